# Losses, pooling, transposed convolution, normalizations, attention, dropout and the linear map,
# against their definitions computed in base R.

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))
softmax_rows <- function(m) t(apply(m, 1, function(r) exp(r - max(r)) / sum(exp(r - max(r)))))

logits <- matrix(c(1, -0.5, 2, 0.25, -1, 0.5, 1.5, -2, 0, 3, -0.75, 1), 3)  # 3 samples, 4 classes
cls <- c(2L, 4L, 1L)

test_that("cross entropy with label smoothing", {
  lp <- log(softmax_rows(logits))
  y <- diag(4)[cls, ]
  ys <- 0.875 * y + 0.125 / 4
  expect_equal(pg_item(pg_cross_entropy(pg_tensor(logits), cls, reduction = "sum", label_smoothing = 0.125)),
               -sum(lp * ys), tolerance = 1e-6)
  expect_equal(v(pg_cross_entropy(pg_tensor(logits), pg_tensor(cls), reduction = "none")), -rowSums(lp * y), tolerance = 1e-6)
})

test_that("sparse categorical cross entropy leaves out ignore_index", {
  lp <- log(softmax_rows(logits))
  picked <- lp[cbind(1:3, cls)]
  keep <- cls != 4L
  expect_equal(pg_item(pg_sparse_categorical_cross_entropy(pg_tensor(logits), pg_tensor(cls), ignore_index = 4)),
               -sum(picked[keep]) / sum(keep), tolerance = 1e-6)
  expect_equal(pg_item(pg_sparse_categorical_cross_entropy(pg_tensor(logits), pg_tensor(cls))), -mean(picked), tolerance = 1e-6)
  sm <- 0.25
  none <- v(pg_sparse_categorical_cross_entropy(pg_tensor(logits), pg_tensor(cls), label_smoothing = sm, reduction = "none"))
  expect_equal(none, -((1 - sm) * picked + sm * rowMeans(lp)), tolerance = 1e-6)
})

test_that("binary cross entropy of probabilities and of logits", {
  p <- c(0.25, 0.5, 0.875, 0.125)
  y <- c(0, 1, 1, 0)
  expect_equal(pg_item(pg_binary_cross_entropy(pg_tensor(p), pg_tensor(y))), mean(-(y * log(p) + (1 - y) * log(1 - p))),
               tolerance = 1e-6)
  z <- c(-2, 0.5, 3, -0.25)
  s <- 1 / (1 + exp(-z))
  expect_equal(pg_item(pg_binary_cross_entropy_logits(pg_tensor(z), pg_tensor(y), reduction = "sum")),
               sum(-(y * log(s) + (1 - y) * log(1 - s))), tolerance = 1e-6)
})

test_that("pooling takes the max or mean of each window", {
  m <- matrix(c(1, 5, -2, 0, 3, 2, 7, -1, 4, 0.5, 6, 2, -3, 1, 0, 8), 4)
  x <- pg_tensor(array(m, c(1, 1, 4, 4)))
  win <- function(f) matrix(c(f(m[1:2, 1:2]), f(m[3:4, 1:2]), f(m[1:2, 3:4]), f(m[3:4, 3:4])), 2)
  expect_equal(as.array(pg_max_pool2d(x))[1, 1, , ], win(max))
  expect_equal(as.array(pg_avg_pool2d(x))[1, 1, , ], win(mean))
  expect_identical(dim(pg_max_pool2d(x, 3, stride = 1, padding = 1)), c(1L, 1L, 4L, 4L))
  expect_equal(as.array(pg_max_pool2d(x, 3, stride = 1, padding = 1))[1, 1, 1, 1], max(m[1:2, 1:2]))
  expect_equal(as.array(pg_max_pool2d(x, c(2, 4)))[1, 1, , ], c(max(m[1:2, ]), max(m[3:4, ])))
})

test_that("a transposed convolution with stride = kernel tiles the kernel (a Kronecker product)", {
  xin <- matrix(c(1, 2, -1, 0.5), 2)
  w <- matrix(c(1, 0.5, -2, 3), 2)
  y <- pg_conv_transpose2d(pg_tensor(array(xin, c(1, 1, 2, 2))), pg_tensor(array(w, c(1, 1, 2, 2))), stride = 2)
  expect_equal(as.array(y)[1, 1, , ], kronecker(xin, w))
  y2 <- pg_conv_transpose2d(pg_tensor(array(xin, c(1, 1, 2, 2))), pg_tensor(array(w, c(1, 1, 2, 2))), stride = 2,
                            padding = 1, output_padding = 1)
  expect_identical(dim(y2), c(1L, 1L, 3L, 3L))
  expect_equal(as.array(y2)[1, 1, , ], kronecker(xin, w)[2:4, 2:4])
})

