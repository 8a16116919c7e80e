# Acceptance 5: as.array(pg_tensor(a)) is identical to a for random arrays of rank 0-4 and every
# dtype R can hold exactly (doubles as float64, and as float32 when float32-representable;
# integers as int32/int64; logicals as bool), and matrix products agree with R's own %*%.

skip_if_no_daemon()

f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)
rand_shape <- function(rank) if (rank == 0) NULL else sample(1:4, rank, replace = TRUE)
make_array <- function(values, shape) if (is.null(shape)) values[1] else array(values[seq_len(prod(shape))], shape)

test_that("as.array(pg_tensor(a)) returns a exactly, ranks 0-4, every R type", {
  set.seed(1)
  for (rank in 0:4) {
    for (rep in 1:2) {
      shape <- rand_shape(rank)
      n <- max(1, prod(shape))
      dbl <- make_array(rnorm(n) * 1e3, shape)
      expect_identical(as.array(pg_tensor(dbl, dtype = "float64")), dbl)
      f <- make_array(f32(rnorm(n)), shape)
      expect_identical(as.array(pg_tensor(f)), f)  # default float32
      int <- make_array(sample(-1e6:1e6, n, replace = TRUE), shape)
      expect_identical(as.array(pg_tensor(int)), int)
      lgl <- make_array(sample(c(TRUE, FALSE), n, replace = TRUE), shape)
      expect_identical(as.array(pg_tensor(lgl)), lgl)
      expect_identical(as.array(pg_tensor(int, dtype = "int64")), make_array(as.double(int), shape))
    }
  }
})

test_that("dtypes follow R's types and dim() is the shape", {
  expect_equal(pg_dtype(pg_tensor(1.5)), "float32")
  expect_equal(pg_dtype(pg_tensor(1L)), "int32")
  expect_equal(pg_dtype(pg_tensor(TRUE)), "bool")
  expect_equal(pg_dtype(pg_tensor(1, dtype = "float64")), "float64")
  a <- array(1:24, c(2, 3, 4))
  expect_equal(dim(pg_tensor(a)), c(2L, 3L, 4L))
  expect_equal(dim(pg_tensor(5)), integer(0))
  expect_equal(length(pg_tensor(a)), 24L)
})

test_that("an element keeps its R index through the daemon (column-major vs row-major)", {
  a <- array(as.double(1:60), c(3, 4, 5))
  x <- pg_tensor(a)
  expect_equal(as.array(x[2, 3, 4]), a[2, 3, 4])
  expect_equal(as.array(x[2:3, , 5]), a[2:3, , 5])
  expect_equal(as.array(aperm(x, c(3, 1, 2))), aperm(a, c(3, 1, 2)))
  expect_equal(as.array(pg_sum(x, axis = 2)), apply(a, c(1, 3), sum))
  expect_equal(as.array(pg_sum(x, axis = -1, keepdim = TRUE)), array(apply(a, c(1, 2), sum), c(3, 4, 1)))
})

test_that("matrix products agree with R's %*% within float32 tolerance", {
  set.seed(2)
  for (dims in list(c(3, 5, 2), c(17, 33, 9), c(1, 8, 1))) {
    a <- matrix(rnorm(dims[1] * dims[2]), dims[1])
    b <- matrix(rnorm(dims[2] * dims[3]), dims[2])
    got <- as.array(pg_tensor(a) %*% pg_tensor(b))
    expect_equal(dim(got), dim(a %*% b))
    expect_equal(got, a %*% b, tolerance = 1e-5)
  }
  v <- rnorm(5)
  m <- matrix(rnorm(15), 5)
  expect_equal(as.vector(as.array(pg_matmul(v, pg_tensor(m)))), as.vector(v %*% m), tolerance = 1e-5)
})
