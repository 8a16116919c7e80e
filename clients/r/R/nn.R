# Activations, losses, convolution and the nn_linear layer.

#' Activations
#' @param x a tensor.
#' @return a tensor of x's shape (float).
#' @export
pg_relu <- function(x) if (x$node$dtype == "bool" || dtype_kind(x$node$dtype) == "u") x else unop(OP$RELU, x)
#' @rdname pg_relu
#' @export
pg_sigmoid <- function(x) unop(OP$SIGMOID, float_of(x))
#' @rdname pg_relu
#' @export
pg_tanh <- function(x) unop(OP$TANH, float_of(x))
#' @rdname pg_relu
#' @export
pg_gelu <- function(x) unop(OP$GELU, float_of(x))
#' @rdname pg_relu
#' @export
pg_silu <- function(x) unop(OP$SILU, float_of(x))
#' @rdname pg_relu
#' @param neg_slope slope for x < 0.
#' @export
pg_leaky_relu <- function(x, neg_slope = 0.01) pg_where(x < 0, x * neg_slope, x)

#' Cross entropy
#'
#' Of logits `x` with class indices (1-based, an integer tensor or R vector with one rank less
#' than x) or class probabilities `y` (x's shape); the class axis is 2 (the rows are samples).
#' @param x logits.
#' @param y targets.
#' @param reduction "mean", "sum" or "none".
#' @return a tensor.
#' @export
pg_cross_entropy <- function(x, y, reduction = "mean") {
  nd <- length(x$node$shape)
  ax <- if (nd >= 2) 1 else nd - 1  # 0-based class axis
  ncls <- x$node$shape[ax + 1]
  if (!is_tensor(y)) y <- pg_tensor(if (is.double(y) && length(dim(y)) < nd && !is.null(y)) as.integer(y) else y)
  if (length(y$node$shape) < nd) {  # 1-based class indices
    y <- make(OP$ONE_HOT, y$node$dtype, c(y$node$shape, ncls), list(y - 1L), list(n = ncls))
    if (ax != nd - 1) {
      yn <- length(y$node$shape)
      y <- pg_permute(y, c(seq_len(ax), yn, seq(ax + 1, yn - 1)))
    }
  }
  y <- pg_cast(y, least_upper_float(x$node$dtype))
  loss <- -pg_sum(pg_log_softmax(x, ax + 1) * y, ax + 1)
  switch(reduction, mean = pg_mean(loss), sum = pg_sum(loss), none = loss,
         pg_abort("invalid_argument", "reduction must be 'mean', 'sum' or 'none'"))
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
