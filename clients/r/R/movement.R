# Movement ops with R's 1-based axes: axis k (k >= 1) is the k-th dimension of dim(x), and
# negative axes count from the end (-1 is the last). The wire takes 0-based axes.

# 0-based wire axis for a 1-based R axis.
wire_axis <- function(axis, ndim) {
  if (length(axis) != 1L || is.na(axis) || axis == 0 || axis > ndim || axis < -ndim) {
    pg_abort("invalid_argument", sprintf("axis %s is out of range for a tensor of rank %d (axes are 1-based; -1 is the last)",
                                         format(axis), ndim))
  }
  if (axis > 0) axis - 1 else ndim + axis
}

wire_axes <- function(axis, ndim) {
  if (is.null(axis)) return(seq_len(ndim) - 1)
  sort(unique(vapply(axis, wire_axis, numeric(1), ndim = ndim)))
}

reshape_to <- function(x, shape) {
  shape <- as.numeric(shape)
  if (identical(x$node$shape, shape)) return(x)
  make(OP$RESHAPE, x$node$dtype, shape, list(x), shape)
}

#' Movement: reshape, permute, expand, pad, flip, concatenate, stack
#'
#' Axes are 1-based (`-1` is the last). `pg_reshape` takes the new shape (one entry may be -1;
#' elements keep their row-major order, as on the wire); `pg_permute`/`aperm` a permutation of
#' `1:rank`; `pg_expand` grows size-1 axes; `pg_pad` takes one `c(before, after)` pair per axis (a
#' list, or a matrix with one row per axis; a negative amount removes elements) and fills with
#' `value`; `pg_flip` reverses axes; `pg_cat` joins tensors along an axis, `pg_stack` along a new
#' one; `t()` transposes a matrix. The shape of `pg_reshape` and `pg_expand` may be a list holding
#' symbolic sizes (`list(pos + 1, 8)`: see [pg_variable]).
#' @param x a tensor.
#' @param shape the new shape.
#' @param perm a permutation of the axes.
#' @param padding before/after amounts per axis.
#' @param axis 1-based axis (or axes).
#' @param tensors a list of tensors (or tensors as `...`).
#' @param ... more tensors.
#' @return a tensor.
#' @export
pg_reshape <- function(x, shape) {
  if (is.list(shape)) return(reshape_sym(x, shape))
  shape <- as.numeric(shape)
  if (sum(shape == -1) == 1) shape[shape == -1] <- prod(x$node$shape) / prod(shape[shape != -1])
  if (prod(shape) != prod(x$node$shape)) {
    pg_abort("invalid_argument", sprintf("cannot reshape (%s) to (%s)", paste(x$node$shape, collapse = ", "),
                                         paste(shape, collapse = ", ")))
  }
  reshape_to(x, shape)
}

#' @rdname pg_reshape
#' @export
pg_permute <- function(x, perm) {
  nd <- length(x$node$shape)
  if (!setequal(perm, seq_len(nd)) || length(perm) != nd) {
    pg_abort("invalid_argument", sprintf("permutation (%s) is not one of 1:%d", paste(perm, collapse = ", "), nd))
  }
  order <- as.numeric(perm) - 1
  if (identical(order, seq_len(nd) - 1)) return(x)
  make(OP$PERMUTE, x$node$dtype, x$node$shape[perm], list(x), order)
}

#' @rdname pg_reshape
#' @param a a tensor (aperm's argument name).
#' @param resize unused.
#' @export
aperm.polygrad_tensor <- function(a, perm = NULL, resize = TRUE, ...) {
  if (is.null(perm)) perm <- rev(seq_along(a$node$shape))
  pg_permute(a, perm)
}

#' @rdname pg_reshape
#' @export
t.polygrad_tensor <- function(x) {
  nd <- length(x$node$shape)
  if (nd == 1L) return(reshape_to(x, c(1, x$node$shape)))  # as R: a vector becomes a 1-row matrix
  if (nd != 2L) pg_abort("invalid_argument", "t() needs a matrix; use aperm for higher ranks")
  pg_permute(x, c(2, 1))
}

#' @rdname pg_reshape
#' @export
pg_expand <- function(x, shape) {
  if (is.list(shape)) return(expand_sym(x, shape))
  shape <- as.numeric(shape)
  s <- x$node$shape
  s1 <- c(rep(1, length(shape) - length(s)), s)
  shape[shape == -1] <- s1[shape == -1]
  if (any(s1 != shape & s1 != 1)) {
    pg_abort("invalid_argument", sprintf("cannot expand (%s) to (%s)", paste(s, collapse = ", "), paste(shape, collapse = ", ")))
  }
  broadcast_to(x, shape)
}

