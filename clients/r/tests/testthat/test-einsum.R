# pg_einsum: one EINSUM node (the daemon's), its shape known locally; bad equations refused here.

skip_if_no_daemon()

test_that("einsum multiplies, traces and broadcasts as numpy, in shape order", {
  a <- pg_tensor(matrix(1:6, 2, byrow = TRUE))  # shape (2, 3): rows 1 2 3 and 4 5 6
  b <- pg_tensor(matrix(c(1, 0, 0, 1, 1, 1), 3, byrow = TRUE))
  y <- pg_einsum("ij,jk->ik", a, b)
  expect_equal(dim(y), c(2, 2))
  expect_equal(pg_dtype(y), "float32")
  expect_equal(as.array(y), matrix(c(4, 5, 10, 11), 2, byrow = TRUE))
  expect_equal(pg_item(pg_einsum("ii", pg_eye(3))), 3)
  expect_equal(dim(pg_einsum("...j,kj", pg_zeros(5, 2, 3), pg_zeros(4, 3))), c(5, 2, 4))
  expect_equal(dim(pg_einsum("ba", list(pg_zeros(2, 3)))), c(3, 2))
})

test_that("pg_qr and pg_svd factors reconstruct the matrix (the daemon's QR and SVD)", {
  a <- matrix(c(2, -1, 0, 1, 3, 1, 0, 1, 4, 1, 0, 1), 4, byrow = TRUE)
  f <- pg_qr(pg_tensor(a))
  expect_equal(c(dim(f$q), dim(f$r)), c(4, 3, 3, 3))
  expect_equal(as.array(f$q %*% f$r), a, tolerance = 1e-5)
  d <- pg_svd(pg_tensor(a), full_matrices = FALSE)
  expect_equal(as.vector(as.array(d$s)), svd(a)$d, tolerance = 1e-5)
  expect_error(pg_svd(pg_tensor(a)), "non-square")
  expect_error(pg_qr(pg_zeros(3)), "needs a matrix")
})

test_that("a bad equation is refused before any round trip, naming the problem", {
  a <- pg_zeros(2, 3)
  expect_error(pg_einsum("ij,jk->ik", a, a), "label 'j' has sizes 3 and 2")
  expect_error(pg_einsum("ij->k", a), "output label 'k' is not in any input")
  expect_error(pg_einsum("ijk", a), "operand 0 names 3 axes but has 2")
  expect_error(pg_einsum(strrep("i", 600), a), "more than 512")
  expect_error(pg_einsum("i...j...", a), "more than one '...'")
})
