# Elementwise math and activations against base R on the same (float32-exact) values.

skip_if_no_daemon()

f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)
v <- function(t) as.vector(as.array(t))

test_that("round is half to even, as R's", {
  a <- c(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.25, 2.75, -2.75, 3)
  expect_equal(v(round(pg_tensor(a))), round(a))
  expect_equal(v(round(pg_tensor(a, dtype = "float16"))), round(a))
  expect_identical(v(round(pg_tensor(c(1L, -2L)))), c(1L, -2L))  # integers are already round
  expect_error(round(pg_tensor(a), 1), class = "polygrad_invalid_argument")
})

test_that("exp2, reciprocal, rsqrt, clamp, is.nan and is.infinite", {
  a <- f32(c(0.25, 1, 2, 4.5, 9))
  x <- pg_tensor(a)
  expect_equal(v(pg_exp2(x)), 2^a, tolerance = 1e-6)
  expect_equal(v(pg_reciprocal(x)), 1 / a, tolerance = 1e-6)
  expect_equal(v(pg_rsqrt(x)), 1 / sqrt(a), tolerance = 1e-6)
  expect_equal(v(pg_clamp(x, 1, 4)), pmin(pmax(a, 1), 4))
  expect_equal(v(pg_clamp(x, max = 2)), pmin(a, 2))
  expect_error(pg_clamp(x), class = "polygrad_invalid_argument")
  z <- pg_tensor(c(1, -1, 0, 2)) / pg_tensor(c(0, 0, 0, 1))
  expect_identical(v(is.nan(z)), c(FALSE, FALSE, TRUE, FALSE))
  expect_identical(v(is.infinite(z)), c(TRUE, TRUE, FALSE, FALSE))
})

test_that("activations match their definitions", {
  a <- f32(c(-4, -1.5, -0.25, 0, 0.5, 2, 3.5, 7))
  x <- pg_tensor(a)
  sig <- function(u) 1 / (1 + exp(-u))
  softplus <- log1p(exp(a))
  expect_equal(v(pg_softplus(x)), softplus, tolerance = 1e-6)
  expect_equal(v(pg_softplus(x, beta = 2)), log1p(exp(2 * a)) / 2, tolerance = 1e-6)
  expect_equal(v(pg_logsigmoid(x)), log(sig(a)), tolerance = 1e-6)
  expect_equal(v(pg_elu(x, 0.5)), ifelse(a > 0, a, 0.5 * (exp(a) - 1)), tolerance = 1e-6)
  expect_equal(v(pg_relu6(x)), pmin(pmax(a, 0), 6))
  expect_equal(v(pg_hardtanh(x, -0.5, 1.5)), pmin(pmax(a, -0.5), 1.5))
  expect_equal(v(pg_hardsigmoid(x)), pmax(0, pmin(1, a / 6 + 0.5)), tolerance = 1e-6)
  expect_equal(v(pg_hardswish(x)), a * pmin(pmax(a + 3, 0), 6) / 6, tolerance = 1e-6)
  expect_equal(v(pg_mish(x)), a * tanh(softplus), tolerance = 1e-6)
  expect_equal(v(pg_quick_gelu(x)), a * sig(1.702 * a), tolerance = 1e-6)
})
