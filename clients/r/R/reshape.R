# Shape changes built from RESHAPE, PERMUTE, EXPAND and SHRINK: squeeze and friends, transpose,
# repeat, and splitting a tensor into pieces. Axes are 1-based; -1 is the last.

#' Reshaping helpers
#'
#' `pg_squeeze` drops `axis` if its extent is 1 (`NULL`: every extent-1 axis);
#' `pg_unsqueeze` inserts an axis of extent 1 so that it becomes axis `axis` of the result;
#' `pg_flatten` merges axes `start` to `end` into one; `pg_unflatten` splits axis `axis` into
#' `sizes`; `pg_transpose` swaps two axes; `pg_repeat` tiles x `repeats[i]` times along axis i
#' (leading repeats add axes, as torch's `repeat`).
#' @param x a tensor.
#' @param axis a 1-based axis.
#' @param start,end the first and last axis to merge.
#' @param sizes the extents axis `axis` splits into.
#' @param dim0,dim1 the axes to swap.
#' @param repeats how often to repeat along each axis.
#' @return a tensor.
#' @export
pg_squeeze <- function(x, axis = NULL) {
  s <- x$node$shape
  if (is.null(axis)) return(reshape_to(x, s[s != 1]))
  if (!length(s)) return(x)
  d <- wire_axis(axis, length(s)) + 1
  if (s[d] != 1) return(x)
  reshape_to(x, s[-d])
}

#' @rdname pg_squeeze
#' @export
pg_unsqueeze <- function(x, axis) {
  s <- x$node$shape
  d <- wire_axis(axis, length(s) + 1)
  reshape_to(x, c(s[seq_len(d)], 1, s[seq_len(length(s) - d) + d]))
}

#' @rdname pg_squeeze
#' @export
pg_flatten <- function(x, start = 1, end = -1) {
  s <- x$node$shape
  if (!length(s)) return(reshape_to(x, 1))
  a <- wire_axis(start, length(s)) + 1
  e <- wire_axis(end, length(s)) + 1
  if (e < a) pg_abort("invalid_argument", sprintf("flatten: end axis %d comes before start axis %d", e, a))
  reshape_to(x, c(s[seq_len(a - 1)], prod(s[a:e]), s[seq_len(length(s) - e) + e]))
}

#' @rdname pg_squeeze
#' @export
pg_unflatten <- function(x, axis, sizes) {
  s <- x$node$shape
  d <- wire_axis(axis, length(s)) + 1
  pg_reshape(x, c(s[seq_len(d - 1)], sizes, s[seq_len(length(s) - d) + d]))
}

#' @rdname pg_squeeze
#' @export
pg_transpose <- function(x, dim0 = -2, dim1 = -1) {
  nd <- length(x$node$shape)
  order <- seq_len(nd)
  a <- wire_axis(dim0, nd) + 1
  b <- wire_axis(dim1, nd) + 1
  order[c(a, b)] <- order[c(b, a)]
  pg_permute(x, order)
}

#' @rdname pg_squeeze
#' @export
pg_repeat <- function(x, repeats) {
  reps <- as.numeric(repeats)
  s <- x$node$shape
  if (length(reps) < length(s)) {
    pg_abort("invalid_argument", sprintf("repeat needs at least %d repeat counts, got %d", length(s), length(reps)))
  }
  base <- c(rep(1, length(reps) - length(s)), s)
  y <- reshape_to(x, as.vector(rbind(1, base)))
  y <- pg_expand(y, as.vector(rbind(reps, base)))
  reshape_to(y, base * reps)
}

#' Split a tensor into pieces
#'
#' `pg_split` cuts x along `axis` into pieces of the extents `sizes` (one number: pieces of that
#' extent, the last one smaller); `pg_chunk` into `chunks` pieces of equal extent (the last one
#' smaller). `pg_shrink` keeps a range of each axis.
#' @param x a tensor.
#' @param sizes extents of the pieces, or one extent.
#' @param chunks how many pieces.
#' @param axis a 1-based axis.
#' @param ranges one `c(first, last)` pair of 1-based positions per axis (`NULL`: all of it);
#'   `last = first - 1` keeps nothing.
#' @return `pg_split`, `pg_chunk`: a list of tensors; `pg_shrink`: a tensor.
#' @export
pg_split <- function(x, sizes, axis = 1) {
  s <- x$node$shape
  d <- wire_axis(axis, length(s)) + 1
  n <- s[d]
  if (length(sizes) == 1L) {
    if (sizes <= 0) pg_abort("invalid_argument", "split size must be positive")
    sizes <- if (n > 0) pmin(sizes, n - seq(0, n - 1, by = sizes)) else 0
  }
  if (sum(sizes) != n) {
    pg_abort("invalid_argument", sprintf("split sizes (%s) do not add up to %s", paste(sizes, collapse = ", "), n))
  }
  ends <- cumsum(sizes)
  lapply(seq_along(sizes), function(i) {
    begin <- numeric(length(s))
    end <- s
    begin[d] <- ends[i] - sizes[i]
    end[d] <- ends[i]
    shrink(x, begin, end)
  })
}

#' @rdname pg_split
#' @export
pg_chunk <- function(x, chunks, axis = 1) {
  n <- x$node$shape[wire_axis(axis, length(x$node$shape)) + 1]
  pg_split(x, max(1, ceiling(n / chunks)), axis)
}

#' @rdname pg_split
#' @export
pg_shrink <- function(x, ranges) {
  s <- x$node$shape
  if (length(ranges) != length(s)) pg_abort("invalid_argument", sprintf("shrink needs %d ranges", length(s)))
  begin <- numeric(length(s))
  end <- s
  for (i in seq_along(s)) {
    r <- ranges[[i]]
    if (is.null(r)) next
    if (length(r) != 2L || r[1] < 1 || r[2] < r[1] - 1 || r[2] > s[i]) {
      pg_abort("invalid_argument", sprintf("shrink: range c(%s) does not fit an axis of extent %s",
                                           paste(r, collapse = ", "), s[i]))
    }
    begin[i] <- r[1] - 1
    end[i] <- r[2]
  }
  shrink(x, begin, end)
}
