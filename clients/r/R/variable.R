# tinygrad's Variable for R, as the Python client's polygrad.variable: a named integer with bounds,
# bound to a value for one call. A bound value (and `+ k`, `- k`, `* k` of it) is a symbolic size
# (class pg_sym): in the shape of pg_reshape or pg_expand, or a bound of pg_shrink or a `[` index,
# it is sent as a SymbolicDim, so the daemon keeps the axis at its largest size and takes the value
# as data: one set of kernels serves every value, and a jit replays a new value without capturing
# again. A pg_sym is a list, not a number, so base R cannot take its value silently: every use as
# a plain number goes through a method here, noted while a jit captures (the replay would not
# follow a number computed from an old value).

.max_variable_name <- 64L

#' Variables and symbolic sizes
#'
#' tinygrad's `Variable`: `pg_variable(name, min, max)` is a named integer in `[min, max]`;
#' `pg_bind(var, value)` is that variable at `value` for one call (an error outside the bounds).
#' A bound value plus or minus a whole number, or times a positive whole number, stays a symbolic
#' size of the same variable; any other use takes the value as a plain number: `as.integer()`,
#' `as.numeric()`, comparisons, other arithmetic, and tensor arithmetic (`tensor * pos` is
#' `tensor * as.numeric(pos)`).
#'
#' A symbolic size goes where the API takes sizes: the shape of `pg_reshape` and `pg_expand` (a
#' list, as `c()` would drop it: `pg_expand(x, list(pos + 1, 8))`), a range of `pg_shrink` (a
#' list pair: `pg_shrink(cache, list(list(1, pos + 1), NULL))` keeps the first `pos + 1` rows,
#' tinygrad's `cache[0:pos+1]`), and a single position of `[` and `[<-` (`cache[pos + 1, ]` reads
#' or writes row `pos + 1`, tinygrad's `cache[pos:pos+1]`). R's `:` would take the value, so
#' `x[1:(pos + 1), ]` is not symbolic: use `pg_shrink`. A range ending at a symbolic size from the
#' first position makes a symbolic axis; a range of a fixed count starting at a symbolic position
#' (`list(pos + 1, pos + 2)`) reads from a position the daemon holds per run; other ranges take
#' the values. `pg_shrink(x, ranges) <- value` writes through such a view (an assign, as `[<-`).
#'
#' The daemon keeps a symbolic axis at its largest size (`max * mul + add`), and so does `dim()`.
#' Reductions over it (`pg_sum`, `max`, `%*%`, `pg_softmax`, ...) read only the part below the
#' value; ops that need its size (`mean`, `pg_flip`, ...) and reading a tensor that still has one
#' (`as.array`) are the daemon's INVALID_ARGUMENT: reduce or shrink it first. `jit(fn)` called with
#' a bound variable argument replays a new value with RunStep `variables` when the capture used
#' the variable only in symbolic sizes, and captures again (compiling nothing) when fn took it as
#' a number.
#' @param name the variable's name, 1 to 64 characters.
#' @param min,max its bounds (whole numbers, `min <= max`).
#' @param var a variable made by `pg_variable`.
#' @param value a whole number in `[min, max]`.
#' @return `pg_variable`: a `pg_variable`; `pg_bind`: a bound value (a `pg_sym`).
#' @examples
#' \dontrun{
#' start_pos <- pg_variable("start_pos", 0, 63)
#' pos <- pg_bind(start_pos, 5)
#' keys <- pg_shrink(cache, list(list(1, pos + 1), NULL))  # rows 1..6, one kernel for every pos
#' }
#' @export
pg_variable <- function(name, min, max) {
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name) || nchar(name) > .max_variable_name) {
    pg_abort("invalid_argument", sprintf("a variable's name is a string of 1 to %d characters", .max_variable_name))
  }
  for (what in c("min", "max")) {
    v <- get(what)
    if (!is.numeric(v) || length(v) != 1L || !is.finite(v) || v != trunc(v)) {
      pg_abort("invalid_argument", sprintf("variable '%s': %s must be a whole number", name, what))
    }
  }
  if (min > max) pg_abort("invalid_argument", sprintf("variable '%s': min %s exceeds max %s", name, format(min), format(max)))
  structure(list(name = name, min = as.numeric(min), max = as.numeric(max)), class = "pg_variable")
}

