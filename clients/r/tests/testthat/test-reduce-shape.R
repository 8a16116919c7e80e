# Reductions, scans, constructors, shape helpers and indexing, against base R.

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))

a <- matrix(c(1.5, -2, 0.25, 3, 4, -1, 2, 0.5, -3, 1, 2.5, 0.75), 3)  # float32-exact
x <- pg_tensor(a)

test_that("prod, std and logsumexp", {
  expect_equal(v(pg_prod(x, 2)), apply(a, 1, prod))
  expect_equal(pg_item(prod(x)), prod(a), tolerance = 1e-6)
  expect_identical(v(pg_prod(pg_tensor(matrix(1:6, 2)), 1)), c(2L, 12L, 30L))
  expect_equal(v(pg_std(x, 1)), apply(a, 2, sd), tolerance = 1e-6)
  expect_equal(v(pg_std(x, 2, correction = 0)), apply(a, 1, function(r) sqrt(mean((r - mean(r))^2))), tolerance = 1e-6)
  expect_equal(v(pg_logsumexp(x, 2)), log(rowSums(exp(a))), tolerance = 1e-6)
  expect_equal(dim(pg_logsumexp(x, 1, keepdim = TRUE)), c(1L, 4L))
  expect_equal(pg_item(pg_logsumexp(x)), log(sum(exp(a))), tolerance = 1e-6)
})

test_that("argmax and argmin give 1-based positions, the first on ties", {
  expect_identical(v(pg_argmax(x, 2)), apply(a, 1, which.max))
  expect_identical(v(pg_argmin(x, 1)), apply(a, 2, which.min))
  expect_identical(dim(pg_argmax(x, 1, keepdim = TRUE)), c(1L, 4L))
  expect_identical(pg_item(pg_argmax(x)), which.max(as.vector(t(a))))  # row-major flattening
  expect_identical(v(pg_argmax(pg_tensor(c(2L, 5L, 5L, 1L)))), 2L)
})

test_that("cumsum along an axis keeps the dtype; bool counts", {
  expect_equal(as.array(pg_cumsum(x, 2)), t(apply(a, 1, cumsum)))
  expect_equal(as.array(pg_cumsum(x, 1)), apply(a, 2, cumsum))
  expect_equal(v(cumsum(pg_tensor(c(1, 2, 3.5)))), c(1, 3, 6.5))
  i <- pg_cumsum(pg_tensor(matrix(1:6, 2)), -1)
  expect_identical(pg_dtype(i), "int32")
  expect_identical(as.array(i), t(apply(matrix(1:6, 2), 1, cumsum)))
  expect_identical(v(pg_cumsum(pg_tensor(c(TRUE, FALSE, TRUE)))), c(1L, 1L, 2L))
})

test_that("sort, topk and running extremes match base R (1-based indices; NaN last; ties stable)", {
  s <- pg_sort(x, 2)
  expect_equal(as.array(s$values), t(apply(a, 1, sort)))
  expect_identical(as.array(s$indices), t(apply(a, 1, order)))
  d <- pg_sort(pg_tensor(c(2, NaN, 5, 2)), descending = TRUE)
  expect_identical(v(d$values), c(NaN, 5, 2, 2))
  expect_identical(v(d$indices), c(2L, 3L, 1L, 4L))
  k <- pg_topk(x, 2, 1, largest = FALSE)
  expect_equal(as.array(k$values), apply(a, 2, function(c) sort(c)[1:2]))
  expect_error(pg_topk(x, 9, 1), "topk: k must be a whole number from 0 to 3")
  y <- c(1, 3, 2, 3, 0)
  expect_equal(v(pg_cummax(pg_tensor(y))$values), cummax(y))
  expect_identical(v(pg_cummax(pg_tensor(y))$indices), c(1L, 2L, 2L, 4L, 4L))
  expect_equal(v(pg_cummin(pg_tensor(y))$values), cummin(y))
  expect_equal(as.array(pg_cumprod(x, 2)), t(apply(a, 1, cumprod)), tolerance = 1e-6)
  expect_equal(v(pg_logcumsumexp(pg_tensor(y))), log(cumsum(exp(y))), tolerance = 1e-6)
})

test_that("linspace, eye and randint", {
  expect_equal(v(pg_linspace(0, 1, 5)), seq(0, 1, length.out = 5))
  expect_identical(dim(pg_linspace(2, 3, 1)), 1L)
  expect_identical(pg_dtype(pg_linspace(-2, 2, 9, dtype = "float64")), "float64")
  expect_equal(as.array(pg_eye(3)), diag(3))
  expect_identical(as.array(pg_eye(2, 4, dtype = "int32")), matrix(c(1L, 0L, 0L, 1L, 0L, 0L, 0L, 0L), 2))
  expect_equal(v(pg_linspace(2.5, 9, 1)), 2.5)
  expect_identical(dim(pg_eye(0, 3)), c(0L, 3L))
  # integer bounds past int32 default to int64; values past the dtype are refused, not wrapped
  expect_identical(pg_dtype(pg_arange(2147483600L, 2147483700, 25)), "int64")
  expect_error(pg_arange(0L, 300L, dtype = "int8"), "does not fit int8", class = "polygrad_invalid_argument")
  pg_manual_seed(11)
  r1 <- v(pg_randint(50, low = -5, high = 5))
  pg_manual_seed(11)
  r2 <- v(pg_randint(50, low = -5, high = 5))
  expect_identical(r1, r2)
  expect_true(all(r1 >= -5 & r1 < 5))
  expect_true(length(unique(r1)) > 3)
  expect_identical(pg_dtype(pg_randint(2, 3, low = 0, high = 200, dtype = "uint8")), "uint8")
  expect_error(pg_randint(3, low = 0, high = 300, dtype = "uint8"), class = "polygrad_invalid_argument")
})

