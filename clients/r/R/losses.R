# The losses: each one op of the daemon, whose formula is core's (core/frontend/losses.h); here
# only their arguments and result shapes. Class indices are 1-based, as R's.

# SHAPE_LOSS: one loss op of the predictions' float dtype, the per-element losses' shape when
# reduction is "none", else 0-d.
loss_op <- function(code, srcs, per_element, reduction, fields = list()) {
  if (!(length(reduction) == 1L && reduction %in% c("mean", "sum", "none"))) {
    pg_abort("invalid_argument", sprintf("reduction must be 'mean', 'sum' or 'none', got '%s'", format(reduction)))
  }
  make(code, least_upper_float(srcs[[1]]$node$dtype), if (reduction == "none") per_element else numeric(), srcs,
       c(list(mode = reduction), fields))
}

check_smoothing <- function(s) {
  if (!(length(s) == 1L && is.numeric(s) && !is.na(s) && s >= 0 && s <= 1)) {
    pg_abort("invalid_argument", "label_smoothing must be in [0, 1]")
  }
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
  check_smoothing(label_smoothing)
  s <- x$node$shape
  nd <- length(s)
  ax <- if (nd >= 2) 1 else nd - 1  # 0-based class axis
  if (!is_tensor(y)) y <- pg_tensor(if (is.double(y) && length(dim(y)) < nd && !is.null(y)) as.integer(y) else y)
  per <- s[-(ax + 1)]
  ys <- y$node$shape
  if (identical(as.numeric(ys), as.numeric(per)) && nd >= 1) {
    y <- y - 1L  # 1-based class indices
  } else if (!identical(as.numeric(ys), as.numeric(s))) {
    pg_abort("invalid_argument", sprintf("pg_cross_entropy: targets of shape (%s) fit neither class indices (%s) nor class probabilities (%s)",
                                         paste(ys, collapse = ", "), paste(per, collapse = ", "), paste(s, collapse = ", ")))
  }
  loss_op(OP$CROSS_ENTROPY, list(x, y), per, reduction, list(axes = ax, label_smoothing = label_smoothing))
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
  check_smoothing(label_smoothing)
  if (!is_tensor(y)) y <- pg_tensor(as.integer(y))
  s <- x$node$shape
  if (!length(s) || !identical(as.numeric(y$node$shape), as.numeric(s[-length(s)]))) {
    pg_abort("invalid_argument", sprintf("pg_sparse_categorical_cross_entropy: targets of shape (%s) do not fit logits (%s)",
                                         paste(y$node$shape, collapse = ", "), paste(s, collapse = ", ")))
  }
  # -1 (0-based) is the daemon's "none ignored".
  ignore <- if (is.null(ignore_index)) -1 else ignore_index - 1
  loss_op(OP$SPARSE_CATEGORICAL_CROSSENTROPY, list(x, y - 1L), y$node$shape, reduction,
          list(ignore_index = ignore, label_smoothing = label_smoothing))
}

#' Binary cross entropy
#'
#' Of probabilities `x` (`pg_binary_cross_entropy`) or logits `x`
#' (`pg_binary_cross_entropy_logits`, computed stably) with targets `y` in \[0, 1\] of x's shape.
#' @param x probabilities or logits.
#' @param y targets.
#' @param reduction "mean", "sum" or "none".
#' @param pos_weight the weight of the positive term (logits): a number or tensor broadcasting with x, or `NULL` for 1.
#' @return a tensor.
#' @export
pg_binary_cross_entropy <- function(x, y, reduction = "mean") {
  srcs <- lapply(broadcast_sources(x, list(y), OP$BINARY_CROSSENTROPY), float_of)
  loss_op(OP$BINARY_CROSSENTROPY, srcs, srcs[[1]]$node$shape, reduction)
}

#' @rdname pg_binary_cross_entropy
#' @export
pg_binary_cross_entropy_logits <- function(x, y, reduction = "mean", pos_weight = NULL) {
  operands <- if (is.null(pos_weight)) list(y) else list(y, pos_weight)
  srcs <- lapply(broadcast_sources(x, operands, OP$BINARY_CROSSENTROPY_LOGITS), float_of)
  loss_op(OP$BINARY_CROSSENTROPY_LOGITS, srcs, srcs[[1]]$node$shape, reduction)
}
