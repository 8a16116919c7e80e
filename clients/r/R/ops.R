# R's group generics for tensors: Ops (arithmetic, comparison, logic), Math, Summary, plus mean
# and matrix products. Each builds the same nodes as the Python client's operator of that name.

logical_not <- function(x) {
  b <- pg_cast(x, "bool")
  make(OP$CMPNE, "bool", b$node$shape, list(b, const_tensor(TRUE, "bool", b$node$shape)))
}

pg_div <- function(x, y, reverse = FALSE) {
  ab <- broadcasted(x, y, reverse, op = OP$DIV)
  a <- float_of(ab[[1]])
  b <- float_of(ab[[2]])
  make(OP$DIV, a$node$dtype, a$node$shape, list(a, b))
}

# x ^ y: integer tensors to integer powers stay integers (INT_POW: exact, wrapping; a negative
# number as the exponent is refused, as torch refuses it), else the float POW (constant whole
# exponents up to 64 multiply there).
pg_pow <- function(x, y, reverse = FALSE) {
  ab <- broadcasted(x, y, reverse, op = OP$POW)
  a <- ab[[1]]
  b <- ab[[2]]
  if (is_int_dtype(a$node$dtype)) {
    if (!reverse && !is_tensor(y) && length(y) == 1L && is.numeric(y) && y < 0) {
      pg_abort("invalid_argument", "Integers to negative integer powers are not allowed.")
    }
    return(make(OP$INT_POW, a$node$dtype, a$node$shape, list(a, b)))
  }
  a <- float_of(a)
  b <- float_of(b)
  make(OP$POW, a$node$dtype, a$node$shape, list(a, b))
}

cmp <- function(op, x, y, reverse = FALSE) {
  ab <- broadcasted(x, y, reverse, op = op)
  make(op, "bool", ab[[1]]$node$shape, ab)
}

#' Arithmetic, comparison and logic on tensors
#'
#' `+ - * / ^ %/% %% == != < > <= >= & | !` and unary minus, with tensors or R numbers on either
#' side and numpy broadcasting. Integer operands of `/` divide in float32 (tinygrad's rule). `%/%`
#' and `%%` are R's (and Python's) floor division and the remainder with the divisor's sign:
#' [pg_floor_divide] and [pg_remainder].
#' @param e1,e2 tensors or R values.
#' @return a tensor.
#' @export
Ops.polygrad_tensor <- function(e1, e2) {
  # Ops.pg_sym is this same function, so R dispatches a tensor with a Variable's value here (two
  # different methods would be an "incompatible methods" warning): variable.R's sym_ops.
  if (is_sym(e1) || (!missing(e2) && is_sym(e2))) return(sym_ops(.Generic, e1, e2))
  if (missing(e2)) {
    return(switch(.Generic,
                  "-" = if (e1$node$dtype == "bool") logical_not(e1) else unop(OP$NEG, e1),
                  "+" = e1,
                  "!" = logical_not(e1),
                  pg_abort("invalid_argument", sprintf("unary %s is not defined for tensors", .Generic))))
  }
  rev <- !is_tensor(e1)
  x <- if (rev) e2 else e1
  y <- if (rev) e1 else e2
  switch(.Generic,
         "+" = binop(OP$ADD, x, y, rev),
         "-" = binop(OP$SUB, x, y, rev),
         "*" = binop(OP$MUL, x, y, rev),
         "/" = pg_div(x, y, rev),
         "^" = pg_pow(x, y, rev),
         "%/%" = pg_floor_divide(x, y, rev),
         "%%" = pg_remainder(x, y, rev),
         "<" = cmp(OP$CMPLT, x, y, rev),
         ">" = cmp(OP$CMPLT, x, y, !rev),
         "!=" = cmp(OP$CMPNE, x, y, rev),
         "==" = cmp(OP$CMPEQ, x, y, rev),
         ">=" = cmp(OP$CMPLE, x, y, !rev),
         "<=" = cmp(OP$CMPLE, x, y, rev),
         "&" = { ab <- broadcasted(x, y, rev); pg_where(ab[[2]], ab[[1]], FALSE) },
         "|" = { ab <- broadcasted(x, y, rev); pg_where(ab[[2]], TRUE, ab[[1]]) },
         pg_abort("invalid_argument", sprintf("%s is not defined for tensors", .Generic)))
}

#' Choose elementwise
#' @param cond a tensor (cast to bool).
#' @param x,y tensors or R values.
#' @return a tensor: x where cond is true, else y.
#' @export
pg_where <- function(cond, x, y) {
  if (is_tensor(x)) {
    xy <- broadcasted(x, y); x <- xy[[1]]; y <- xy[[2]]
  } else if (is_tensor(y)) {
    yx <- broadcasted(y, x); y <- yx[[1]]; x <- yx[[2]]
  }
  cx <- broadcasted(cond, x, match_dtype = FALSE); cond <- cx[[1]]; x <- cx[[2]]
  cy <- broadcasted(cond, y, match_dtype = FALSE); cond <- cy[[1]]; y <- cy[[2]]
  xy <- broadcasted(x, y); x <- xy[[1]]; y <- xy[[2]]
  shape <- broadcast_shape(cond$node$shape, x$node$shape)
  cond <- broadcast_to(pg_cast(cond, "bool"), shape)
  make(OP$WHERE, x$node$dtype, shape, list(cond, broadcast_to(x, shape), broadcast_to(y, shape)))
}

