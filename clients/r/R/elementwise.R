# Elementwise math and activations composed from wire ops, node for node as the Python and
# JavaScript clients compose them (so all three send the daemon the same graphs).

#' More elementwise math
#'
#' `pg_exp2` is 2^x, `pg_reciprocal` 1/x and `pg_rsqrt` 1/sqrt(x), all in float. `pg_clamp`
#' limits x to \[min, max\] (either may be `NULL`). `is.nan` and `is.infinite` work on tensors
#' and give bool tensors.
#' @param x a tensor.
#' @param min,max bounds (R numbers or tensors).
#' @return a tensor.
#' @export
pg_exp2 <- function(x) unop(OP$EXP2, float_of(x))

#' @rdname pg_exp2
#' @export
pg_reciprocal <- function(x) unop(OP$RECIPROCAL, float_of(x))

#' @rdname pg_exp2
#' @export
pg_rsqrt <- function(x) pg_reciprocal(sqrt(x))

#' @rdname pg_exp2
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

#' @rdname pg_exp2
#' @export
is.nan.polygrad_tensor <- function(x) cmp(OP$CMPNE, x, x)

#' @rdname pg_exp2
#' @export
is.infinite.polygrad_tensor <- function(x) (x == Inf) | (x == -Inf)

#' More activations
#'
#' `pg_softplus` is log(1 + exp(beta x)) / beta, and x where beta x > `threshold` (torch); `pg_logsigmoid` log(sigmoid(x)); `pg_elu` x
#' above 0, else alpha (exp(x) - 1); `pg_relu6` min(max(x, 0), 6); `pg_hardtanh` x clamped to
#' \[min_val, max_val\]; `pg_hardsigmoid` relu6-like max(0, min(1, alpha x + beta));
#' `pg_hardswish` x relu6(x + 3) / 6; `pg_mish` x tanh(softplus(x)); `pg_quick_gelu`
#' x sigmoid(1.702 x).
#' @param x a tensor.
#' @param beta,alpha,threshold the curves' parameters.
#' @param min_val,max_val `pg_hardtanh`'s bounds.
#' @return a tensor of x's shape.
#' @export
pg_softplus <- function(x, beta = 1, threshold = 20) {
  x <- float_of(x)
  make(OP$SOFTPLUS, x$node$dtype, x$node$shape, list(x), list(beta = beta, threshold = threshold))
}

#' @rdname pg_softplus
#' @export
pg_logsigmoid <- function(x) -pg_softplus(-x)

#' @rdname pg_softplus
#' @export
pg_elu <- function(x, alpha = 1) pg_relu(x) - alpha * pg_relu(1 - exp(x))

#' @rdname pg_softplus
#' @export
pg_relu6 <- function(x) pg_minimum(pg_relu(x), 6)

#' @rdname pg_softplus
#' @export
pg_hardtanh <- function(x, min_val = -1, max_val = 1) pg_clamp(x, min_val, max_val)

#' @rdname pg_softplus
#' @export
pg_hardsigmoid <- function(x, alpha = 1 / 6, beta = 0.5) {
  y <- alpha * x + beta
  pg_relu(y) - pg_relu(y - 1)
}

#' @rdname pg_softplus
#' @export
pg_hardswish <- function(x) x * pg_relu6(x + 3) * (1 / 6)

#' @rdname pg_softplus
#' @export
pg_mish <- function(x) x * tanh(pg_softplus(x))

#' @rdname pg_softplus
#' @export
pg_quick_gelu <- function(x) x * pg_sigmoid(x * 1.702)

#' Elementwise math the daemon computes
#'
#' R's `atan`, `asin`, `acos`, `sinh`, `cosh`, `asinh`, `acosh`, `atanh`, `log10`, `log1p` and
#' `expm1` work on tensors (the Math group) with torch's values at the edges of each domain: nan
#' outside it (`asin` beyond \[-1, 1\], `acosh` below 1), +-inf at poles (`atanh(1)`).
#' `pg_erf` is the error function, `pg_softsign` x / (1 + |x|), `pg_celu` x above 0 and
#' alpha (exp(x / alpha) - 1) below, `pg_selu` torch's selu, `pg_logaddexp` log(exp(x) + exp(y))
#' without overflow, `pg_copysign` |x| with the sign bit of y (-0 counts as negative; no gradient
#' flows to y), `pg_lerp` x + weight (y - x), computed from the nearer end (exact at weight 1).
#' All compute in float (float16 and bfloat16 in float32, rounded once). `pg_isfinite` and
#' `pg_isclose` (|x - y| <= atol + rtol |y|, equal infinities included, as torch.isclose) give
#' bool tensors; `pg_allclose` is whether every element is close, as an R logical (it realizes).
#' @param x,y tensors (y and weight may be R numbers).
#' @param alpha `pg_celu`'s scale, not 0.
#' @param weight the interpolation weight.
#' @param rtol,atol relative and absolute tolerance, both >= 0.
#' @param equal_nan whether two nans are close.
#' @return a tensor of the broadcast shape (`pg_allclose`: TRUE or FALSE).
#' @export
pg_erf <- function(x) unop(OP$ERF, float_of(x))

#' @rdname pg_erf
#' @export
pg_softsign <- function(x) unop(OP$SOFTSIGN, float_of(x))

#' @rdname pg_erf
#' @export
pg_selu <- function(x) unop(OP$SELU, float_of(x))

#' @rdname pg_erf
#' @export
pg_celu <- function(x, alpha = 1) {
  x <- float_of(x)
  make(OP$CELU, x$node$dtype, x$node$shape, list(x), list(alpha = alpha))
}

float_binop <- function(op, x, y) {
  ab <- broadcasted(x, y, op = op)
  a <- float_of(ab[[1]])
  make(op, a$node$dtype, a$node$shape, list(a, float_of(ab[[2]])))
}

#' @rdname pg_erf
#' @export
pg_logaddexp <- function(x, y) float_binop(OP$LOGADDEXP, x, y)

#' @rdname pg_erf
#' @export
pg_copysign <- function(x, y) float_binop(OP$COPYSIGN, x, y)

#' @rdname pg_erf
#' @export
pg_lerp <- function(x, y, weight) {
  ab <- broadcasted(x, y, op = OP$LERP)
  aw <- broadcasted(ab[[1]], weight, op = OP$LERP)
  ab <- broadcasted(aw[[1]], ab[[2]], op = OP$LERP)
  a <- float_of(ab[[1]])
  make(OP$LERP, a$node$dtype, a$node$shape, list(a, float_of(ab[[2]]), pg_cast(aw[[2]], a$node$dtype)))
}

#' @rdname pg_erf
#' @export
pg_isfinite <- function(x) make(OP$ISFINITE, "bool", x$node$shape, list(x))

#' @rdname pg_erf
#' @export
pg_isclose <- function(x, y, rtol = 1e-5, atol = 1e-8, equal_nan = FALSE) {
  if (!(rtol >= 0 && atol >= 0)) {
    pg_abort("invalid_argument", sprintf("isclose needs rtol >= 0 and atol >= 0, got %s and %s", rtol, atol))
  }
  ab <- broadcasted(x, y, op = OP$ISCLOSE)
  make(OP$ISCLOSE, "bool", ab[[1]]$node$shape, ab, list(rtol = rtol, atol = atol, equal_nan = isTRUE(equal_nan)))
}

#' @rdname pg_erf
#' @export
pg_allclose <- function(x, y, rtol = 1e-5, atol = 1e-8, equal_nan = FALSE) {
  isTRUE(as.logical(pg_item(pg_all(pg_isclose(x, y, rtol, atol, equal_nan)))))
}
