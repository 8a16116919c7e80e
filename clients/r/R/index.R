# Indexing with R's 1-based positions, and the index ops: gather, one-hot, triangles. Positions
# read from integer tensors are 1-based too; the daemon's are 0-based, so one is subtracted here.

#' Index a tensor
#'
#' 1-based, as R: an index per axis, each missing (all of it), positions (an R vector of whole
#' numbers in 1..extent, in any order, repeats allowed), or an integer tensor of positions,
#' whose axes replace the indexed one (out-of-range positions give zeros there). Several indexes
#' select independently, axis by axis, as for R arrays. With `drop = TRUE`, axes of extent 1 are
#' dropped, as for R arrays.
#' @param x a tensor.
#' @param ... one index per axis.
#' @param drop drop extent-1 axes.
#' @return a tensor.
#' @export
`[.polygrad_tensor` <- function(x, ..., drop = TRUE) {
  shape <- x$node$shape
  nd <- length(shape)
  idx <- as.list(substitute(list(...)))[-1L]
  if (length(idx) != nd) pg_abort("invalid_argument", sprintf("a tensor of rank %d needs %d indices", nd, nd))
  env <- parent.frame()
  out <- x
  by_tensor <- list()
  for (i in seq_len(nd)) {
    if (identical(idx[[i]], quote(expr = ))) next
    v <- eval(idx[[i]], env)
    if (is_tensor(v)) {
      by_tensor[[as.character(i)]] <- v
      next
    }
    if (!is.numeric(v) || anyNA(v) || any(v != trunc(v)) || any(v < 1 | v > shape[i])) {
      pg_abort("invalid_argument", sprintf("index %d: positions must be whole numbers in 1..%s", i, shape[i]))
    }
    step <- unique(diff(v))
    if (length(v) <= 1L || (length(step) == 1L && step != 0)) {
      out <- slice_axis(out, i - 1, v)
    } else {  # any other selection: by a tensor of the positions
      by_tensor[[as.character(i)]] <- pg_tensor(array(as.integer(v), length(v)))
    }
  }
  # Last axis first: an index tensor of another rank shifts the axes after it.
  for (i in sort(as.integer(names(by_tensor)), decreasing = TRUE)) {
    out <- index_axis(out, i - 1, by_tensor[[as.character(i)]])
  }
  if (drop) out <- reshape_to(out, out$node$shape[out$node$shape != 1])
  out
}

# Positions v (1-based, an arithmetic progression) of 0-based axis a, as shrink, flip and pad.
slice_axis <- function(x, a, v) {
  size <- x$node$shape[a + 1]
  if (!length(v)) return(shrink_axis(x, a, 0, 0))
  step <- if (length(v) > 1L) v[2] - v[1] else 1
  start <- v[1] - 1
  if (step < 0) {
    x <- pg_flip(x, a + 1)
    start <- size - v[1]
    step <- -step
  }
  n <- length(v)
  if (step == 1) return(shrink_axis(x, a, start, start + n))
  end <- min(size, start + n * step)
  x <- shrink_axis(x, a, start, end)
  pads <- rep(list(c(0, 0)), length(x$node$shape))
  pads[[a + 1]] <- c(0, n * step - (end - start))
  x <- pg_pad(x, pads)
  s <- x$node$shape
  x <- reshape_to(x, c(s[seq_len(a)], n, step, s[-seq_len(a + 1)]))
  x <- shrink_axis(x, a + 1, 0, 1)
  s <- x$node$shape
  reshape_to(x, c(s[seq_len(a)], n, s[-seq_len(a + 2)]))
}

shrink_axis <- function(x, a, begin, end) {
  b <- numeric(length(x$node$shape))
  e <- x$node$shape
  b[a + 1] <- begin
  e[a + 1] <- end
  shrink(x, b, e)
}

