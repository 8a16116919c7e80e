#' Sorting and running extremes
#'
#' The daemon's SORT, TOPK, CUMMAX, CUMMIN, CUMPROD and LOGCUMSUMEXP along one axis: NaN sorts last
#' (first when `descending`), ties keep their order. `pg_sort`, `pg_topk`, `pg_cummax` and
#' `pg_cummin` return `list(values, indices)` with 1-based int32 indices (for the running
#' extremes: where the extreme last occurred). `pg_cumprod` multiplies along `axis` (bool as
#' int32); `pg_logcumsumexp` is `log(cumsum(exp(x)))` without overflow (float).
#' @param x a tensor.
#' @param axis 1-based axis (-1: the last).
#' @param descending largest first.
#' @param k how many to keep.
#' @param largest the k largest (else the k smallest).
#' @return a tensor, or a list of values and indices.
#' @export
pg_sort <- function(x, axis = -1, descending = FALSE) {
  values_indices(OP$SORT, x, axis, NULL, list(descending = isTRUE(descending)))
}

#' @rdname pg_sort
#' @export
pg_topk <- function(x, k, axis = -1, largest = TRUE) {
  s <- x$node$shape
  if (!length(s)) return(pg_topk(reshape_to(x, 1), k, 1, largest))
  ax <- wire_axis(axis, length(s))
  if (length(k) != 1L || is.na(k) || k != round(k) || k < 0 || k > s[ax + 1]) {
    pg_abort("invalid_argument", sprintf("topk: k must be a whole number from 0 to %d, got %s", s[ax + 1], format(k)))
  }
  out <- s
  out[ax + 1] <- k
  values_indices(OP$TOPK, x, axis, out, list(n = k, descending = isTRUE(largest)))
}

#' @rdname pg_sort
#' @export
pg_cummax <- function(x, axis = 1) values_indices(OP$CUMMAX, x, axis, NULL, list())

#' @rdname pg_sort
#' @export
pg_cummin <- function(x, axis = 1) values_indices(OP$CUMMIN, x, axis, NULL, list())

#' @rdname pg_sort
#' @export
pg_cumprod <- function(x, axis = 1) {
  s <- x$node$shape
  if (!length(s)) return(reshape_to(pg_cumprod(reshape_to(x, 1), 1), numeric()))
  ax <- wire_axis(axis, length(s))
  dt <- x$node$dtype
  if (dt == "bool") return(pg_cumprod(pg_cast(x, "int32"), ax + 1))
  acc <- if (is_float_dtype(dt)) sum_acc_dtype(dt) else dt
  pg_cast(make(OP$CUMPROD, acc, s, list(pg_cast(x, acc)), list(axes = ax)), dt)
}

#' @rdname pg_sort
#' @export
pg_logcumsumexp <- function(x, axis = 1) {
  s <- x$node$shape
  if (!length(s)) return(reshape_to(pg_logcumsumexp(reshape_to(x, 1), 1), numeric()))
  ax <- wire_axis(axis, length(s))
  if (!is_float_dtype(x$node$dtype)) x <- pg_cast(x, "float32")
  dt <- x$node$dtype
  acc <- sum_acc_dtype(dt)
  pg_cast(make(OP$LOGCUMSUMEXP, acc, s, list(pg_cast(x, acc)), list(axes = ax)), dt)
}

# list(values, indices) of one op along `axis`, indices 1-based; a 0-d tensor as a 1-element one.
values_indices <- function(op, x, axis, shape, fields) {
  s <- x$node$shape
  if (!length(s)) {
    wire_axis(axis, 1)
    r <- values_indices(op, reshape_to(x, 1), 1, if (is.null(shape)) NULL else 1, fields)
    return(list(values = reshape_to(r$values, numeric()), indices = reshape_to(r$indices, numeric())))
  }
  ax <- wire_axis(axis, length(s))
  out <- if (is.null(shape)) s else shape
  values <- make(op, x$node$dtype, out, list(x), c(fields, list(axes = ax)))
  indices <- make(op, "int32", out, list(x), c(fields, list(axes = ax, indices = TRUE)))
  list(values = values, indices = indices + 1L)
}
