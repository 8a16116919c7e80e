# Optimizers with torch's update rules, built exactly as the Python client builds them (so the
# numbers match): a step makes every parameter's and state tensor's new value as lazy graph,
# realizes them in one request with the gradients and the pending loss, and rebinds each
# parameter tensor to its new node. Values that change every step (the learning rate, Adam's
# bias corrections) are small 0-d buffers, so every step runs the same kernels.

# A float that reaches the graph as a 0-d float32 buffer, re-made only when it changes; `make`
# gives another form (Muon's coefficients: one 1-D float64 buffer, made once).
new_scalar <- function(value, make = pg_tensor) {
  s <- new.env(parent = emptyenv())
  s$value <- as.double(value)
  s$make <- make
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
  if (is.null(s$t) || (s$t$node$sent && !identical(s$t$node$gen, .pg$gen))) s$t <- s$make(s$value)
  s$t
}

# Rebinds tensor t to x's value (the Python client's Tensor.assign): the R object stays.
assign_tensor <- function(t, x) {
  if (x$node$dtype != t$node$dtype) x <- pg_cast(x, t$node$dtype)
  if (!is.null(.pg$watch)) .pg$watch$assigned[[length(.pg$watch$assigned) + 1L]] <- t
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
  if (!is.null(.pg$watch)) .pg$watch$optimizers[[length(.pg$watch$optimizers) + 1L]] <- o
  o$steps <- o$steps + 1
  state <- untracked(o$update())
  grads <- Filter(Negate(is.null), lapply(o$params, function(p) p$grad))
  for (g in grads) g$node$rg <- FALSE  # a consumed gradient keeps no history once realized
  losses <- Filter(function(t) !nzchar(t$node$handle), take_pending_losses())
  c(o$params, state, grads, losses)
}

# One update rule of the daemon (core/frontend/optimizers.h) for one parameter: a node per value
# the step writes (outputs: a list of list(tensor, "param" | "m" | "v")), each tensor rebound to
# its node once all are built from the old values.
apply_update <- function(code, rule, srcs, outputs) {
  made <- lapply(outputs, function(o) make(code, o[[1]]$node$dtype, o[[1]]$node$shape, srcs, c(rule, list(mode = o[[2]]))))
  for (i in seq_along(outputs)) assign_tensor(outputs[[i]][[1]], made[[i]])
}

#' Optimizers
#'
#' `optim_sgd` (torch's SGD with optional momentum, nesterov and weight decay), `optim_lars`
#' (tinygrad's LARS: SGD scaled per parameter by the trust ratio tcoef ||p|| / (||g|| +
#' weight_decay ||p||), before the momentum when `classic`, else after it), `optim_adam`
#' (torch's Adam; `decoupled = TRUE` is AdamW), `optim_lamb` (tinygrad's LAMB) and `optim_muon`
#' (Muon: nesterov momentum, each direction orthogonalized by Newton-Schulz as a (rows, rest)
#' matrix, decoupled weight decay; parameters of rank >= 2), each the
#' daemon's update rule. `$step()` updates every parameter that has a gradient, in one request;
#' `$zero_grad()` clears them.
#' @param params a list of tensors (e.g. `parameters(model)`).
#' @param lr learning rate.
#' @param momentum SGD momentum.
#' @param weight_decay L2 weight decay (Adam with `decoupled`: AdamW's decay).
#' @param nesterov SGD's Nesterov momentum (needs momentum > 0).
#' @param betas Adam's and LAMB's (b1, b2).
#' @param eps Adam's and LAMB's epsilon.
#' @param decoupled AdamW's decoupled weight decay.
#' @param classic LARS: scale by lr and the trust ratio before the momentum.
#' @param tcoef LARS's trust coefficient (0: plain SGD).
#' @param ns_steps Muon's Newton-Schulz iterations (1 to 64).
#' @param ns_coefficients Muon's Newton-Schulz polynomial (1 to 16 coefficients).
#' @return an optimizer (an environment with `$step()` and `$zero_grad()`).
#' @export
optim_sgd <- function(params, lr = 0.01, momentum = 0, weight_decay = 0, nesterov = FALSE) {
  momentum_optimizer(params, lr, momentum, OP$SGD_UPDATE,
                     list(momentum = momentum, weight_decay = weight_decay, nesterov = isTRUE(nesterov)))
}

#' @rdname optim_sgd
#' @export
optim_lars <- function(params, lr = 0.001, momentum = 0.9, weight_decay = 1e-4, nesterov = FALSE, classic = TRUE,
                       tcoef = 0.001) {
  if (momentum < 0 || weight_decay < 0) pg_abort("invalid_argument", "LARS: momentum and weight_decay must be >= 0")
  momentum_optimizer(params, lr, momentum, OP$LARS_UPDATE,
                     list(momentum = momentum, weight_decay = weight_decay, nesterov = isTRUE(nesterov),
                          trust_coefficient = tcoef, classic_momentum = isTRUE(classic)))
}

