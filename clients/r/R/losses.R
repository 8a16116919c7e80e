# Losses, composed from log-softmax, one-hot and reductions as the Python and JavaScript clients
# compose them. Class indices are 1-based, as R's.

reduce_loss <- function(loss, reduction) {
  switch(reduction, mean = pg_mean(loss), sum = pg_sum(loss), none = loss,
         pg_abort("invalid_argument", sprintf("reduction must be 'mean', 'sum' or 'none', got '%s'", reduction)))
}

#' Cross entropy
#'
#' Of logits `x` with class indices (1-based, an integer tensor or R vector with one rank less
#' than x) or class probabilities `y` (x's shape); the class axis is 2 (the rows are samples), or
#' the only one of a 1-D x. With `label_smoothing` s, the targets become (1 - s) y + s / classes.
#' @param x logits.
#' @param y targets.
#' @param reduction "mean", "sum" or "none".
#' @param label_smoothing in \[0, 1\].
#' @return a tensor.
#' @export
pg_cross_entropy <- function(x, y, reduction = "mean", label_smoothing = 0) {
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) pg_abort("invalid_argument", "label_smoothing must be in [0, 1]")
  nd <- length(x$node$shape)
  ax <- if (nd >= 2) 1 else nd - 1  # 0-based class axis
  ncls <- x$node$shape[ax + 1]
  if (!is_tensor(y)) y <- pg_tensor(if (is.double(y) && length(dim(y)) < nd && !is.null(y)) as.integer(y) else y)
  if (length(y$node$shape) < nd) {  # 1-based class indices
    y <- one_hot(y - 1L, ncls)
    if (ax != nd - 1) {
      yn <- length(y$node$shape)
      y <- pg_permute(y, c(seq_len(ax), yn, seq(ax + 1, yn - 1)))
    }
  }
  y <- pg_cast(y, least_upper_float(x$node$dtype))
  if (label_smoothing != 0) y <- (1 - label_smoothing) * y + label_smoothing / ncls
  reduce_loss(-pg_sum(pg_log_softmax(x, ax + 1) * y, ax + 1), reduction)
}

#' Sparse categorical cross entropy
#'
#' Cross entropy of logits `x` (classes along the last axis) with 1-based class indices `y` (one
#' axis less); samples whose class is `ignore_index` count for nothing, and `"mean"` averages over
#' the others. With `label_smoothing` s, each sample's loss mixes in s times the mean of its
#' negative log-probabilities.
#' @param x logits.
#' @param y an integer tensor of 1-based classes.
#' @param ignore_index `NULL` or a class to leave out.
#' @param label_smoothing in \[0, 1\].
#' @param reduction "mean", "sum" or "none".
#' @return a tensor.
#' @export
pg_sparse_categorical_cross_entropy <- function(x, y, ignore_index = NULL, label_smoothing = 0, reduction = "mean") {
  if (!is_tensor(y)) y <- pg_tensor(as.integer(y))
  log_probs <- pg_log_softmax(x, -1)
  dt <- log_probs$node$dtype
  mask <- if (!is.null(ignore_index)) y != ignore_index else pg_full(dim(y), value = TRUE, dtype = "bool")
  nd <- length(x$node$shape)
  target <- pg_cast(one_hot(y - 1L, x$node$shape[nd]), dt) * pg_cast(pg_unsqueeze(mask, -1), dt)
  maskf <- pg_cast(mask, dt)
  smoothing <- label_smoothing * (pg_mean(log_probs, -1) * maskf)
  unreduced <- (1 - label_smoothing) * pg_sum(log_probs * target, -1) + smoothing
  switch(reduction,
         mean = -(pg_sum(unreduced) / pg_sum(maskf)),
         sum = -pg_sum(unreduced),
         none = -unreduced,
         pg_abort("invalid_argument", sprintf("reduction must be 'mean', 'sum' or 'none', got '%s'", reduction)))
}

#' Binary cross entropy
#'
#' Of probabilities `x` (`pg_binary_cross_entropy`) or logits `x`
#' (`pg_binary_cross_entropy_logits`, computed stably) with targets `y` in \[0, 1\] of x's shape.
#' @param x probabilities or logits.
#' @param y targets.
#' @param reduction "mean", "sum" or "none".
#' @param pos_weight the weight of the positive term (logits).
#' @return a tensor.
#' @export
pg_binary_cross_entropy <- function(x, y, reduction = "mean") {
  reduce_loss((-y) * log(x) - (1 - y) * log(1 - x), reduction)
}

#' @rdname pg_binary_cross_entropy
#' @export
pg_binary_cross_entropy_logits <- function(x, y, reduction = "mean", pos_weight = 1) {
  a <- (pos_weight * y) * pg_logsigmoid(x)
  reduce_loss(-(a + (1 - y) * pg_logsigmoid(-x)), reduction)
}
