# Optimizers with torch's update rules, built exactly as the Python client builds them (so the
# numbers match): a step makes every parameter's and state tensor's new value as lazy graph,
# realizes them in one request with the gradients and the pending loss, and rebinds each
# parameter tensor to its new node. Values that change every step (the learning rate, Adam's
# bias corrections) are small 0-d buffers, so every step runs the same kernels.

# A float that reaches the graph as a 0-d float32 buffer, re-made only when it changes.
new_scalar <- function(value) {
  s <- new.env(parent = emptyenv())
  s$value <- as.double(value)
  s$t <- NULL
  s
}
scalar_set <- function(s, value) {
  if (as.double(value) != s$value) {
    s$value <- as.double(value)
    s$t <- NULL
  }
}
scalar_tensor <- function(s) {
  if (is.null(s$t) || (s$t$node$sent && !identical(s$t$node$gen, .pg$gen))) s$t <- pg_tensor(s$value)
  s$t
}

# Rebinds tensor t to x's value (the Python client's Tensor.assign): the R object stays.
assign_tensor <- function(t, x) {
  if (x$node$dtype != t$node$dtype) x <- pg_cast(x, t$node$dtype)
  t$node <- x$node
  invisible(t)
}

new_optimizer <- function(params, lr, kind) {
  params <- if (is_tensor(params)) list(params) else params
  for (p in params) if (is.null(p$rg) && is_float_dtype(p$node$dtype)) requires_grad(p) <- TRUE
  o <- new.env(parent = emptyenv())
  o$params <- Filter(function(p) isTRUE(p$rg), params)
  if (!length(o$params)) pg_abort("invalid_argument", "optimizer got no parameters that require grad")
  o$lr_scalar <- new_scalar(lr)
  o$steps <- 0
  o$kind <- kind
  o$zero_grad <- function() {
    for (p in o$params) p$grad <- NULL
    invisible(NULL)
  }
  o$step <- function() {
    graph_realize(lapply(schedule_step(o), function(t) t$node), FALSE)
    invisible(NULL)
  }
  class(o) <- c(paste0("optim_", kind), "polygrad_optimizer")
  o
}

# Builds the update lazily and returns what the step realizes: parameters, state, gradients and
# the losses whose backward() produced them.
schedule_step <- function(o) {
  o$steps <- o$steps + 1
  state <- untracked(o$update())
  grads <- Filter(Negate(is.null), lapply(o$params, function(p) p$grad))
  for (g in grads) g$node$rg <- FALSE  # a consumed gradient keeps no history once realized
  losses <- Filter(function(t) !nzchar(t$node$handle), take_pending_losses())
  c(o$params, state, grads, losses)
}

#' Optimizers
#'
#' `optim_sgd` (torch's SGD with optional momentum) and `optim_adam` (torch's Adam). `$step()`
#' updates every parameter that has a gradient, in one request; `$zero_grad()` clears them.
#' @param params a list of tensors (e.g. `parameters(model)`).
#' @param lr learning rate.
#' @param momentum SGD momentum.
#' @param betas Adam's (b1, b2).
#' @param eps Adam's epsilon.
#' @return an optimizer (an environment with `$step()` and `$zero_grad()`).
#' @export
optim_sgd <- function(params, lr = 0.01, momentum = 0) {
  o <- new_optimizer(params, lr, "sgd")
  o$momentum <- momentum
  o$b <- if (momentum != 0) lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype)) else list()
  o$update <- function() {
    lr_t <- scalar_tensor(o$lr_scalar)
    for (i in seq_along(o$params)) {
      t <- o$params[[i]]
      if (is.null(t$grad)) next
      g <- t$grad
      if (o$momentum != 0) {
        assign_tensor(o$b[[i]], o$b[[i]] * o$momentum + g)
        g <- o$b[[i]]
      }
      assign_tensor(t, t - g * lr_t)
    }
    o$b
  }
  o
}

#' @rdname optim_sgd
#' @export
optim_adam <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8) {
  o <- new_optimizer(params, lr, "adam")
  o$b1 <- betas[1]
  o$b2 <- betas[2]
  o$eps <- eps
  o$m <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$v <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$step_size <- new_scalar(0)
  o$bc2_sqrt <- new_scalar(0)
  o$update <- function() {
    k <- o$steps
    scalar_set(o$step_size, o$lr_scalar$value / (1 - o$b1^k))
    scalar_set(o$bc2_sqrt, sqrt(1 - o$b2^k))
    step_size <- scalar_tensor(o$step_size)
    bc2_sqrt <- scalar_tensor(o$bc2_sqrt)
    for (i in seq_along(o$params)) {
      t <- o$params[[i]]
      if (is.null(t$grad)) next
      g <- t$grad
      assign_tensor(o$m[[i]], o$m[[i]] * o$b1 + g * (1 - o$b1))
      assign_tensor(o$v[[i]], o$v[[i]] * o$b2 + g * (1 - o$b2) * g)  # torch's addcmul order
      denom <- sqrt(o$v[[i]]) / bc2_sqrt + o$eps
      assign_tensor(t, t - step_size * (o$m[[i]] / denom))
    }
    c(o$m, o$v)
  }
  o
}

# Per-step scalar values of step k (from 1), by scalar name: fed to compiled steps.
optimizer_scalars <- function(o, k) {
  out <- list(lr_scalar = o$lr_scalar$value)
  if (o$kind == "adam") {
    out$step_size <- o$lr_scalar$value / (1 - o$b1^k)
    out$bc2_sqrt <- sqrt(1 - o$b2^k)
  }
  out
}