#' @rdname optim_sgd
#' @export
optim_muon <- function(params, lr = 0.001, momentum = 0.95, weight_decay = 0.1, ns_steps = 5,
                       ns_coefficients = c(3.4445, -4.775, 2.0315), nesterov = TRUE) {
  if (momentum < 0 || weight_decay < 0) pg_abort("invalid_argument", "Muon: momentum and weight_decay must be >= 0")
  if (length(ns_steps) != 1L || ns_steps < 1 || ns_steps > 64 || ns_steps != trunc(ns_steps))
    pg_abort("invalid_argument", "Muon: ns_steps must be 1 to 64")
  if (length(ns_coefficients) < 1 || length(ns_coefficients) > 16)
    pg_abort("invalid_argument", "Muon takes 1 to 16 ns_coefficients")
  for (t in params) {
    if (length(t$node$shape) < 2)
      pg_abort("invalid_argument", sprintf("Muon orthogonalizes matrices: a parameter of shape (%s) needs another optimizer (e.g. AdamW for biases and norms)",
                                           paste(t$node$shape, collapse = ", ")))
  }
  coefficients <- new_scalar(ns_coefficients, function(v) pg_tensor(array(v, length(v)), dtype = "float64"))
  momentum_optimizer(params, lr, momentum, OP$MUON_STEP,
                     list(momentum = momentum, weight_decay = weight_decay, nesterov = isTRUE(nesterov),
                          n = as.integer(ns_steps), eps = 1e-7),
                     operands = function() list(scalar_tensor(coefficients)))
}

# SGD, LARS and Muon: param, grad, lr and the momentum buffer (with momentum) into `code` with `rule`.
momentum_optimizer <- function(params, lr, momentum, code, rule, operands = function() list()) {
  if (isTRUE(rule$nesterov) && !(momentum > 0)) pg_abort("invalid_argument", "nesterov momentum needs momentum > 0")
  o <- new_optimizer(params, lr, "sgd")
  o$momentum <- momentum
  o$rule <- rule
  o$b <- if (momentum != 0) lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype)) else list()
  o$update <- function() {
    lr_t <- scalar_tensor(o$lr_scalar)
    extra <- operands()  # sources between lr and the momentum buffer
    for (i in seq_along(o$params)) {
      t <- o$params[[i]]
      if (is.null(t$grad)) next
      state <- if (o$momentum != 0) list(o$b[[i]]) else list()
      apply_update(code, o$rule, c(list(t, t$grad, lr_t), extra, state),
                   c(list(list(t, "param")), lapply(state, function(b) list(b, "m"))))
    }
    o$b
  }
  o
}

#' @rdname optim_sgd
#' @export
optim_adam <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8, weight_decay = 0, decoupled = FALSE) {
  o <- new_optimizer(params, lr, "adam")
  o$rule <- list(beta1 = betas[1], beta2 = betas[2], eps = eps, weight_decay = weight_decay, decoupled = isTRUE(decoupled))
  o$m <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$v <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$count <- new_scalar(0)  # the step number, from which the daemon computes the bias corrections
  o$update <- function() {
    scalar_set(o$count, o$steps)
    scalars <- list(scalar_tensor(o$lr_scalar), scalar_tensor(o$count))
    for (i in seq_along(o$params)) {
      t <- o$params[[i]]
      if (is.null(t$grad)) next
      apply_update(OP$ADAM_STEP, o$rule, c(list(t, t$grad, o$m[[i]], o$v[[i]]), scalars),
                   list(list(t, "param"), list(o$m[[i]], "m"), list(o$v[[i]], "v")))
    }
    c(o$m, o$v)
  }
  o
}

#' @rdname optim_sgd
#' @export
optim_lamb <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-6, weight_decay = 0) {
  o <- new_optimizer(params, lr, "lamb")
  o$rule <- list(beta1 = betas[1], beta2 = betas[2], eps = eps, weight_decay = weight_decay)
  o$m <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$v <- lapply(o$params, function(t) pg_zeros(dim(t), dtype = t$node$dtype))
  o$count <- new_scalar(0)  # the step number, from which the daemon computes the bias corrections
  o$update <- function() {
    scalar_set(o$count, o$steps)
    scalars <- list(scalar_tensor(o$lr_scalar), scalar_tensor(o$count))
    for (i in seq_along(o$params)) {
      t <- o$params[[i]]
      if (is.null(t$grad)) next
      apply_update(OP$LAMB_STEP, o$rule, c(list(t, t$grad, o$m[[i]], o$v[[i]]), scalars),
                   list(list(t, "param"), list(o$m[[i]], "m"), list(o$v[[i]], "v")))
    }
    c(o$m, o$v)
  }
  o
}

# Per-step scalar values of step k (from 1), by scalar name: fed to compiled steps.
optimizer_scalars <- function(o, k) {
  out <- list(lr_scalar = o$lr_scalar$value)
  if (o$kind %in% c("adam", "lamb")) out$count <- k  # the daemon computes the bias corrections from it
  out
}
