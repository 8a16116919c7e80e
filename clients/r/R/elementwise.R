# Elementwise math and activations composed from wire ops, node for node as the Python and
# JavaScript clients compose them (so all three send the daemon the same graphs).

#' More elementwise math
#'
#' `pg_rsqrt` is 1/sqrt(x), in float (`pg_exp2`, `pg_reciprocal` and the other functions that are
#' one op of the daemon are in [ops_gen]). `pg_clamp` limits x to \[min, max\] (either may be
#' `NULL`). `is.nan` and `is.infinite` work on tensors and give bool tensors.
#' @param x a tensor.
#' @param min,max bounds (R numbers or tensors).
#' @return a tensor.
#' @export
pg_rsqrt <- function(x) pg_reciprocal(sqrt(x))

#' @rdname pg_rsqrt
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

#' @rdname pg_rsqrt
#' @export
is.nan.polygrad_tensor <- function(x) cmp(OP$CMPNE, x, x)

#' @rdname pg_rsqrt
#' @export
is.infinite.polygrad_tensor <- function(x) (x == Inf) | (x == -Inf)

#' More activations
#'
#' `pg_logsigmoid` is log(sigmoid(x)) (through [pg_softplus], log(1 + exp(beta x)) / beta, and x
#' where beta x > `threshold`, as torch); `pg_elu` x above 0, else alpha (exp(x) - 1); `pg_relu6`
#' min(max(x, 0), 6); `pg_hardtanh` x clamped to \[min_val, max_val\]; `pg_hardsigmoid`
#' relu6-like max(0, min(1, alpha x + beta)); `pg_hardswish` x relu6(x + 3) / 6; `pg_mish`
#' x tanh(softplus(x)); `pg_quick_gelu` x sigmoid(1.702 x).
#' @param x a tensor.
#' @param beta,alpha the curves' parameters.
#' @param min_val,max_val `pg_hardtanh`'s bounds.
#' @return a tensor of x's shape.
#' @export
pg_logsigmoid <- function(x) -pg_softplus(-x)

#' @rdname pg_logsigmoid
#' @export
pg_elu <- function(x, alpha = 1) pg_relu(x) - alpha * pg_relu(1 - exp(x))

#' @rdname pg_logsigmoid
#' @export
pg_relu6 <- function(x) pg_minimum(pg_relu(x), 6)

#' @rdname pg_logsigmoid
#' @export
pg_hardtanh <- function(x, min_val = -1, max_val = 1) pg_clamp(x, min_val, max_val)

#' @rdname pg_logsigmoid
#' @export
pg_hardsigmoid <- function(x, alpha = 1 / 6, beta = 0.5) {
  y <- alpha * x + beta
  pg_relu(y) - pg_relu(y - 1)
}

#' @rdname pg_logsigmoid
#' @export
pg_hardswish <- function(x) x * pg_relu6(x + 3) * (1 / 6)

#' @rdname pg_logsigmoid
#' @export
pg_mish <- function(x) x * tanh(pg_softplus(x))

#' @rdname pg_logsigmoid
#' @export
pg_quick_gelu <- function(x) x * pg_sigmoid(x * 1.702)

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
