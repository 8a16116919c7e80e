# The R runner of the cross-client conformance corpus (tests/conformance/README.md): builds each
# case through the R package's public API, realizes it on the daemon at POLYGRAD_ADDRESS, checks
# the local shape and dtype against the daemon's, and compares the raw bytes with the Python
# runner's results (<out>/python.json). Writes <out>/r.json and prints `N passed, M failed`
# (cases whose op R has no builder for are listed as unsupported, not failed).
#
#   POLYGRAD_ADDRESS=unix:/... POLYGRAD_CONFORMANCE_OUT=DIR Rscript tests/conformance/conformance_r.R
suppressMessages(library(polygrad))
here <- dirname(normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))))
cases_file <- file.path(here, "cases.json")
out <- Sys.getenv("POLYGRAD_CONFORMANCE_OUT")
stopifnot(nzchar(out), file.exists(cases_file))
corpus <- jsonlite::fromJSON(cases_file, simplifyVector = FALSE)
py <- jsonlite::fromJSON(file.path(out, "python.json"), simplifyVector = FALSE)$cases

# ---- splitmix64 with 64-bit words as four 16-bit limbs (R has no unsigned 64-bit integer) ----
limbs <- function(hex) strtoi(substring(hex, c(13, 9, 5, 1), c(16, 12, 8, 4)), 16L)  # low limb first
u64_add <- function(a, b) {
  s <- a + b
  for (i in 1:3) { s[i + 1] <- s[i + 1] + s[i] %/% 65536; s[i] <- s[i] %% 65536 }
  s[4] <- s[4] %% 65536
  s
}
u64_xor <- function(a, b) as.numeric(bitwXor(as.integer(a), as.integer(b)))  # doubles: products must not overflow
u64_shr <- function(a, k) {  # a >> k for 0 < k < 64
  bits <- unlist(lapply(a, function(l) as.integer(intToBits(l))[1:16]))
  shifted <- c(bits[(k + 1):64], integer(k))
  vapply(0:3, function(i) sum(shifted[i * 16 + 1:16] * 2^(0:15)), 0)
}
u64_mul <- function(a, b) {
  r <- numeric(8)
  for (i in 1:4) for (j in 1:4) if (i + j - 1 <= 4) r[i + j - 1] <- r[i + j - 1] + a[i] * b[j]
  for (i in 1:4) { r[i + 1] <- r[i + 1] + r[i] %/% 65536; r[i] <- r[i] %% 65536 }
  r[1:4]
}
u64_mod <- function(a, m) {  # exact for m < 2^36
  r <- 0
  for (i in 4:1) r <- (r * 65536 + a[i]) %% m
  r
}
GAMMA <- limbs("9E3779B97F4A7C15"); M1 <- limbs("BF58476D1CE4E5B9"); M2 <- limbs("94D049BB133111EB")
splitmix <- function(seed, n) {
  state <- c(seed %% 65536, (seed %/% 65536) %% 65536, (seed %/% 2^32) %% 65536, (seed %/% 2^48) %% 65536)
  lapply(seq_len(n), function(i) {
    state <<- u64_add(state, GAMMA)
    z <- state
    z <- u64_mul(u64_xor(z, u64_shr(z, 30)), M1)
    z <- u64_mul(u64_xor(z, u64_shr(z, 27)), M2)
    u64_xor(z, u64_shr(z, 31))
  })
}
stopifnot(identical(sprintf("%04X", rev(splitmix(0, 1)[[1]])), c("E220", "A839", "7B1D", "CDAF")))

