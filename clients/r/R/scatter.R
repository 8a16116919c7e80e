#' Scatter, selection by index and resampling
#'
#' The daemon's SCATTER_REDUCE, NLL_LOSS, INTERPOLATE, UNFOLD, NONZERO and MULTINOMIAL, and the
#' functions built from them. Positions and classes are 1-based, as in `pg_gather` and
#' `pg_one_hot`; elements are visited in row-major order (the wire's).
#'
#' `pg_scatter` writes `src` (a tensor, or a number for every position) at `index` along `axis`
#' (torch's scatter; of updates landing on one position the later in index order wins, as torch
#' on the CPU); `reduce` "add" or "multiply" combines them with x. `pg_scatter_reduce` combines
#' with "sum", "prod", "mean", "amax" or "amin"; without `include_self` the positions written
#' start from the updates alone. `pg_nll_loss` is torch's nll_loss on log-probabilities
#' (N, C, ...) or (C) with 1-based class targets. `pg_interpolate` resizes the last
#' `length(size)` axes ("linear", "nearest" or "nearest-exact"). `pg_unfold` is torch's
#' `Tensor.unfold`. `pg_nonzero` gives the (count, rank) 1-based positions of the nonzero
#' elements (the count is read first; with `size`, exactly that many rows without a round trip,
#' the rest `fill`), `pg_masked_select` the elements where `mask` is true (with `size`, `fill`
#' after them).
#' `pg_multinomial` draws 1-based class indices from weights along the last axis, `pg_randperm`
#' a permutation of 1..n, `pg_normal` normal numbers. `pg_max_unpool2d` writes each value at its
#' 1-based flat position in the spatial volume of the last `spatial` axes (torch's
#' max_unpool1d/2d/3d). `pg_contiguous_backward` returns x;
#' `pg_replace` makes x stand for y.
#' @param x a tensor.
#' @param axis a 1-based axis (-1: the last).
#' @param index an integer tensor of 1-based positions.
#' @param src a tensor (at least index's extents) or a number.
#' @param reduce NULL, "add" or "multiply" (`pg_scatter`); "sum", "prod", "mean", "amax" or
#'   "amin" (`pg_scatter_reduce`).
#' @param include_self whether x's value takes part.
#' @param y targets (`pg_nll_loss`); the tensor x now stands for (`pg_replace`).
#' @param weight NULL or a weight per class.
#' @param ignore_index NULL or a class that counts for nothing.
#' @param reduction "mean", "sum" or "none".
#' @param size output sizes (`pg_interpolate`); the window length (`pg_unfold`); NULL or the
#'   number of rows (`pg_nonzero`) or elements (`pg_masked_select`) to return.
#' @param fill the value of the rows or elements past the count (`pg_nonzero`, `pg_masked_select`).
#' @param mode "linear", "nearest" or "nearest-exact".
#' @param align_corners (linear) corners of input and output align.
#' @param step the distance between window starts.
#' @param mask a bool tensor broadcasting to x.
#' @param num_samples how many draws per row.
#' @param replacement draw with replacement.
#' @param n the permutation's length.
#' @param dtype the result's dtype.
#' @param mean,std the normal's mean and standard deviation.
#' @param ... the shape.
#' @param indices 1-based flat positions in the spatial volume.
#' @param kernel,stride,padding the pooling's geometry.
#' @param output_size NULL or the output's spatial sizes, e.g. c(H, W).
#' @param spatial how many trailing axes to unpool, 1 to 3: the length of `kernel` when it has
#'   2 or 3 values, else 2.
#' @return a tensor.
#' @export
pg_scatter <- function(x, axis, index, src, reduce = NULL) {
  if (!is.null(reduce)) {
    r <- switch(reduce, add = "sum", multiply = "prod", reduce)
    return(pg_scatter_reduce(x, axis, index, src, r))
  }
  scatter_node(x, axis, index, src, "none", FALSE, "pg_scatter")
}

