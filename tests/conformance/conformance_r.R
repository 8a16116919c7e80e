# The R runner of the cross-client conformance corpus (tests/conformance/README.md): builds each
# case through the R package's public API, realizes it on the daemon at POLYGRAD_ADDRESS, checks
# the local shape and dtype against the daemon's and the public read against the buffer, and
# compares the raw bytes with the Python runner's results (<out>/python.json). Writes <out>/r.json
# and prints `N passed, M failed`. Every case is built: a corpus op without an R builder, or a
# case that cannot be built, fails. Only a case whose `requires` device the daemon lacks is
# skipped (as the Python and JavaScript runners skip it), saying why.
#
#   POLYGRAD_ADDRESS=unix:/... POLYGRAD_CONFORMANCE_OUT=DIR Rscript tests/conformance/conformance_r.R
suppressMessages(library(polygrad))
`%||%` <- function(a, b) if (is.null(a)) b else a
here <- dirname(normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))))
cases_file <- file.path(here, "cases.json")
out <- Sys.getenv("POLYGRAD_CONFORMANCE_OUT")
stopifnot(nzchar(out), file.exists(cases_file))
corpus_sha <- digest::digest(file = cases_file, algo = "sha256")
corpus <- jsonlite::fromJSON(cases_file, simplifyVector = FALSE)
python <- jsonlite::fromJSON(file.path(out, "python.json"), simplifyVector = FALSE)
if (!identical(python$corpus_sha256, corpus_sha)) stop(file.path(out, "python.json"), " is from another version of cases.json")
py <- python$cases

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

ITEMSIZE <- c(bool = 1, int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8,
              float16 = 2, bfloat16 = 2, float32 = 4, float64 = 8)

