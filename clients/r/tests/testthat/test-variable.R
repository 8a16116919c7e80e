# Variables and symbolic sizes (R/variable.R), as the Python client's tests/e2e/test_symbolic_dims.py
# and test_kv_cache.py: attention over a symbolic prefix of a cache matches base R at every
# position; a jit replays new positions with RunStep `variables` from one capture; a cache row
# written at a symbolic position inside a jit is captured once; the wire carries the SymbolicDim
# entries the Python client sends; a loop leaves no buffer behind on the daemon.

W <- 16
D <- 8

f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)

# softmax(q k[1:n]^T) v[1:n], row by row, in base R.
attention_ref <- function(q, k, v, n) {
  s <- q %*% t(k[seq_len(n), , drop = FALSE])
  p <- exp(s - apply(s, 1, max))
  (p / rowSums(p)) %*% v[seq_len(n), , drop = FALSE]
}

# The step a jit made, and its id (the same id: no capture since).
jit_step <- function(f) attr(f, "jit")$step

test_that("a variable binds whole numbers in its bounds and keeps + k, - k, * k symbolic", {
  v <- pg_variable("start_pos", 0, 15)
  expect_error(pg_bind(v, 16), "outside \\[0, 15\\]", class = "polygrad_invalid_argument")
  expect_error(pg_bind(v, -1), "outside \\[0, 15\\]")
  expect_error(pg_bind(v, 2.5), "whole number")
  expect_error(pg_variable("", 0, 1), "1 to 64 characters")
  expect_error(pg_variable(strrep("x", 65), 0, 1), "1 to 64 characters")
  expect_error(pg_variable("n", 3, 2), "min 3 exceeds max 2")
  p <- pg_bind(v, 4)
  s <- (p + 1) * 2 - 3
  expect_s3_class(s, "pg_sym")
  expect_equal(c(polygrad:::sym_int(s), polygrad:::sym_max(s), s$mul, s$add), c(7, 29, 2, -1))
  expect_identical(as.integer(p + 1), 5L)
  expect_identical(as.numeric(p * 3), 12)
  expect_false(inherits(p - p, "pg_sym"))  # other arithmetic takes the value
  expect_identical(p - p, 0)
  expect_identical(10 - p, 6)
})

test_that("nodes carry the SymbolicDim entries the Python client sends", {
  K <- pg_tensor(array(1, c(W, D)))
  p <- pg_bind(pg_variable("start_pos", 0, W - 1), 4)
  entry <- function(extent, mul, add, begin) list(axis = 0, extent = extent, variable = "start_pos", mul = mul,
                                                  add = add, begin = begin)
  end <- polygrad:::node_wire(pg_shrink(K, list(list(1, p + 1), NULL))$node)
  expect_equal(end$pairs, list(begin = c(0, 0), end = c(W, D)))  # the end at its largest
  expect_equal(end$symbolic, list(entry(5, 1, 1, FALSE)))
  begin <- polygrad:::node_wire(K[p + 1, , drop = FALSE]$node)
  expect_equal(begin$pairs, list(begin = c(4, 0), end = c(5, D)))  # the current begin and end
  expect_equal(begin$symbolic, list(entry(4, 1, 0, TRUE)))
  grown <- polygrad:::node_wire(pg_expand(pg_tensor(array(1, c(1, D))), list(p * 2 + 2, D))$node)
  expect_equal(as.vector(grown$shape$dims), c(2 * (W - 1) + 2, D))
  expect_equal(grown$symbolic, list(entry(10, 2, 2, FALSE)))
  # A begin that could fall below 0, or an end past the axis, takes the value instead.
  expect_null(polygrad:::node_wire(K[p, , drop = FALSE]$node)$symbolic)
  big <- pg_bind(pg_variable("big", 1, W + 4), 2)
  expect_null(polygrad:::node_wire(pg_shrink(K, list(list(1, big), NULL))$node)$symbolic)
})

skip_if_no_daemon()

