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
#' `pg_sum` accumulates ints in int32 and floats in at least float32. `pg_any` and `pg_all` say
#' whether any / every element is nonzero (bool; `pg_all` is TRUE over no elements, as are R's
#' `any` and `all` of a tensor over all of it); `pg_std_mean` and `pg_var_mean` give a list of
#' the two tensors.
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
  axes <- wire_axes(axis, length(x$node$shape))
  if (!length(axes)) return(x)
  make(OP$REDUCE_MIN, x$node$dtype, reduced_shape(x$node$shape, axes, keepdim), list(x),
       list(axes = axes, keepdim = keepdim))
}

#' @rdname pg_sum
#' @export
pg_any <- function(x, axis = NULL, keepdim = FALSE) bool_reduce(OP$REDUCE_ANY, x, axis, keepdim)

#' @rdname pg_sum
#' @export
pg_all <- function(x, axis = NULL, keepdim = FALSE) bool_reduce(OP$REDUCE_ALL, x, axis, keepdim)

bool_reduce <- function(op, x, axis, keepdim) {
  axes <- wire_axes(axis, length(x$node$shape))
  if (!length(axes)) return(pg_cast(x, "bool"))
  make(op, "bool", reduced_shape(x$node$shape, axes, keepdim), list(x), list(axes = axes, keepdim = keepdim))
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
#' @export
pg_prod <- function(x, axis = NULL, keepdim = FALSE) {
  dt <- x$node$dtype
  ret <- reduce_op(OP$REDUCE_PROD, pg_cast(x, sum_acc_dtype(dt)), wire_axes(axis, length(x$node$shape)), keepdim)
  if (dt %in% c("float16", "bfloat16")) pg_cast(ret, dt) else ret
}

#' @rdname pg_sum
#' @param correction 1 for the sample variance.
#' @export
pg_var <- function(x, axis = NULL, keepdim = FALSE, correction = 1) spread(OP$VAR, x, axis, keepdim, correction)

#' @rdname pg_sum
#' @export
pg_std <- function(x, axis = NULL, keepdim = FALSE, correction = 1) spread(OP$STD, x, axis, keepdim, correction)

# VAR and STD: over no axes (a 0-d tensor) the variance is 0, or nan for a correction of 1 or more.
spread <- function(op, x, axis, keepdim, correction) {
  axes <- wire_axes(axis, length(x$node$shape))
  composite(op, x, reduced_shape(x$node$shape, axes, keepdim),
            list(axes = axes, keepdim = keepdim, correction = correction, no_axes = !length(axes)))
}

#' @rdname pg_sum
#' @export
pg_std_mean <- function(x, axis = NULL, keepdim = FALSE, correction = 1) {
  list(std = pg_std(x, axis, keepdim, correction), mean = pg_mean(x, axis, keepdim))
}

#' @rdname pg_sum
#' @export
pg_var_mean <- function(x, axis = NULL, keepdim = FALSE, correction = 1) {
  list(var = pg_var(x, axis, keepdim, correction), mean = pg_mean(x, axis, keepdim))
}

#' @rdname pg_sum
#' @export
pg_logsumexp <- function(x, axis = NULL, keepdim = FALSE) {
  x <- float_of(x)
  nd <- length(x$node$shape)
  axes <- wire_axes(axis, nd)
  if (!length(axes)) return(x)
  out_shape <- reduced_shape(x$node$shape, axes, keepdim)
  if (length(axes) > 1) {  # the wire takes one axis: move the reduced axes last and merge them
    rest <- setdiff(seq_len(nd) - 1, axes)
    x <- pg_permute(x, c(rest, axes) + 1)
    x <- pg_reshape(x, c(x$node$shape[seq_along(rest)], -1))
    axes <- length(rest)
  }
  reshape_to(composite(OP$LOGSUMEXP, x, reduced_shape(x$node$shape, axes, FALSE), list(axes = axes)), out_shape)
}

#' Positions of extremes, and cumulative sums
#'
#' `pg_argmax` and `pg_argmin` give the 1-based position (int32) of the largest or smallest
#' value along `axis`, the first on ties; with `axis = NULL`, the position in the row-major
#' flattening (`pg_reshape(x, -1)`, as the wire orders elements). `pg_cumsum` sums along `axis`
#' (ints keep their dtype, bool counts in int32).
#' @param x a tensor.
#' @param axis 1-based axis (-1: the last).
#' @param keepdim keep the reduced axis with size 1.
#' @return a tensor.
#' @export
pg_argmax <- function(x, axis = NULL, keepdim = FALSE) arg_extreme(OP$ARGMAX, x, axis, keepdim) + 1L

#' @rdname pg_argmax
#' @export
pg_argmin <- function(x, axis = NULL, keepdim = FALSE) arg_extreme(OP$ARGMIN, x, axis, keepdim) + 1L

# The daemon's 0-based ARGMAX/ARGMIN along one axis.
arg_extreme <- function(op, x, axis, keepdim) {
  if (is.null(axis)) return(arg_extreme(op, pg_reshape(x, -1), 1, FALSE))
  s <- x$node$shape
  if (!length(s)) {
    wire_axis(axis, 1)
    return(make(op, "int32", numeric(), list(reshape_to(x, 1)), list(axes = 0, keepdim = FALSE)))
  }
  ax <- wire_axis(axis, length(s))
  if (s[ax + 1] == 0) pg_abort("invalid_argument", sprintf("arg max/min of an empty axis %d", ax + 1))
  make(op, "int32", reduced_shape(s, ax, keepdim), list(x), list(axes = ax, keepdim = keepdim))
}

#' @rdname pg_argmax
#' @export
pg_cumsum <- function(x, axis = 1) {
  s <- x$node$shape
  if (!length(s)) {
    wire_axis(axis, 1)
    return(reshape_to(pg_cumsum(reshape_to(x, 1), 1), numeric()))
  }
  ax <- wire_axis(axis, length(s))
  dt <- x$node$dtype
  if (dt == "bool") return(pg_cumsum(pg_cast(x, "int32"), ax + 1))
  acc <- if (is_float_dtype(dt)) sum_acc_dtype(dt) else dt
  pg_cast(make(OP$CUMSUM, acc, s, list(pg_cast(x, acc)), list(axes = ax)), dt)
}

#' Softmax, log-softmax and layer normalization
#'
#' `pg_layernorm` then scales by `weight` and adds `bias` when given, both shaped as the
#' normalized axes in their order.
#' @param x a tensor.
#' @param axis 1-based axis (-1: the last).
#' @param eps added to the variance.
#' @param weight,bias `NULL` or tensors of the normalized axes' shape.
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
pg_layernorm <- function(x, axis = -1, eps = 1e-5, weight = NULL, bias = NULL) {
  x <- float_of(x)
  nd <- length(x$node$shape)
  axes <- wire_axes(axis, nd)
  n <- length(axes)
  if (all(axes == seq(nd - n, nd - 1))) {
    return(trailing_norm(OP$LAYERNORM, x, list(normalized_axes = n, eps = eps), weight, bias))
  }
  # Other axes: move them last, normalize, move them back (as the Python client does).
  rest <- setdiff(seq_len(nd) - 1, axes)
  order <- c(rest, axes)
  inverse <- match(seq_len(nd) - 1, order)
  y <- pg_layernorm(pg_permute(x, order + 1), seq(length(rest) + 1, nd), eps, weight, bias)
  pg_permute(y, inverse)
}
