# jit(fn), tinygrad's TinyJit: eager first call, then one compiled step; the model and optimizer
# reached through fn's closure are its state; losses equal the eager loop's; mismatched calls fail.

skip_if_no_daemon()

jit_mlp <- function(seed) {
  set.seed(seed)
  f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)
  arr <- function(d) array(f32(rnorm(prod(d)) * 0.5), d)
  ps <- list(w1 = pg_tensor(arr(c(16, 8))), b1 = pg_tensor(arr(16)), w2 = pg_tensor(arr(c(4, 16))), b2 = pg_tensor(arr(4)))
  for (p in ps) requires_grad(p) <- TRUE
  ps$opt <- optim_adam(ps[c("w1", "b1", "w2", "b2")], lr = 0.01)
  ps
}

test_that("a jitted Adam loop through closures gives the eager loop's losses", {
  set.seed(3)
  xs <- lapply(1:12, function(i) array(rnorm(32 * 8), c(32, 8)))
  ys <- lapply(1:12, function(i) array(rnorm(32 * 4), c(32, 4)))
  train_with <- function(m) function(x, y) {
    out <- pg_relu(x %*% t(m$w1) + m$b1) %*% t(m$w2) + m$b2
    loss <- mean((out - y)^2)
    m$opt$zero_grad()
    backward(loss)
    m$opt$step()
    loss
  }
  mj <- jit_mlp(1)
  me <- jit_mlp(1)
  step <- jit(train_with(mj))
  eager <- train_with(me)
  lj <- vapply(1:12, function(i) pg_item(step(pg_tensor(xs[[i]]), pg_tensor(ys[[i]]))), 0)
  le <- vapply(1:12, function(i) pg_item(eager(pg_tensor(xs[[i]]), pg_tensor(ys[[i]]))), 0)
  expect_lte(max(abs(lj - le) / abs(le)), 1e-5)
  expect_true(lj[12] < lj[1])
  expect_equal(mj$opt$steps, 12)
  expect_equal(attr(step, "jit")$step$runs, 11)
  expect_equal(as.array(mj$w1), as.array(me$w1), tolerance = 1e-5)
})

test_that("jit replays with new inputs and refuses other shapes", {
  w <- pg_tensor(diag(3))
  f <- jit(function(x) w %*% x + 1)
  for (i in 1:4) {
    x <- array(as.double(i:(i + 2)), 3)
    expect_equal(as.array(f(pg_tensor(x))), array(x + 1, 3))
  }
  expect_error(f(pg_tensor(array(1, 4))), "args mismatch")
  jit_reset(f)
  expect_null(attr(f, "jit")$step)
  expect_equal(as.array(f(pg_tensor(array(1, 3)))), array(2, 3))
})

test_that("two jits updating one tensor see each other", {
  acc <- pg_tensor(0)
  requires_grad(acc) <- TRUE
  o1 <- optim_sgd(list(acc), lr = 1)
  o10 <- optim_sgd(list(acc), lr = 10)
  # Each step moves acc by -lr (the gradient of -acc is -1).
  f1 <- jit(function(x) { o1$zero_grad(); backward(pg_sum(-acc * x)); o1$step(); acc * 1 })
  f10 <- jit(function(x) { o10$zero_grad(); backward(pg_sum(-acc * x)); o10$step(); acc * 1 })
  got <- vapply(list(f1, f1, f10, f1, f10, f10, f1, f1), function(f) pg_item(f(pg_tensor(1))), 0)
  expect_equal(got, c(1, 2, 12, 13, 23, 33, 34, 35))
})

test_that("random numbers are drawn anew every replay, the numbers eager calls draw", {
  x <- pg_tensor(array(1, c(4, 8)))
  calls <- function(f) {
    pg_manual_seed(3)
    before <- pg_rand(4, 8)  # drawn outside fn: the same in every call
    lapply(1:5, function(i) as.array(f(x, before)))
  }
  g <- jit(function(a, b) pg_dropout(a, 0.5) + pg_rand(4, 8) * b)
  jitted <- calls(g)
  expect_equal(attr(g, "jit")$step$runs, 4)
  eager <- calls(function(a, b) pg_dropout(a, 0.5) + pg_rand(4, 8) * b)
  expect_identical(jitted, eager)
  expect_equal(length(unique(lapply(jitted, as.vector))), 5)
})

test_that("a replay is dispatched: its output arrives with the answer, a large one's handle released", {
  conn <- polygrad:::get_conn()
  n <- conn$max_inline / 4 + 1024  # float32s: past what a RunStep answer carries inline
  w <- pg_realize(pg_tensor(rep(1, n), dtype = "float32"))
  f <- jit(function(x) x * w)
  x <- pg_realize(pg_tensor(rep(2, n), dtype = "float32"))
  for (i in 1:3) expect_equal(sum(as.array(f(x))), 2 * n)  # eager, capture, replay
  pg_synchronize()
  queued <- polygrad:::.pg$dead_handles
  a <- f(x)
  b <- f(x)
  # Sent, not settled: answers are applied by a read, a synchronize or the next realize.
  expect_equal(length(polygrad:::.pg$outstanding), 2L)
  expect_true(isTRUE(a$node$awaited))
  expect_equal(sum(as.array(b)), 2 * n)  # the read waits for both answers
  expect_null(a$node$awaited)
  released <- setdiff(polygrad:::.pg$dead_handles, queued)
  expect_length(released, 2L)  # both outputs came as handles of the daemon's copies
  expect_equal(as.array(pg_tensor(1) + 1), 2)  # this request carries the releases
  err <- tryCatch(polygrad:::rpc("Release", list(handles = released[[1]])), error = function(e) e)
  expect_s3_class(err, "polygrad_not_found")
})
