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
#' smaller). `pg_shrink` keeps a range of each axis; `pg_shrink(x, ranges) <- value` writes into
#' that range (lazily, x stays the same object, as `[<-`). A range may hold symbolic sizes (a list
#' pair, `list(1, pos + 1)`: see [pg_variable]).
#' @param x a tensor.
#' @param sizes extents of the pieces, or one extent.
#' @param chunks how many pieces.
#' @param axis a 1-based axis.
#' @param ranges one `c(first, last)` pair of 1-based positions per axis (`NULL`: all of it);
#'   `last = first - 1` keeps nothing. A pair with a symbolic size is a list, `list(1, pos + 1)`.
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
  begin <- as.list(numeric(length(s)))
  end <- as.list(s)
  for (i in seq_along(s)) {
    r <- ranges[[i]]
    if (is.null(r)) next
    # A pair with a symbolic bound is a list (c() would drop it); see pg_variable.
    if (length(r) != 2L || !all(vapply(r, function(v) is_sym(v) || (is.numeric(v) && length(v) == 1L), TRUE))) {
      pg_abort("invalid_argument", sprintf("shrink: range %d is not a pair of positions", i))
    }
    first <- sym_int(r[[1]])
    last <- sym_int(r[[2]])
    if (first < 1 || last < first - 1 || last > s[i]) {
      pg_abort("invalid_argument", sprintf("shrink: range c(%s, %s) does not fit an axis of extent %s",
                                           format(first), format(last), s[i]))
    }
    begin[[i]] <- r[[1]] - 1
    end[[i]] <- r[[2]]
  }
  shrink_sym(x, begin, end)
}

#' @rdname pg_split
#' @param value the tensor, number or R array written into the view (`pg_shrink<-`).
#' @export
`pg_shrink<-` <- function(x, ranges, value) {
  # Through the view: the daemon's WRITE_VIEW follows the view's movement ops back to x's node.
  write_through(x, pg_shrink(x, ranges), value)
}

#' Rolling, diagonals, grids, repeats and masks
#'
#' `pg_roll` shifts x along `axis` (several axes: one shift each), wrapping around (`axis = NULL`:
#' the flattened tensor), as torch.roll. `pg_diagonal` takes the elements (i, i + offset) of the
#' planes of axes `dim1` and `dim2` as a new last axis (torch.diagonal); `pg_diag` puts a vector on
#' diagonal `diagonal` of a square matrix, or takes that diagonal of a matrix. `pg_meshgrid` gives
#' one grid per 1-D input, shaped by all their lengths (`indexing = "xy"` swaps the first two
#' axes, as torch and numpy). `pg_repeat_interleave` repeats each element `repeats` times in a
#' row along `axis` (`NULL`: of the flattened tensor). `pg_masked_fill` puts `value` where the
#' bool `mask` (broadcasting to x's shape) is TRUE. All are movement ops and `pg_where`, so
#' gradients flow through them.
#' @param x a tensor.
#' @param shifts how far to shift along each of `axis` (negative: backwards).
#' @param axis 1-based axis (`pg_roll`: axes); `NULL` for the flattened tensor.
#' @param offset,diagonal which diagonal: 0 the main one, positive above it, negative below.
#' @param dim1,dim2 the 1-based axes whose planes hold the diagonal.
#' @param ... 1-D tensors (or one list of them).
#' @param indexing `"ij"` or `"xy"`.
#' @param repeats how many times each element repeats (a whole number).
#' @param mask a bool tensor (or R logical array).
#' @param value the fill value.
#' @return a tensor (`pg_meshgrid`: a list of tensors).
#' @export
pg_roll <- function(x, shifts, axis = NULL) {
  if (is.null(axis)) return(reshape_to(pg_roll(pg_flatten(x), shifts, 1), x$node$shape))
  if (length(shifts) != length(axis)) {
    pg_abort("invalid_argument", sprintf("roll: %d shifts for %d axes", length(shifts), length(axis)))
  }
  for (i in seq_along(axis)) {
    s <- x$node$shape
    d <- wire_axis(axis[i], length(s)) + 1
    n <- s[d]
    k <- if (n > 0) shifts[i] %% n else 0
    if (k) {
      parts <- pg_split(x, c(n - k, k), d)
      x <- pg_cat(parts[[2]], parts[[1]], axis = d)
    }
  }
  x
}

