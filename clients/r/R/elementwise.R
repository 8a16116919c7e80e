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
  y <- if (is.null(min)) x else pg_maximum(x, min)
  if (is.null(max)) y else pg_minimum(y, max)
}

#' @rdname pg_exp2
#' @export
is.nan.polygrad_tensor <- function(x) cmp(OP$CMPNE, x, x)

#' @rdname pg_exp2
#' @export
is.infinite.polygrad_tensor <- function(x) (x == Inf) | (x == -Inf)

#' More activations
#'
#' `pg_softplus` is log(1 + exp(beta x)) / beta; `pg_logsigmoid` log(sigmoid(x)); `pg_elu` x
#' above 0, else alpha (exp(x) - 1); `pg_relu6` min(max(x, 0), 6); `pg_hardtanh` x clamped to
#' \[min_val, max_val\]; `pg_hardsigmoid` relu6-like max(0, min(1, alpha x + beta));
#' `pg_hardswish` x relu6(x + 3) / 6; `pg_mish` x tanh(softplus(x)); `pg_quick_gelu`
#' x sigmoid(1.702 x).
#' @param x a tensor.
#' @param beta,alpha the curves' parameters.
#' @param min_val,max_val `pg_hardtanh`'s bounds.
#' @return a tensor of x's shape.
#' @export
pg_softplus <- function(x, beta = 1) log(1 + exp(x * beta)) * (1 / beta)

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
