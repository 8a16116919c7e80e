# Tensor utilities the Python client's Tensor has: tensors shaped like another, host-drawn
# initializers, properties, clone and assign, gradients of chosen targets, no_grad and sequential.
# None of them is an op: each makes one node of an existing kind, reads a node's fields, or draws
# host data (the initializers use R's own generator, as Python's use numpy's: `set.seed()` fixes
# them).

#' Tensor utilities
#'
#' `pg_zeros_like`, `pg_ones_like`, `pg_full_like`, `pg_rand_like` and `pg_randn_like` make a tensor
#' of `x`'s shape (and dtype, unless `dtype` is given). `pg_uniform` draws U(low, high) on the host
#' (R's generator: `set.seed()` fixes it); `pg_scaled_uniform` (bound 1/sqrt(numel)),
#' `pg_glorot_uniform` (sqrt(6 / (shape[1] + prod(shape[-1])))), `pg_kaiming_uniform` and
#' `pg_kaiming_normal` (gain sqrt(2 / (1 + a^2)) over sqrt(prod(shape[-1]))) are tinygrad's
#' initializers. `pg_element_size`, `pg_nbytes`, `pg_is_floating_point`, `pg_is_realized` and
#' `pg_node_id` read a tensor's facts; `pg_clone(x)` is a tensor of x's node (gradients flow through
#' it to x); `pg_assign(x, value)` makes `x` stand for `value` (lazily; cast to x's dtype, same shape).
#' `pg_gradient(loss, targets)` gives d(loss)/d(target) for each target as lazy tensors (loss has one
#' element unless `gradient`, shaped like it, is given); `pg_no_grad(expr)` evaluates `expr` with
#' gradient tracking off; `pg_sequential(x, layers)` applies each function of `layers` in turn.
#' @param x a tensor.
#' @param ... the shape, as integers or one vector.
#' @param value the fill value (`pg_full_like`), or the tensor or R values `x` takes (`pg_assign`).
#' @param dtype the element type (default: x's, or float32).
#' @param low,high `pg_uniform`'s bounds.
#' @param a the negative slope of the rectifier the Kaiming initializers assume.
#' @param loss a float tensor.
#' @param targets a list of float tensors.
#' @param gradient a tensor of loss's shape, or `NULL`.
#' @param expr an expression.
#' @param layers a list of functions of one tensor.
#' @return a tensor, a list of tensors (`pg_gradient`), a number or flag (the properties), or
#'   expr's value (`pg_no_grad`).
#' @name pg_utilities
NULL

#' @rdname pg_utilities
#' @export
pg_full_like <- function(x, value, dtype = NULL) {
  const_tensor(value, if (is.null(dtype)) x$node$dtype else check_dtype(dtype), x$node$shape)
}

#' @rdname pg_utilities
#' @export
pg_zeros_like <- function(x, dtype = NULL) pg_full_like(x, 0, dtype)

#' @rdname pg_utilities
#' @export
pg_ones_like <- function(x, dtype = NULL) pg_full_like(x, 1, dtype)

#' @rdname pg_utilities
#' @export
pg_rand_like <- function(x, dtype = NULL) pg_rand(x$node$shape, dtype = if (is.null(dtype)) x$node$dtype else dtype)

#' @rdname pg_utilities
#' @export
pg_randn_like <- function(x, dtype = NULL) pg_randn(x$node$shape, dtype = if (is.null(dtype)) x$node$dtype else dtype)

# Host values of `shape` (row-major like every shape here; the draws are independent, so their
# order does not matter) as a tensor.
host_tensor <- function(values, shape, dtype) {
  if (!length(shape)) return(pg_tensor(values, dtype = dtype))
  pg_tensor(array(values, dim = shape), dtype = dtype)
}

#' @rdname pg_utilities
#' @export
pg_uniform <- function(..., low = 0, high = 1, dtype = "float32") {
  shape <- shape_args(...)
  host_tensor(stats::runif(prod(shape), low, high), shape, check_dtype(dtype))
}

#' @rdname pg_utilities
#' @export
pg_scaled_uniform <- function(..., dtype = "float32") {
  shape <- shape_args(...)
  b <- prod(shape)^-0.5
  pg_uniform(shape, low = -b, high = b, dtype = dtype)
}

