# Group generics and ops against R's own arithmetic on the same (float32-exact) values.

skip_if_no_daemon()

f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)

test_that("Ops with R numbers on either side, broadcasting and comparisons", {
  a <- matrix(f32(c(-1.5, 2, 0.25, 3, -4, 5)), 2)
  x <- pg_tensor(a)
  expect_equal(as.array(x + 1), a + 1)
  expect_equal(as.array(2 - x), 2 - a)
  expect_equal(as.array(-x), -a)
  expect_equal(as.array(x * x), a * a)
  expect_equal(as.array(x / 2), a / 2)
  expect_equal(as.array(1 / x), 1 / a, tolerance = 1e-6)
  expect_equal(as.array(x^2), a^2)
  expect_equal(as.array(x > 0), a > 0)
  expect_equal(as.array(x <= 2), a <= 2)
  expect_equal(as.array(x == 2), a == 2)
  expect_equal(as.array(x != 2), a != 2)
  expect_equal(as.array((x > 0) & (x < 3)), (a > 0) & (a < 3))
  row <- pg_tensor(array(f32(c(10, 20, 30)), c(1, 3)))
  expect_equal(as.array(x + row), a + matrix(c(10, 20, 30), 2, 3, byrow = TRUE))
})

test_that("Math, Summary and mean", {
  a <- matrix(f32(c(0.5, 1.5, 2.25, 3, 4.75, 0.125)), 2)
  x <- pg_tensor(a)
  for (f in list(exp, log, sqrt, sin, cos, tanh, abs, floor, ceiling)) {
    expect_equal(as.array(f(x)), f(a), tolerance = 1e-6)
  }
  expect_equal(pg_item(sum(x)), sum(a), tolerance = 1e-6)
  expect_equal(pg_item(max(x)), max(a))
  expect_equal(pg_item(min(x)), min(a))
  expect_equal(pg_item(mean(x)), mean(a), tolerance = 1e-6)
  expect_equal(as.vector(as.array(pg_mean(x, axis = 1))), as.vector(colMeans(a)), tolerance = 1e-6)
  expect_equal(as.array(pg_softmax(x, axis = -1)), t(apply(a, 1, function(r) exp(r) / sum(exp(r)))), tolerance = 1e-6)
})

test_that("min and minimum of unsigned integers count 0 as the least", {
  u <- pg_tensor(matrix(c(3L, 0L, 5L, 7L), 2), dtype = "uint16")
  expect_identical(as.vector(as.array(pg_min(u, 2))), c(3L, 0L))
  expect_identical(pg_item(min(u)), 0L)
  expect_identical(as.vector(as.array(pg_minimum(u, 4L))), c(3L, 0L, 4L, 4L))
})

test_that("movement ops", {
  a <- array(as.double(1:24), c(2, 3, 4))
  x <- pg_tensor(a, dtype = "float64")
  expect_equal(as.array(pg_reshape(x, c(6, 4))), aperm(array(aperm(a), c(4, 6))))
  expect_equal(as.array(pg_flip(x, 3)), a[, , 4:1])
  expect_equal(as.array(pg_cat(x, x, axis = 2)), array(c(a[, , 1], a[, , 1], a[, , 2], a[, , 2], a[, , 3], a[, , 3], a[, , 4], a[, , 4]), c(2, 6, 4)))
  expect_equal(dim(pg_stack(list(x, x), axis = 1)), c(2L, 2L, 3L, 4L))
  # more pieces than one CAT takes (4096) are joined in groups
  expect_identical(as.vector(as.array(pg_cat(lapply(seq_len(8197), function(i) pg_tensor(array(i, 1)))))), seq_len(8197))
  p <- as.array(pg_pad(pg_tensor(matrix(1, 2, 2)), list(c(1, 0), c(0, 2))))
  expect_equal(p, rbind(0, cbind(matrix(1, 2, 2), 0, 0)))
  expect_equal(as.array(pg_expand(pg_tensor(array(c(1, 2), c(2, 1))), c(2, 3))), matrix(c(1, 2), 2, 3))
})

test_that("gradients of a simple function", {
  w <- pg_tensor(c(1, 2, 3))
  requires_grad(w) <- TRUE
  loss <- sum(w * w)
  backward(loss)
  expect_equal(as.vector(as.array(grad(w))), c(2, 4, 6))
  d <- pg_detach(w)
  expect_equal(as.vector(as.array(d)), c(1, 2, 3))
})

test_that("softplus past its threshold and clamp at its bounds pass torch's gradients", {
  s <- pg_tensor(c(-1, 0, 1, 100))
  requires_grad(s) <- TRUE
  sp <- pg_softplus(s)
  backward(sum(sp))
  expect_equal(as.vector(as.array(sp))[4], 100)
  expect_equal(as.vector(as.array(grad(s))), c(plogis(c(-1, 0, 1)), 1), tolerance = 1e-6)
  c <- pg_tensor(c(-1, 0.5, 1, 2, NaN))
  requires_grad(c) <- TRUE
  cl <- pg_clamp(c, -1, 1)
  backward(sum(cl))
  expect_true(is.nan(as.vector(as.array(cl))[5]))
  expect_equal(as.vector(as.array(grad(c))), c(1, 1, 1, 0, 0))
  expect_error(pg_clamp(pg_tensor(c(TRUE, FALSE)), 0), "clamp_min does not take bool")
})

test_that("print shows values, dtype and device", {
  out <- format(pg_tensor(matrix(c(1, 2, 3, 4), 2)))
  expect_match(out[1], "float32\\[2, 2\\] on CPU")
  expect_true(any(grepl("4", out[-1])))
})