#' Elementwise maximum and minimum
#' @param x,y tensors or R values.
#' @return a tensor.
#' @export
pg_maximum <- function(x, y) binop(OP$MAX, x, y)
#' @rdname pg_maximum
#' @export
pg_minimum <- function(x, y) binop(OP$MINIMUM, x, y)

# R's round() passes digits; a tensor rounds to whole numbers only.
round_tensor <- function(x, digits = 0) {
  if (!identical(as.numeric(digits), 0)) pg_abort("invalid_argument", "round() of a tensor takes no digits")
  pg_round(x)
}

#' Elementwise math on tensors
#'
#' `exp log sqrt abs sin cos tan tanh floor ceiling trunc round sign log2 cumsum atan asin acos
#' sinh cosh asinh acosh atanh log10 log1p expm1` (R's Math group: the generated functions of
#' [ops_gen], `pg_exp`, `pg_abs`, `pg_ceil`, ...; see [pg_isclose] for
#' the edges of their domains). `round` rounds half to even (as R, numpy and torch) and takes no
#' digits; `cumsum` takes a 1-D tensor ([pg_cumsum] takes an axis).
#' @param x a tensor.
#' @param ... unused (`round`: `digits` must be 0).
#' @return a tensor.
#' @export
Math.polygrad_tensor <- function(x, ...) {
  switch(.Generic,
         exp = pg_exp(x),
         log = pg_log(x),
         log2 = pg_log2(x),
         exp2 = pg_exp2(x),
         sqrt = pg_sqrt(x),
         sin = pg_sin(x),
         cos = pg_cos(x),
         tan = pg_tan(x),
         tanh = pg_tanh(x),
         atan = pg_atan(x),
         asin = pg_asin(x),
         acos = pg_acos(x),
         sinh = pg_sinh(x),
         cosh = pg_cosh(x),
         asinh = pg_asinh(x),
         acosh = pg_acosh(x),
         atanh = pg_atanh(x),
         log10 = pg_log10(x),
         log1p = pg_log1p(x),
         expm1 = pg_expm1(x),
         abs = pg_abs(x),
         sign = pg_sign(x),
         trunc = pg_trunc(x),
         floor = pg_floor(x),
         ceiling = pg_ceil(x),
         round = round_tensor(x, ...),
         cumsum = {
           if (length(x$node$shape) != 1L) {
             pg_abort("invalid_argument", "cumsum() takes a 1-D tensor; use pg_cumsum(x, axis)")
           }
           pg_cumsum(x, 1)
         },
         pg_abort("invalid_argument", sprintf("%s is not defined for tensors", .Generic)))
}

#' Reductions over all elements
#'
#' `sum`, `prod`, `max`, `min`, `any`, `all` (R's Summary group) of one tensor, as a 0-d tensor
#' (bool for `any` and `all`).
#' @param ... one tensor.
#' @param na.rm ignored (tensors have no NA).
#' @return a tensor.
#' @export
Summary.polygrad_tensor <- function(..., na.rm = FALSE) {
  args <- list(...)
  if (length(args) != 1L) pg_abort("invalid_argument", sprintf("%s of several tensors: combine them with pg_cat", .Generic))
  x <- args[[1]]
  switch(.Generic, sum = pg_sum(x), prod = pg_prod(x), max = pg_max(x), min = pg_min(x), any = pg_any(x),
         all = pg_all(x),
         pg_abort("invalid_argument", sprintf("%s is not defined for tensors", .Generic)))
}

#' Matrix products
#'
#' numpy's `matmul`: 1-D operands are promoted and the added axis dropped, batch axes broadcast.
#' `%*%` calls `pg_matmul` when either side is a tensor (R 4.2 has no S3 dispatch for it).
#' @param x,y tensors (or R arrays).
#' @return a tensor.
#' @export
pg_matmul <- function(x, y) {
  if (!is_tensor(x)) x <- pg_tensor(x)
  if (!is_tensor(y)) y <- pg_tensor(y)
  sa <- x$node$shape
  sb <- y$node$shape
  out_dt <- least_upper_dtype(x$node$dtype, y$node$dtype)
  acc <- sum_acc_dtype(out_dt)
  a <- pg_cast(x, acc)
  b <- pg_cast(y, acc)
  shape <- matmul_shape(sa, sb)
  if (is.null(shape)) daemon_reject(OP$MATMUL, acc, list(a, b), sprintf(
    "cannot matmul (%s) with (%s)", paste(sa, collapse = ", "), paste(sb, collapse = ", ")))
  pg_cast(make(OP$MATMUL, acc, shape, list(a, b)), out_dt)
}

matmul_shape <- function(sa, sb) {
  if (!length(sa) || !length(sb)) return(NULL)
  a <- if (length(sa) == 1L) c(1, sa) else sa
  b <- if (length(sb) == 1L) c(sb, 1) else sb
  if (a[length(a)] != b[length(b) - 1L]) return(NULL)
  batch <- broadcast_shape(a[seq_len(length(a) - 2L)], b[seq_len(length(b) - 2L)])
  if (is.null(batch)) return(NULL)
  c(batch, if (length(sa) > 1L) a[length(a) - 1L], if (length(sb) > 1L) b[length(b)])
}

#' @rdname pg_matmul
#' @export
`%*%` <- function(x, y) {
  if (is_tensor(x) || is_tensor(y)) pg_matmul(x, y) else base::`%*%`(x, y)
}
