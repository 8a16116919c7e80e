# Reductions and the composites the daemon expands (softmax, layernorm, ...), with 1-based axes.

reduce_op <- function(op, x, axes, keepdim) {
  if (!length(axes)) return(x)
  s <- x$node$shape
  r <- make(op, x$node$dtype, reduced_shape(s, axes, TRUE), list(x), axes)
  if (keepdim) r else reshape_to(r, reduced_shape(s, axes, FALSE))
}

reduced_shape <- function(s, axes, keepdim) {
  if (keepdim) ifelse((seq_along(s) - 1) %in% axes, 1, s) else s[!(seq_along(s) - 1) %in% axes]
}

#' Reductions
#'
#' Over `axis` (1-based; `NULL`: every axis), keeping reduced axes with size 1 when `keepdim`.
#' `pg_sum` accumulates ints in int32 and floats in at least float32.
#' @param x a tensor.
#' @param axis 1-based axis or axes; `NULL` for all.
#' @param keepdim keep
#'   reduced axes.
#' @param ... unused.
#' @return a tensor.
#' @export
pg_sum <- function(x, axis = NULL, keepdim = FALSE) {
  dt <- x$node$dtype
  ret <- reduce_op(OP$REDUCE_SUM, pg_cast(x, sum_acc_dtype(dt)), wire_axes(axis, length(x$node$shape)), keepdim)
  if (dt %in% c("float16", "bfloat16")) pg_cast(ret, dt) else ret
}

#' @rdname pg_sum
#' @export
pg_max <- function(x, axis = NULL, keepdim = FALSE) {
  reduce_op(OP$REDUCE_MAX, x, wire_axes(axis, length(x$node$shape)), keepdim)
}

#' @rdname pg_sum
#' @export
pg_min <- function(x, axis = NULL, keepdim = FALSE) {
  inverse(reduce_op(OP$REDUCE_MAX, inverse(x), wire_axes(axis, length(x$node$shape)), keepdim))
}

composite <- function(op, x, shape, arg) {
  out <- least_upper_float(x$node$dtype)
  xa <- pg_cast(x, sum_acc_dtype(out))
  pg_cast(make(op, xa$node$dtype, shape, list(xa), arg), out)
}

#' @rdname pg_sum
#' @export
pg_mean <- function(x, axis = NULL, keepdim = FALSE) {
  axes <- wire_axes(axis, length(x$node$shape))
  if (!length(axes)) return(float_of(x))
  composite(OP$MEAN, x, reduced_shape(x$node$shape, axes, keepdim), list(axes = axes, keepdim = keepdim))
}

#' @rdname pg_sum
#' @export
mean.polygrad_tensor <- function(x, axis = NULL, keepdim = FALSE, ...) pg_mean(x, axis, keepdim)

#' @rdname pg_sum
#' @param correction 1 for the sample variance.
#' @export
pg_var <- function(x, axis = NULL, keepdim = FALSE, correction = 1) {
  axes <- wire_axes(axis, length(x$node$shape))
  composite(OP$VAR, x, reduced_shape(x$node$shape, axes, keepdim),
            list(axes = axes, keepdim = keepdim, correction = correction))
}

#' Softmax, log-softmax and layer normalization
#' @param x a tensor.
#' @param axis 1-based axis (-1: the last).
#' @param eps added to the variance.
#' @return a tensor of x's shape.
#' @export
pg_softmax <- function(x, axis = -1) softmax_like(OP$SOFTMAX, x, axis)

#' @rdname pg_softmax
#' @export
pg_log_softmax <- function(x, axis = -1) softmax_like(OP$LOG_SOFTMAX, x, axis)

softmax_like <- function(op, x, axis) {
  x <- float_of(x)
  if (!length(x$node$shape)) return(reshape_to(softmax_like(op, reshape_to(x, 1), 1), numeric()))
  composite(op, x, x$node$shape, list(axes = wire_axis(axis, length(x$node$shape))))
}

#' @rdname pg_softmax
#' @export
pg_layernorm <- function(x, axis = -1, eps = 1e-5) {
  x <- float_of(x)
  nd <- length(x$node$shape)
  axes <- wire_axes(axis, nd)
  n <- length(axes)
  if (all(axes == seq(nd - n, nd - 1))) {
    return(composite(OP$LAYERNORM, x, x$node$shape, list(normalized_axes = n, eps = eps)))
  }
  # Other axes: move them last, normalize, move them back (as the Python client does).
  rest <- setdiff(seq_len(nd) - 1, axes)
  order <- c(rest, axes)
  inverse <- match(seq_len(nd) - 1, order)
  y <- pg_layernorm(pg_permute(x, order + 1), seq(length(rest) + 1, nd), eps)
  pg_permute(y, inverse)
}