input_tensor <- function(spec) {
  dt <- spec$dtype
  shape <- unlist(spec$shape)
  n <- if (length(shape)) prod(shape) else 1
  zs <- splitmix(spec$seed, n)
  vals <- if (isTRUE(spec$bits)) {
    bits <- 8 * c(int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8)[[dt]]
    vapply(zs, function(z) {
      v <- sum(z[seq_len(bits / 16)] * 65536^(seq_len(bits / 16) - 1))
      if (bits == 8) v <- z[1] %% 256
      if (!startsWith(dt, "u") && v >= 2^(bits - 1)) v - 2^bits else v
    }, 0)
  } else {
    v <- spec$lo + vapply(zs, u64_mod, 0, m = spec$hi - spec$lo + 1)
    if (dt == "bool") v != 0 else if (dt %in% c("float16", "bfloat16", "float32", "float64")) v / spec$div else v
  }
  a <- if (!length(shape)) vals else if (length(shape) == 1) array(vals, shape) else aperm(array(vals, rev(shape)))
  if (is.numeric(a) && !dt %in% c("int64", "uint64", "uint32", "float16", "bfloat16", "float32", "float64")) storage.mode(a) <- "integer"
  pg_tensor(a, dtype = dt)
}
stopifnot(identical(as.vector(as.array(input_tensor(list(dtype = "int8", shape = list(6), seed = 5, bits = TRUE)))),
                    c(90L, -8L, 71L, 69L, -59L, 68L)))

