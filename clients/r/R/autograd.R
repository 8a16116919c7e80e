# Autograd: gradients are GRADIENT nodes (more lazy graph) the daemon expands, as in Python.

#' Gradients
#'
#' `requires_grad(x) <- TRUE` marks a float tensor as a gradient target; `backward(loss)` adds
#' d(loss)/d(x) to `grad(x)` for every such tensor the loss depends on (lazily: nothing runs until
#' a gradient, or an optimizer step, is realized); `pg_detach(x)` is x with no gradient flowing back.
#' @param x a tensor.
#' @param value `TRUE` or `FALSE`.
#' @param loss a one-element tensor.
#' @return `requires_grad`: the flag; `grad`: a tensor or `NULL`; `backward`: loss, invisibly.
#' @export
requires_grad <- function(x) isTRUE(x$rg)

#' @rdname requires_grad
#' @export
`requires_grad<-` <- function(x, value) {
  if (value && !is_float_dtype(x$node$dtype)) {
    pg_abort("invalid_argument", sprintf("only float tensors can require gradients, this one is %s", x$node$dtype))
  }
  x$rg <- value
  leaves <- Filter(function(w) !is.null(.Call(pg_c_weakref_get, w)), .pg$leaves)
  leaves <- Filter(function(w) !identical(.Call(pg_c_weakref_get, w), x), leaves)
  if (value) {
    n <- x$node
    if (n$op == OP$CONST && !n$sent) {
      # Equal constants are one node on the daemon: a leaf gets a buffer of its own.
      x$node <- new_node(OP$BUFFER, n$dtype, n$shape, list(),
                         .Call(pg_c_encode, rep(as.double(n$arg), prod(n$shape)), .dtype_wire[[n$dtype]]))
    }
    leaves[[length(leaves) + 1L]] <- .Call(pg_c_weakref, x)
  }
  .pg$leaves <- leaves
  x
}

#' @rdname requires_grad
#' @export
grad <- function(x) x$grad

#' @rdname requires_grad
#' @export
pg_detach <- function(x) {
  if (!is_float_dtype(x$node$dtype)) return(wrap_node(x$node))
  zero <- new_node(OP$CONST, x$node$dtype, x$node$shape, list(), 0)
  wrap_node(new_node(OP$ADD, x$node$dtype, x$node$shape, list(x$node, zero), stop = TRUE))
}

# Remembers t, a tensor made from data or a random draw with requires_grad unset, when it is float.
note_created <- function(t) {
  if (!is_float_dtype(t$node$dtype)) return(invisible(t))
  .pg$created_n <- .pg$created_n + 1
  assign(format(.pg$created_n, scientific = FALSE), .Call(pg_c_weakref, t), envir = .pg$created)
  if (length(.pg$created) >= .pg$created_prune_at) {
    for (key in ls(.pg$created, sorted = FALSE)) {
      if (is.null(.Call(pg_c_weakref_get, get(key, envir = .pg$created)))) rm(list = key, envir = .pg$created)
    }
    .pg$created_prune_at <- max(1024, 2 * length(.pg$created))
  }
  invisible(t)
}

# Tensors with requires_grad = TRUE the loss depends on (not through stop nodes), in node order;
# where there are none, tinygrad's rule: the live float tensors made from data or random draws
# whose requires_grad is unset (NULL, not FALSE). Constants are left out (the daemon merges them).
grad_targets <- function(loss) {
  ids <- vapply(toposort(loss$node, function(n) n$stop), function(n) n$id, numeric(1))
  found <- Filter(function(t) !is.null(t) && t$node$id %in% ids,
                  lapply(.pg$leaves, function(w) .Call(pg_c_weakref_get, w)))
  if (!length(found)) {
    found <- Filter(function(t) !is.null(t) && is.null(t$rg) && t$node$id %in% ids && t$node$op != OP$CONST &&
                      is_float_dtype(t$node$dtype),
                    lapply(as.list(.pg$created), function(w) .Call(pg_c_weakref_get, w)))
  }
  found[order(vapply(found, function(t) t$node$id, numeric(1)))]
}

#' @rdname requires_grad
#' @export
backward <- function(loss) {
  if (!is_float_dtype(loss$node$dtype)) pg_abort("invalid_argument", "cannot differentiate a non-float tensor")
  if (prod(loss$node$shape) != 1) pg_abort("invalid_argument", "backward() needs a one-element loss")
  targets <- grad_targets(loss)
  if (!length(targets)) {
    pg_abort("invalid_argument", paste("backward(): the loss depends on no tensor with requires_grad = TRUE, nor on a float",
                                       "tensor made from data or a random draw with requires_grad left unset"))
  }
  track <- .pg$no_grad == 0L && .pg$untracked == 0L
  done <- list()
  for (t in targets) {
    key <- as.character(t$node$id)
    g <- done[[key]]
    if (is.null(g)) {
      g <- wrap_node(new_node(OP$GRADIENT, t$node$dtype, t$node$shape, list(loss$node, t$node), rg = track),
                     rg = if (track) TRUE else NULL)
      done[[key]] <- g
    }
    t$grad <- if (is.null(t$grad)) g else t$grad + g
  }
  .pg$pending_losses <- c(Filter(function(p) !is.null(.Call(pg_c_weakref_get, p$ref)), .pg$pending_losses),
                          list(list(ref = .Call(pg_c_weakref, loss), gen = .pg$gen)))
  invisible(loss)
}

# A loss from an earlier session's backward() is not taken: its graph reads that session's nodes,
# which went with it (it stayed only while the collector had not yet taken it).
take_pending_losses <- function() {
  current <- Filter(function(p) identical(p$gen, .pg$gen), .pg$pending_losses)
  out <- Filter(Negate(is.null), lapply(current, function(p) .Call(pg_c_weakref_get, p$ref)))
  .pg$pending_losses <- list()
  out
}

untracked <- function(expr) {
  .pg$untracked <- .pg$untracked + 1L
  on.exit(.pg$untracked <- .pg$untracked - 1L)
  expr
}
