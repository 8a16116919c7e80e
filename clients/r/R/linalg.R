# Linear algebra with its shape rules here and its work in the daemon: numpy's einsum (EINSUM,
# SHAPE_EINSUM) and the QR and SVD factorizations (QR, SVD; SHAPE_FACTOR). A tensor's shape is
# known and a bad equation refused before any round trip; R's shapes are the Python client's
# (row-major), so an equation reads the same.

.max_einsum_equation <- 512  # core's kMaxEinsumEquation

einsum_spec <- function(s, what) {
  parts <- strsplit(paste0(s, "\x01"), "...", fixed = TRUE)[[1]]
  if (length(parts) > 2) pg_abort("invalid_argument", sprintf("einsum: %s has more than one '...'", what))
  letters <- strsplit(sub("...", "", s, fixed = TRUE), "")[[1]]
  bad <- letters[!grepl("^[A-Za-z]$", letters)]
  if (length(bad)) pg_abort("invalid_argument", sprintf("einsum: %s: '%s' is not a letter or '...'", what, bad[1]))
  at <- if (length(parts) == 2) nchar(parts[1]) else -1L
  list(letters = letters, at = at)
}

# Labels with "..." standing for `covered` axes, right-aligned among `ell` (".0", ".1", ...).
einsum_labels <- function(p, covered, ell) {
  if (p$at < 0) return(p$letters)
  stand_ins <- if (covered > 0) sprintf(".%d", seq(ell - covered, ell - 1)) else character()
  c(p$letters[seq_len(p$at)], stand_ins, p$letters[seq_len(length(p$letters) - p$at) + p$at])
}

einsum_shape <- function(equation, shapes) {
  if (nchar(equation) > .max_einsum_equation) {
    pg_abort("invalid_argument", sprintf("einsum: the equation has %d characters, more than %d", nchar(equation),
                                         .max_einsum_equation))
  }
  eq <- gsub(" ", "", equation, fixed = TRUE)
  sides <- strsplit(paste0(eq, "\x01"), "->", fixed = TRUE)[[1]]
  if (length(sides) > 2) pg_abort("invalid_argument", "einsum: the equation has more than one '->'")
  sides <- sub("\x01$", "", sides)
  specs <- strsplit(paste0(sides[1], "\x01"), ",", fixed = TRUE)[[1]]
  specs <- sub("\x01$", "", specs)
  if (length(specs) != length(shapes)) {
    pg_abort("invalid_argument", sprintf("einsum: the equation has %d operands, %d tensors given", length(specs),
                                         length(shapes)))
  }
  parsed <- lapply(seq_along(specs), function(i) {
    p <- einsum_spec(specs[i], sprintf("operand %d", i - 1))
    p$covered <- length(shapes[[i]]) - length(p$letters)
    if (p$covered < 0 || (p$at < 0 && p$covered != 0)) {
      pg_abort("invalid_argument", sprintf("einsum: operand %d names %d axes but has %d", i - 1, length(p$letters),
                                           length(shapes[[i]])))
    }
    p
  })
  ell <- max(vapply(parsed, function(p) p$covered, numeric(1)))
  sizes <- list()
  uses <- list()
  for (i in seq_along(parsed)) {
    mine <- list()
    labels <- einsum_labels(parsed[[i]], parsed[[i]]$covered, ell)
    for (k in seq_along(labels)) {
      label <- labels[k]
      n <- shapes[[i]][k]
      uses[[label]] <- (if (is.null(uses[[label]])) 0 else uses[[label]]) + 1
      if (!is.null(mine[[label]]) && mine[[label]] != n) {
        pg_abort("invalid_argument", sprintf("einsum: label '%s' repeats in operand %d over axes of sizes %d and %d",
                                             label, i - 1, mine[[label]], n))
      }
      mine[[label]] <- n
    }
    for (label in names(mine)) {
      n <- mine[[label]]
      if (is.null(sizes[[label]]) || sizes[[label]] == 1) sizes[[label]] <- n
      else if (n != 1 && n != sizes[[label]]) {
        pg_abort("invalid_argument", sprintf("einsum: label '%s' has sizes %d and %d", label, sizes[[label]], n))
      }
    }
  }
  if (length(sides) == 2) {
    out <- einsum_labels(einsum_spec(sides[2], "the output"), ell, ell)
    for (i in seq_along(out)) {
      if (is.null(sizes[[out[i]]])) pg_abort("invalid_argument", sprintf("einsum: output label '%s' is not in any input", out[i]))
      if (out[i] %in% out[-seq_len(i)]) pg_abort("invalid_argument", sprintf("einsum: output label '%s' repeats", out[i]))
    }
  } else {
    once <- names(uses)[vapply(uses, function(n) n == 1, logical(1)) & !startsWith(names(uses), ".")]
    out <- c(if (ell > 0) sprintf(".%d", seq_len(ell) - 1) else character(), sort(once, method = "radix"))
  }
  vapply(out, function(label) as.numeric(sizes[[label]]), numeric(1), USE.NAMES = FALSE)
}

