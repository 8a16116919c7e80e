# Convolutions and pooling over 1, 2 or 3 spatial axes (the last ones): the daemon's CONV2D,
# CONV_TRANSPOSE2D, MAX_POOL2D and AVG_POOL2D (named for 2-D, taking any of the three), shaped and
# typed here as the Python and JavaScript clients do it.

# n whole numbers >= low from one number (repeated) or n.
ntuple <- function(v, n, what, low) {
  v <- as.numeric(v)
  if (length(v) == 1L) v <- rep(v, n)
  if (length(v) != n || any(v != trunc(v)) || any(v < low)) {
    pg_abort("invalid_argument", sprintf("%s needs one or %d whole numbers >= %d", what, n, low))
  }
  v
}

# (before, after) per spatial axis in axis order (c(top, bottom, left, right) in 2-D) from one
# number, one value per axis, or those 2n values.
padding_pairs <- function(padding, n) {
  p <- as.numeric(padding)
  out <- if (length(p) == 2L * n) p else rep(ntuple(p, n, "padding", 0), each = 2)
  if (any(out < 0) || any(out != trunc(out))) pg_abort("invalid_argument", "padding must be whole numbers >= 0")
  out
}

# The spatial axes of a convolution: length(dim(weight)) - 2, 1 to 3, the input of the same rank.
spatial_count <- function(xs, ws, what, layout) {
  if (length(ws) < 3L || length(ws) > 5L || length(xs) != length(ws)) {
    pg_abort("invalid_argument", sprintf(
      "%s takes input (N, C, *spatial) and weight %s of the same rank with 1 to 3 spatial axes, got (%s) and (%s)",
      what, layout, paste(xs, collapse = ", "), paste(ws, collapse = ", ")))
  }
  length(ws) - 2L
}

#' Convolution over 1, 2 or 3 spatial axes
#'
#' Cross-correlation of x (N, C, *spatial) with weight (O, C/groups, *kernel), as PyTorch's
#' conv1d/2d/3d; the spatial axes are those of the weight beyond its first two.
#' @param x,weight tensors.
#' @param bias `NULL` or a tensor of length O, added per output channel.
#' @param stride,dilation an integer or one per spatial axis.
#' @param padding an integer, one per spatial axis, or (before, after) per axis, e.g.
#'   c(top, bottom, left, right).
#' @param groups channel groups.
#' @return a tensor.
#' @export
pg_conv2d <- function(x, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1) {
  xs <- x$node$shape
  ws <- weight$node$shape
  n <- spatial_count(xs, ws, "pg_conv2d", "(O, C/groups, *kernel)")
  st <- ntuple(stride, n, "stride", 1)
  dil <- ntuple(dilation, n, "dilation", 1)
  pad <- padding_pairs(padding, n)
  padded <- xs[2 + seq_len(n)] + pad[2 * seq_len(n) - 1] + pad[2 * seq_len(n)]
  sp <- floor((padded - dil * (ws[2 + seq_len(n)] - 1) - 1) / st) + 1
  if (any(sp < 1)) pg_abort("invalid_argument", "pg_conv2d: the kernel does not fit the padded input")
  srcs <- conv_sources(x, weight, bias, ws[1], "pg_conv2d")
  arg <- list(stride = st, padding = pad, dilation = dil, groups = groups)
  pg_cast(make(OP$CONV2D, srcs$acc, c(xs[1], ws[1], sp), srcs$src, arg), srcs$out)
}

# x, weight and the bias (NULL or `channels` long) in the float accumulator of their common
# dtype (`src`), that accumulator (`acc`) and the result's dtype (`out`); the op adds the bias
# per output channel.
conv_sources <- function(x, weight, bias, channels, name) {
  if (!is.null(bias)) bias <- of_shape(bias, channels, paste0(name, ": bias"))
  ts <- Filter(Negate(is.null), list(x, weight, bias))
  out <- least_upper_float(do.call(least_upper_dtype, lapply(ts, function(t) t$node$dtype)))
  acc <- sum_acc_dtype(out)
  list(src = lapply(ts, pg_cast, acc), acc = acc, out = out)
}

#' Transposed convolution over 1, 2 or 3 spatial axes
#'
#' The gradient of [pg_conv2d] with respect to its input, as PyTorch's `conv_transpose1d/2d/3d`:
#' x (N, Cin, *spatial), weight (Cin, Cout/groups, *kernel); each output axis is
#' (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1 long.
#' @param x,weight tensors.
#' @param bias `NULL` or a tensor of length Cout, added per output channel.
#' @param stride,padding,dilation,output_padding an integer or one per spatial axis.
#' @param groups channel groups.
#' @return a tensor.
#' @export
pg_conv_transpose2d <- function(x, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1,
                                output_padding = 0) {
  xs <- x$node$shape
  ws <- weight$node$shape
  n <- spatial_count(xs, ws, "pg_conv_transpose2d", "(Cin, Cout/groups, *kernel)")
  st <- ntuple(stride, n, "stride", 1)
  dil <- ntuple(dilation, n, "dilation", 1)
  pad <- ntuple(padding, n, "padding", 0)
  opad <- ntuple(output_padding, n, "output_padding", 0)
  if (ws[1] != xs[2] || xs[2] %% groups != 0) {
    pg_abort("invalid_argument", sprintf("pg_conv_transpose2d: weight (%s) does not fit %s input channels in %s groups",
                                         paste(ws, collapse = ", "), xs[2], groups))
  }
  if (any(opad >= st & opad >= dil)) pg_abort("invalid_argument", "output_padding must be smaller than stride or dilation")
  sp <- (xs[2 + seq_len(n)] - 1) * st - 2 * pad + dil * (ws[2 + seq_len(n)] - 1) + opad + 1
  if (any(sp <= 0)) pg_abort("invalid_argument", "pg_conv_transpose2d: the padding leaves no output")
  cout <- ws[2] * groups
  srcs <- conv_sources(x, weight, bias, cout, "pg_conv_transpose2d")
  arg <- list(stride = st, padding = pad, dilation = dil, groups = groups, output_padding = opad)
  pg_cast(make(OP$CONV_TRANSPOSE2D, srcs$acc, c(xs[1], cout, sp), srcs$src, arg), srcs$out)
}

