# Tensors made from a shape rather than from data: constants, ranges, the identity and the
# daemon's seeded random streams.

#' Constant and random tensors
#'
#' `pg_zeros`, `pg_ones` and `pg_full` make constants; `pg_arange` counts; `pg_linspace` spaces
#' `steps` values evenly from `start` to `stop` (both included, numpy's rule); `pg_eye` is the
#' identity matrix (n rows, m columns). `pg_rand` (uniform in \[0, 1)), `pg_randn` (standard
#' normal) and `pg_randint` (integers uniform in \[low, high)) are computed on the daemon from a
#' seed and a call counter, so `pg_manual_seed(s)` gives the same numbers as the Python client's
#' `Tensor.manual_seed(s)`.
#'
#' @param ... the shape, as integers or one vector.
#' @param value the fill value.
#' @param dtype the element type.
#' @param start,stop,step `pg_arange` bounds: start, start + step, ... below stop. Without a
#'   dtype: int32 when a bound is an R integer and all are whole (int64 past int32's range), else
#'   float32; values past the dtype's range are an error.
#' @param steps `pg_linspace`: how many values.
#' @param n,m `pg_eye`: rows and columns.
#' @param low,high `pg_randint`: the values' range, `low` included, `high` not.
#' @param seed an integer seed.
#' @return a tensor (`pg_manual_seed`: `NULL`, invisibly).
#' @name pg_constructors
NULL

shape_args <- function(...) {
  s <- unlist(list(...))
  if (is.null(s)) numeric() else as.numeric(s)
}

#' @rdname pg_constructors
#' @export
pg_full <- function(..., value, dtype = NULL) {
  dt <- if (is.null(dtype)) dtype_of_r(value) else check_dtype(dtype)
  const_tensor(value, dt, shape_args(...))
}

#' @rdname pg_constructors
#' @export
pg_zeros <- function(..., dtype = "float32") const_tensor(0, check_dtype(dtype), shape_args(...))

#' @rdname pg_constructors
#' @export
pg_ones <- function(..., dtype = "float32") const_tensor(1, check_dtype(dtype), shape_args(...))

#' @rdname pg_constructors
#' @export
pg_arange <- function(start, stop = NULL, step = 1, dtype = NULL) {
  if (is.null(stop)) {
    stop <- start
    start <- 0
  }
  if (step == 0) pg_abort("invalid_argument", "arange: step must not be zero")
  all_int <- all(c(start, stop, step) == trunc(c(start, stop, step))) && (is.integer(start) || is.integer(stop))
  fits <- function(dt, v) all(v >= dtype_min(dt) & v <= dtype_max(dt))
  # Integer bounds past int32 need int64 (torch's default, as Python's); int32 would wrap.
  int_default <- if (fits("int32", c(start, stop - step, step))) "int32" else "int64"
  dt <- if (is.null(dtype)) (if (all_int) int_default else "float32") else check_dtype(dtype)
  n <- max(0, ceiling((stop - start) / step))
  if (n > 0 && is_int_dtype(dt) && !fits(dt, c(start, start + (n - 1) * step))) {
    pg_abort("invalid_argument", sprintf("arange(%s, %s, %s) does not fit %s", format(start), format(stop), format(step), dt))
  }
  if (n == 0) return(pg_tensor(array(numeric(), 0), dtype = dt))
  calc <- if (is_float_dtype(dt) || all_int) dt else "float32"
  progression <- if (start == 0 && step == 1) list() else list(const_tensor(start, calc), const_tensor(step, calc))
  pg_cast(make(OP$ARANGE, calc, n, progression, n), dt)
}

#' @rdname pg_constructors
#' @export
pg_linspace <- function(start, stop, steps, dtype = "float32") {
  if (length(steps) != 1L || steps < 0 || steps != trunc(steps)) {
    pg_abort("invalid_argument", sprintf("linspace: steps must be a whole number >= 0, got %s", format(steps)))
  }
  if (!is.finite(start) || !is.finite(stop)) pg_abort("invalid_argument", "linspace bounds must be finite")
  dtype <- check_dtype(dtype)
  if (steps == 0) return(pg_tensor(array(numeric(), 0), dtype = dtype))
  # numpy's linspace, computed by the daemon (LINSPACE): the last value exactly stop
  make(OP$LINSPACE, dtype, steps, list(), list(shape = steps, start = start, stop = stop))
}

#' @rdname pg_constructors
#' @export
pg_eye <- function(n, m = n, dtype = "float32") {
  dtype <- check_dtype(dtype)
  if (n == 0 || m == 0) return(pg_tensor(array(numeric(), c(n, m)), dtype = dtype))
  make(OP$EYE, dtype, c(n, m), list(), c(n, m))  # the daemon's EYE
}

#' @rdname pg_constructors
#' @export
pg_manual_seed <- function(seed = 0) {
  .pg$seed <- as.numeric(seed) %% 2^64
  .pg$counter <- 0
  invisible(NULL)
}

# The (seed, counter) key of the next random call: the daemon draws from it.
random_key <- function() {
  if (is.null(.pg$seed)) pg_manual_seed(as.numeric(Sys.time()) * 1000 %% 2^31)
  counter <- .pg$counter
  .pg$counter <- (counter + 1) %% 2^32
  list(seed = format(.pg$seed, scientific = FALSE), counter = counter)
}

random_tensor <- function(op, shape, dtype, ...) {
  t <- make(op, dtype, shape, list(), c(random_key(), list(shape = shape), list(...)))
  note_created(t)
  t
}

#' @rdname pg_constructors
#' @export
pg_rand <- function(..., dtype = "float32") random_tensor(OP$RAND, shape_args(...), check_dtype(dtype))

#' @rdname pg_constructors
#' @export
pg_randn <- function(..., dtype = "float32") random_tensor(OP$RANDN, shape_args(...), check_dtype(dtype))

#' @rdname pg_constructors
#' @export
pg_randint <- function(..., low = 0, high = 10, dtype = "int32") {
  dt <- check_dtype(dtype)
  if (!is_int_dtype(dt)) pg_abort("invalid_argument", sprintf("randint makes integer tensors, got %s", dt))
  if (!(high > low)) pg_abort("invalid_argument", sprintf("randint needs low < high, got [%s, %s)", low, high))
  if (high - low > 2^32 || low < dtype_min(dt) || high - 1 > dtype_max(dt)) {
    pg_abort("invalid_argument", sprintf("randint range [%s, %s) does not fit %s (or spans more than 2^32)",
                                         low, high, dt))
  }
  random_tensor(OP$RANDINT, shape_args(...), dt, low = low, high = high)
}