test_that("rms, group and batch normalization", {
  expect_equal(as.array(pg_rms_norm(pg_tensor(logits))), logits / sqrt(rowMeans(logits^2) + 1e-6), tolerance = 1e-6)
  expect_error(pg_rms_norm(pg_tensor(logits), 1), class = "polygrad_invalid_argument")
  w <- c(2, -1, 0.5, 1)
  expect_equal(as.array(pg_rms_norm(pg_tensor(logits), weight = pg_tensor(w))),
               sweep(logits / sqrt(rowMeans(logits^2) + 1e-6), 2, w, `*`), tolerance = 1e-6)
  centered <- logits - rowMeans(logits)
  ln <- sweep(centered / sqrt(rowMeans(centered^2) + 1e-5), 2, w, `*`) + 0.5
  expect_equal(as.array(pg_layernorm(pg_tensor(logits), weight = pg_tensor(w), bias = pg_full(4, value = 0.5))), ln,
               tolerance = 1e-5)
  expect_error(pg_layernorm(pg_tensor(logits), weight = pg_tensor(c(1, 2, 3))), "weight must have shape \\(4\\)",
               class = "polygrad_invalid_argument")
  b <- array(c(1, 2, -1, 0.5, 3, -2, 0.25, 4, 1.5, -0.5, 2, 1), c(2, 2, 3))  # (N, C, L)
  norm <- function(u, eps = 1e-5) (u - mean(u)) / sqrt(mean((u - mean(u))^2) + eps)
  g <- as.array(pg_group_norm(pg_tensor(b), 1, weight = pg_tensor(c(2, 1)), bias = pg_tensor(c(0, 1))))
  for (n in 1:2) {
    want <- array(norm(b[n, , ]), c(2, 3))
    expect_equal(g[n, , ], want * c(2, 1) + c(0, 1), tolerance = 1e-5)
  }
  bt <- as.array(pg_batch_norm(pg_tensor(b), training = TRUE))
  for (ch in 1:2) expect_equal(bt[, ch, ], array(norm(b[, ch, ]), c(2, 3)), tolerance = 1e-5)
  rm <- c(0.5, -1)
  rv <- c(4, 0.25)
  be <- as.array(pg_batch_norm(pg_tensor(b), pg_tensor(rm), pg_tensor(rv), weight = pg_tensor(c(1, 3)), eps = 0))
  for (ch in 1:2) expect_equal(be[, ch, ], (b[, ch, ] - rm[ch]) / sqrt(rv[ch]) * c(1, 3)[ch], tolerance = 1e-6)
})

test_that("scaled dot-product attention, plain, causal and masked", {
  q <- matrix(c(1, 0, -1, 0.5, 2, 1), 3)
  k <- matrix(c(0.5, 1, -1, 0, 1, 2, 0.25, -0.5), 4)
  val <- matrix(c(1, 2, 3, 4, -1, 0, 1, 0.5), 4)
  att <- function(scores) softmax_rows(scores) %*% val
  s <- q %*% t(k) / sqrt(2)
  out <- pg_scaled_dot_product_attention(pg_tensor(q), pg_tensor(k), pg_tensor(val))
  expect_equal(as.array(out), att(s), tolerance = 1e-5)
  mask <- matrix(c(TRUE, TRUE, FALSE, TRUE, FALSE, TRUE, TRUE, TRUE, TRUE, FALSE, TRUE, TRUE), 3)
  masked <- pg_scaled_dot_product_attention(pg_tensor(q), pg_tensor(k), pg_tensor(val), attn_mask = pg_tensor(mask))
  expect_equal(as.array(masked), att(ifelse(mask, s, -Inf)), tolerance = 1e-5)
  kq <- k[1:3, ]
  causal <- pg_scaled_dot_product_attention(pg_tensor(q), pg_tensor(kq), pg_tensor(val[1:3, ]), is_causal = TRUE)
  sc <- q %*% t(kq) / sqrt(2)
  sc[upper.tri(sc)] <- -Inf
  expect_equal(as.array(causal), softmax_rows(sc) %*% val[1:3, ], tolerance = 1e-5)
})