test_that("attention over a symbolic prefix of a cache matches base R at every position", {
  set.seed(0)
  k <- array(f32(rnorm(W * D)), c(W, D))
  v <- array(f32(rnorm(W * D)), c(W, D))
  q <- array(f32(rnorm(2 * D)), c(2, D))
  K <- pg_realize(pg_tensor(k))
  V <- pg_realize(pg_tensor(v))
  Q <- pg_realize(pg_tensor(q))
  start_pos <- pg_variable("start_pos", 0, W - 1)
  for (pos in c(0, 4, 15, 7)) {
    sp <- pg_bind(start_pos, pos)
    keys <- pg_shrink(K, list(list(1, sp + 1), NULL))
    vals <- pg_shrink(V, list(list(1, sp + 1), NULL))
    expect_equal(dim(keys), c(W, D))  # the daemon's shape: the axis at its largest
    got <- as.array(pg_softmax(Q %*% t(keys), -1) %*% vals)
    expect_equal(got, attention_ref(q, k, v, pos + 1), tolerance = 1e-5, info = sprintf("position %d", pos))
    # Reductions read only the valid rows.
    rows <- k[seq_len(pos + 1), , drop = FALSE]
    expect_equal(as.vector(as.array(pg_sum(keys, 1))), colSums(rows), tolerance = 1e-5)
    expect_equal(as.vector(as.array(pg_max(keys, 1))), apply(rows, 2, max))
    # One row at a symbolic position.
    expect_equal(as.vector(as.array(K[sp + 1, ])), k[pos + 1, ])
  }
})

test_that("a symbolic size follows permutes, whole-axis reshapes and expands", {
  a <- array(as.double(seq_len(W * D)), c(W, D))
  A <- pg_realize(pg_tensor(a))
  n <- pg_bind(pg_variable("n", 1, W), 5)
  part <- pg_shrink(A, list(list(1, n), NULL))
  flat <- pg_reshape(part, list(n * D))  # the symbolic axis merged with the one inside it
  expect_equal(dim(flat), W * D)
  expect_equal(pg_item(pg_sum(flat)), sum(a[1:5, ]))
  expect_equal(as.vector(as.array(pg_sum(t(part), 2))), colSums(a[1:5, ]))
  mask <- pg_expand(pg_tensor(array(1, c(1, D))), list(n, D))  # a symbolic expand
  expect_equal(pg_item(pg_sum(mask * part)), sum(a[1:5, ]))
})

test_that("a tensor with a symbolic dim is not read back: the daemon's INVALID_ARGUMENT", {
  K <- pg_realize(pg_tensor(array(1, c(W, D))))
  part <- pg_shrink(K, list(list(1, pg_bind(pg_variable("n", 0, W - 1), 3) + 1), NULL))
  expect_error(as.array(part), "output \\d+ has a symbolic dim \\(axis 0\\)", class = "polygrad_invalid_argument")
  expect_error(as.array(mean(part)), "symbolic dim", class = "polygrad_invalid_argument")
  expect_equal(pg_item(pg_sum(part)), 4 * D)  # the session goes on
})

test_that("a jit replays new positions from one capture with RunStep variables", {
  set.seed(1)
  k <- array(f32(rnorm(W * D)), c(W, D))
  q <- array(f32(rnorm(D)), c(1, D))
  K <- pg_realize(pg_tensor(k))
  start_pos <- pg_variable("start_pos", 0, W - 1)
  attend <- jit(function(x, pos) {
    keys <- pg_shrink(K, list(list(1, pos + 1), NULL))
    pg_softmax(x %*% t(keys), -1) %*% keys
  })
  positions <- c(2, 3, 5, 9, 15, 0, 5)
  ids <- character()
  for (pos in positions) {
    got <- as.array(attend(pg_tensor(q), pg_bind(start_pos, pos)))
    expect_equal(got, attention_ref(q, k, k, pos + 1), tolerance = 1e-5, info = sprintf("position %d", pos))
    if (!is.null(jit_step(attend))) ids <- c(ids, jit_step(attend)$step_id)
  }
  expect_length(unique(ids), 1L)  # one capture
  expect_equal(jit_step(attend)$runs, length(positions) - 1)
  expect_equal(jit_step(attend)$variables, "start_pos")

  # fn taking the value as a number: each new value is captured again, and right.
  weighted <- jit(function(x, pos) pg_sum(x * K[1, ] * pos))  # a tensor times the value
  ids <- character()
  for (pos in 1:4) {
    expect_equal(pg_item(weighted(pg_tensor(q), pg_bind(start_pos, pos))), sum(q * k[1, ]) * pos, tolerance = 1e-5)
    if (!is.null(jit_step(weighted))) ids <- c(ids, jit_step(weighted)$step_id)
  }
  expect_length(unique(ids), 3L)
  expect_equal(jit_step(weighted)$runs, 1)
})

