# Normalizations the daemon computes as composites (RMS_NORM, GROUP_NORM, BATCHNORM_*, with their
# per-channel affine part), and scaled dot-product attention.

# t (a tensor, or data for one) as a tensor, which must have `shape`; `what` names it.
of_shape <- function(t, shape, what) {
  if (!is_tensor(t)) t <- pg_tensor(t)
  if (!identical(as.numeric(t$node$shape), as.numeric(shape))) {
    pg_abort("invalid_argument", sprintf("%s must have shape (%s), got shape (%s)", what, paste(shape, collapse = ", "),
                                         paste(t$node$shape, collapse = ", ")))
  }
  t
}

# The per-channel weight and bias sources of a normalization of x (N, C, ...), in x's dtype: none,
# list(weight) or list(weight, bias), a bias alone with a weight of ones (the daemon applies them).
affine_sources <- function(x, weight, bias, shape = x$node$shape[2]) {
  if (is.null(weight) && is.null(bias)) return(list())
  ts <- list(weight = if (is.null(weight)) pg_ones(shape) else weight, bias = bias)
  out <- list()
  for (name in names(ts)) {
    t <- ts[[name]]
    if (is.null(t)) next
    out[[length(out) + 1L]] <- pg_cast(of_shape(t, shape, name), x$node$dtype)
  }
  out
}

# LAYERNORM or RMS_NORM over the last arg$normalized_axes axes with the optional weight and bias of
# those axes' shape: computed in the float accumulator of the common dtype of x, weight and bias,
# and returned in that dtype (as x * weight + bias would promote).
trailing_norm <- function(op, x, arg, weight, bias) {
  dts <- vapply(Filter(is_tensor, list(weight, bias)), function(t) t$node$dtype, "")
  out <- least_upper_float(do.call(least_upper_dtype, as.list(c(x$node$dtype, dts))))
  xa <- pg_cast(x, sum_acc_dtype(out))
  s <- x$node$shape
  affine <- affine_sources(xa, weight, bias, s[seq(length(s) - arg$normalized_axes + 1, length(s))])
  pg_cast(make(op, xa$node$dtype, s, c(list(xa), affine), arg), out)
}

#' Normalizations
#'
#' `pg_rms_norm` divides by the root mean square over the last axes (`axis`, which must be the
#' last ones), then scales by `weight` (those axes' shape) when given. `pg_group_norm` normalizes x (N, C, ...) over each of `groups` groups of channels
#' and `pg_batch_norm` over the batch per channel: with the batch's statistics when `training`
#' (or without running statistics), else with `running_mean` and `running_var`. Both then scale by
#' `weight` and add `bias` per channel when given.
#' @param x a tensor.
#' @param axis 1-based axis or axes.
#' @param eps added to the mean square or the variance.
#' @param groups how many channel groups.
#' @param weight,bias `NULL` or tensors of length C (`pg_rms_norm`: of the normalized axes' shape).
#' @param running_mean,running_var `NULL` or tensors of length C.
#' @param training use the batch's statistics.
#' @return a tensor of x's shape.
#' @export
pg_rms_norm <- function(x, axis = -1, eps = 1e-6, weight = NULL) {
  nd <- length(x$node$shape)
  axes <- wire_axes(axis, nd)
  if (!length(axes) || !all(axes == seq(nd - length(axes), nd - 1))) {
    pg_abort("invalid_argument", "pg_rms_norm normalizes over the last axes")
  }
  trailing_norm(OP$RMS_NORM, x, list(normalized_axes = length(axes), eps = eps), weight, NULL)
}