#' @rdname pg_variable
#' @export
pg_bind <- function(var, value) {
  if (!inherits(var, "pg_variable")) pg_abort("invalid_argument", "pg_bind takes a variable made by pg_variable")
  if (!is.numeric(value) || length(value) != 1L || !is.finite(value) || value != trunc(value)) {
    pg_abort("invalid_argument", sprintf("variable '%s' binds a whole number", var$name))
  }
  if (value < var$min || value > var$max) {
    pg_abort("invalid_argument", sprintf("variable '%s': %s is outside [%s, %s]", var$name, format(value),
                                         format(var$min), format(var$max)))
  }
  structure(list(var = var, value = as.numeric(value), mul = 1, add = 0), class = c("pg_bound", "pg_sym"))
}

new_sym <- function(var, value, mul, add) structure(list(var = var, value = value, mul = mul, add = add), class = "pg_sym")

is_sym <- function(x) inherits(x, "pg_sym")

# The size at the bound value, read without counting as a use of it as a number (the wire, checks).
sym_int <- function(s) if (is_sym(s)) s$value * s$mul + s$add else s

# The largest size: the axis' size on the daemon.
sym_max <- function(s) if (is_sym(s)) s$var$max * s$mul + s$add else s

# The value as a plain number: noted while a jit captures, so a new value captures again.
sym_taken <- function(s) {
  if (!is.null(.pg$concrete_uses)) assign(s$var$name, TRUE, envir = .pg$concrete_uses)
  sym_int(s)
}

plain_whole <- function(k) is.numeric(k) && !is.object(k) && length(k) == 1L && is.finite(k) && k == trunc(k)

# Ops.polygrad_tensor routes here whenever an operand is symbolic (it is also Ops.pg_sym): `+ k`,
# `- k` and `* k` (k >= 1) of a symbolic size stay symbolic; anything else, tensor arithmetic
# included, takes the value.
sym_ops <- function(op, e1, e2) {
  unary <- missing(e2)
  if (!unary && is_sym(e1) && plain_whole(e2)) {
    if (op == "+") return(new_sym(e1$var, e1$value, e1$mul, e1$add + e2))
    if (op == "-") return(new_sym(e1$var, e1$value, e1$mul, e1$add - e2))
    if (op == "*" && e2 >= 1) return(new_sym(e1$var, e1$value, e1$mul * e2, e1$add * e2))
  }
  if (!unary && is_sym(e2) && plain_whole(e1)) {
    if (op == "+") return(new_sym(e2$var, e2$value, e2$mul, e2$add + e1))
    if (op == "*" && e1 >= 1) return(new_sym(e2$var, e2$value, e2$mul * e1, e2$add * e1))
  }
  value <- function(v) if (is_sym(v)) sym_taken(v) else v
  if (unary) return(get(op)(value(e1)))
  get(op)(value(e1), value(e2))
}

#' @export
Ops.pg_sym <- Ops.polygrad_tensor

#' @export
Math.pg_sym <- function(x, ...) get(.Generic)(sym_taken(x), ...)

#' @export
Summary.pg_sym <- function(..., na.rm = FALSE) {
  get(.Generic)(unlist(lapply(list(...), function(v) if (is_sym(v)) sym_taken(v) else v)), na.rm = na.rm)
}

#' @export
as.integer.pg_sym <- function(x, ...) as.integer(sym_taken(x))

#' @export
as.double.pg_sym <- function(x, ...) as.double(sym_taken(x))

#' @export
as.vector.pg_sym <- function(x, mode = "any") as.vector(sym_taken(x), mode)

#' @export
format.pg_sym <- function(x, ...) {
  term <- if (x$mul == 1) x$var$name else sprintf("%s*%s", format(x$mul), x$var$name)
  if (x$add == 0) sprintf("%s=%s", term, format(sym_int(x)))
  else sprintf("(%s%s%s)=%s", term, if (x$add > 0) "+" else "-", format(abs(x$add)), format(sym_int(x)))
}

#' @export
print.pg_sym <- function(x, ...) {
  cat("<symbolic size ", format(x), " of [", format(sym_int(new_sym(x$var, x$var$min, x$mul, x$add))), ", ",
      format(sym_max(x)), "]>\n", sep = "")
  invisible(x)
}