#' Max and average pooling over 1, 2 or 3 spatial axes
#'
#' The maximum or the mean of each `kernel` window of the last `spatial` axes, windows `stride`
#' apart (default: the kernel, so they tile). Padding never wins a maximum; padded zeros count in a
#' mean unless `count_include_pad` is `FALSE` (torch's: the mean is then over the input's elements).
#' `ceil_mode = TRUE` keeps a last partial window that starts inside the input or its
#' before-padding (torch's `ceil_mode`); the padding that holds it never counts in a mean.
#' `return_indices = TRUE` makes `pg_max_pool2d` return `list(values, indices)`, the indices each
#' maximum's 1-based flat position in the input's spatial volume (as [pg_max_unpool2d] takes them).
#' @param x a tensor of at least `spatial` axes.
#' @param kernel an integer or one per spatial axis.
#' @param stride,dilation an integer or one per spatial axis.
#' @param padding an integer, one per spatial axis, or (before, after) per axis, e.g.
#'   c(top, bottom, left, right).
#' @param spatial how many trailing axes to pool over, 1 to 3: the length of `kernel` when it has
#'   2 or 3 values, else 2 (as a single number means in tinygrad); 1-D pooling says `spatial = 1`.
#' @param ceil_mode whether to keep a last partial window.
#' @param return_indices whether `pg_max_pool2d` also returns the maxima's positions.
#' @param count_include_pad whether padded zeros count in `pg_avg_pool2d`'s means.
#' @return a tensor.
#' @export
pg_max_pool2d <- function(x, kernel = 2, stride = NULL, padding = 0, dilation = 1, spatial = NULL,
                          ceil_mode = FALSE, return_indices = FALSE) {
  p <- pool_geometry(x, kernel, stride, padding, dilation, spatial, ceil_mode, "pg_max_pool2d")
  values <- make(OP$MAX_POOL2D, x$node$dtype, p$shape, list(x), p$arg)
  if (!isTRUE(return_indices)) return(values)
  indices <- make(OP$MAX_POOL2D, "int32", p$shape, list(x), c(p$arg, list(indices = TRUE)))
  list(values = values, indices = indices + 1L)
}

#' @rdname pg_max_pool2d
#' @export
pg_avg_pool2d <- function(x, kernel = 2, stride = NULL, padding = 0, dilation = 1, spatial = NULL,
                          ceil_mode = FALSE, count_include_pad = TRUE) {
  p <- pool_geometry(x, kernel, stride, padding, dilation, spatial, ceil_mode, "pg_avg_pool2d")
  if (!isTRUE(count_include_pad)) p$arg$counted_padding <- rep(0, length(p$arg$padding))
  out <- least_upper_float(x$node$dtype)
  xa <- pg_cast(x, sum_acc_dtype(out))
  pg_cast(make(OP$AVG_POOL2D, xa$node$dtype, p$shape, list(xa), p$arg), out)
}

# A pooling's kernel over `spatial` trailing axes (NULL: the kernel's length when it has 2 or 3
# values, else 2, as a single number means in tinygrad), 1 to 3 of them.
pool_kernel <- function(kernel, spatial, what) {
  n <- if (is.null(spatial)) (if (length(kernel) == 1L) 2L else length(kernel)) else as.integer(spatial)
  if (length(n) != 1L || is.na(n) || n < 1L || n > 3L) pg_abort("invalid_argument", sprintf("%s pools over 1 to 3 axes", what))
  ntuple(kernel, n, "kernel", 1)
}

# The result's shape and the composite arg of a pooling. With ceil_mode, an axis keeps a last
# partial window when it starts inside the input or its before-padding (torch; the daemon pads).
pool_geometry <- function(x, kernel, stride, padding, dilation, spatial, ceil_mode, what) {
  k <- pool_kernel(kernel, spatial, what)
  n <- length(k)
  st <- if (is.null(stride)) k else ntuple(stride, n, "stride", 1)
  dil <- ntuple(dilation, n, "dilation", 1)
  pad <- padding_pairs(padding, n)
  s <- x$node$shape
  nd <- length(s)
  if (nd < n) pg_abort("invalid_argument", sprintf("%s needs a tensor of at least %d axes", what, n))
  span <- dil * (k - 1) + 1
  padded <- s[nd - rev(seq_len(n)) + 1] + pad[2 * seq_len(n) - 1] + pad[2 * seq_len(n)]
  if (any(padded < span)) pg_abort("invalid_argument", sprintf("%s: the window does not fit the padded input", what))
  ceil_mode <- isTRUE(ceil_mode)
  windows <- (if (ceil_mode) ceiling((padded - span) / st) else floor((padded - span) / st)) + 1
  if (ceil_mode) {
    before <- pad[2 * seq_len(n) - 1]
    windows <- windows - ((windows - 1) * st >= s[nd - rev(seq_len(n)) + 1] + before)
  }
  list(shape = c(s[seq_len(nd - n)], windows),
       arg = list(kernel = k, stride = st, padding = pad, dilation = dil, ceil_mode = ceil_mode))
}