#' @rdname pg_reshape
#' @param value `pg_pad`'s fill value.
#' @export
pg_pad <- function(x, padding, value = 0) {
  shape <- x$node$shape
  nd <- length(shape)
  pairs <- if (is.matrix(padding)) lapply(seq_len(nrow(padding)), function(i) padding[i, ]) else padding
  if (length(pairs) != nd) pg_abort("invalid_argument", sprintf("pad needs %d (before, after) pairs", nd))
  begin <- vapply(pairs, function(p) as.numeric(p[1]), 0)
  end <- vapply(pairs, function(p) as.numeric(p[2]), 0)
  if (any(begin < 0 | end < 0)) {  # negative amounts remove elements first
    lo <- pmax(0, -begin)
    hi <- shape - pmax(0, -end)
    if (any(lo > hi)) pg_abort("invalid_argument", "pad removes more than a whole axis")
    x <- shrink(x, lo, hi)
    begin <- pmax(0, begin)
    end <- pmax(0, end)
  }
  if (all(begin == 0 & end == 0)) return(x)
  arg <- list(begin = begin, end = end)
  out_shape <- x$node$shape + begin + end
  out <- make(OP$PAD, x$node$dtype, out_shape, list(x), arg)
  if (value != 0) {  # the padded positions: where a padded all-true mask is false
    mask <- make(OP$PAD, "bool", out_shape, list(const_tensor(TRUE, "bool", x$node$shape)), arg)
    out <- pg_where(mask, out, value)
  }
  out
}

# RESHAPE or EXPAND to a shape (a list) with symbolic sizes: the daemon's shape is their largest,
# the node carries their SymbolicDim entries. Always a node: a symbolic size is not a plain one of
# the same value.
reshape_sym <- function(x, shape) {
  sizes <- sym_sizes(shape)
  if (prod(sizes$max) != prod(x$node$shape)) {
    pg_abort("invalid_argument", sprintf("cannot reshape (%s) to (%s)", paste(x$node$shape, collapse = ", "),
                                         paste(vapply(shape, format, ""), collapse = ", ")))
  }
  make(OP$RESHAPE, x$node$dtype, sizes$max, list(x), with_symbolic(sizes$max, sizes$symbolic))
}

expand_sym <- function(x, shape) {
  sizes <- sym_sizes(shape)
  s <- x$node$shape
  s1 <- c(rep(1, length(sizes$max) - length(s)), s)
  if (length(s1) != length(sizes$max) || any(s1 != sizes$max & s1 != 1)) {
    pg_abort("invalid_argument", sprintf("cannot expand (%s) to (%s)", paste(s, collapse = ", "),
                                         paste(vapply(shape, format, ""), collapse = ", ")))
  }
  if (length(s1) != length(s)) x <- reshape_to(x, s1)
  make(OP$EXPAND, x$node$dtype, sizes$max, list(x), with_symbolic(sizes$max, sizes$symbolic))
}

shrink <- function(x, begin, end) {
  if (all(begin == 0 & end == x$node$shape)) return(x)
  make(OP$SHRINK, x$node$dtype, end - begin, list(x), list(begin = begin, end = end))
}

#' @rdname pg_reshape
#' @export
pg_flip <- function(x, axis) {
  axes <- wire_axes(axis, length(x$node$shape))
  if (!length(axes)) return(x)
  make(OP$FLIP, x$node$dtype, x$node$shape, list(x), axes)
}

#' @rdname pg_reshape
#' @export
pg_cat <- function(tensors, ..., axis = 1) {
  ts <- if (is_tensor(tensors)) c(list(tensors), list(...)) else c(tensors, list(...))
  nd <- length(ts[[1]]$node$shape)
  d <- wire_axis(axis, nd) + 1
  for (t in ts) {
    if (length(t$node$shape) != nd || any(t$node$shape[-d] != ts[[1]]$node$shape[-d])) {
      pg_abort("invalid_argument", sprintf("pg_cat: shapes differ outside axis %d", d))
    }
  }
  dt <- least_upper_dtype(vapply(ts, function(t) t$node$dtype, ""))
  joined(lapply(ts, pg_cast, dt), d)
}

# One CAT of tensors (checked, one dtype) along the 1-based axis d; more than the op takes are
# joined in groups first (bit for bit the same elements).
joined <- function(ts, d) {
  limit <- MAX_ARITY[["CAT"]]
  if (length(ts) > limit) {
    groups <- split(ts, ceiling(seq_along(ts) / limit))
    return(joined(unname(lapply(groups, joined, d)), d))
  }
  shape <- ts[[1]]$node$shape
  shape[d] <- sum(vapply(ts, function(t) t$node$shape[d], 0))
  make(OP$CAT, ts[[1]]$node$dtype, shape, ts, list(axes = d - 1))
}

