# Activations, dropout, the linear map and the nn_linear layer.

#' Activations
#'
#' `pg_relu` is max(x, 0) (bool and unsigned tensors unchanged), `pg_gelu` gelu's tanh approximation (tinygrad's), or
#' with `approximate = "none"` torch's exact gelu through erf.
#' `pg_sigmoid`, `pg_tanh`, `pg_silu`, `pg_leaky_relu` and the other activations that are one op of
#' the daemon are in [ops_gen].
#' @param x a tensor.
#' @param approximate `"tanh"` or `"none"`.
#' @return a tensor of x's shape (float).
#' @export
pg_relu <- function(x) if (x$node$dtype == "bool" || dtype_kind(x$node$dtype) == "u") x else unop(OP$RELU, x)
#' @rdname pg_relu
#' @export
pg_gelu <- function(x, approximate = "tanh") {
  if (!identical(approximate, "tanh") && !identical(approximate, "none")) {
    pg_abort("invalid_argument", "pg_gelu: approximate must be \"tanh\" or \"none\"")
  }
  unop(if (approximate == "tanh") OP$GELU else OP$GELU_ERF, float_of(x))
}

#' Dropout
#'
#' With `training`, zeroes each element with probability `p` and scales the others by
#' 1 / (1 - p), drawing from the daemon's seeded stream (see [pg_manual_seed]); otherwise x.
#' @param x a tensor.
#' @param p the probability of zeroing an element.
#' @param training apply it (`FALSE`: x unchanged, as at inference).
#' @return a tensor.
#' @export
pg_dropout <- function(x, p = 0.5, training = TRUE) {
  if (!(p >= 0 && p <= 1)) pg_abort("invalid_argument", sprintf("dropout probability must be in [0, 1], got %s", p))
  if (!training || p == 0) return(x)
  x <- float_of(x)
  make(OP$DROPOUT, x$node$dtype, x$node$shape, list(x), c(random_key(), list(p = p)))
}

#' Linear map
#'
#' `x %*% weight + bias` with weight (in, out), as tinygrad's and the Python client's
#' `Tensor.linear` (a 1-D weight scales elementwise). [nn_linear] holds its weight as (out, in).
#' @param x a tensor.
#' @param weight a tensor (in, out) or (in).
#' @param bias `NULL` or a tensor (out).
#' @return a tensor.
#' @export
pg_linear <- function(x, weight, bias = NULL) {
  src <- lapply(Filter(Negate(is.null), list(x, weight, bias)), function(t) if (is_tensor(t)) t else pg_tensor(t))
  out_dt <- do.call(least_upper_dtype, lapply(src, function(t) t$node$dtype))
  acc <- sum_acc_dtype(out_dt)
  src <- lapply(src, pg_cast, acc)
  shape <- linear_shape(src[[1]]$node$shape, src[[2]]$node$shape, if (length(src) > 2L) src[[3]]$node$shape)
  if (is.null(shape)) daemon_reject(OP$LINEAR, acc, src, "linear: the shapes do not fit")
  pg_cast(make(OP$LINEAR, acc, shape, src), out_dt)
}

# The daemon's SHAPE_LINEAR rule: x %*% w's shape (x and w broadcast for a 1-D w), with the
# bias's; NULL where they do not fit.
linear_shape <- function(sx, sw, sb) {
  y <- if (length(sw) == 1L) broadcast_shape(sx, sw) else matmul_shape(sx, sw)
  if (is.null(y) || is.null(sb)) y else broadcast_shape(y, sb)
}

#' Linear layer
#'
#' `y = x %*% t(weight) + bias` with weight (out, in) and bias drawn from U(-1/sqrt(in),
#' 1/sqrt(in)) as in PyTorch. The layer is a function of x with `$weight` and `$bias`.
#' @param in_features,out_features sizes.
#' @param bias include a bias.
#' @return an `nn_linear` object (call it on a tensor).
#' @export
nn_linear <- function(in_features, out_features, bias = TRUE) {
  bound <- 1 / sqrt(in_features)
  layer <- new.env(parent = emptyenv())
  layer$weight <- param(pg_rand(out_features, in_features) * (2 * bound) - bound)
  layer$bias <- if (bias) param(pg_rand(out_features) * (2 * bound) - bound) else NULL
  f <- function(x) {
    y <- pg_matmul(x, pg_permute(layer$weight, c(2, 1)))
    if (is.null(layer$bias)) y else y + layer$bias
  }
  structure(f, class = c("nn_linear", "nn_module"), state = layer)
}

# A parameter: realized to a buffer of its own, requiring grad.
param <- function(t) {
  t <- pg_realize(t)
  t <- wrap_node(t$node)
  requires_grad(t) <- TRUE
  t
}

#' @export
`$.nn_module` <- function(x, name) get0(name, envir = attr(x, "state"), inherits = FALSE)

#' @export
`$<-.nn_module` <- function(x, name, value) {
  assign(name, value, envir = attr(x, "state"))
  x
}

#' Parameters of a model
#'
#' The tensors of a model: an `nn_module` (such as [nn_linear]), a list of them or of tensors,
#' in order, without duplicates.
#' @param model a module, tensor or (nested) list.
#' @return a list of tensors.
#' @export
parameters <- function(model) {
  out <- list()
  walk <- function(m) {
    if (is_tensor(m)) {
      if (!any(vapply(out, identical, TRUE, m))) out[[length(out) + 1L]] <<- m
    } else if (inherits(m, "polygrad_optimizer")) {
      walk(m$params)
      walk(m$b)
      walk(m$m)
      walk(m$v)
    } else if (inherits(m, "nn_module")) {
      st <- attr(m, "state")
      nms <- ls(st)  # weight before bias, as the Python client's state dicts
      for (nm in c(intersect(c("weight", "bias"), nms), setdiff(sort(nms), c("weight", "bias")))) {
        walk(get(nm, envir = st))
      }
    } else if (is.list(m)) {
      for (e in m) walk(e)
    }
  }
  walk(model)
  out
}