# Axis a (0-based) indexed by the 1-based positions in idx: the daemon's GATHER of rows, so an inf
# or NaN elsewhere in x stays out of the result.
index_axis <- function(x, a, idx) {
  if (!is_int_dtype(idx$node$dtype)) {
    pg_abort("invalid_argument", sprintf("index tensors must hold integer positions, got %s%s", idx$node$dtype,
                                         if (idx$node$dtype == "bool") " (for a mask use pg_where)" else ""))
  }
  dt <- x$node$dtype
  if (!is_float_dtype(dt) && !is_int_dtype(dt)) x <- pg_cast(x, "int32")
  s <- x$node$shape
  n <- s[a + 1]
  rest <- setdiff(seq_along(s) - 1, a)
  ishape <- idx$node$shape
  before <- s[seq_len(a)]
  after <- s[-seq_len(a + 1)]
  if (n == 0) return(pg_zeros(c(before, ishape, after), dtype = dt))
  i <- pg_cast(idx, "int32") - 1L
  flat <- pg_where((i >= 0L) & (i < n), i, -1L)
  rows <- pg_reshape(pg_permute(x, c(a, rest) + 1), c(n, -1))
  count <- prod(ishape)
  cols <- rows$node$shape[2]
  picked <- make(OP$GATHER, rows$node$dtype, c(count, cols),
                 list(rows, pg_expand(pg_reshape(flat, c(count, 1)), c(count, cols))), list(axes = 0))
  out <- reshape_to(picked, c(ishape, s[rest + 1]))
  nb <- length(ishape)
  order <- c(nb + seq_len(a), seq_len(nb), nb + a + seq_len(length(after)))
  pg_cast(pg_permute(out, order), dt)
}

one_hot <- function(x, n) make(OP$ONE_HOT, x$node$dtype, c(x$node$shape, n), list(x), list(n = n))

#' One-hot encoding
#'
#' A new last axis of extent `n` with 1 at each element's class and 0 elsewhere, in x's dtype.
#' Classes are 1-based; values outside 1..n give all zeros.
#' @param x an integer tensor of classes.
#' @param n the number of classes.
#' @return a tensor.
#' @export
pg_one_hot <- function(x, n) {
  if (!is_int_dtype(x$node$dtype)) {
    pg_abort("invalid_argument", sprintf("pg_one_hot needs an integer tensor, got %s", x$node$dtype))
  }
  if (length(n) != 1L || n != trunc(n) || n < 1) pg_abort("invalid_argument", "pg_one_hot needs n >= 1 classes")
  one_hot(x - 1L, n)
}

#' Gather along an axis
#'
#' `out[i, j, ...]` is x at position `index[i, j, ...]` along `axis` and at i, j, ... elsewhere
#' (torch's `gather`); positions are 1-based. index has x's rank and extents no larger than x's.
#' @param x a tensor.
#' @param axis a 1-based axis.
#' @param index an integer tensor of positions.
#' @return a tensor of index's shape.
#' @export
pg_gather <- function(x, axis, index) {
  if (!is_tensor(index)) index <- pg_tensor(index)
  if (!is_int_dtype(index$node$dtype)) {
    pg_abort("invalid_argument", sprintf("pg_gather needs an integer index, got %s", index$node$dtype))
  }
  s <- x$node$shape
  is <- index$node$shape
  if (!length(s)) pg_abort("invalid_argument", "pg_gather needs a tensor of at least 1 axis")
  ax <- wire_axis(axis, length(s)) + 1
  if (length(is) != length(s)) {
    pg_abort("invalid_argument", sprintf("pg_gather: index has %d axes, x %d", length(is), length(s)))
  }
  other <- seq_along(s) != ax
  if (any(is[other] > s[other])) {
    pg_abort("invalid_argument", sprintf("pg_gather: index (%s) exceeds x (%s) off axis %d", paste(is, collapse = ", "),
                                         paste(s, collapse = ", "), ax))
  }
  if (any(is[other] != s[other])) x <- shrink(x, numeric(length(s)), ifelse(other, is, s))
  make(OP$GATHER, x$node$dtype, is, list(x, index - 1L), list(axes = ax - 1))
}

#' Lower and upper triangles
#'
#' `pg_tril` keeps the elements on and below diagonal `diagonal` of the last two axes (0: the
#' main one, 1: the one above it, -1: below), `pg_triu` those on and above; the rest become 0.
#' @param x a tensor of at least 2 axes.
#' @param diagonal which diagonal.
#' @return a tensor of x's shape.
#' @export
pg_tril <- function(x, diagonal = 0) triangle(OP$TRIL, x, diagonal)

#' @rdname pg_tril
#' @export
pg_triu <- function(x, diagonal = 0) triangle(OP$TRIU, x, diagonal)

triangle <- function(op, x, diagonal) {
  if (length(x$node$shape) < 2) pg_abort("invalid_argument", "tril/triu need at least 2 axes")
  if (length(diagonal) != 1L || diagonal != trunc(diagonal)) pg_abort("invalid_argument", "diagonal must be a whole number")
  make(op, x$node$dtype, x$node$shape, list(x), list(diagonal = diagonal))
}
