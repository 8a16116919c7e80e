# Integer division and remainders, bitwise ops, shifts and bitcasts: IDIV, FMOD, FLOOR_DIVIDE,
# REMAINDER, AND, OR, XOR, LSHIFT, RSHIFT and BITCAST, as the Python and JavaScript clients send them.

int_binop <- function(op, name, a, b) {
  if (!is_int_dtype(a$node$dtype)) {
    pg_abort("invalid_argument", sprintf("%s needs integer tensors, got %s", name, a$node$dtype))
  }
  make(op, a$node$dtype, a$node$shape, list(a, b))
}

#' Integer division and remainders
#'
#' `pg_idiv` divides integers truncating toward zero (C's `/`; x / 0 gives 0) and `pg_fmod` is the
#' remainder with the dividend's sign (C's `%`, torch's `fmod`). `pg_floor_divide` rounds toward
#' negative infinity and `pg_remainder` has the divisor's sign: they are R's `%/%` and `%%`
#' (and Python's `//` and `%`), which call them. Float operands work too, except for `pg_idiv`.
#' @param x,y tensors or R numbers.
#' @param reverse compute y op x.
#' @return a tensor.
#' @export
pg_idiv <- function(x, y, reverse = FALSE) {
  ab <- broadcasted(x, y, reverse)
  int_binop(OP$IDIV, "pg_idiv", ab[[1]], ab[[2]])
}

#' @rdname pg_idiv
#' @export
pg_fmod <- function(x, y, reverse = FALSE) divmod_op(OP$FMOD, "pg_fmod", x, y, reverse)

#' @rdname pg_idiv
#' @export
pg_floor_divide <- function(x, y, reverse = FALSE) divmod_op(OP$FLOOR_DIVIDE, "%/%", x, y, reverse)

#' @rdname pg_idiv
#' @export
pg_remainder <- function(x, y, reverse = FALSE) divmod_op(OP$REMAINDER, "%%", x, y, reverse)

divmod_op <- function(op, name, x, y, reverse) {
  ab <- broadcasted(x, y, reverse)
  a <- ab[[1]]
  if (a$node$dtype == "bool") pg_abort("invalid_argument", sprintf("%s needs integer or float tensors, got bool", name))
  make(op, a$node$dtype, a$node$shape, ab)
}

#' Bitwise ops and shifts
#'
#' And, or, xor and not of the bits of integer tensors (of bool tensors: the logical ones).
#' `pg_lshift(x, n)` is x * 2^n and `pg_rshift(x, n)` floor(x / 2^n), both wrapping in x's dtype
#' (an arithmetic shift for signed integers, as torch's), for 0 <= n < the dtype's bits.
#' @param x,y tensors or R numbers (x a tensor).
#' @param n the shift.
#' @return a tensor.
#' @export
pg_bitwise_and <- function(x, y) {
  ab <- broadcasted(x, y)
  if (ab[[1]]$node$dtype == "bool") return(pg_where(ab[[2]], ab[[1]], FALSE))
  int_binop(OP$AND, "pg_bitwise_and", ab[[1]], ab[[2]])
}

#' @rdname pg_bitwise_and
#' @export
pg_bitwise_or <- function(x, y) {
  ab <- broadcasted(x, y)
  if (ab[[1]]$node$dtype == "bool") return(pg_where(ab[[2]], TRUE, ab[[1]]))
  int_binop(OP$OR, "pg_bitwise_or", ab[[1]], ab[[2]])
}

#' @rdname pg_bitwise_and
#' @export
pg_bitwise_xor <- function(x, y) {
  ab <- broadcasted(x, y)
  if (ab[[1]]$node$dtype == "bool") return(cmp(OP$CMPNE, ab[[1]], ab[[2]]))
  int_binop(OP$XOR, "pg_bitwise_xor", ab[[1]], ab[[2]])
}

#' @rdname pg_bitwise_and
#' @export
pg_bitwise_not <- function(x) {
  dt <- x$node$dtype
  if (dt == "bool") return(logical_not(x))
  ones <- if (dtype_kind(dt) == "u") max_const(dt, x$node$shape) else const_tensor(-1, dt, x$node$shape)
  int_binop(OP$XOR, "pg_bitwise_not", x, ones)
}

# x << n or x >> n as one LSHIFT / RSHIFT, after checking n.
shift_op <- function(op, x, n, name) {
  dt <- x$node$dtype
  if (!is_int_dtype(dt)) pg_abort("invalid_argument", sprintf("%s needs an integer tensor, got %s", name, dt))
  bits <- 8 * .dtype_size[[dt]]
  if (length(n) != 1L || !is.numeric(n) || n != trunc(n) || n < 0 || n >= bits) {
    pg_abort("invalid_argument", sprintf("%s takes a shift in [0, %d) for %s, got %s", name, bits, dt, format(n)))
  }
  make(op, dt, x$node$shape, list(x, const_tensor(n, dt, x$node$shape)))
}

#' @rdname pg_bitwise_and
#' @export
pg_lshift <- function(x, n) shift_op(OP$LSHIFT, x, n, "pg_lshift")

#' @rdname pg_bitwise_and
#' @export
pg_rshift <- function(x, n) shift_op(OP$RSHIFT, x, n, "pg_rshift")

#' Reinterpret a tensor's bits
#'
#' Each element's bits read as `dtype` (torch's `view(dtype)`): with a different element size the
#' bytes of the last axis are regrouped, so its length changes by the ratio. No gradient passes.
#' @param x a tensor.
#' @param dtype the new element type.
#' @return a tensor.
#' @export
pg_bitcast <- function(x, dtype) {
  dt <- check_dtype(dtype)
  if (dt == x$node$dtype) return(x)
  shape <- x$node$shape
  a <- .dtype_size[[x$node$dtype]]
  b <- .dtype_size[[dt]]
  if (a != b) {
    what <- sprintf("bitcast from %s (%d bytes) to %s (%d bytes)", x$node$dtype, a, dt, b)
    nd <- length(shape)
    if (!nd) pg_abort("invalid_argument", paste(what, "of a 0-d tensor: differing sizes need a last axis"))
    if (b > a && shape[nd] %% (b / a) != 0) {
      pg_abort("invalid_argument", sprintf("%s: the last axis (%s) must be a multiple of %d", what, shape[nd], b / a))
    }
    shape[nd] <- shape[nd] * a / b
  }
  wrap_node(new_node(OP$BITCAST, dt, shape, list(x$node)))
}