#' @rdname pg_roll
#' @export
pg_diagonal <- function(x, offset = 0, dim1 = 1, dim2 = 2) {
  nd <- length(x$node$shape)
  d1 <- wire_axis(dim1, nd) + 1
  d2 <- wire_axis(dim2, nd) + 1
  if (d1 == d2) pg_abort("invalid_argument", sprintf("diagonal: dim1 and dim2 are both axis %d", d1))
  y <- pg_permute(x, c(setdiff(seq_len(nd), c(d1, d2)), d1, d2))
  s <- y$node$shape
  nb <- nd - 2
  batch <- s[seq_len(nb)]
  lo_r <- min(s[nd - 1], max(0, -offset))
  lo_c <- min(s[nd], max(0, offset))
  n <- max(0, min(s[nd - 1] - lo_r, s[nd] - lo_c))
  y <- shrink(y, c(rep(0, nb), lo_r, lo_c), c(batch, lo_r + n, lo_c + n))
  # The n x n block read with a row stride of n + 1 walks its diagonal.
  y <- pg_pad(reshape_to(y, c(batch, n * n)), c(rep(list(c(0, 0)), nb), list(c(0, n))))
  y <- reshape_to(y, c(batch, n, n + 1))
  reshape_to(shrink(y, rep(0, nd), c(batch, n, 1)), c(batch, n))
}

#' @rdname pg_roll
#' @export
pg_diag <- function(x, diagonal = 0) {
  nd <- length(x$node$shape)
  if (nd == 2L) return(pg_diagonal(x, diagonal))
  if (nd != 1L) pg_abort("invalid_argument", sprintf("diag takes a 1-D or 2-D tensor, got %d-D", nd))
  n <- x$node$shape[1]
  k <- abs(diagonal)
  # pg_diagonal's walk backwards: each value followed by n zeros, read as n x n.
  y <- reshape_to(pg_pad(reshape_to(x, c(n, 1)), list(c(0, 0), c(0, n))), n * (n + 1))
  y <- reshape_to(shrink(y, 0, n * n), c(n, n))
  pg_pad(y, if (diagonal >= 0) list(c(0, k), c(k, 0)) else list(c(k, 0), c(0, k)))
}

#' @rdname pg_roll
#' @export
pg_meshgrid <- function(..., indexing = "ij") {
  ts <- list(...)
  if (length(ts) == 1L && !is_tensor(ts[[1]])) ts <- ts[[1]]
  if (!indexing %in% c("ij", "xy")) {
    pg_abort("invalid_argument", sprintf("meshgrid indexing must be \"ij\" or \"xy\", got %s", format(indexing)))
  }
  ts <- lapply(ts, function(t) reshape_to(t, prod(t$node$shape)))
  if (indexing == "xy" && length(ts) > 1L) {
    g <- pg_meshgrid(c(list(ts[[2]], ts[[1]]), ts[-(1:2)]), indexing = "ij")
    return(c(list(g[[2]], g[[1]]), g[-(1:2)]))
  }
  shape <- vapply(ts, function(t) t$node$shape[1], 0)
  lapply(seq_along(ts), function(i) {
    s <- rep(1, length(ts))
    s[i] <- shape[i]
    pg_expand(reshape_to(ts[[i]], s), shape)
  })
}

#' @rdname pg_roll
#' @export
pg_repeat_interleave <- function(x, repeats, axis = NULL) {
  if (length(repeats) != 1L || !is.numeric(repeats) || repeats < 0 || repeats != trunc(repeats)) {
    pg_abort("invalid_argument", "repeat_interleave takes one whole count >= 0 (counts per element would make the shape depend on the data)")
  }
  if (is.null(axis)) {
    x <- pg_flatten(x)
    d <- 1
  } else {
    d <- wire_axis(axis, length(x$node$shape)) + 1
  }
  s <- x$node$shape
  before <- s[seq_len(d)]
  after <- s[-seq_len(d)]
  y <- pg_expand(reshape_to(x, c(before, 1, after)), c(before, repeats, after))
  reshape_to(y, c(s[seq_len(d - 1)], s[d] * repeats, after))
}

#' @rdname pg_roll
#' @export
pg_masked_fill <- function(x, mask, value) {
  if (!is_tensor(mask)) mask <- pg_tensor(mask)
  b <- broadcast_shape(mask$node$shape, x$node$shape)
  if (is.null(b) || !identical(as.numeric(b), as.numeric(x$node$shape))) {
    pg_abort("invalid_argument", sprintf("masked_fill: a mask of shape (%s) does not broadcast to (%s)",
                                         paste(mask$node$shape, collapse = ", "), paste(x$node$shape, collapse = ", ")))
  }
  pg_where(mask, value, x)
}
