# Convolutions and pooling over the last two axes: the daemon's CONV2D, CONV_TRANSPOSE2D,
# MAX_POOL2D and AVG_POOL2D, shaped and typed here as the Python and JavaScript clients do it.

# c(h, w) from one number or two.
hw_pair <- function(v, what, low) {
  v <- as.numeric(v)
  if (length(v) == 1L) v <- c(v, v)
  if (length(v) != 2L || any(v != trunc(v)) || any(v < low)) {
    pg_abort("invalid_argument", sprintf("%s needs one or two whole numbers >= %d", what, low))
  }
  v
}

# (top, bottom, left, right) from one number, c(h, w), or those four.
padding4 <- function(padding) {
  p <- as.numeric(padding)
  out <- if (length(p) == 4L) p else rep(hw_pair(p, "padding", 0), each = 2)
  if (any(out < 0) || any(out != trunc(out))) pg_abort("invalid_argument", "padding must be whole numbers >= 0")
  out
}

#' 2-D convolution
#'
#' Cross-correlation of x (N, C, H, W) with weight (O, C/groups, KH, KW), as PyTorch.
#' @param x,weight tensors.
#' @param bias `NULL` or a tensor of length O.
#' @param stride,padding,dilation
#'   an integer or c(h, w).
#' @param groups channel groups.
#' @return a tensor.
#' @export
pg_conv2d <- function(x, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1) {
  pair <- function(v) if (length(v) == 1L) c(v, v) else as.numeric(v)
  st <- pair(stride)
  dil <- pair(dilation)
  pad <- if (length(padding) == 4L) as.numeric(padding) else rep(pair(padding), each = 2)  # top, bottom, left, right
  xs <- x$node$shape
  ws <- weight$node$shape
  h <- floor((xs[3] + pad[1] + pad[2] - dil[1] * (ws[3] - 1) - 1) / st[1]) + 1
  w <- floor((xs[4] + pad[3] + pad[4] - dil[2] * (ws[4] - 1) - 1) / st[2]) + 1
  out <- least_upper_float(least_upper_dtype(x$node$dtype, weight$node$dtype))
  acc <- sum_acc_dtype(out)
  arg <- list(stride = st, padding = if (pad[1] == pad[2] && pad[3] == pad[4]) pad[c(1, 3)] else pad,
              dilation = dil, groups = groups)
  y <- pg_cast(make(OP$CONV2D, acc, c(xs[1], ws[1], h, w), list(pg_cast(x, acc), pg_cast(weight, acc)), arg), out)
  if (is.null(bias)) y else y + reshape_to(bias, c(1, ws[1], 1, 1))
}

#' 2-D transposed convolution
#'
#' The gradient of [pg_conv2d] with respect to its input, as PyTorch's `conv_transpose2d`: x
#' (N, Cin, H, W), weight (Cin, Cout/groups, KH, KW); the output is
#' ((H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1) high, and as wide.
#' @param x,weight tensors.
#' @param bias `NULL` or a tensor of length Cout.
#' @param stride,padding,dilation,output_padding an integer or c(h, w).
#' @param groups channel groups.
#' @return a tensor.
#' @export
pg_conv_transpose2d <- function(x, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1,
                                output_padding = 0) {
  st <- hw_pair(stride, "stride", 1)
  dil <- hw_pair(dilation, "dilation", 1)
  pad <- hw_pair(padding, "padding", 0)
  opad <- hw_pair(output_padding, "output_padding", 0)
  xs <- x$node$shape
  ws <- weight$node$shape
  if (length(xs) != 4L || length(ws) != 4L) {
    pg_abort("invalid_argument", sprintf(
      "pg_conv_transpose2d takes (N, Cin, H, W) and (Cin, Cout/groups, KH, KW), got (%s) and (%s)",
      paste(xs, collapse = ", "), paste(ws, collapse = ", ")))
  }
  if (ws[1] != xs[2] || xs[2] %% groups != 0) {
    pg_abort("invalid_argument", sprintf("pg_conv_transpose2d: weight (%s) does not fit %s input channels in %s groups",
                                         paste(ws, collapse = ", "), xs[2], groups))
  }
  if (any(opad >= st & opad >= dil)) pg_abort("invalid_argument", "output_padding must be smaller than stride or dilation")
  hw <- (xs[3:4] - 1) * st - 2 * pad + dil * (ws[3:4] - 1) + opad + 1
  if (any(hw <= 0)) pg_abort("invalid_argument", "pg_conv_transpose2d: the padding leaves no output")
  cout <- ws[2] * groups
  out <- least_upper_float(least_upper_dtype(x$node$dtype, weight$node$dtype))
  acc <- sum_acc_dtype(out)
  arg <- list(stride = st, padding = pad, dilation = dil, groups = groups, output_padding = opad)
  y <- pg_cast(make(OP$CONV_TRANSPOSE2D, acc, c(xs[1], cout, hw), list(pg_cast(x, acc), pg_cast(weight, acc)), arg), out)
  if (is.null(bias)) y else y + pg_reshape(bias, c(1, -1, 1, 1))
}

#' 2-D max and average pooling
#'
#' The maximum or the mean of each `kernel` window of the last two axes, windows `stride` apart
#' (default: the kernel, so they tile). Padding never wins a maximum; padded zeros count in a
#' mean.
#' @param x a tensor of at least 2 axes.
#' @param kernel,stride,dilation an integer or c(h, w).
#' @param padding an integer, c(h, w) or c(top, bottom, left, right).
#' @return a tensor.
#' @export
pg_max_pool2d <- function(x, kernel = 2, stride = NULL, padding = 0, dilation = 1) {
  p <- pool_geometry(x, kernel, stride, padding, dilation, "pg_max_pool2d")
  make(OP$MAX_POOL2D, x$node$dtype, p$shape, list(x), p$arg)
}

#' @rdname pg_max_pool2d
#' @export
pg_avg_pool2d <- function(x, kernel = 2, stride = NULL, padding = 0, dilation = 1) {
  p <- pool_geometry(x, kernel, stride, padding, dilation, "pg_avg_pool2d")
  out <- least_upper_float(x$node$dtype)
  xa <- pg_cast(x, sum_acc_dtype(out))
  pg_cast(make(OP$AVG_POOL2D, xa$node$dtype, p$shape, list(xa), p$arg), out)
}

pool_geometry <- function(x, kernel, stride, padding, dilation, what) {
  k <- hw_pair(kernel, "kernel", 1)
  st <- if (is.null(stride)) k else hw_pair(stride, "stride", 1)
  dil <- hw_pair(dilation, "dilation", 1)
  pad <- padding4(padding)
  s <- x$node$shape
  nd <- length(s)
  if (nd < 2) pg_abort("invalid_argument", sprintf("%s needs a tensor of at least 2 axes", what))
  span <- dil * (k - 1) + 1
  padded <- s[nd - 1:0] + c(pad[1] + pad[2], pad[3] + pad[4])
  if (any(padded < span)) pg_abort("invalid_argument", sprintf("%s: the window does not fit the padded input", what))
  list(shape = c(s[seq_len(nd - 2)], floor((padded - span) / st) + 1),
       arg = list(kernel = k, stride = st, padding = pad, dilation = dil))
}