#' @rdname pg_scatter
#' @export
pg_scatter_reduce <- function(x, axis, index, src, reduce, include_self = TRUE) {
  if (!(length(reduce) == 1L && reduce %in% c("sum", "prod", "mean", "amax", "amin"))) {
    pg_abort("invalid_argument", sprintf("pg_scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '%s'",
                                         format(reduce)))
  }
  scatter_node(x, axis, index, src, reduce, isTRUE(include_self), "pg_scatter_reduce")
}

scatter_node <- function(x, axis, index, src, mode, include_self, name) {
  if (!is_tensor(index)) index <- pg_tensor(index)
  s <- x$node$shape
  is <- index$node$shape
  if (!length(s)) pg_abort("invalid_argument", sprintf("%s needs a tensor of at least 1 axis", name))
  ax <- wire_axis(axis, length(s))
  if (!is_int_dtype(index$node$dtype) || length(is) != length(s)) {
    pg_abort("invalid_argument", sprintf("%s: index must be an integer tensor of rank %d, got %s of shape (%s)", name,
                                         length(s), index$node$dtype, paste(is, collapse = ", ")))
  }
  other <- seq_along(s) != ax + 1
  if (any(is[other] > s[other])) {
    pg_abort("invalid_argument", sprintf("%s: index (%s) exceeds x (%s) on an axis other than %d", name,
                                         paste(is, collapse = ", "), paste(s, collapse = ", "), ax + 1))
  }
  if (!is_tensor(src)) src <- pg_full(is, value = src, dtype = x$node$dtype)
  if (length(src$node$shape) != length(s) || any(is > src$node$shape)) {
    pg_abort("invalid_argument", sprintf("%s: src (%s) must be at least index's shape (%s)", name,
                                         paste(src$node$shape, collapse = ", "), paste(is, collapse = ", ")))
  }
  make(OP$SCATTER_REDUCE, x$node$dtype, s, list(x, index - 1L, src),
       list(axes = ax, mode = mode, include_self = include_self))
}

#' @rdname pg_scatter
#' @export
pg_nll_loss <- function(x, y, weight = NULL, ignore_index = NULL, reduction = "mean") {
  s <- x$node$shape
  if (!length(s) || !is_float_dtype(x$node$dtype)) {
    pg_abort("invalid_argument", sprintf("pg_nll_loss: log-probabilities must be a float tensor with a class axis, got %s of shape (%s)",
                                         x$node$dtype, paste(s, collapse = ", ")))
  }
  if (!is_tensor(y)) y <- pg_tensor(if (is.double(y)) as.integer(y) else y)
  ax <- if (length(s) >= 2) 2 else 1
  want <- s[-ax]
  if (!identical(as.numeric(y$node$shape), as.numeric(want)) || y$node$dtype == "bool") {
    pg_abort("invalid_argument", sprintf("pg_nll_loss: targets of shape (%s) do not fit log-probabilities (%s)",
                                         paste(y$node$shape, collapse = ", "), paste(s, collapse = ", ")))
  }
  src <- list(x, y - 1L)
  if (!is.null(weight)) {
    if (!is_tensor(weight)) weight <- pg_tensor(weight)
    if (!identical(as.numeric(weight$node$shape), as.numeric(s[ax]))) {
      pg_abort("invalid_argument", sprintf("pg_nll_loss: weight (%s) must have one entry per class (%d)",
                                           paste(weight$node$shape, collapse = ", "), s[ax]))
    }
    src[[3]] <- weight
  }
  # -100 (torch's default, 0-based) is never a class, like no ignore_index.
  ignore <- if (is.null(ignore_index)) -100 else ignore_index - 1
  loss_op(OP$NLL_LOSS, src, y$node$shape, reduction, list(ignore_index = ignore))
}

