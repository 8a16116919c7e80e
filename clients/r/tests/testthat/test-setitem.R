# x[...] <- value, Python's t[idx] = v: against base R arrays' `[<-` on random data (1-based
# positions, missing = the whole axis, R's column-major filling and recycling), a gradient against
# a hand-derived one, and a write captured by jit.

skip_if_no_daemon()

shape <- c(4, 5, 6)
f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)
rand_array <- function(d) array(f32(rnorm(prod(d)) * 4), d)

# One index per axis, NULL for a missing one; arithmetic progressions write through the view
# (WRITE_VIEW), other positions and index tensors by a scatter.
cases <- list(
  "a row" = list(2, NULL, NULL),
  "a range" = list(NULL, 2:4, NULL),
  "steps" = list(c(1, 3), NULL, seq(1, 6, by = 2)),
  "reversed steps" = list(4:1, NULL, c(6, 3)),
  "one element" = list(3, 5, 6),
  "empty" = list(integer(), NULL, NULL),
  "unordered positions" = list(c(3, 1, 4), NULL, 2),
  "positions and a range" = list(c(1, 3), c(5, 2), 2:4),
  "repeated positions" = list(c(2, 2, 4), NULL, c(1, 1)),
  "an index tensor" = list(NULL, "tensor", NULL)
)
tensor_positions <- c(5L, 1L, 3L)

# The case's indexes for base R and for the tensor (missing ones as R's empty argument).
r_args <- function(idx) lapply(idx, function(i) if (is.null(i)) quote(expr = ) else if (identical(i, "tensor")) tensor_positions else i)
t_args <- function(idx) lapply(idx, function(i) {
  if (is.null(i)) quote(expr = ) else if (identical(i, "tensor")) pg_tensor(tensor_positions) else i
})

for (name in names(cases)) {
  test_that(sprintf("x[...] <- value matches base R: %s", name), {
    set.seed(nchar(name))
    a <- rand_array(shape)
    ra <- r_args(cases[[name]])
    sel <- dim(do.call(`[`, c(list(a), ra, list(drop = FALSE))))
    dropped <- sel[sel != 1]
    values <- list(number = 2.5, array = rand_array(sel),
                   tensor = if (length(dropped) && all(dropped > 0)) rand_array(dropped) else NULL)
    for (kind in names(values)) {
      v <- values[[kind]]
      if (is.null(v)) next
      want <- do.call(`[<-`, c(list(a), ra, list(value = v)))
      x <- pg_tensor(a)
      same <- x
      got <- do.call(`[<-`, c(list(x), t_args(cases[[name]]), list(value = if (kind == "tensor") pg_tensor(v) else v)))
      expect_true(identical(got, same), info = kind)
      expect_equal(as.array(x), want, info = kind)
    }
  })
}

test_that("the assignment syntax: missing axes, positions, a number, R values recycled, a cast", {
  set.seed(7)
  a <- array(sample(0:9, prod(shape), replace = TRUE), shape)
  x <- pg_tensor(a)
  y <- x
  x[2, , ] <- 5
  a[2, , ] <- 5L
  expect_equal(x$node$op, polygrad:::OP$WRITE_VIEW)  # an arithmetic progression writes through the view
  x[c(1, 3), 2:4, 6] <- c(1.9, -2.7, 3.2)  # doubles into int32 truncate; R recycles them
  a[c(1, 3), 2:4, 6] <- trunc(c(1.9, -2.7, 3.2))
  x[c(4, 1, 2), 1, 1] <- -8  # other positions by a scatter
  a[c(4, 1, 2), 1, 1] <- -8L
  expect_false(x$node$op == polygrad:::OP$WRITE_VIEW)
  m <- matrix(10 * (1:8), 4, 2)
  x[, 5, c(2, 4)] <- pg_tensor(m)  # a tensor of the selection's shape without its extent-1 axis
  a[, 5, c(2, 4)] <- m
  x[4, 1:3, ] <- pg_tensor(100:105)  # broadcast over the selected rows
  a[4, 1:3, ] <- rep(100:105, each = 3)
  expect_equal(x$node$dtype, "int32")
  expect_true(identical(x, y))
  expect_equal(as.array(y), a)
  expect_error(x[1:2, 1, 1] <- c(1, 2, 3), "not a multiple of the 3 values")
  expect_error(x[1, 1, 1:2] <- pg_ones(3), "cannot expand")
  expect_error(x[7, , ] <- 0, "positions must be whole numbers in 1..4")
  expect_error(x[1, 1] <- 0, "needs 3 indices")
  expect_error(x[NULL, 1, 1] <- 0, "index 1 is NULL")
})

test_that("a bool mask of x's shape writes where it is true", {
  set.seed(8)
  a <- rand_array(shape)
  b <- rand_array(shape)
  x <- pg_tensor(a)
  x[x > 0.5] <- -1
  a[a > 0.5] <- -1
  x[a < 0] <- pg_tensor(b)  # an R logical array is a mask too
  a[a < 0] <- b[a < 0]
  expect_equal(as.array(x), a)
  expect_error(x[pg_tensor(c(TRUE, FALSE))] <- 0, "bool mask index must have the tensor's shape \\(4, 5, 6\\)")
})

# y = 1.5 x with y[2:3, c(1, 3)] <- w * w, loss sum(y^2): d/dx is 2 y 1.5 where nothing was
# written and 0 where it was; d/dw is 2 (w^2) 2 w.
test_that("gradients through x[...] <- value: zero where written, the selected upstream gradient for value", {
  set.seed(9)
  x0 <- rand_array(c(5, 4))
  w0 <- rand_array(c(2, 2))
  x <- pg_tensor(x0)
  w <- pg_tensor(w0)
  requires_grad(x) <- TRUE
  requires_grad(w) <- TRUE
  y <- x * 1.5
  y[2:3, c(1, 3)] <- w * w
  backward(pg_sum(y * y))
  written <- array(FALSE, c(5, 4))
  written[2:3, c(1, 3)] <- TRUE
  expect_equal(as.array(grad(x)), ifelse(written, 0, 2 * 1.5 * 1.5 * x0), tolerance = 1e-5)
  expect_equal(as.array(grad(w)), 4 * w0^3, tolerance = 1e-5)
})

test_that("a write inside jit is captured as an assign of the tensor", {
  acc <- pg_tensor(array(0, 6))
  add <- jit(function(v) {
    acc[seq(1, 6, by = 2)] <- acc[seq(1, 6, by = 2)] + v
    pg_sum(acc)
  })
  want <- numeric(6)
  for (i in 1:4) {
    v <- c(i, -i, 0.5)
    total <- pg_item(add(pg_tensor(v)))
    want[seq(1, 6, by = 2)] <- want[seq(1, 6, by = 2)] + v
    expect_equal(total, sum(want))
  }
  expect_equal(attr(add, "jit")$step$runs, 3)
  expect_equal(as.array(acc), array(want, 6))
})
