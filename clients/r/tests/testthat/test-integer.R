# Integer division, remainders, bitwise ops, shifts, bitcasts and raw bytes, against base R.

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))

test_that("%/% and %% are R's floor division and remainder, for ints and floats", {
  a <- c(-7L, 7L, -7L, 7L, 6L, -6L, 0L, 9L)
  b <- c(2L, -2L, -2L, 2L, 3L, 4L, 5L, -4L)
  x <- pg_tensor(a)
  y <- pg_tensor(b)
  expect_identical(v(x %/% y), a %/% b)
  expect_identical(v(x %% y), a %% b)
  expect_identical(v(x %% 3L), a %% 3L)
  expect_identical(v(20L %/% y), 20L %/% b)
  af <- c(-7.5, 7.5, 5.25, -5.25)
  bf <- c(2, -2, 1.5, 1.5)
  expect_equal(v(pg_tensor(af) %/% pg_tensor(bf)), af %/% bf)
  expect_equal(v(pg_tensor(af) %% pg_tensor(bf)), af %% bf)
  u <- pg_tensor(c(7L, 200L, 9L), dtype = "uint8")
  expect_identical(v(u %/% 2L), c(3L, 100L, 4L))
  expect_identical(v(u %% 7L), c(0L, 4L, 2L))
})

test_that("pg_idiv truncates toward zero and pg_fmod has the dividend's sign (C's / and %)", {
  a <- c(-7L, 7L, -7L, 7L, 5L)
  b <- c(2L, -2L, -2L, 2L, 0L)
  x <- pg_tensor(a)
  expect_identical(v(pg_idiv(x, pg_tensor(b))), c(as.integer(trunc(a[1:4] / b[1:4])), 0L))  # x / 0 gives 0
  expect_identical(v(pg_fmod(x, 3L)), a - as.integer(trunc(a / 3)) * 3L)
  expect_equal(v(pg_fmod(pg_tensor(c(-7.5, 7.5)), 2)), c(-1.5, 1.5))
  expect_error(pg_idiv(pg_tensor(c(1.5, 2)), 2), class = "polygrad_invalid_argument")
})

test_that("bitwise ops agree with bitwAnd, bitwOr, bitwXor and bitwNot", {
  a <- c(-1L, 0L, 12345L, -98765L, .Machine$integer.max, 255L)
  b <- c(7L, -1L, 54321L, 4096L, -2L, 15L)
  x <- pg_tensor(a)
  y <- pg_tensor(b)
  expect_identical(v(pg_bitwise_and(x, y)), bitwAnd(a, b))
  expect_identical(v(pg_bitwise_or(x, y)), bitwOr(a, b))
  expect_identical(v(pg_bitwise_xor(x, y)), bitwXor(a, b))
  expect_identical(v(pg_bitwise_not(x)), bitwNot(a))
  expect_identical(v(pg_bitwise_not(pg_tensor(c(0L, 255L, 15L), dtype = "uint8"))), c(255L, 0L, 240L))
  p <- pg_tensor(c(TRUE, TRUE, FALSE, FALSE))
  q <- pg_tensor(c(TRUE, FALSE, TRUE, FALSE))
  expect_identical(v(pg_bitwise_and(p, q)), c(TRUE, FALSE, FALSE, FALSE))
  expect_identical(v(pg_bitwise_or(p, q)), c(TRUE, TRUE, TRUE, FALSE))
  expect_identical(v(pg_bitwise_xor(p, q)), c(FALSE, TRUE, TRUE, FALSE))
  expect_error(pg_bitwise_and(pg_tensor(c(1.5)), 1), class = "polygrad_invalid_argument")
})