#' @rdname pg_scatter
#' @export
pg_interpolate <- function(x, size, mode = "linear", align_corners = FALSE) {
  if (!(length(mode) == 1L && mode %in% c("linear", "nearest", "nearest-exact"))) {
    pg_abort("invalid_argument", sprintf("pg_interpolate: mode must be 'linear', 'nearest' or 'nearest-exact', got '%s'",
                                         format(mode)))
  }
  s <- x$node$shape
  size <- as.numeric(size)
  if (!length(size) || length(size) > length(s) || any(is.na(size) | size != round(size) | size < 1)) {
    pg_abort("invalid_argument", sprintf("pg_interpolate: size (%s) must be 1 to %d positive whole numbers for shape (%s)",
                                         paste(size, collapse = ", "), length(s), paste(s, collapse = ", ")))
  }
  lead <- length(s) - length(size)
  if (any(s[lead + seq_along(size)] == 0)) pg_abort("invalid_argument", "pg_interpolate: cannot resize an empty axis")
  dt <- if (mode != "linear" || is_float_dtype(x$node$dtype)) x$node$dtype else "float32"
  make(OP$INTERPOLATE, dt, c(s[seq_len(lead)], size), list(x),
       list(shape = size, mode = mode, align_corners = isTRUE(align_corners)))
}

#' @rdname pg_scatter
#' @export
pg_unfold <- function(x, axis, size, step) {
  s <- x$node$shape
  ax <- wire_axis(axis, max(length(s), 1))
  n <- if (length(s)) s[ax + 1] else 1
  if (length(size) != 1L || is.na(size) || size != round(size) || size < 0 || size > n) {
    pg_abort("invalid_argument", sprintf("pg_unfold: size %s must be a whole number from 0 to %d", format(size), n))
  }
  if (length(step) != 1L || is.na(step) || step != round(step) || step < 1) {
    pg_abort("invalid_argument", sprintf("pg_unfold: step must be a whole number >= 1, got %s", format(step)))
  }
  count <- (n - size) %/% step + 1
  shape <- if (length(s)) {
    out <- s
    out[ax + 1] <- count
    c(out, size)
  } else size  # 0-d: one window, no count axis (torch)
  make(OP$UNFOLD, x$node$dtype, shape, list(x), list(axes = ax, n = size, step = step))
}

#' @rdname pg_scatter
#' @export
pg_nonzero <- function(x, size = NULL, fill = 0) {
  if (is.null(size)) {
    count <- as.numeric(pg_item(pg_sum(pg_cast(x != 0, "int32"))))
    return(make(OP$NONZERO, "int32", c(count, length(x$node$shape)), list(x), list(n = count)) + 1L)
  }
  if (length(size) != 1L || is.na(size) || size != trunc(size) || size < 0) {
    pg_abort("invalid_argument", "pg_nonzero: size must be a whole number >= 0")
  }
  fill <- trunc(fill)
  if (length(fill) != 1L || is.na(fill) || fill - 1 < -2^31 || fill - 1 >= 2^31) {
    pg_abort("invalid_argument", "pg_nonzero: fill must fit int32")
  }
  # The wire's positions are 0-based: its fill is one less than the 1-based one asked for.
  make(OP$NONZERO, "int32", c(size, length(x$node$shape)), list(x), list(n = size, fill = fill - 1)) + 1L
}

#' @rdname pg_scatter
#' @export
pg_masked_select <- function(x, mask, size = NULL, fill = 0) {
  b <- broadcasted(x, mask, match_dtype = FALSE)
  m <- pg_cast(b[[2]], "bool")
  if (is.null(size)) {
    size <- as.numeric(pg_item(pg_sum(pg_cast(m != 0, "int32"))))
  } else if (length(size) != 1L || is.na(size) || size != trunc(size) || size < 0) {
    pg_abort("invalid_argument", "pg_masked_select: size must be a whole number >= 0")
  }
  dt <- x$node$dtype
  make(OP$MASKED_SELECT, dt, size, list(m, b[[1]], const_tensor(fill, dt)), list(n = size))
}

