# Scatter, selection by index and resampling (the daemon's SCATTER_REDUCE, NLL_LOSS, INTERPOLATE,
# UNFOLD, NONZERO, MULTINOMIAL) against base R computations; positions and classes are 1-based.

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))

# torch's scatter_reduce along the columns of matrix x, written as loops.
scatter_ref <- function(x, idx, src, f, include_self) {
  out <- x
  for (r in seq_len(nrow(x))) for (i in seq_len(ncol(x))) {
    hits <- src[r, seq_len(ncol(idx))][idx[r, ] == i]
    if (length(hits)) out[r, i] <- f(if (include_self) c(x[r, i], hits) else hits)
  }
  out
}

x <- matrix(c(1, 4, 2, 5, 3, 6), 2)         # rows (1, 2, 3) and (4, 5, 6)
idx <- matrix(c(3L, 2L, 1L, 2L), 2)          # row 1 writes at 3 and 1, row 2 twice at 2
src <- matrix(c(10, 30, 20, 40, 50, 60), 2)  # a column wider than the index: cut to it

test_that("scatter writes src at the positions; of colliding updates the last wins", {
  last <- function(h) tail(h, 1)
  got <- pg_scatter(pg_tensor(x), 2, pg_tensor(idx), pg_tensor(src))
  expect_equal(as.array(got), scatter_ref(x, idx, src, last, FALSE))
  expect_equal(as.array(pg_scatter(pg_tensor(x), 2, pg_tensor(idx), 9)), scatter_ref(x, idx, src * 0 + 9, last, FALSE))
  expect_equal(as.array(pg_scatter(pg_tensor(x), 2, pg_tensor(idx), pg_tensor(src), reduce = "multiply")),
               scatter_ref(x, idx, src, prod, TRUE))
  expect_error(pg_scatter(pg_tensor(x), 2, pg_tensor(matrix(0.5)), pg_tensor(src)), "index must be an integer tensor")
})

test_that("scatter_reduce in every mode, with and without self", {
  fs <- list(sum = sum, prod = prod, mean = mean, amax = max, amin = min)
  for (m in names(fs)) for (self in c(TRUE, FALSE)) {
    got <- pg_scatter_reduce(pg_tensor(x), 2, pg_tensor(idx), pg_tensor(src), m, include_self = self)
    expect_equal(as.array(got), scatter_ref(x, idx, src, fs[[m]], self), info = paste(m, self))
  }
})

test_that("nll_loss with weights and an ignored class", {
  logp <- matrix(c(-1, -0.5, -4, -2, -1.5, -5, -3, -2.5, -6), 3)
  y <- c(3L, 1L, 2L)
  w <- c(1, 2, 4)
  picked <- logp[cbind(1:3, y)]
  expect_equal(pg_item(pg_nll_loss(pg_tensor(logp), y)), -mean(picked), tolerance = 1e-6)
  keep <- y != 2
  expect_equal(pg_item(pg_nll_loss(pg_tensor(logp), y, weight = w, ignore_index = 2)),
               -sum((w[y] * picked)[keep]) / sum(w[y][keep]), tolerance = 1e-6)
  expect_equal(v(pg_nll_loss(pg_tensor(logp), y, reduction = "none")), -picked, tolerance = 1e-6)
})

test_that("interpolate: linear (approx at torch's positions), nearest", {
  a <- c(0, 4, 1)
  n <- length(a)
  m <- 7
  pos <- pmax(((0:(m - 1)) + 0.5) * n / m - 0.5, 0)  # torch's source positions, 0-based
  got <- v(pg_interpolate(pg_tensor(matrix(a, 1)), m))
  expect_equal(got, approx(0:(n - 1), a, pos, rule = 2)$y, tolerance = 1e-6)
  corners <- v(pg_interpolate(pg_tensor(matrix(a, 1)), m, align_corners = TRUE))
  expect_equal(corners, approx(0:(n - 1), a, (0:(m - 1)) * (n - 1) / (m - 1))$y, tolerance = 1e-6)
  near <- v(pg_interpolate(pg_tensor(1:3), 5, mode = "nearest"))
  expect_identical(near, (1:3)[floor((0:4) * 3 / 5) + 1])
})

test_that("unfold is embed's windows", {
  w <- pg_unfold(pg_tensor(0:6), 1, 3, 2)
  expect_identical(dim(w), c(3L, 3L))
  expect_identical(as.array(w), embed(0:6, 3)[c(1, 3, 5), 3:1])
})

test_that("nonzero and masked_select visit elements in row-major order", {
  a <- matrix(c(0, 2, 1.5, 0, 0, -1), 2)
  want <- which(a != 0, arr.ind = TRUE)
  want <- unname(want[order(want[, 1], want[, 2]), ])
  expect_identical(as.array(pg_nonzero(pg_tensor(a))), matrix(as.integer(want), ncol = 2))
  expect_identical(v(pg_masked_select(pg_tensor(1:4), c(TRUE, FALSE, FALSE, TRUE))), c(1L, 4L))
  # tinygrad's size=: a fixed row count, the rest filled
  expect_identical(as.array(pg_nonzero(pg_tensor(a), size = 5, fill = 0)),
                   rbind(matrix(as.integer(want), ncol = 2), matrix(0L, 2, 2)))
  expect_identical(v(pg_masked_select(pg_tensor(1:4), c(TRUE, FALSE, FALSE, TRUE), size = 3, fill = 9)), c(1L, 4L, 9L))
})

test_that("multinomial draws only weighted classes; randperm and normal", {
  pg_manual_seed(3)
  d <- as.array(pg_multinomial(pg_tensor(rbind(c(0, 1, 0), c(2, 0, 0))), 20, replacement = TRUE))
  expect_true(all(d[1, ] == 2L) && all(d[2, ] == 1L))
  expect_identical(sort(v(pg_randperm(8))), 1:8)
  expect_identical(dim(pg_normal(2, 3, mean = 1, std = 2)), c(2L, 3L))
  up <- pg_max_unpool2d(pg_tensor(array(c(5, 7), c(1, 1, 1, 2))), pg_tensor(array(c(2L, 3L), c(1, 1, 1, 2))))
  expect_identical(dim(up), c(1L, 1L, 2L, 4L))
  expect_equal(as.vector(aperm(as.array(up), 4:1)), c(0, 5, 7, 0, 0, 0, 0, 0))
  r <- pg_zeros(2)
  pg_replace(r, pg_ones(2, dtype = "int32"))
  expect_identical(v(r), c(1L, 1L))
  expect_identical(pg_contiguous_backward(r), r)
})