#' @export
print.pg_variable <- function(x, ...) {
  cat(sprintf("<polygrad variable %s in [%s, %s]>\n", x$name, format(x$min), format(x$max)))
  invisible(x)
}

# The wire's SymbolicDim for symbolic size `s` on `axis` (0-based): the extent at the bound value
# and how it follows the variable, so a compiled step can take a new value per run.
sym_entry <- function(axis, s, begin = FALSE) {
  list(axis = axis, extent = sym_int(s), variable = s$var$name, mul = s$mul, add = s$add, begin = begin)
}

# Sizes that may hold symbolic ones (a list, or a plain vector): their largest values (the
# daemon's shape) and the SymbolicDim entries of the symbolic ones (NULL: none).
sym_sizes <- function(sizes) {
  if (!is.list(sizes) || is_sym(sizes)) sizes <- if (is_sym(sizes)) list(sizes) else as.list(as.numeric(sizes))
  entries <- list()
  for (i in seq_along(sizes)) {
    s <- sizes[[i]]
    if (is_sym(s)) {
      entries[[length(entries) + 1L]] <- sym_entry(i - 1, s)
    } else if (!is.numeric(s) || length(s) != 1L) {
      pg_abort("invalid_argument", sprintf("size %d is not a number or a symbolic size", i))
    }
  }
  list(max = vapply(sizes, sym_max, numeric(1)), symbolic = if (length(entries)) entries)
}

# A movement node's arg with the SymbolicDim entries the wire sends with it (node_wire).
with_symbolic <- function(arg, entries) {
  if (length(entries)) attr(arg, "symbolic") <- entries
  arg
}

# A shrink's (begin, end) on an axis of `size` as the daemon takes it (Python's _symbolic_pair):
# a symbolic end from begin 0 that fits the axis at its largest makes a symbolic axis; a symbolic
# begin with end = begin + k of the same variable, inside the axis for every value, is a begin the
# daemon holds per run (its count fixed); any other symbolic bound takes its value.
symbolic_pair <- function(b, e, size) {
  if (is_sym(b)) {
    if (is_sym(e) && identical(e$var$name, b$var$name) && e$mul == b$mul && e$add >= b$add &&
        b$var$min * b$mul + b$add >= 0 && sym_max(e) <= size) {
      return(list(b = b, e = sym_int(b) + (e$add - b$add)))
    }
    return(list(b = sym_taken(b), e = if (is_sym(e)) sym_taken(e) else e))
  }
  if (b == 0 && (!is_sym(e) || sym_max(e) <= size)) return(list(b = b, e = e))
  list(b = b, e = if (is_sym(e)) sym_taken(e) else e)
}

# SHRINK of x to the 0-based [begin, end) per axis, each bound a number or a symbolic size.
shrink_sym <- function(x, begin, end) {
  s <- x$node$shape
  for (i in seq_along(s)) {
    b <- sym_int(begin[[i]])
    e <- sym_int(end[[i]])
    if (!(0 <= b && b <= e && e <= s[i])) {
      pg_abort("invalid_argument", sprintf("shrink: (%s, %s) is out of range for an axis of size %s", format(b),
                                           format(e), format(s[i])))
    }
  }
  pairs <- lapply(seq_along(s), function(i) symbolic_pair(begin[[i]], end[[i]], s[i]))
  if (!any(vapply(pairs, function(p) is_sym(p$b) || is_sym(p$e), TRUE))) {
    return(shrink(x, vapply(pairs, function(p) p$b, 0), vapply(pairs, function(p) p$e, 0)))
  }
  entries <- list()
  for (i in seq_along(pairs)) {
    p <- pairs[[i]]
    if (is_sym(p$e)) entries[[length(entries) + 1L]] <- sym_entry(i - 1, p$e)
    if (is_sym(p$b)) entries[[length(entries) + 1L]] <- sym_entry(i - 1, p$b, begin = TRUE)
  }
  # A symbolic end is sent at its largest (the axis' size on the daemon); a symbolic begin at its
  # value, its end the value plus the count.
  b <- vapply(pairs, function(p) sym_int(p$b), 0)
  e <- vapply(pairs, function(p) sym_max(p$e), 0)
  make(OP$SHRINK, x$node$dtype, e - b, list(x), with_symbolic(list(begin = b, end = e), entries))
}