input_tensor <- function(spec) {
  dt <- spec$dtype
  shape <- as.numeric(unlist(spec$shape))
  n <- prod(shape)
  zs <- splitmix(spec$seed, n)
  if (isTRUE(spec$bits) && ITEMSIZE[[dt]] == 8) {
    # Random 64-bit patterns: past 2^53, exact only as bytes (each z little-endian: the low limb first).
    bytes <- unlist(lapply(zs, function(z) as.raw(as.vector(rbind(z %% 256, z %/% 256)))))
    return(pg_from_bytes(bytes, dt, shape))
  }
  vals <- if (isTRUE(spec$bits)) {
    bits <- 8 * ITEMSIZE[[dt]]
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
stopifnot(identical(as.vector(as.array(input_tensor(list(dtype = "float32", shape = list(2, 3), seed = 1, lo = -16, hi = 16,
                                                         div = 4)))), c(1.0, 3.25, 0.75, 0.5, -4.0, 1.75)))

# ---- builders: R API spellings of the corpus's ops -------------------------------------------
# The corpus speaks Python: 0-based axes and positions, negative ones from the end. The R API is
# 1-based (axes, class indices, gather and index positions, argmax's result); `ax` and `pos`
# translate, and argmax's 1-based answer is turned back into the corpus's 0-based one.
ax <- function(a) if (is.null(a)) NULL else vapply(unlist(a), function(k) if (k >= 0) k + 1 else k, 0)
pos <- function(t) t + 1L  # 0-based positions (>= 0) in an integer tensor, as 1-based ones
num_or <- function(args, y) if (!is.null(args$scalar)) args$scalar else y
binary <- function(f) function(ins, args) f(ins[[1]], num_or(args, ins[[2]]))
unary <- function(f) function(ins, args) f(ins[[1]])
input <- function(ins, i) if (length(ins) >= i) ins[[i]] else NULL
# A case's kernel list names the pooled axes (a one-value list: 1-D); a number means 2-D, and R
# cannot tell c(3) from 3, so say it.
pool_axes <- function(kernel) if (is.list(kernel)) length(kernel) else NULL
seeded <- function(f) function(ins, args) { pg_manual_seed(args$seed); f(ins, args) }
pair_list <- function(p) lapply(p, function(e) as.numeric(unlist(e)))

# Python's slice(start, stop, step).indices(size), as 1-based positions.
py_slice <- function(sl, size) {
  step <- sl[[3]] %||% 1
  lower <- if (step < 0) -1 else 0
  upper <- if (step < 0) size - 1 else size
  clamp <- function(v, d) if (is.null(v)) d else if (v < 0) max(v + size, lower) else min(v, upper)
  start <- clamp(sl[[1]], if (step < 0) upper else lower)
  stop <- clamp(sl[[2]], if (step < 0) lower else upper)
  n <- max(0, ceiling((stop - start) / step))
  start + step * (seq_len(n) - 1) + 1
}

# numpy indexing as R's indexes for `[` (each axis on its own) and numpy's result shape: an int
# selects (its axis goes), a slice keeps its positions, null adds an axis, "..." stands for the
# axes not named, and an integer tensor indexes its axis (R positions from numpy's: -1 is the last).
r_index <- function(ins, args) {
  s <- dim(ins[[1]])
  entries <- args$index
  is_ell <- vapply(entries, function(e) identical(e, "..."), TRUE)
  if (!any(is_ell)) { entries <- c(entries, list("...")); is_ell <- c(is_ell, TRUE) }
  named <- sum(!is_ell & !vapply(entries, is.null, TRUE))
  at <- which(is_ell)
  full <- rep(list(list(slice = list(NULL, NULL, NULL))), length(s) - named)
  entries <- c(entries[seq_len(at - 1)], full, entries[-seq_len(at)])
  if (sum(vapply(entries, function(e) is.list(e) && !is.null(e$tensor), TRUE)) > 1) {
    stop("numpy's joint indexing by several tensors has no R counterpart (R indexes each axis on its own)")
  }
  idx <- rep(list(quote(expr = )), length(s))
  final <- numeric()
  axis <- 0
  for (e in entries) {
    if (is.null(e)) {
      final <- c(final, 1)
      next
    }
    size <- s[axis + 1]
    if (is.numeric(e)) {
      idx[[axis + 1]] <- if (e < 0) e + size + 1 else e + 1
    } else if (!is.null(e$slice)) {
      idx[[axis + 1]] <- py_slice(e$slice, size)
      final <- c(final, length(idx[[axis + 1]]))
    } else {
      t <- ins[[e$tensor + 1]]
      idx[[axis + 1]] <- pg_where(t < 0L, t + (size + 1L), t + 1L)
      final <- c(final, dim(t))
    }
    axis <- axis + 1
  }
  list(idx = idx, final = final)
}

index_builder <- function(ins, args) {
  r <- r_index(ins, args)
  pg_reshape(do.call(`[`, c(list(ins[[1]]), r$idx, list(drop = TRUE))), r$final)
}

# x[index] <- value through R's `[<-` (the value input 2, or args' number); x comes back.
setitem_builder <- function(ins, args) {
  value <- if (is.null(args$value)) ins[[2]] else args$value
  do.call(`[<-`, c(list(ins[[1]]), r_index(ins, args)$idx, list(value = value)))
}

# Python's ignore_index -1 means none; a class otherwise (0-based there, 1-based here).
ignore_of <- function(i) if (is.null(i) || i == -1) NULL else i + 1

builders <- list(
  from = unary(identity),
  full = function(ins, args) pg_full(unlist(args$shape), value = args$value, dtype = args$dtype),
  zeros = function(ins, args) pg_zeros(unlist(args$shape), dtype = args$dtype %||% "float32"),
  ones = function(ins, args) pg_ones(unlist(args$shape), dtype = args$dtype %||% "float32"),
  arange = function(ins, args) pg_arange(args$start, args$stop, args$step %||% 1, dtype = args$dtype),
  linspace = function(ins, args) pg_linspace(args$start, args$stop, args$steps, dtype = args$dtype %||% "float32"),
  eye = function(ins, args) pg_eye(args$n, args$m %||% args$n, dtype = args$dtype %||% "float32"),
  rand = seeded(function(ins, args) pg_rand(unlist(args$shape), dtype = args$dtype %||% "float32")),
  randn = seeded(function(ins, args) pg_randn(unlist(args$shape), dtype = args$dtype %||% "float32")),
  randint = seeded(function(ins, args) pg_randint(unlist(args$shape), low = args$low %||% 0, high = args$high %||% 10,
                                                  dtype = args$dtype %||% "int32")),
  dropout = seeded(function(ins, args) pg_dropout(ins[[1]], args$p, training = TRUE)),
  # R's own generics where R users reach an op through one (the generated pg_ functions are built
  # from the op table below).
  neg = unary(function(x) -x), exp = unary(exp), log = unary(log), sqrt = unary(sqrt), sin = unary(sin),
  cos = unary(cos), tan = unary(tan), tanh = unary(tanh), abs = unary(abs), floor = unary(floor),
  ceil = unary(ceiling), trunc = unary(trunc), round = unary(round), sign = unary(sign), log2 = unary(log2),
  relu = unary(pg_relu),
  gelu = function(ins, args) pg_gelu(ins[[1]], approximate = args$approximate %||% "tanh"),
  isnan = unary(is.nan),
  atan = unary(atan), asin = unary(asin), acos = unary(acos), sinh = unary(sinh),
  cosh = unary(cosh), asinh = unary(asinh), acosh = unary(acosh), atanh = unary(atanh), log10 = unary(log10),
  log1p = unary(log1p), expm1 = unary(expm1),
  isclose = function(ins, args) pg_isclose(ins[[1]], ins[[2]], rtol = args$rtol, atol = args$atol,
                                           equal_nan = isTRUE(args$equalNan)),
  any = function(ins, args) pg_any(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  all = function(ins, args) pg_all(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  add = binary(`+`), sub = binary(`-`), mul = binary(`*`), div = binary(`/`), pow = binary(`^`),
  maximum = binary(pg_maximum), minimum = binary(pg_minimum),
  lt = binary(`<`), le = binary(`<=`), gt = binary(`>`), ge = binary(`>=`), eq = binary(`==`), ne = binary(`!=`),
  idiv = binary(pg_idiv), fmod = binary(pg_fmod), remainder = binary(`%%`), floorDivide = binary(`%/%`),
  bitwiseAnd = binary(pg_bitwise_and), bitwiseOr = binary(pg_bitwise_or), bitwiseXor = binary(pg_bitwise_xor),
  bitwiseNot = unary(pg_bitwise_not), logicalNot = unary(function(x) !x),
  lshift = function(ins, args) pg_lshift(ins[[1]], args$n),
  rshift = function(ins, args) pg_rshift(ins[[1]], args$n),
  clamp = function(ins, args) pg_clamp(ins[[1]], args$min, args$max),
  where = function(ins, args) pg_where(ins[[1]], if (length(ins) > 1) ins[[2]] else args$x, if (length(ins) > 2) ins[[3]] else args$y),
  cast = function(ins, args) pg_cast(ins[[1]], args$dtype),
  bitcast = function(ins, args) pg_bitcast(ins[[1]], args$dtype),
  sum = function(ins, args) pg_sum(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  prod = function(ins, args) pg_prod(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  max = function(ins, args) pg_max(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  min = function(ins, args) pg_min(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  mean = function(ins, args) pg_mean(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  var = function(ins, args) pg_var(ins[[1]], ax(args$axis), isTRUE(args$keepdim), args$correction %||% 1),
  std = function(ins, args) pg_std(ins[[1]], ax(args$axis), isTRUE(args$keepdim), args$correction %||% 1),
  logsumexp = function(ins, args) pg_logsumexp(ins[[1]], ax(args$axis), isTRUE(args$keepdim)),
  argmax = function(ins, args) pg_argmax(ins[[1]], ax(args$axis), isTRUE(args$keepdim)) - 1L,
  argmin = function(ins, args) pg_argmin(ins[[1]], ax(args$axis), isTRUE(args$keepdim)) - 1L,
  cumsum = function(ins, args) pg_cumsum(ins[[1]], ax(args$axis %||% 0)),
  sort = function(ins, args) pg_sort(ins[[1]], ax(args$axis), isTRUE(args$descending))$values,
  topk = function(ins, args) pg_topk(ins[[1]], args$k, ax(args$axis), args$largest %||% TRUE)$values,
  cummax = function(ins, args) pg_cummax(ins[[1]], ax(args$axis))$values,
  cummin = function(ins, args) pg_cummin(ins[[1]], ax(args$axis))$values,
  cumprod = function(ins, args) pg_cumprod(ins[[1]], ax(args$axis)),
  logcumsumexp = function(ins, args) pg_logcumsumexp(ins[[1]], ax(args$axis)),
  reshape = function(ins, args) pg_reshape(ins[[1]], unlist(args$shape)),
  expand = function(ins, args) pg_expand(ins[[1]], unlist(args$shape)),
  permute = function(ins, args) pg_permute(ins[[1]], unlist(args$order) + 1),
  transpose = function(ins, args) pg_transpose(ins[[1]], ax(args$dim0 %||% -2), ax(args$dim1 %||% -1)),
  pad = function(ins, args) pg_pad(ins[[1]], pair_list(args$padding), value = args$value %||% 0),
  shrink = function(ins, args) pg_shrink(ins[[1]], lapply(pair_list(args$arg), function(p) c(p[1] + 1, p[2]))),
  flip = function(ins, args) pg_flip(ins[[1]], ax(args$axis)),
  squeeze = function(ins, args) pg_squeeze(ins[[1]], ax(args$dim)),
  unsqueeze = function(ins, args) pg_unsqueeze(ins[[1]], ax(args$dim)),
  flatten = function(ins, args) pg_flatten(ins[[1]], ax(args$start %||% 0), ax(args$end %||% -1)),
  unflatten = function(ins, args) pg_unflatten(ins[[1]], ax(args$dim), unlist(args$sizes)),
  `repeat` = function(ins, args) pg_repeat(ins[[1]], unlist(args$repeats)),
  split = function(ins, args) pg_split(ins[[1]], unlist(args$sizes), ax(args$dim %||% 0))[[args$piece + 1]],
  chunk = function(ins, args) pg_chunk(ins[[1]], args$chunks, ax(args$dim %||% 0))[[args$piece + 1]],
  cat = function(ins, args) pg_cat(ins, axis = ax(args$dim %||% 0)),
  einsum = function(ins, args) pg_einsum(args$equation, ins),
  rearrange = function(ins, args) do.call(pg_rearrange, c(list(ins[[1]], args$formula), args$sizes)),
  qr = function(ins, args) pg_qr(ins[[1]])[[args$factor]],
  svd = function(ins, args) pg_svd(ins[[1]], full_matrices = isTRUE(args$full), sweeps = args$sweeps)[[args$factor]],
  stack = function(ins, args) pg_stack(ins, axis = ax(args$dim %||% 0)),
  index = index_builder,
  setitem = setitem_builder,
  matmul = function(ins, args) pg_matmul(ins[[1]], ins[[2]]),
  linear = function(ins, args) pg_linear(ins[[1]], ins[[2]], input(ins, 3)),
  softmax = function(ins, args) pg_softmax(ins[[1]], ax(args$axis %||% -1)),
  logSoftmax = function(ins, args) pg_log_softmax(ins[[1]], ax(args$axis %||% -1)),
  layernorm = function(ins, args) pg_layernorm(ins[[1]], ax(args$axis %||% -1), args$eps %||% 1e-5, input(ins, 2), input(ins, 3)),
  rmsNorm = function(ins, args) pg_rms_norm(ins[[1]], ax(args$axis %||% -1), args$eps %||% 1e-6, input(ins, 2)),
  groupNorm = function(ins, args) pg_group_norm(ins[[1]], args$groups, input(ins, 2), input(ins, 3), args$eps %||% 1e-5),
  batchnorm = function(ins, args) pg_batchnorm(ins[[1]], if (is.null(args$weight)) NULL else ins[[args$weight + 1]],
                                              if (is.null(args$bias)) NULL else ins[[args$bias + 1]], ins[[2]], ins[[3]],
                                              ax(args$axis)),
  batchNorm = function(ins, args) pg_batch_norm(ins[[1]], input(ins, 2), input(ins, 3), input(ins, 4), input(ins, 5),
                                                training = isTRUE(args$training), eps = args$eps %||% 1e-5),
  crossEntropy = function(ins, args) {
    y <- ins[[2]]
    if (length(dim(y)) < length(dim(ins[[1]]))) y <- pos(y)  # class indices
    pg_cross_entropy(ins[[1]], y, reduction = args$reduction %||% "mean", label_smoothing = args$labelSmoothing %||% 0)
  },
  sparseCategoricalCrossentropy = function(ins, args) {
    pg_sparse_categorical_cross_entropy(ins[[1]], pos(ins[[2]]), ignore_index = ignore_of(args$ignoreIndex),
                                        label_smoothing = args$labelSmoothing %||% 0, reduction = args$reduction %||% "mean")
  },
  binaryCrossentropy = function(ins, args) pg_binary_cross_entropy(ins[[1]], ins[[2]], args$reduction %||% "mean"),
  binaryCrossentropyLogits = function(ins, args) {
    pg_binary_cross_entropy_logits(ins[[1]], ins[[2]], args$reduction %||% "mean", pos_weight = input(ins, 3))
  },
  oneHot = function(ins, args) pg_one_hot(pos(ins[[1]]), args$n),
  tril = function(ins, args) pg_tril(ins[[1]], args$diagonal %||% 0),
  triu = function(ins, args) pg_triu(ins[[1]], args$diagonal %||% 0),
  gather = function(ins, args) pg_gather(ins[[1]], ax(args$dim), pos(ins[[2]])),
  scatter = function(ins, args) pg_scatter(ins[[1]], ax(args$dim), pos(ins[[2]]), input(ins, 3) %||% args$value),
  scatterReduce = function(ins, args) pg_scatter_reduce(ins[[1]], ax(args$dim), pos(ins[[2]]), ins[[3]], args$reduce,
                                                        include_self = isTRUE(args$includeSelf)),
  nllLoss = function(ins, args) pg_nll_loss(ins[[1]], pos(ins[[2]]), input(ins, 3),
                                            ignore_index = if (is.null(args$ignoreIndex)) NULL else args$ignoreIndex + 1,
                                            reduction = args$reduction %||% "mean"),
  interpolate = function(ins, args) pg_interpolate(ins[[1]], unlist(args$size), args$mode %||% "linear",
                                                   isTRUE(args$alignCorners)),
  unfold = function(ins, args) pg_unfold(ins[[1]], ax(args$dim), args$size, args$step),
  nonzero = function(ins, args) pg_nonzero(ins[[1]]) - 1L,
  maskedSelect = function(ins, args) pg_masked_select(ins[[1]], ins[[2]]),
  multinomial = seeded(function(ins, args) pg_multinomial(ins[[1]], args$n, isTRUE(args$replacement)) - 1L),
  randperm = seeded(function(ins, args) pg_randperm(args$n) - 1L),
  normal = seeded(function(ins, args) pg_normal(unlist(args$shape), mean = args$mean, std = args$std)),
  maxUnpool2d = function(ins, args) pg_max_unpool2d(ins[[1]], pos(ins[[2]]), unlist(args$kernel %||% 2), unlist(args$stride),
                                                    unlist(args$padding %||% 0), unlist(args$outputSize),
                                                    spatial = pool_axes(args$kernel)),
  conv2d = function(ins, args) pg_conv2d(ins[[1]], ins[[2]], input(ins, 3),
                                         stride = unlist(args$stride %||% 1), padding = unlist(args$padding %||% 0),
                                         dilation = unlist(args$dilation %||% 1), groups = args$groups %||% 1),
  convTranspose2d = function(ins, args) pg_conv_transpose2d(ins[[1]], ins[[2]], input(ins, 3),
    stride = unlist(args$stride %||% 1), padding = unlist(args$padding %||% 0), dilation = unlist(args$dilation %||% 1),
    groups = args$groups %||% 1, output_padding = unlist(args$outputPadding %||% 0)),
  maxPool2d = function(ins, args) pg_max_pool2d(ins[[1]], unlist(args$kernel %||% 2), unlist(args$stride),
                                                unlist(args$padding %||% 0), unlist(args$dilation %||% 1),
                                                spatial = pool_axes(args$kernel), ceil_mode = isTRUE(args$ceilMode)),
  maxPool2dIndices = function(ins, args) pg_max_pool2d(ins[[1]], unlist(args$kernel %||% 2), unlist(args$stride),
                                                       unlist(args$padding %||% 0), unlist(args$dilation %||% 1),
                                                       spatial = pool_axes(args$kernel), ceil_mode = isTRUE(args$ceilMode),
                                                       return_indices = TRUE)$indices - 1L,
  avgPool2d = function(ins, args) pg_avg_pool2d(ins[[1]], unlist(args$kernel %||% 2), unlist(args$stride),
                                                unlist(args$padding %||% 0), unlist(args$dilation %||% 1),
                                                spatial = pool_axes(args$kernel), ceil_mode = isTRUE(args$ceilMode),
                                                count_include_pad = args$countIncludePad %||% TRUE),
  newtonSchulz = function(ins, args) pg_newton_schulz(ins[[1]], args$steps, unlist(args$params), eps = args$eps %||% 1e-7),
  scaledDotProductAttention = function(ins, args) {
    if (!is.null(args$p)) pg_manual_seed(args$seed)  # dropout on the weights
    pg_scaled_dot_product_attention(ins[[1]], ins[[2]], ins[[3]], attn_mask = input(ins, 4), is_causal = isTRUE(args$causal),
                                    dropout_p = args$p %||% 0)
  },
  # One optimizer step on parameter ins[[1]] with gradient ins[[2]], built lazily: the new parameter.
  optimizerStep = function(ins, args) {
    p <- ins[[1]]
    o <- args$options %||% list()
    requires_grad(p) <- TRUE
    opt <- switch(args$optimizer,
                  sgd = optim_sgd(list(p), lr = args$lr, momentum = o$momentum %||% 0, weight_decay = o$weightDecay %||% 0,
                                  nesterov = isTRUE(o$nesterov)),
                  adam = optim_adam(list(p), lr = args$lr, weight_decay = o$weightDecay %||% 0),
                  adamw = optim_adam(list(p), lr = args$lr, weight_decay = o$weightDecay %||% 0.01, decoupled = TRUE),
                  lamb = optim_lamb(list(p), lr = args$lr, weight_decay = o$weightDecay %||% 0),
                  lars = optim_lars(list(p), lr = args$lr, momentum = o$momentum %||% 0.9, weight_decay = o$weightDecay %||% 1e-4,
                                    nesterov = isTRUE(o$nesterov), classic = !isFALSE(o$classic), tcoef = o$tcoef %||% 0.001),
                  muon = optim_muon(list(p), lr = args$lr, momentum = o$momentum %||% 0.95, weight_decay = o$weightDecay %||% 0.1,
                                    ns_steps = o$nsSteps %||% 5, ns_coefficients = unlist(o$nsCoefficients %||% c(3.4445, -4.775, 2.0315)),
                                    nesterov = !isFALSE(o$nesterov)))
    p$grad <- ins[[2]]
    polygrad:::schedule_step(opt)
    p
  },
  grad = function(ins, args) {
    wrt <- ins[[args$wrt + 1]]
    requires_grad(wrt) <- TRUE
    backward(sum(builders[[args$of]](ins, args$args %||% list())))
    grad(wrt)
  },
  to = function(ins, args) {
    y <- pg_to(ins[[1]], args$device)
    if (isTRUE(args$back)) pg_to(y, "CPU") else y
  }
)

# The builder of a function generated from the op schema (an .op_methods entry), by its method's
# camelCase name: its operands from the inputs after the first, then from args by name; its
# parameters from args by camelCase name (an axis made 1-based), else their defaults. A new schema
# op needs only cases.
camel <- function(n) gsub("_([a-z0-9])", "\\U\\1", n, perl = TRUE)
generated_builder <- function(m) {
  f <- getExportedValue("polygrad", paste0("pg_", m$method))
  function(ins, args) {
    rest <- m$operands[seq_along(m$operands) > length(ins) - 1L]
    operands <- c(ins[-1], lapply(rest, function(n) args[[camel(n)]]))
    params <- list()
    for (p in names(m$params)) {
      v <- args[[camel(p)]]
      if (!is.null(v)) params[[p]] <- if (m$params[[p]]$kind == "axis") ax(v) else v
    }
    do.call(f, c(list(ins[[1]]), operands, params))
  }
}
generated <- lapply(polygrad:::.op_methods, generated_builder)
names(generated) <- vapply(polygrad:::.op_methods, function(m) camel(m$method), "")
builders <- c(builders, generated[setdiff(names(generated), names(builders))])

# The case's op on its inputs, then each `then` step on the previous result.
build <- function(case, ins) {
  t <- builders[[case$op]](ins, case$args)
  for (step in case$then) t <- builders[[step$op]](list(t), step$args %||% list())
  t
}

# Whether GetInfo lists the device (by kind, "CUDA", or full name, "CUDA:0") as available; else why not.
device_missing <- function(name) {
  want <- toupper(name)
  devs <- pg_info()$devices %||% list()
  for (d in devs) {
    n <- toupper(d$name %||% "")
    if (want %in% c(n, sub(":.*$", "", n))) {
      if (isTRUE(d$available)) return(NULL)
      return(sprintf("the daemon has no available %s device (%s)", name, d$detail %||% "unavailable"))
    }
  }
  sprintf("the daemon has no available %s device", name)
}

# ---- checks that need no daemon -----------------------------------------------------------------
ops <- unique(unlist(lapply(corpus$cases, function(c) c(c$op, vapply(c$then %||% list(), function(s) s$op, "")))))
unbuilt <- setdiff(ops, names(builders))

# ---- the cases ------------------------------------------------------------------------------------
wire_name <- function(code) names(polygrad:::OP)[match(code, unlist(polygrad:::OP))]
results <- list()
passed <- 0
failed <- 0
skipped <- 0
fail <- function(id, why) {
  failed <<- failed + 1
  cat(sprintf("FAIL %s: %s\n", id, why))
}
if (length(unbuilt)) fail("(corpus)", paste("corpus ops without an R builder in conformance_r.R:", paste(unbuilt, collapse = ", ")))
for (case in corpus$cases) {
  id <- case$id
  ref <- py[[id]]
  if (!is.null(case$requires)) {
    why <- device_missing(case$requires)
    if (!is.null(why)) {
      skipped <- skipped + 1
      results[[id]] <- list(status = "skipped", reason = why)
      cat(sprintf("SKIP %s: %s\n", id, why))
      next
    }
  }
  entry <- tryCatch({
    if (!case$op %in% names(builders)) stop("no R builder for op ", case$op)
    ins <- lapply(case$inputs, input_tensor)
    t <- build(case, ins)
    # The wire ops of the graph, walked before realizing drops the sources.
    sent <- wire_name(vapply(polygrad:::toposort(t$node), function(n) n$op, 0))
    d <- polygrad:::realized_bytes(t)  # the daemon's account: Download's dtype, shape and bytes
    public <- pg_bytes(t)
    values <- as.array(t)
    e <- list(status = "ok", dtype = pg_dtype(t), shape = as.numeric(dim(t)), daemon_dtype = d$dtype,
              daemon_shape = d$shape, nbytes = length(d$data), sha256 = digest::digest(d$data, algo = "sha256", serialize = FALSE))
    if (length(d$data) <= 1024) e$hex <- paste(as.character(d$data), collapse = "")
    problems <- character()
    missing <- setdiff(unlist(case$wire), sent)
    if (length(missing)) problems <- c(problems, sprintf("the graph lacks wire op(s) %s (it has %s)",
                                                         paste(missing, collapse = ", "), paste(sort(unique(sent)), collapse = ", ")))
    if (e$dtype != e$daemon_dtype || !identical(e$shape, e$daemon_shape)) {
      problems <- c(problems, sprintf("local %s(%s) differs from the daemon's %s(%s)", e$dtype, paste(e$shape, collapse = ","),
                                      e$daemon_dtype, paste(e$daemon_shape, collapse = ",")))
    }
    if (!identical(public, d$data)) problems <- c(problems, "pg_bytes() differs from the downloaded buffer")
    # as.array's values, encoded again, are the buffer (64-bit integers past 2^53 excepted: doubles).
    if (!(e$dtype %in% c("int64", "uint64") && any(abs(as.vector(values)) >= 2^53)) &&
        !identical(.Call(polygrad:::pg_c_encode, polygrad:::to_row_major(values), polygrad:::.dtype_wire[[e$dtype]]), d$data)) {
      problems <- c(problems, "as.array() values differ from the downloaded buffer")
    }
    if (is.null(ref)) {
      problems <- c(problems, "the Python run has no result for this case")
    } else if (ref$status != "ok") {
      problems <- c(problems, sprintf("the Python run did not pass this case (%s): %s", ref$status, ref$error %||% ref$reason %||% ""))
    } else {
      if (e$dtype != ref$dtype || !identical(e$shape, as.numeric(unlist(ref$shape)))) {
        problems <- c(problems, sprintf("R %s(%s) differs from Python's %s(%s)", e$dtype, paste(e$shape, collapse = ","),
                                        ref$dtype, paste(unlist(ref$shape), collapse = ",")))
      }
      if (e$sha256 != ref$sha256) {
        problems <- c(problems, sprintf("bytes differ from Python's\n  r:      %s\n  python: %s", e$hex %||% "(long)", ref$hex %||% "(long)"))
      }
    }
    if (length(problems)) e$problems <- problems
    e
  }, error = function(err) list(status = "error", error = conditionMessage(err)))
  results[[id]] <- entry[setdiff(names(entry), "problems")]
  if (entry$status != "ok") fail(id, entry$error) else if (length(entry$problems)) fail(id, paste(entry$problems, collapse = "; ")) else passed <- passed + 1
}
jsonlite::write_json(list(client = "r", corpus_sha256 = corpus_sha, cases = results), file.path(out, "r.json"),
                     auto_unbox = TRUE, digits = NA, null = "null")
built <- sum(vapply(results, function(r) r$status == "ok", TRUE))
cat(sprintf("conformance (R): %d of %d cases built, %d skipped (a device the daemon lacks)\n", built, length(corpus$cases), skipped))
cat(sprintf("%d passed, %d failed\n", passed, failed))
quit(status = if (failed > 0) 1L else 0L)