#' @rdname pg_scatter
#' @export
pg_multinomial <- function(x, num_samples = 1, replacement = FALSE) {
  s <- x$node$shape
  if (!(length(s) %in% c(1, 2))) {
    pg_abort("invalid_argument", sprintf("pg_multinomial takes a 1-D or 2-D tensor of weights, got shape (%s)",
                                         paste(s, collapse = ", ")))
  }
  if (length(num_samples) != 1L || is.na(num_samples) || num_samples != round(num_samples) || num_samples < 1) {
    pg_abort("invalid_argument", sprintf("pg_multinomial: num_samples must be a whole number >= 1, got %s", format(num_samples)))
  }
  n <- s[length(s)]
  if (n == 0) pg_abort("invalid_argument", "pg_multinomial: no classes to draw from")
  if (!isTRUE(replacement) && num_samples > n) {
    pg_abort("invalid_argument", sprintf("pg_multinomial: %d samples without replacement from %d classes", num_samples, n))
  }
  out <- c(s[-length(s)], num_samples)
  make(OP$MULTINOMIAL, "int32", out, list(x),
       c(random_key(), list(n = num_samples, replacement = isTRUE(replacement)))) + 1L
}

#' @rdname pg_scatter
#' @export
pg_randperm <- function(n, dtype = NULL) {
  if (length(n) != 1L || is.na(n) || n != round(n) || n < 0) {
    pg_abort("invalid_argument", sprintf("pg_randperm needs a count n >= 0, got %s", format(n)))
  }
  perm <- pg_sort(pg_rand(n))$indices  # 1-based already
  if (is.null(dtype)) perm else pg_cast(perm, dtype)
}

#' @rdname pg_scatter
#' @export
pg_normal <- function(..., mean = 0, std = 1, dtype = "float32") {
  dt <- check_dtype(dtype)
  if (!is_float_dtype(dt)) pg_abort("invalid_argument", sprintf("pg_normal makes float tensors, got %s", dt))
  random_tensor(OP$NORMAL, shape_args(...), dt, mean = as.double(mean), std = as.double(std))
}

#' @rdname pg_scatter
#' @export
pg_max_unpool2d <- function(x, indices, kernel = 2, stride = NULL, padding = 0, output_size = NULL, spatial = NULL) {
  k <- pool_kernel(kernel, spatial, "pg_max_unpool2d")
  n <- length(k)
  st <- if (is.null(stride)) k else ntuple(stride, n, "stride", 1)
  pad <- ntuple(padding, n, "padding", 0)
  if (!is_tensor(indices)) indices <- pg_tensor(indices)
  s <- x$node$shape
  nd <- length(s)
  if (nd < n || !identical(as.numeric(indices$node$shape), as.numeric(s)) || !is_int_dtype(indices$node$dtype)) {
    pg_abort("invalid_argument", sprintf("pg_max_unpool2d: indices (%s) must be integers of the values' shape (%s), of at least %d axes",
                                         paste(indices$node$shape, collapse = ", "), paste(s, collapse = ", "), n))
  }
  sp <- if (is.null(output_size)) (s[nd - n + seq_len(n)] - 1) * st - 2 * pad + k
        else utils::tail(as.numeric(output_size), n)
  make(OP$MAX_UNPOOL2D, x$node$dtype, c(s[seq_len(nd - n)], sp), list(x, indices - 1L), list(shape = sp))
}

#' @rdname pg_scatter
#' @export
pg_contiguous_backward <- function(x) x

#' @rdname pg_scatter
#' @export
pg_replace <- function(x, y) {
  if (!is_tensor(y)) pg_abort("invalid_argument", "pg_replace takes a tensor")
  if (!identical(as.numeric(x$node$shape), as.numeric(y$node$shape))) {
    pg_abort("invalid_argument", sprintf("pg_replace: shape (%s) differs from (%s)", paste(y$node$shape, collapse = ", "),
                                         paste(x$node$shape, collapse = ", ")))
  }
  x$node <- y$node
  invisible(x)
}