test_that("a cache row written at a symbolic position inside a jit is captured once", {
  set.seed(3)
  rows <- array(f32(rnorm(W * D)), c(W, D))
  cache <- pg_realize(pg_zeros(2, W, D) + 0)
  allpos <- pg_realize(pg_tensor(rows))
  start_pos <- pg_variable("start_pos", 0, W - 1)
  step <- jit(function(x, pos) {
    cache[1, pos + 1, ] <- x  # `[<-` at a symbolic position
    pg_shrink(cache, list(c(2, 2), list(pos + 1, pos + 1), NULL)) <- -x  # the same through pg_shrink<-
    keys <- pg_shrink(cache[1, , ], list(list(1, pos + 1), NULL))
    pg_sum(keys, 1) + allpos[pos + 1, ]
  })
  want <- array(0, c(2, W, D))
  ids <- character()
  for (pos in 0:7) {
    x <- array(f32(rnorm(D)), c(1, D))
    got <- as.array(step(pg_tensor(x), pg_bind(start_pos, pos)))
    want[1, pos + 1, ] <- x
    want[2, pos + 1, ] <- -x
    ref <- colSums(matrix(want[1, seq_len(pos + 1), ], ncol = D)) + rows[pos + 1, ]
    expect_equal(as.vector(got), ref, tolerance = 1e-5, info = sprintf("position %d", pos))
    if (!is.null(jit_step(step))) ids <- c(ids, jit_step(step)$step_id)
  }
  expect_equal(as.array(cache), want, tolerance = 1e-6)
  expect_length(unique(ids), 1L)
  expect_equal(jit_step(step)$runs, 7)
})

# The daemon's live-buffer gauge, from its /metrics page.
live_buffers <- function(url) {
  invisible(gc())
  polygrad:::flush_releases()
  pg_synchronize()
  text <- readLines(url, warn = FALSE)
  as.numeric(sub("^\\S+ ", "", grep("^polygradd_buffers(\\{[^}]*\\})? ", text, value = TRUE)[1]))
}

test_that("a jitted loop over positions leaves no buffer behind on the daemon", {
  d <- polygrad:::start_daemon(args = "--metrics-listen=127.0.0.1:0")
  on.exit({
    pg_disconnect()
    polygrad:::stop_daemon(d)
  })
  wait_until(function() any(grepl(" info listening ", readLines(d$log, warn = FALSE))), "the daemon's listening line")
  line <- grep(" info listening ", readLines(d$log, warn = FALSE), value = TRUE)[1]
  url <- sub('^.*metrics="?(http://[^" ]+).*$', "\\1", line)
  skip_if(!startsWith(url, "http://"), "this daemon reports no /metrics URL")
  pg_connect(d$address)
  K <- pg_realize(pg_tensor(array(f32(rnorm(W * D)), c(W, D))))
  cache <- pg_realize(pg_zeros(W, D) + 0)
  start_pos <- pg_variable("start_pos", 0, W - 1)
  step <- jit(function(x, pos) {
    cache[pos + 1, ] <- x
    pg_softmax(x %*% t(pg_shrink(cache, list(list(1, pos + 1), NULL))), -1) %*% K
  })
  loop <- function(positions) for (pos in positions) as.array(step(pg_tensor(array(1, c(1, D))), pg_bind(start_pos, pos)))
  loop(0:3)
  before <- live_buffers(url)
  loop(4:11)
  expect_equal(live_buffers(url), before)
  expect_equal(jit_step(step)$runs, 11)  # every call but the eager first
})
