# Elementwise glue of the R client: clamp's optional bounds, R's is.nan and is.infinite on tensors,
# isclose; the math itself is the daemon's.

#' More elementwise math
#'
#' `pg_clamp` limits x to \[min, max\] (either may be `NULL`). `is.nan` and `is.infinite` work on
#' tensors and give bool tensors. `pg_rsqrt`, `pg_hardtanh`, `pg_elu` and the other functions that
#' are one op of the daemon are in [ops_gen].
#' @param x a tensor.
#' @param min,max bounds (R numbers or tensors).
#' @return a tensor.
#' @export
pg_clamp <- function(x, min = NULL, max = NULL) {
  if (is.null(min) && is.null(max)) pg_abort("invalid_argument", "pg_clamp needs min or max")
  y <- if (is.null(min)) x else clamp_op(OP$CLAMP_MIN, x, min)
  if (is.null(max)) y else clamp_op(OP$CLAMP_MAX, y, max)
}

# torch's clamp_min / clamp_max on the daemon: nan anywhere gives nan, a tie passes x's gradient.
clamp_op <- function(op, x, bound) {
  if (x$node$dtype == "bool") {
    pg_abort("invalid_argument", sprintf("%s does not take bool tensors", tolower(names(OP)[unlist(OP) == op])))
  }
  binop(op, x, bound)
}

#' @rdname pg_clamp
#' @export
is.nan.polygrad_tensor <- function(x) pg_isnan(x)

#' @rdname pg_clamp
#' @export
is.infinite.polygrad_tensor <- function(x) pg_isinf(x)

#' Closeness of tensors
#'
#' `pg_isclose` is |x - y| <= atol + rtol |y| elementwise, equal infinities included, as
#' torch.isclose, a bool tensor; `pg_allclose` is whether every element is close, as an R logical
#' (it realizes). The daemon's elementwise math (`pg_erf`, `pg_logaddexp`, `pg_lerp`, R's `atan`,
#' `asinh`, `log1p`, ... on tensors) has torch's values at the edges of each domain: nan outside
#' it (`asin` beyond \[-1, 1\], `acosh` below 1), +-inf at poles (`atanh(1)`); see [ops_gen].
#' @param x,y tensors (y may be an R number).
#' @param rtol,atol relative and absolute tolerance, both >= 0.
#' @param equal_nan whether two nans are close.
#' @return a bool tensor of the broadcast shape (`pg_allclose`: TRUE or FALSE).
#' @export
pg_isclose <- function(x, y, rtol = 1e-5, atol = 1e-8, equal_nan = FALSE) {
  if (!(rtol >= 0 && atol >= 0)) {
    pg_abort("invalid_argument", sprintf("isclose needs rtol >= 0 and atol >= 0, got %s and %s", rtol, atol))
  }
  ab <- broadcasted(x, y, op = OP$ISCLOSE)
  make(OP$ISCLOSE, "bool", ab[[1]]$node$shape, ab, list(rtol = rtol, atol = atol, equal_nan = isTRUE(equal_nan)))
}

#' @rdname pg_isclose
#' @export
pg_allclose <- function(x, y, rtol = 1e-5, atol = 1e-8, equal_nan = FALSE) {
  isTRUE(as.logical(pg_item(pg_all(pg_isclose(x, y, rtol, atol, equal_nan)))))
}