#' einsum
#'
#' numpy's einsum, computed by the daemon: one comma-separated spec per operand ("ij,jk->ik"),
#' "..." for broadcast axes, a label repeated within an operand for its diagonal ("ii->i"; "ii" is
#' the trace), and without "->" the labels used once in ASCII order. Axes are read in the tensor's
#' shape order (`dim(x)`), as in the Python client. Operands of different dtypes are promoted to one.
#' @param equation the einsum equation.
#' @param ... the operand tensors (or one list of them).
#' @return a tensor.
#' @export
pg_einsum <- function(equation, ...) {
  xs <- list(...)
  if (length(xs) == 1L && is.list(xs[[1]]) && !is_tensor(xs[[1]])) xs <- xs[[1]]
  if (!is.character(equation) || length(equation) != 1L || !length(xs) || !all(vapply(xs, is_tensor, logical(1)))) {
    pg_abort("invalid_argument", "pg_einsum takes an equation and one or more tensors")
  }
  if (length(xs) > MAX_ARITY[["EINSUM"]]) {
    pg_abort("invalid_argument", sprintf("pg_einsum takes at most %d operands, got %d", MAX_ARITY[["EINSUM"]], length(xs)))
  }
  shape <- einsum_shape(equation, lapply(xs, function(t) t$node$shape))
  dt <- least_upper_dtype(vapply(xs, function(t) t$node$dtype, ""))
  make(OP$EINSUM, dt, shape, lapply(xs, pg_cast, dt), list(equation = equation))
}

# One factor of a factorization of the last two axes (SHAPE_FACTOR): k = min(m, n); QR's q (m, k)
# and r (k, n), SVD's u (m, k), s (k) and vh (k, n).
factor_shape <- function(shape, factor) {
  r <- length(shape)
  m <- shape[r - 1]
  n <- shape[r]
  k <- min(m, n)
  c(shape[seq_len(r - 2)], switch(factor, q = c(m, k), r = c(k, n), u = c(m, k), s = k, vh = c(k, n)))
}

#' Matrix factorizations
#'
#' `pg_qr(x)` is torch.linalg.qr's reduced QR of the last two axes (Householder reflections with
#' LAPACK's signs): `list(q, r)`. `pg_svd(x)` is the SVD by one-sided Jacobi rotations (`sweeps`
#' passes over every column pair; meant for small matrices): `list(u, s, vh)`, singular values
#' descending, singular vectors unique up to sign; `full_matrices = TRUE` takes square matrices
#' only (the reduced and full factors coincide there). Axes are in shape order (`dim(x)`), as in
#' the Python client; the daemon computes both (QR, SVD: one node per factor).
#' @param x a tensor of at least two axes.
#' @param full_matrices see above.
#' @param sweeps Jacobi sweeps, 1 to 64.
#' @return a named list of tensors.
#' @export
pg_qr <- function(x) {
  if (length(x$node$shape) < 2) pg_abort("invalid_argument", "pg_qr needs a matrix (or a batch of them)")
  x <- float_of(x)
  list(q = make(OP$QR, x$node$dtype, factor_shape(x$node$shape, "q"), list(x), list(mode = "q")),
       r = make(OP$QR, x$node$dtype, factor_shape(x$node$shape, "r"), list(x), list(mode = "r")))
}

#' @rdname pg_qr
#' @export
pg_svd <- function(x, full_matrices = TRUE, sweeps = 12) {
  s <- x$node$shape
  if (length(s) < 2) pg_abort("invalid_argument", "pg_svd needs a matrix (or a batch of them)")
  if (isTRUE(full_matrices) && s[length(s) - 1] != s[length(s)]) {
    pg_abort("invalid_argument", "pg_svd(full_matrices = TRUE) of a non-square matrix: pass full_matrices = FALSE")
  }
  if (length(sweeps) != 1L || sweeps < 1 || sweeps > 64 || sweeps != trunc(sweeps)) {
    pg_abort("invalid_argument", "pg_svd: sweeps must be 1 to 64")
  }
  x <- float_of(x)
  out <- lapply(c("u", "s", "vh"), function(f) {
    make(OP$SVD, x$node$dtype, factor_shape(x$node$shape, f), list(x), list(mode = f, n = as.integer(sweeps)))
  })
  stats::setNames(out, c("u", "s", "vh"))
}
