# Indexing with R's 1-based positions, and the index ops: gather, one-hot, triangles. Positions
# read from integer tensors are 1-based too; the daemon's are 0-based, so one is subtracted here.

#' Index a tensor, or write into part of one
#'
#' 1-based, as R: an index per axis, each missing (all of it), positions (an R vector of whole
#' numbers in 1..extent, in any order, repeats allowed), or an integer tensor of positions,
#' whose axes replace the indexed one (out-of-range positions give zeros there). Several indexes
#' select independently, axis by axis, as for R arrays. With `drop = TRUE`, axes of extent 1 are
#' dropped, as for R arrays. A symbolic position (`x[pos + 1, ]` for a bound variable `pos`, see
#' [pg_variable]) reads or writes one row at a position the daemon holds per run.
#'
#' `x[...] <- value` writes `value` where `x[...]` reads (Python's `t[idx] = v`), lazily; x stays
#' the same object (an assign, which `jit` and `compile_step` capture as one). The indexes are
#' `[`'s; a bool tensor (or R logical array) of x's shape, as the only index, writes where it is
#' true. `value` is cast to x's dtype: a number fills the selection; other R values fill it in R's
#' order (column-major), recycled as for R arrays; a tensor has the selection's shape with or
#' without its extent-1 axes, or broadcasts to it. Where a position repeats, the last write in
#' row-major order wins; an out-of-range position of an index tensor writes nothing.
#' @param x a tensor.
#' @param ... one index per axis.
#' @param drop drop extent-1 axes.
#' @param value a tensor, number or R array written into the selection.
#' @return a tensor (`[`); x itself (`[<-`).
#' @export
`[.polygrad_tensor` <- function(x, ..., drop = TRUE) {
  vals <- eval_indices(as.list(substitute(list(...)))[-1L], parent.frame())
  out <- select_indices(x, check_indices(vals, x$node$shape))
  if (drop) out <- reshape_to(out, out$node$shape[out$node$shape != 1])
  out
}

#' @rdname sub-.polygrad_tensor
#' @export
`[<-.polygrad_tensor` <- function(x, ..., value) {
  vals <- eval_indices(as.list(substitute(list(...)))[-1L], parent.frame())
  if (length(vals) == 1L && is_mask(vals[[1]], x)) return(write_masked(x, vals[[1]], value))
  idx <- check_indices(vals, x$node$shape)
  through_view <- all(vapply(idx, function(v) is.null(v) || is_sym(v) || (!is_tensor(v) && is_progression(v)), TRUE))
  if (through_view) write_view(x, idx, value) else write_positions(x, idx, value)
}

# The index arguments' values, NULL where one is missing (the whole axis).
eval_indices <- function(exprs, env) {
  lapply(seq_along(exprs), function(i) {
    if (identical(exprs[[i]], quote(expr = ))) return(NULL)
    v <- eval(exprs[[i]], env)
    if (is.null(v)) pg_abort("invalid_argument", sprintf("index %d is NULL: leave it empty for the whole axis", i))
    v
  })
}

# One index per axis, each NULL, a tensor, or R positions checked against the axis.
check_indices <- function(vals, shape) {
  nd <- length(shape)
  if (length(vals) != nd) pg_abort("invalid_argument", sprintf("a tensor of rank %d needs %d indices", nd, nd))
  for (i in seq_len(nd)) {
    v <- vals[[i]]
    if (is.null(v) || is_tensor(v)) next
    if (is_sym(v)) {  # one position, read from a begin the daemon holds per run (variable.R)
      if (sym_int(v) < 1 || sym_int(v) > shape[i]) {
        pg_abort("invalid_argument", sprintf("index %d: position %s is outside 1..%s", i, format(v), shape[i]))
      }
      next
    }
    if (!is.numeric(v) || anyNA(v) || any(v != trunc(v)) || any(v < 1 | v > shape[i])) {
      pg_abort("invalid_argument", sprintf("index %d: positions must be whole numbers in 1..%s", i, shape[i]))
    }
  }
  vals
}

is_progression <- function(v) {
  step <- unique(diff(v))
  length(v) <= 1L || (length(step) == 1L && step != 0)
}