#' @rdname pg_utilities
#' @export
pg_glorot_uniform <- function(..., dtype = "float32") {
  shape <- shape_args(...)
  b <- sqrt(6 / (shape[1] + prod(shape[-1])))
  pg_uniform(shape, low = -b, high = b, dtype = dtype)
}

kaiming_std <- function(shape, a) sqrt(2 / (1 + a^2)) / sqrt(prod(shape[-1]))

#' @rdname pg_utilities
#' @export
pg_kaiming_uniform <- function(..., a = 0.01, dtype = "float32") {
  shape <- shape_args(...)
  b <- sqrt(3) * kaiming_std(shape, a)
  pg_uniform(shape, low = -b, high = b, dtype = dtype)
}

#' @rdname pg_utilities
#' @export
pg_kaiming_normal <- function(..., a = 0.01, dtype = "float32") {
  shape <- shape_args(...)
  host_tensor(stats::rnorm(prod(shape), 0, kaiming_std(shape, a)), shape, check_dtype(dtype))
}

#' @rdname pg_utilities
#' @export
pg_element_size <- function(x) .dtype_size[[x$node$dtype]]

#' @rdname pg_utilities
#' @export
pg_nbytes <- function(x) prod(x$node$shape) * pg_element_size(x)

#' @rdname pg_utilities
#' @export
pg_is_floating_point <- function(x) is_float_dtype(x$node$dtype)

#' @rdname pg_utilities
#' @export
pg_is_realized <- function(x) nzchar(x$node$handle)

#' @rdname pg_utilities
#' @export
pg_node_id <- function(x) x$node$id

#' @rdname pg_utilities
#' @export
pg_clone <- function(x) wrap_node(x$node, rg = x$rg)

is_grad_leaf <- function(x) {
  isTRUE(x$rg) && any(vapply(.pg$leaves, function(w) identical(.Call(pg_c_weakref_get, w), x), logical(1)))
}

#' @rdname pg_utilities
#' @export
pg_assign <- function(x, value) {
  if (!is_tensor(value)) value <- pg_tensor(value, dtype = x$node$dtype)
  if (!identical(as.numeric(value$node$shape), as.numeric(x$node$shape))) {
    pg_abort("invalid_argument", sprintf("assign: shape (%s) differs from (%s)", paste(value$node$shape, collapse = ", "),
                                         paste(x$node$shape, collapse = ", ")))
  }
  if (!identical(value, x) && is_grad_leaf(value)) {
    value <- untracked(value + 0)  # another leaf: a copy, so the two do not become one gradient target
  } else if (is_grad_leaf(x) && isTRUE(value$node$rg)) {
    value <- pg_detach(value)  # a leaf takes the value, not its history (as the Python client)
  }
  assign_tensor(x, value)
}

#' @rdname pg_utilities
#' @export
pg_gradient <- function(loss, targets, gradient = NULL) {
  if (is_tensor(targets)) targets <- list(targets)
  if (!is_float_dtype(loss$node$dtype)) pg_abort("invalid_argument", "cannot differentiate a non-float tensor")
  if (is.null(gradient)) {
    if (prod(loss$node$shape) != 1) {
      pg_abort("invalid_argument", "pg_gradient() without a gradient needs a one-element loss")
    }
  } else {
    loss <- loss * pg_tensor(gradient, dtype = loss$node$dtype)
  }
  track <- .pg$no_grad == 0L && .pg$untracked == 0L
  lapply(targets, function(t) {
    if (!is_tensor(t) || !is_float_dtype(t$node$dtype)) {
      pg_abort("invalid_argument", "gradient targets must be float tensors")
    }
    wrap_node(new_node(OP$GRADIENT, t$node$dtype, t$node$shape, list(loss$node, t$node), rg = track),
              rg = if (track) TRUE else NULL)
  })
}

#' @rdname pg_utilities
#' @export
pg_no_grad <- function(expr) {
  .pg$no_grad <- .pg$no_grad + 1L
  on.exit(.pg$no_grad <- .pg$no_grad - 1L)
  expr
}

#' @rdname pg_utilities
#' @export
pg_sequential <- function(x, layers) Reduce(function(acc, f) f(acc), layers, x)
