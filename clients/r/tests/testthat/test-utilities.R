# The Tensor utilities R shares with the Python client (R/utilities.R): like-constructors,
# initializers, properties, clone/assign, gradients of chosen targets, no_grad, sequential.

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))

test_that("like-constructors keep the shape and the dtype unless told", {
  x <- pg_tensor(matrix(1:6, 2), dtype = "int16")
  expect_equal(dim(pg_zeros_like(x)), c(2, 3))
  expect_equal(pg_dtype(pg_ones_like(x)), "int16")
  expect_equal(v(pg_full_like(x, 7, dtype = "float64")), rep(7, 6))
  expect_equal(pg_dtype(pg_full_like(x, 7, dtype = "float64")), "float64")
  r <- v(pg_rand_like(pg_zeros(4, 5)))
  expect_true(all(r >= 0 & r < 1) && length(unique(r)) == 20)
  expect_equal(pg_dtype(pg_randn_like(x, dtype = "float16")), "float16")
})

test_that("initializers draw within their tinygrad bounds from R's generator", {
  set.seed(1)
  a <- v(pg_uniform(100, low = -2, high = 3))
  set.seed(1)
  expect_equal(v(pg_uniform(100, low = -2, high = 3)), a)
  expect_true(all(a >= -2 & a < 3))
  expect_equal(v(pg_uniform(100, low = -2, high = 3)) == a, rep(FALSE, 100))  # a new draw
  expect_true(all(abs(v(pg_scaled_uniform(8, 2))) <= 0.25))
  expect_true(all(abs(v(pg_glorot_uniform(8, 2, 3))) <= sqrt(6 / 14)))
  b <- sqrt(3) * sqrt(2 / (1 + 0.01^2)) / sqrt(6)
  ku <- v(pg_kaiming_uniform(50, 2, 3))
  expect_true(all(abs(ku) <= b) && max(abs(ku)) > b / 2)
  kn <- v(pg_kaiming_normal(400, 50, a = 1))
  expect_equal(sd(kn), 1 / sqrt(50), tolerance = 0.05)
  expect_equal(dim(pg_kaiming_normal(3, 4)), c(3, 4))
  expect_equal(length(v(pg_uniform())), 1L)  # a 0-d draw
})

test_that("properties read the node", {
  x <- pg_zeros(3, 4, dtype = "float16")
  expect_equal(pg_element_size(x), 2)
  expect_equal(pg_nbytes(x), 24)
  expect_true(pg_is_floating_point(x))
  expect_false(pg_is_floating_point(pg_tensor(1L)))
  y <- x + 1
  expect_false(pg_is_realized(y))
  pg_realize(y)
  expect_true(pg_is_realized(y))
  expect_true(pg_node_id(y) > pg_node_id(x))
})

test_that("clone passes gradients to its source; assign rebinds, casts and checks the shape", {
  w <- pg_tensor(c(1, 2, 3))
  requires_grad(w) <- TRUE
  loss <- sum(pg_clone(w) * pg_clone(w))
  backward(loss)
  expect_equal(v(grad(w)), c(2, 4, 6), tolerance = 1e-6)
  t <- pg_zeros(3)
  pg_assign(t, c(4L, 5L, 6L))
  expect_equal(pg_dtype(t), "float32")
  expect_equal(v(t), c(4, 5, 6))
  expect_error(pg_assign(t, pg_zeros(2)), "assign: shape \\(2\\) differs from \\(3\\)")
  # A leaf takes a tracked value's data, not its history: no gradient flows through it to w.
  u <- pg_zeros(3)
  requires_grad(u) <- TRUE
  pg_assign(u, w * 2)
  backward(sum(u * u))
  expect_equal(v(grad(u)), c(4, 8, 12), tolerance = 1e-6)
  expect_equal(v(grad(w)), c(2, 4, 6), tolerance = 1e-6)
})

test_that("pg_gradient differentiates with respect to the targets given, with a seed gradient", {
  x <- pg_tensor(c(1, 2, 3))
  y <- pg_tensor(c(-1, 0.5, 2))
  g <- pg_gradient(sum(x * x * y), list(x, y))
  expect_equal(v(g[[1]]), 2 * c(1, 2, 3) * c(-1, 0.5, 2), tolerance = 1e-6)
  expect_equal(v(g[[2]]), c(1, 4, 9), tolerance = 1e-6)
  gs <- pg_gradient(x * x, x, gradient = c(1, 0, -1))
  expect_equal(v(gs[[1]]), c(2, 0, -6), tolerance = 1e-6)
  expect_error(pg_gradient(x * x, x), "one-element loss")
})

test_that("pg_no_grad leaves results untracked and restores tracking after an error", {
  w <- pg_tensor(c(1, 2))
  requires_grad(w) <- TRUE
  y <- pg_no_grad(w * 3)
  expect_false(isTRUE(y$rg))
  expect_error(pg_no_grad(stop("inside")), "inside")
  expect_equal(polygrad:::.pg$no_grad, 0L)
  expect_true(isTRUE((w * 3)$rg))
})

test_that("pg_sequential applies each layer in turn", {
  out <- pg_sequential(pg_tensor(c(-1, 2)), list(function(t) t * 2, pg_relu, function(t) t + 1))
  expect_equal(v(out), c(1, 5))
})

test_that("tinygrad's tri-state requires_grad: with no TRUE tensor, backward fills the unset float data", {
  x <- pg_tensor(c(0.5, -1))  # requires_grad left unset (NULL)
  r <- pg_rand(2)             # a random draw, unset too
  frozen <- pg_tensor(c(2, 3))
  requires_grad(frozen) <- FALSE
  # a comparison inside the differentiated graph is allowed: where(x < 0, x, 2x)
  backward(sum(pg_where(x < 0, x, x * 2) * frozen + r * pg_ones(2)))
  expect_equal(v(grad(x)), c(4, 3))
  expect_equal(v(grad(r)), c(1, 1))
  expect_null(grad(frozen))
  # a requires_grad = TRUE tensor takes precedence: the unset ones get nothing then
  w <- pg_tensor(1.5)
  requires_grad(w) <- TRUE
  u <- pg_tensor(4)
  backward(sum(w * u))
  expect_equal(v(grad(w)), 4)
  expect_null(grad(u))
  expect_error(backward(sum(frozen * pg_ones(2))), "depends on no tensor with requires_grad = TRUE")
})