# x at the indexes, axes kept: arithmetic progressions as movement ops (a view of x), any other
# positions by a tensor of them.
select_indices <- function(x, idx) {
  out <- x
  by_tensor <- list()
  for (i in seq_along(idx)) {
    v <- idx[[i]]
    if (is.null(v)) next
    if (is_tensor(v)) {
      by_tensor[[as.character(i)]] <- v
    } else if (is_sym(v)) {
      out <- shrink_sym(out, replace(as.list(numeric(length(out$node$shape))), i, list(v - 1)),
                        replace(as.list(out$node$shape), i, list(v)))
    } else if (is_progression(v)) {
      out <- slice_axis(out, i - 1, v)
    } else {
      by_tensor[[as.character(i)]] <- pg_tensor(array(as.integer(v), length(v)))
    }
  }
  # Last axis first: an index tensor of another rank shifts the axes after it.
  for (i in sort(as.integer(names(by_tensor)), decreasing = TRUE)) {
    out <- index_axis(out, i - 1, by_tensor[[as.character(i)]])
  }
  out
}

is_mask <- function(m, x) {
  (is_tensor(m) && m$node$dtype == "bool") || (is.logical(m) && (length(x$node$shape) == 1L || !is.null(dim(m))))
}

write_masked <- function(x, mask, value) {
  if (!is_tensor(mask)) mask <- pg_tensor(mask)
  shape <- x$node$shape
  if (!identical(as.numeric(mask$node$shape), as.numeric(shape))) {
    pg_abort("invalid_argument", sprintf("a bool mask index must have the tensor's shape (%s), got (%s)",
                                         paste(shape, collapse = ", "), paste(mask$node$shape, collapse = ", ")))
  }
  pg_assign(x, pg_where(mask, written_value(x, value, shape), x))
}

# Through the view x[idx]: the daemon's WRITE_VIEW follows the view's movement ops back to x's
# node, so the view is built anew from it here.
write_view <- function(x, idx, value) write_through(x, select_indices(x, idx), value)

write_through <- function(x, view, value) {
  v <- written_value(x, value, view$node$shape)
  pg_assign(x, make(OP$WRITE_VIEW, x$node$dtype, x$node$shape, list(x, view, v), list()))
}

# Each selected element's 1-based position in x (0 where an index tensor is out of range, which
# the scatter then skips), written by a scatter over x's elements.
write_positions <- function(x, idx, value) {
  shape <- x$node$shape
  n <- prod(shape)
  positions <- reshape_to(pg_arange(1L, n + 1L, dtype = "int32"), shape)
  pos <- select_indices(positions, idx)
  k <- prod(pos$node$shape)
  v <- written_value(x, value, pos$node$shape)
  flat <- pg_scatter(reshape_to(x, n), 1, reshape_to(pos, k), reshape_to(v, k))
  pg_assign(x, reshape_to(flat, shape))
}

# value as a tensor of x's dtype and the selection's shape `sel` (extent-1 axes kept).
written_value <- function(x, value, sel) {
  dt <- x$node$dtype
  if (is_tensor(value)) return(pg_cast(fit_to(value, sel), dt))
  if (!is.numeric(value) && !is.logical(value)) {
    pg_abort("invalid_argument", sprintf("cannot write an R %s into a tensor", typeof(value)))
  }
  n <- prod(sel)
  if (length(value) == 1L) return(const_tensor(value, dt, sel))
  if (if (length(value)) n %% length(value) != 0 else n > 0) {
    pg_abort("invalid_argument", sprintf("%d elements to replace are not a multiple of the %d values given", n,
                                         length(value)))
  }
  pg_tensor(array(rep_len(as.vector(value), n), dim = sel), dtype = dt)
}

# A tensor of sel's shape: one of sel's shape without its extent-1 axes is reshaped, any other
# broadcast (numpy's rules).
fit_to <- function(v, sel) {
  s <- v$node$shape
  if (prod(s) == prod(sel) && identical(as.numeric(s[s != 1]), as.numeric(sel[sel != 1]))) return(reshape_to(v, sel))
  if (length(s) > length(sel)) {
    pg_abort("invalid_argument", sprintf("a value of shape (%s) does not fit a selection of shape (%s)",
                                         paste(s, collapse = ", "), paste(sel, collapse = ", ")))
  }
  pg_expand(v, sel)
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