#' @rdname pg_reshape
#' @export
pg_stack <- function(tensors, ..., axis = 1) {
  ts <- if (is_tensor(tensors)) c(list(tensors), list(...)) else c(tensors, list(...))
  nd <- length(ts[[1]]$node$shape)
  d <- wire_axis(axis, nd + 1)  # 0-based position of the new axis
  ts <- lapply(ts, function(t) {
    s <- t$node$shape
    reshape_to(t, c(s[seq_len(d)], 1, s[seq_len(nd - d) + d]))
  })
  pg_cat(ts, axis = d + 1)
}

# einops groups of one side: "b (h w) c" -> list("b", c("h", "w"), "c").
rearrange_groups <- function(side, what) {
  toks <- strsplit(trimws(gsub(")", " ) ", gsub("(", " ( ", side, fixed = TRUE), fixed = TRUE)), "\\s+")[[1]]
  toks <- toks[nzchar(toks)]
  out <- list()
  current <- NULL
  for (tok in toks) {
    if (tok == "(") {
      if (!is.null(current)) pg_abort("invalid_argument", sprintf("rearrange: nested parentheses in %s", what))
      current <- character()
    } else if (tok == ")") {
      if (is.null(current)) pg_abort("invalid_argument", sprintf("rearrange: unbalanced ')' in %s", what))
      out[[length(out) + 1L]] <- current
      current <- NULL
    } else if (grepl("^[A-Za-z_][A-Za-z0-9_]*$", tok)) {
      if (!is.null(current)) current <- c(current, tok) else out[[length(out) + 1L]] <- tok
    } else {
      pg_abort("invalid_argument", sprintf("rearrange: '%s' in %s is not an axis name", substr(tok, 1, 40), what))
    }
  }
  if (!is.null(current)) pg_abort("invalid_argument", sprintf("rearrange: unbalanced '(' in %s", what))
  out
}

#' einops rearrange
#'
#' einops.rearrange for one tensor, as the Python client's `Tensor.rearrange`: regroups, splits,
#' merges and reorders named axes, `pg_rearrange(x, "b (h w) c -> b h w c", h = 2)`; every name
#' appears once on each side. Axes are in shape order (`dim(x)`). Only the reshapes and the permute
#' it names are sent.
#' @param x a tensor.
#' @param formula the pattern.
#' @param ... sizes of axes a group cannot infer, by name.
#' @return a tensor.
#' @export
pg_rearrange <- function(x, formula, ...) {
  sizes <- list(...)
  sides <- strsplit(paste0(formula, "\x01"), "->", fixed = TRUE)[[1]]
  if (length(sides) != 2) pg_abort("invalid_argument", sprintf("rearrange: '%s' needs one '->'", substr(formula, 1, 100)))
  left <- rearrange_groups(sides[1], "the input pattern")
  right <- rearrange_groups(sub("\x01$", "", sides[2]), "the output pattern")
  left_names <- unlist(left)
  right_names <- unlist(right)
  if (anyDuplicated(left_names) || !identical(sort(left_names), sort(right_names))) {
    pg_abort("invalid_argument", sprintf("rearrange: both sides must name the same axes once each: '%s'", substr(formula, 1, 100)))
  }
  shape <- x$node$shape
  if (length(left) != length(shape)) {
    pg_abort("invalid_argument", sprintf("rearrange: the input pattern has %d axes, the tensor %d", length(left), length(shape)))
  }
  unknown <- setdiff(names(sizes), left_names)
  if (length(unknown)) pg_abort("invalid_argument", sprintf("rearrange: sizes given for axes not in the pattern: %s",
                                                             paste(sort(unknown), collapse = ", ")))
  known <- lapply(sizes, as.numeric)
  for (i in seq_along(left)) {
    group <- left[[i]]
    dim_i <- shape[i]
    missing <- group[!group %in% names(known)]
    product <- prod(vapply(group, function(n) if (is.null(known[[n]])) 1 else known[[n]], numeric(1)))
    if (length(missing) > 1) {
      pg_abort("invalid_argument", sprintf("rearrange: cannot infer both %s from size %d", paste(missing, collapse = ", "), dim_i))
    }
    if (length(missing)) {
      if (product == 0 || dim_i %% product != 0) {
        pg_abort("invalid_argument", sprintf("rearrange: size %d does not split by %d for (%s)", dim_i, product,
                                             paste(group, collapse = " ")))
      }
      known[[missing]] <- dim_i / product
    } else if (product != dim_i) {
      pg_abort("invalid_argument", sprintf("rearrange: axes (%s) multiply to %d, the tensor's axis is %d",
                                           paste(group, collapse = " "), product, dim_i))
    }
  }
  split <- reshape_to(x, vapply(left_names, function(n) known[[n]], numeric(1), USE.NAMES = FALSE))
  moved <- if (length(right_names)) pg_permute(split, match(right_names, left_names)) else split
  reshape_to(moved, vapply(right, function(g) prod(vapply(g, function(n) known[[n]], numeric(1))), numeric(1)))
}