test_that("squeeze, unsqueeze, flatten, unflatten, transpose and repeat", {
  b <- array(as.double(1:24), c(2, 1, 3, 4))
  y <- pg_tensor(b)
  expect_identical(dim(pg_squeeze(y, 2)), c(2L, 3L, 4L))
  expect_identical(dim(pg_squeeze(y, 1)), c(2L, 1L, 3L, 4L))
  expect_identical(dim(pg_squeeze(y)), c(2L, 3L, 4L))
  expect_identical(dim(pg_unsqueeze(y, -1)), c(2L, 1L, 3L, 4L, 1L))
  expect_identical(dim(pg_unsqueeze(y, 1)), c(1L, 2L, 1L, 3L, 4L))
  expect_identical(dim(pg_flatten(y)), 24L)
  expect_identical(dim(pg_flatten(y, 2)), c(2L, 12L))
  expect_identical(dim(pg_unflatten(pg_flatten(y, 3), 3, c(3, 4))), c(2L, 1L, 3L, 4L))
  expect_equal(as.array(pg_transpose(y, 1, 4)), aperm(b, c(4, 2, 3, 1)))
  expect_equal(as.array(pg_transpose(x)), t(a))
  expect_equal(as.array(pg_repeat(x, c(2, 3))), a[rep(1:3, 2), rep(1:4, 3)])
  expect_identical(dim(pg_repeat(x, c(2, 1, 1))), c(2L, 3L, 4L))
})

test_that("split, chunk, shrink and pad with a value or negative amounts", {
  p <- pg_split(x, c(1, 2, 1), axis = 2)
  expect_length(p, 3)
  expect_equal(as.array(p[[2]]), a[, 2:3])
  q <- pg_split(x, 3, axis = 2)
  expect_equal(lapply(q, dim), list(c(3L, 3L), c(3L, 1L)))
  ch <- pg_chunk(x, 2, axis = 1)
  expect_equal(as.array(ch[[1]]), a[1:2, ])
  expect_equal(as.array(ch[[2]]), a[3, , drop = FALSE])
  expect_equal(as.array(pg_shrink(x, list(c(2, 3), NULL))), a[2:3, ])
  expect_identical(dim(pg_shrink(x, list(c(2, 1), NULL))), c(0L, 4L))
  padded <- as.array(pg_pad(pg_tensor(matrix(1L, 2, 2)), list(c(1, 0), c(0, 1)), value = 7L))
  expect_identical(padded, rbind(7L, cbind(matrix(1L, 2, 2), 7L)))
  expect_equal(as.array(pg_pad(x, list(c(-1, 1), c(0, -2)))), rbind(a[2:3, 1:2], 0))
})

test_that("`[` takes positions in any order, steps, reversals and index tensors", {
  expect_equal(as.array(x[c(3, 1, 1), ]), a[c(3, 1, 1), ])
  expect_equal(as.array(x[, c(4, 2)]), a[, c(4, 2)])
  expect_equal(as.array(x[, c(1, 3)]), a[, c(1, 3)])
  expect_equal(v(x[3:1, 2]), a[3:1, 2])
  expect_equal(as.array(x[2, , drop = FALSE]), a[2, , drop = FALSE])
  idx <- pg_tensor(matrix(c(3L, 1L, 2L, 3L), 2))
  expect_equal(as.array(x[idx, 1]), matrix(a[c(3, 1, 2, 3), 1], 2))
  expect_equal(as.array(x[pg_tensor(c(2L, 9L)), ]), rbind(a[2, ], 0))  # out of range: zeros
  expect_equal(as.array(x[pg_tensor(c(1L, 3L)), c(4, 1)]), a[c(1, 3), c(4, 1)])
  expect_error(x[0, ], class = "polygrad_invalid_argument")
  expect_error(x[pg_tensor(c(1.5)), ], class = "polygrad_invalid_argument")
})

test_that("gather, one-hot, tril and triu", {
  i <- matrix(c(1L, 4L, 2L, 2L, 3L, 1L), 3)
  g <- pg_gather(x, 2, pg_tensor(i))
  expect_equal(as.array(g), matrix(a[cbind(rep(1:3, 2), as.vector(i))], 3))
  expect_identical(as.array(pg_one_hot(pg_tensor(c(2L, 1L, 3L, 0L)), 3)),
                   rbind(c(0L, 1L, 0L), c(1L, 0L, 0L), c(0L, 0L, 1L), c(0L, 0L, 0L)))
  m <- matrix(as.double(1:16), 4)
  expect_equal(as.array(pg_tril(pg_tensor(m))), m * lower.tri(m, diag = TRUE))
  expect_equal(as.array(pg_triu(pg_tensor(m), 1)), m * upper.tri(m))
  expect_equal(as.array(pg_tril(pg_tensor(m), -1)), m * lower.tri(m))
})