test_that("dropout zeroes and rescales in training, and is the identity otherwise", {
  x <- pg_tensor(matrix(1.5, 20, 10))
  expect_identical(pg_dropout(x, 0.25, training = FALSE), x)
  pg_manual_seed(5)
  d <- as.array(pg_dropout(x, 0.25))
  expect_true(all(d == 0 | abs(d - 2) < 1e-6))
  expect_true(sum(d == 0) > 10 && sum(d == 0) < 100)
  pg_manual_seed(5)
  expect_identical(as.array(pg_dropout(x, 0.25)), d)
})

test_that("the linear map takes weight (in, out)", {
  w <- matrix(c(1, 0.5, -1, 2, 0, 1, 0.25, -0.5), 4)
  expect_equal(as.array(pg_linear(pg_tensor(logits), pg_tensor(w), pg_tensor(c(1, -1)))),
               logits %*% w + matrix(c(1, -1), 3, 2, byrow = TRUE), tolerance = 1e-6)
  expect_equal(as.array(pg_linear(pg_tensor(logits), pg_tensor(w))), logits %*% w, tolerance = 1e-6)
})

test_that("pg_batchnorm is tinygrad's batchnorm with given statistics along 1-based axes", {
  x <- array(c(1, 2, -1, 0.5, 3, -2, 0.25, 4, 1.5, -0.5, 2, 1), c(2, 3, 2))
  m <- c(0.5, -1, 2)
  s <- c(2, 0.5, 1)
  w <- c(1, -1, 3)
  b <- c(0, 0.5, -2)
  got <- as.array(pg_batchnorm(pg_tensor(x), pg_tensor(w), pg_tensor(b), pg_tensor(m), pg_tensor(s)))
  for (c in 1:3) expect_equal(got[, c, ], (x[, c, ] - m[c]) * s[c] * w[c] + b[c], tolerance = 1e-6)
  # no weight or bias, statistics along the last axis, invstd broadcasting to x
  inv <- pg_full(1, 1, 2, value = 0.5)
  got2 <- as.array(pg_batchnorm(pg_tensor(x), NULL, NULL, pg_tensor(c(1, -1)), inv, axis = -1))
  expect_equal(got2, sweep(x, 3, c(1, -1)) * 0.5, tolerance = 1e-6)
  expect_error(pg_batchnorm(pg_tensor(x), NULL, NULL, pg_tensor(m), pg_full(4, value = 1)), class = "polygrad_invalid_argument")
})

test_that("pg_avg_pool2d with count_include_pad = FALSE divides by the elements inside the input", {
  x <- pg_tensor(array(c(1, 4, 7, 2, 5, 8, 3, 6, 9), c(1, 1, 3, 3)))  # rows 1 2 3 / 4 5 6 / 7 8 9
  got <- as.array(pg_avg_pool2d(x, 2, stride = 2, padding = 1, count_include_pad = FALSE))
  expect_equal(got[1, 1, , ], matrix(c(1, 5.5, 2.5, 7), 2))
  counted <- as.array(pg_avg_pool2d(x, 2, stride = 2, padding = 1))
  expect_equal(counted[1, 1, , ], matrix(c(0.25, 2.75, 1.25, 7), 2))
})

test_that("ceil_mode keeps the last partial windows, whose padding never counts in a mean", {
  x <- pg_tensor(array(c(1, 4, 7, 2, 5, 8, 3, 6, 9), c(1, 1, 3, 3)))  # rows 1 2 3 / 4 5 6 / 7 8 9
  expect_equal(as.array(pg_avg_pool2d(x, 2, ceil_mode = TRUE))[1, 1, , ], matrix(c(3, 7.5, 4.5, 9), 2))
  expect_equal(as.array(pg_max_pool2d(x, 2, ceil_mode = TRUE))[1, 1, , ], matrix(c(5, 8, 6, 9), 2))
  expect_identical(dim(pg_max_pool2d(x, 2)), c(1L, 1L, 1L, 1L))
  # a last window that would start in the after-padding is dropped
  expect_identical(dim(pg_max_pool2d(pg_zeros(1, 5), 2, 2, 1, spatial = 1, ceil_mode = TRUE)), c(1L, 3L))
  # return_indices: 1-based flat positions (row-major in the plane), which pg_max_unpool2d takes back
  r <- pg_max_pool2d(x, 2, ceil_mode = TRUE, return_indices = TRUE)
  expect_identical(as.vector(t(as.array(r$indices)[1, 1, , ])), c(5L, 6L, 8L, 9L))
  up <- as.array(pg_max_unpool2d(r$values, r$indices, output_size = c(3, 3)))[1, 1, , ]
  expect_equal(up, rbind(c(0, 0, 0), c(0, 5, 6), c(0, 8, 9)))
})