# ---- builders: R API spellings of the corpus's ops; axes become 1-based -----------------------
ax <- function(a) if (is.null(a)) NULL else vapply(unlist(a), function(k) if (k >= 0) k + 1 else k, 0)
num_or <- function(args, y) if (!is.null(args$scalar)) args$scalar else y
binary <- function(f) function(ins, args) f(ins[[1]], num_or(args, ins[[2]]))
unary <- function(f) function(ins, args) f(ins[[1]])
builders <- list(
  from = unary(identity),
  full = function(ins, args) pg_full(unlist(args$shape), value = args$value, dtype = args$dtype),
  zeros = function(ins, args) pg_zeros(unlist(args$shape), dtype = args$dtype %||% "float32"),
  ones = function(ins, args) pg_ones(unlist(args$shape), dtype = args$dtype %||% "float32"),
  rand = function(ins, args) { pg_manual_seed(args$seed); pg_rand(unlist(args$shape), dtype = args$dtype %||% "float32") },
  randn = function(ins, args) { pg_manual_seed(args$seed); pg_randn(unlist(args$shape), dtype = args$dtype %||% "float32") },
  neg = unary(function(x) -x), exp = unary(exp), log = unary(log), sqrt = unary(sqrt), sin = unary(sin),
  cos = unary(cos), tan = unary(tan), tanh = unary(tanh), abs = unary(abs), floor = unary(floor),
  ceil = unary(ceiling), trunc = unary(trunc), sign = unary(sign), log2 = unary(log2), square = unary(function(x) x^2),
  relu = unary(pg_relu), sigmoid = unary(pg_sigmoid), gelu = unary(pg_gelu), silu = unary(pg_silu),
  leakyRelu = function(ins, args) pg_leaky_relu(ins[[1]], args$slope %||% 0.01),
  add = binary(`+`), sub = binary(`-`), mul = binary(`*`), div = binary(`/`), pow = binary(`^`),
  maximum = binary(pg_maximum), minimum = binary(pg_minimum),
  lt = binary(`<`), le = binary(`<=`), gt = binary(`>`), ge = binary(`>=`), eq = binary(`==`), ne = binary(`!=`),
  logicalNot = unary(function(x) !x),
  where = function(ins, args) pg_where(ins[[1]], if (length(ins) > 1) ins[[2]] else args$x, if (length(ins) > 2) ins[[3]] else args$y),
  cast = function(ins, args) pg_cast(ins[[1]], args$dtype),
  sum = function(ins, args) pg_sum(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  max = function(ins, args) pg_max(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  min = function(ins, args) pg_min(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  mean = function(ins, args) pg_mean(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  var = function(ins, args) pg_var(ins[[1]], ax(args$axis), isTRUE(args$keepdim), args$correction %||% 1),
  reshape = function(ins, args) pg_reshape(ins[[1]], unlist(args$shape)),
  expand = function(ins, args) pg_expand(ins[[1]], unlist(args$shape)),
  permute = function(ins, args) pg_permute(ins[[1]], unlist(args$order) + 1),
  flip = function(ins, args) pg_flip(ins[[1]], ax(args$axis)),
  cat = function(ins, args) pg_cat(ins, axis = ax(args$dim %||% 0)),
  stack = function(ins, args) pg_stack(ins, axis = ax(args$dim %||% 0)),
  matmul = function(ins, args) pg_matmul(ins[[1]], ins[[2]]),
  softmax = function(ins, args) pg_softmax(ins[[1]], ax(args$axis %||% -1)),
  logSoftmax = function(ins, args) pg_log_softmax(ins[[1]], ax(args$axis %||% -1)),
  layernorm = function(ins, args) pg_layernorm(ins[[1]], ax(args$axis %||% -1), args$eps %||% 1e-5),
  conv2d = function(ins, args) pg_conv2d(ins[[1]], ins[[2]], if (length(ins) > 2) ins[[3]] else NULL,
                                         stride = unlist(args$stride %||% 1), padding = unlist(args$padding %||% 0),
                                         dilation = unlist(args$dilation %||% 1), groups = args$groups %||% 1),
  grad = function(ins, args) {
    wrt <- ins[[args$wrt + 1]]
    requires_grad(wrt) <- TRUE
    backward(sum(builders[[args$of]](ins, args$args %||% list())))
    grad(wrt)
  }
)
`%||%` <- function(a, b) if (is.null(a)) b else a
# Args the R builders do not take: such cases are unsupported rather than built differently.
unsupported_args <- function(case) {
  a <- case$args
  (case$op == "pad") || (case$op %in% names(builders) && case$op != "grad" &&
    any(!names(a) %in% c("scalar", "shape", "value", "dtype", "seed", "slope", "x", "y", "axis", "keepdim",
                         "correction", "order", "dim", "eps", "stride", "padding", "dilation", "groups"))) ||
    (case$op == "grad" && !args_ok(a$of)) || !is.null(case$then) || !is.null(case$requires) ||
    # R numbers are doubles: 64-bit integers past 2^53 (random bit patterns) cannot be made exactly.
    any(vapply(case$inputs, function(i) isTRUE(i$bits) && i$dtype %in% c("int64", "uint64"), TRUE))
}
args_ok <- function(op) op %in% names(builders)

results <- list()
passed <- 0
failed <- 0
unsupported <- character()
for (case in corpus$cases) {
  id <- case$id
  ref <- py[[id]]
  if (!case$op %in% names(builders) || unsupported_args(case) || is.null(ref) || ref$status != "ok") {
    unsupported <- c(unsupported, id)
    results[[id]] <- list(status = "skipped", reason = "no R builder for this op or its args, or Python skipped it")
    next
  }
  entry <- tryCatch({
    ins <- lapply(case$inputs, input_tensor)
    t <- builders[[case$op]](ins, case$args)
    # The graph must contain the wire ops the case names (checked before realizing drops it).
    built <- names(polygrad:::OP)[match(vapply(polygrad:::toposort(t$node), function(n) n$op, 0), unlist(polygrad:::OP))]
    missing <- setdiff(unlist(case$wire), built)
    if (length(missing)) stop("the graph lacks wire op(s) ", paste(missing, collapse = ", "))
    d <- polygrad:::realized_bytes(t)
    local_shape <- as.numeric(dim(t))
    list(status = "ok", dtype = pg_dtype(t), shape = local_shape, daemon_dtype = d$dtype, daemon_shape = d$shape,
         nbytes = length(d$data), sha256 = digest::digest(d$data, algo = "sha256", serialize = FALSE))
  }, error = function(e) list(status = "error", error = conditionMessage(e)))
  ok <- entry$status == "ok" && entry$dtype == entry$daemon_dtype && identical(entry$shape, entry$daemon_shape) &&
    entry$sha256 == ref$sha256
  if (ok) passed <- passed + 1 else {
    failed <- failed + 1
    cat(sprintf("FAIL %s: %s\n", id, if (entry$status == "ok") sprintf("R %s%s sha %s, python %s%s sha %s",
        entry$dtype, deparse(entry$shape), substr(entry$sha256, 1, 12), ref$dtype, deparse(unlist(ref$shape)),
        substr(ref$sha256, 1, 12)) else entry$error))
  }
  results[[id]] <- entry
}
jsonlite::write_json(list(client = "r", cases = results), file.path(out, "r.json"), auto_unbox = TRUE, digits = NA)
cat(sprintf("conformance (R): %d of %d cases built; %d unsupported by the R API\n", passed + failed,
            length(corpus$cases), length(unsupported)))
cat(sprintf("%d passed, %d failed\n", passed, failed))
quit(status = if (failed > 0) 1L else 0L)