#' @rdname pg_rms_norm
#' @export
pg_group_norm <- function(x, groups, weight = NULL, bias = NULL, eps = 1e-5) {
  s <- x$node$shape
  if (length(s) < 2) pg_abort("invalid_argument", "pg_group_norm needs (N, C, ...)")
  if (groups < 1 || groups != trunc(groups) || s[2] %% groups != 0) {
    pg_abort("invalid_argument", sprintf("pg_group_norm: %s channels do not split into %s groups", s[2], groups))
  }
  out <- least_upper_float(x$node$dtype)
  xa <- pg_cast(x, sum_acc_dtype(out))
  y <- make(OP$GROUP_NORM, xa$node$dtype, s, c(list(xa), affine_sources(xa, weight, bias)), list(groups = groups, eps = eps))
  pg_cast(y, out)
}

#' @rdname pg_rms_norm
#' @export
pg_batch_norm <- function(x, running_mean = NULL, running_var = NULL, weight = NULL, bias = NULL,
                          training = FALSE, eps = 1e-5) {
  if (length(x$node$shape) < 2) pg_abort("invalid_argument", "pg_batch_norm needs (N, C, ...)")
  out <- least_upper_float(x$node$dtype)
  xa <- pg_cast(x, sum_acc_dtype(out))
  dt <- xa$node$dtype
  affine <- affine_sources(xa, weight, bias)
  y <- if (training || is.null(running_mean) || is.null(running_var)) {
    make(OP$BATCHNORM_TRAIN, dt, xa$node$shape, c(list(xa), affine), list(eps = eps))
  } else {
    make(OP$BATCHNORM_EVAL, dt, xa$node$shape, c(list(xa, pg_cast(running_mean, dt), pg_cast(running_var, dt)), affine),
         list(eps = eps))
  }
  pg_cast(y, out)
}

#' tinygrad's batchnorm with given statistics
#'
#' `(x - mean) * invstd * weight + bias` with the statistics along `axis` (1-based; default the
#' second): `mean`, `weight` and `bias` are reshaped to those axes' sizes, `invstd` too when it has
#' as many axes, else it broadcasts to x. Computed in the float dtype all of them promote to.
#' @param x a tensor.
#' @param weight,bias `NULL` or tensors with the statistics' elements.
#' @param mean,invstd tensors: the mean and 1 / standard deviation.
#' @param axis 1-based axis or axes of the statistics.
#' @return a tensor of x's shape.
#' @export
pg_batchnorm <- function(x, weight, bias, mean, invstd, axis = 2) {
  s <- x$node$shape
  axes <- wire_axes(axis, length(s))
  stat <- s[axes + 1]
  ts <- lapply(list(mean = mean, invstd = invstd, weight = weight, bias = bias),
               function(t) if (is.null(t) || is_tensor(t)) t else pg_tensor(t))
  dts <- vapply(Filter(Negate(is.null), ts), function(t) t$node$dtype, "")
  out <- least_upper_float(do.call(least_upper_dtype, as.list(c(x$node$dtype, dts))))
  ts <- lapply(ts, function(t) if (is.null(t)) NULL else pg_cast(t, out))
  is <- ts$invstd
  along <- length(is$node$shape) == length(axes)
  if (!along && !identical(as.numeric(broadcast_shape(is$node$shape, s)), as.numeric(s))) {
    pg_abort("invalid_argument", sprintf("pg_batchnorm: invstd of shape (%s) does not broadcast to (%s)",
                                         paste(is$node$shape, collapse = ", "), paste(s, collapse = ", ")))
  }
  srcs <- list(pg_cast(x, out), pg_reshape(ts$mean, stat), if (along) pg_reshape(is, stat) else is)
  if (!is.null(ts$weight) || !is.null(ts$bias)) {
    srcs <- c(srcs, list(if (is.null(ts$weight)) pg_ones(stat, dtype = out) else pg_reshape(ts$weight, stat)))
  }
  if (!is.null(ts$bias)) srcs <- c(srcs, list(pg_reshape(ts$bias, stat)))
  make(OP$BATCHNORM_INVSTD, out, s, srcs, list(axes = axes))
}