test_that("shifts multiply and floor-divide by powers of two, wrapping in the dtype", {
  a <- c(-7L, -1L, 0L, 5L, 1000L)
  x <- pg_tensor(a)
  expect_identical(v(pg_lshift(x, 3)), a * 8L)
  expect_identical(v(pg_rshift(x, 1)), as.integer(floor(a / 2)))  # arithmetic: -7 >> 1 is -4
  expect_identical(v(pg_lshift(pg_tensor(c(1L, 3L), dtype = "uint8"), 7)), c(128L, 128L))
  expect_identical(v(pg_rshift(pg_tensor(c(-128L, 64L, 127L), dtype = "int8"), 6)), c(-2L, 1L, 1L))
  # The sign bit's shift (2^7 does not fit int8): -1 for negatives, 0 otherwise, as torch.
  expect_identical(v(pg_rshift(pg_tensor(c(-128L, -1L, 0L, 64L, 127L), dtype = "int8"), 7)), c(-1L, -1L, 0L, 0L, 0L))
  expect_identical(v(pg_rshift(pg_tensor(c(-5L, 5L)), 31)), c(-1L, 0L))
  expect_error(pg_lshift(x, 32), class = "polygrad_invalid_argument")
})

test_that("pg_bitcast reinterprets bits, regrouping the last axis", {
  expect_identical(v(pg_bitcast(pg_tensor(c(1, -2)), "int32")), c(1065353216L, -1073741824L))
  u8 <- pg_tensor(matrix(c(1L, 0L, 255L, 255L), 1), dtype = "uint8")
  expect_identical(as.array(pg_bitcast(u8, "int16")), matrix(c(1L, -1L), 1))
  expect_identical(dim(pg_bitcast(pg_tensor(c(1, 2)), "uint8")), 8L)
  expect_error(pg_bitcast(pg_tensor(c(1L, 2L, 3L), dtype = "uint8"), "int16"), class = "polygrad_invalid_argument")
})

test_that("pg_from_bytes makes exact 64-bit integers and pg_bytes reads them back", {
  le <- function(lo, hi) writeBin(c(as.integer(lo), as.integer(hi)), raw(), size = 4, endian = "little")
  # 2^62 + 1 and -(2^62) - 3: past 2^53, so no R double holds them.
  bytes <- c(le(1L, 2^30), le(-3L, -2^30 - 1))
  x <- pg_from_bytes(bytes, "int64")
  expect_identical(dim(x), 2L)
  expect_identical(pg_dtype(x), "int64")
  expect_identical(pg_bytes(x), bytes)
  expect_identical(v(pg_bitcast(x, "int32")), c(1L, 1073741824L, -3L, -1073741825L))
  expect_identical(pg_bytes(x + 1L), c(le(2L, 2^30), le(-2L, -2^30 - 1)))  # exact arithmetic on the daemon
  m <- pg_from_bytes(as.raw(1:6), "uint8", c(2, 3))
  expect_identical(as.array(m), matrix(1:6, 2, byrow = TRUE))  # row-major, as the wire
  expect_identical(pg_bytes(pg_from_bytes(as.raw(c(0, 0x3c)), "float16", numeric())), as.raw(c(0, 0x3c)))
  expect_equal(pg_item(pg_from_bytes(as.raw(c(0, 0x3c)), "float16", numeric())), 1)
  expect_error(pg_from_bytes(as.raw(1:7), "int32"), class = "polygrad_invalid_argument")
  expect_error(pg_from_bytes(as.raw(1:8), "int32", c(3)), class = "polygrad_invalid_argument")
  expect_error(pg_from_bytes(1:8, "int32"), class = "polygrad_invalid_argument")
})

test_that("the minimum of uint64 values past 2^53 is exact", {
  big <- pg_from_bytes(as.raw(c(rep(0xff, 8), 2, rep(0, 7), rep(0xff, 7), 0x7f)), "uint64")  # 2^64 - 1, 2, 2^63 - 1
  expect_identical(pg_bytes(pg_min(big)), as.raw(c(2, rep(0, 7))))
  expect_identical(pg_bytes(pg_max(big)), as.raw(rep(0xff, 8)))
})
