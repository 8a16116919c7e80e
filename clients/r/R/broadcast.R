# Broadcasting and operand typing, as the Python client does it (tinygrad's rules): the wire
# takes elementwise sources of one shape and dtype, so the client reshapes, expands and casts.

broadcast_shape <- function(a, b) {
  if (identical(a, b)) return(a)
  nd <- max(length(a), length(b))
  pa <- c(rep(1, nd - length(a)), a)
  pb <- c(rep(1, nd - length(b)), b)
  out <- numeric(nd)
  for (i in seq_len(nd)) {
    sizes <- setdiff(unique(c(pa[i], pb[i])), 1)
    if (length(sizes) > 1) return(NULL)
    out[i] <- if (length(sizes)) sizes else 1
  }
  out
}

broadcast_to <- function(x, shape) {
  s <- x$node$shape
  if (identical(s, shape)) return(x)
  if (length(s) < length(shape)) {
    x <- reshape_to(x, c(rep(1, length(shape) - length(s)), s))
    if (identical(x$node$shape, shape)) return(x)
  }
  make(OP$EXPAND, x$node$dtype, shape, list(x), shape)
}

# An R operand as a tensor: a number takes the tensor's dtype when that is a float, or when both
# are whole numbers and the tensor is an integer (so `x + 1` stays int32 for an int32 x).
operand <- function(x, y) {
  if (is_tensor(y)) return(y)
  if ((is.numeric(y) || is.logical(y)) && length(y) == 1L && is.null(dim(y))) {
    xdt <- x$node$dtype
    whole <- is.numeric(y) && is.finite(y) && y == trunc(y)
    ydt <- if (is_float_dtype(xdt) || (is_int_dtype(xdt) && whole && !is.logical(y))) xdt
           else if (is.logical(y)) "bool" else if (is.integer(y) || whole) "int32" else "float32"
    return(const_tensor(y, ydt, x$node$shape))
  }
  pg_tensor(y)
}

# (x, y) broadcast to one shape and (with match_dtype) promoted to one dtype. A shape mismatch
# is sent to the daemon as the bare op, so the condition carries the daemon's own message.
broadcasted <- function(x, y, reverse = FALSE, match_dtype = TRUE, op = OP$ADD) {
  y <- operand(x, y)
  if (match_dtype && x$node$dtype != y$node$dtype) {
    out <- least_upper_dtype(x$node$dtype, y$node$dtype)
    x <- pg_cast(x, out)
    y <- pg_cast(y, out)
  }
  if (reverse) {
    tmp <- x
    x <- y
    y <- tmp
  }
  shape <- broadcast_shape(x$node$shape, y$node$shape)
  if (is.null(shape)) daemon_reject(op, x$node$dtype, list(x, y), sprintf(
    "shapes (%s) and (%s) cannot be broadcast together", paste(x$node$shape, collapse = ", "),
    paste(y$node$shape, collapse = ", ")))
  list(broadcast_to(x, shape), broadcast_to(y, shape))
}

# Sends a node the client knows is malformed, so the error is the daemon's (its message names the
# node and op). `fallback` is raised if the daemon accepts it after all.
daemon_reject <- function(op, dtype, src, fallback, arg = NULL) {
  bad <- make(op, dtype, src[[1]]$node$shape, src, arg)
  graph_realize(list(bad$node), FALSE)
  pg_synchronize()  # the daemon's answer is the error, now
  pg_abort("invalid_argument", fallback)
}

binop <- function(op, x, y, reverse = FALSE) {
  ab <- broadcasted(x, y, reverse, op = op)
  make(op, ab[[1]]$node$dtype, ab[[1]]$node$shape, ab)
}

float_of <- function(x) pg_cast(x, least_upper_float(x$node$dtype))

unop <- function(op, x) make(op, x$node$dtype, x$node$shape, list(x))
