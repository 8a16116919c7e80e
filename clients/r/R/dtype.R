# Element types: wire codes (proto DType), kinds and tinygrad's promotion lattice, as the Python
# client has them (clients/python/polygrad/dtype.py), so both clients type graphs alike.

# Each dtype's facts are polygrad.v1.DType's schema options, generated into R/ops_gen.R as named
# columns: .dtype_wire (its polygrad.v1.DType number), .dtype_size (bytes), .dtype_kind ('b' bool,
# 'i' signed, 'u' unsigned, 'f' float), .dtype_priority (tinygrad's order, to pick the least of
# several common supertypes) and .dtype_promotes_to (the lattice's edges).

dtype_kind <- function(dt) .dtype_kind[[dt]]
is_float_dtype <- function(dt) dtype_kind(dt) == "f"
is_int_dtype <- function(dt) dtype_kind(dt) %in% c("i", "u")

check_dtype <- function(dt) {
  if (!is.character(dt) || length(dt) != 1 || !dt %in% names(.dtype_wire)) {
    pg_abort("invalid_argument", sprintf("unknown dtype %s (one of %s)", deparse(dt),
                                         paste(names(.dtype_wire), collapse = ", ")))
  }
  dt
}

dtype_from_wire <- function(code) names(.dtype_wire)[match(code, .dtype_wire)]

.parents <- function(dt) {
  out <- dt
  for (p in .dtype_promotes_to[[dt]]) out <- union(out, .parents(p))
  out
}

least_upper_dtype <- function(...) {
  ds <- unique(c(...))
  common <- Reduce(intersect, lapply(ds, .parents))
  common[which.min(.dtype_priority[common])]
}

least_upper_float <- function(dt) if (is_float_dtype(dt)) dt else least_upper_dtype(dt, "float32")

# The dtype a sum accumulates in: ints widen to at least int32 (uint32 unsigned), floats to float32.
sum_acc_dtype <- function(dt) {
  k <- dtype_kind(dt)
  if (k == "u") least_upper_dtype(dt, "uint32")
  else if (k %in% c("i", "b")) least_upper_dtype(dt, "int32")
  else least_upper_dtype(dt, "float32")
}

# The dtype of an R value: doubles float32 (the default float), integers int32, logicals bool.
dtype_of_r <- function(x) {
  if (is.logical(x)) "bool" else if (is.integer(x)) "int32" else if (is.numeric(x)) "float32"
  else pg_abort("invalid_argument", sprintf("cannot make a tensor from an R %s", typeof(x)))
}

# The least and greatest values of a dtype, as doubles (uint64's greatest rounds up to 2^64 and
# int64's to 2^63 there: `max_const` makes the exact constant of an unsigned dtype).
dtype_min <- function(dt) {
  switch(dtype_kind(dt), b = 0, f = -Inf, u = 0, i = -2^(8 * .dtype_size[[dt]] - 1))
}
dtype_max <- function(dt) {
  switch(dtype_kind(dt), b = 1, f = Inf, u = 2^(8 * .dtype_size[[dt]]) - 1, i = 2^(8 * .dtype_size[[dt]] - 1) - 1)
}

# The constant max(dt) of an unsigned dtype in `shape`; uint64's as a decimal string, exact on
# the wire (a double cannot hold 2^64 - 1).
max_const <- function(dt, shape) {
  if (dt == "uint64") return(wrap_node(new_node(OP$CONST, dt, shape, list(), "18446744073709551615")))
  const_tensor(dtype_max(dt), dt, shape)
}