#' Newton-Schulz orthogonalization
#'
#' tinygrad's `newton_schulz` (Muon's orthogonalization) over the last two axes: X = x / (its
#' Frobenius norm + eps), then `steps` times X = sum_i params\[i\] (X X')^i X, on the wide
#' orientation (a tall matrix is transposed there and back). Computed by the daemon.
#' @param x a tensor of at least 2 axes.
#' @param steps iterations, 1 to 64.
#' @param params the polynomial's coefficients, 1 to 16.
#' @param eps added to the norm.
#' @return a float tensor of x's shape.
#' @export
pg_newton_schulz <- function(x, steps, params, eps = 1e-7) {
  if (length(x$node$shape) < 2) pg_abort("invalid_argument", "pg_newton_schulz needs a matrix (or a batch of them)")
  if (length(steps) != 1L || steps < 1 || steps > 64 || steps != trunc(steps) || length(params) < 1 || length(params) > 16) {
    pg_abort("invalid_argument", "pg_newton_schulz takes 1 to 64 steps and 1 to 16 coefficients")
  }
  x <- float_of(x)
  device <- tensor_device(x)
  c <- pg_tensor(array(as.double(params), length(params)), dtype = "float64", device = if (device == "CPU") NULL else device)
  make(OP$NEWTON_SCHULZ, x$node$dtype, x$node$shape, list(x, c), list(n = steps, eps = eps))
}

#' Scaled dot-product attention
#'
#' softmax(q k' / sqrt(d) + mask) v over the last two axes, the others broadcasting: q (..., L,
#' d), k (..., S, d), v (..., S, dv). A bool `attn_mask` (L, S) keeps the positions that are
#' `TRUE`; a float one is added to the scores. `is_causal` masks keys after each query's position.
#' `dropout_p` zeroes attention weights with that probability (the rest scaled by 1 / (1 - p))
#' when `training`, drawn on the daemon as [pg_dropout]'s.
#' @param q,k,v tensors.
#' @param attn_mask `NULL` or a tensor.
#' @param is_causal mask future positions.
#' @param dropout_p the probability of dropping an attention weight.
#' @param training whether dropout applies.
#' @return a tensor (..., L, dv).
#' @export
pg_scaled_dot_product_attention <- function(q, k, v, attn_mask = NULL, is_causal = FALSE, dropout_p = 0,
                                            training = TRUE) {
  if (!(dropout_p >= 0 && dropout_p <= 1)) {
    pg_abort("invalid_argument", sprintf("attention: dropout_p must be in [0, 1], got %s", dropout_p))
  }
  qs <- q$node$shape
  ks <- k$node$shape
  vs <- v$node$shape
  if (length(qs) < 2 || length(ks) < 2 || length(vs) < 2) {
    pg_abort("invalid_argument", "attention needs q, k, v of rank >= 2")
  }
  lead <- function(s) s[seq_len(length(s) - 2)]
  batch <- broadcast_shape(broadcast_shape(lead(qs), lead(ks)), lead(vs))
  if (is.null(batch)) pg_abort("invalid_argument", "attention: the batch axes of q, k and v do not broadcast")
  dt <- least_upper_float(least_upper_dtype(q$node$dtype, k$node$dtype, v$node$dtype))
  acc <- sum_acc_dtype(dt)
  src <- list(pg_cast(q, acc), pg_cast(k, acc), pg_cast(v, acc))
  op <- OP$SCALED_DOT_PRODUCT_ATTENTION
  if (!is.null(attn_mask)) {
    if (!is_tensor(attn_mask)) attn_mask <- pg_tensor(attn_mask)
    src[[4]] <- if (attn_mask$node$dtype == "bool") attn_mask else pg_cast(attn_mask, acc)
    op <- OP$SCALED_DOT_PRODUCT_ATTENTION_MASKED
  }
  out_shape <- c(batch, qs[length(qs) - 1], vs[length(vs)])
  arg <- list(causal = is_causal)
  if (dropout_p > 0 && isTRUE(training)) arg <- c(arg, random_key(), list(p = dropout_p))  # drawn on the device
  pg_cast(make(op, acc, out_shape, src, arg), dt)
}
