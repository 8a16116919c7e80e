# The polygrad_tensor class: an environment (so optimizers can rebind a parameter that a model
# holds) standing for one node of the graph. Shapes and dtypes are known locally.

wrap_node <- function(node, rg = NULL) {
  t <- new.env(parent = emptyenv())
  t$node <- node
  t$rg <- rg
  t$grad <- NULL
  class(t) <- "polygrad_tensor"
  t
}

is_tensor <- function(x) inherits(x, "polygrad_tensor")

# A node of op over tensors `src`; tracked for autograd when a source requires grad.
make <- function(op, dtype, shape, src = list(), arg = NULL) {
  track <- .pg$no_grad == 0L && .pg$untracked == 0L &&
    any(vapply(src, function(t) isTRUE(t$rg) || t$node$rg, TRUE))
  t <- wrap_node(new_node(op, dtype, shape, lapply(src, function(t) t$node), arg, rg = track,
                          stop = .pg$no_grad > 0L))
  if (track) t$rg <- TRUE
  t
}

const_tensor <- function(value, dtype, shape = numeric()) {
  wrap_node(new_node(OP$CONST, dtype, shape, list(), const_value(value, dtype)))
}

const_value <- function(value, dtype) {
  k <- dtype_kind(dtype)
  if (k %in% c("i", "u")) {
    if (!is.finite(value)) pg_abort("invalid_argument", sprintf("cannot make an %s constant from %s", dtype, value))
    return(trunc(as.numeric(value)))
  }
  if (k == "b") return(as.logical(value))
  as.double(value)
}

#' Make a tensor from R data
#'
#' An R array's `dim()` is the tensor's shape; a vector without `dim` is 1-D, and a single value
#' without `dim` is 0-D. `as.array(pg_tensor(a))` returns `a` exactly (R is column-major, the wire
#' row-major: the client converts). Doubles become float32 unless `dtype = "float64"`, integers
#' int32, logicals bool.
#'
#' @param x a vector, matrix, array or logical; or a tensor (cast to `dtype`).
#' @param dtype `NULL` or one of "bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
#'   "uint32", "uint64", "float16", "bfloat16", "float32", "float64".
#' @param device `NULL` (the CPU) or a device name such as "CUDA".
#' @return a `polygrad_tensor`.
#' @export
pg_tensor <- function(x, dtype = NULL, device = NULL) {
  if (is_tensor(x)) return(if (is.null(dtype)) x else pg_cast(x, dtype))
  dt <- if (is.null(dtype)) dtype_of_r(x) else check_dtype(dtype)
  if (!is.logical(x) && !is.numeric(x)) pg_abort("invalid_argument", sprintf("cannot make a tensor from an R %s", typeof(x)))
  if (anyNA(x) && !is.double(x)) pg_abort("invalid_argument", "cannot make a tensor from NA values")
  shape <- if (!is.null(dim(x))) dim(x) else if (length(x) == 1L) numeric() else length(x)
  bytes <- .Call(pg_c_encode, to_row_major(x), .dtype_wire[[dt]])
  t <- wrap_node(new_node(OP$BUFFER, dt, shape, list(), bytes))
  if (!is.null(device)) t <- pg_to(t, device)
  t
}

#' Move a tensor to a device
#' @param x a tensor.
#' @param device "CPU", "CUDA", "CUDA:1".
#' @return the tensor on that device (an explicit COPY; gradients pass through).
#' @export
pg_to <- function(x, device) {
  dev <- toupper(device)
  if (dev == "CPU" && tensor_device(x) == "CPU") return(x)
  make(OP$COPY, x$node$dtype, x$node$shape, list(x), list(device = dev))
}

tensor_device <- function(x) {
  n <- x$node
  while (TRUE) {
    if (n$op == OP$COPY) return(n$arg$device)
    if (n$op == OP$BUFFER || !length(n$src)) return("CPU")
    n <- n$src[[1]]
  }
}

#' Constant and random tensors
#'
#' `pg_zeros`, `pg_ones` and `pg_full` make constants; `pg_arange` counts; `pg_rand` (uniform in
#' \[0, 1)) and `pg_randn` (standard normal) are computed on the daemon from a seed and a call
#' counter, so `pg_manual_seed(s)` gives the same numbers as the Python client's
#' `Tensor.manual_seed(s)`.
#'
#' @param ... the shape, as integers or one vector.
#' @param value the fill value.
#' @param dtype the element type.
#' @param start,stop,step `pg_arange` bounds: start, start + step, ... below stop.
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
  dt <- if (is.null(dtype)) (if (all_int) "int32" else "float32") else check_dtype(dtype)
  n <- max(0, ceiling((stop - start) / step))
  if (n == 0) return(pg_tensor(array(numeric(), 0), dtype = dt))
  calc <- if (is_float_dtype(dt) || all_int) dt else "float32"
  x <- make(OP$ARANGE, calc, n, list(), n)
  if (step != 1) x <- binop(OP$MUL, x, const_tensor(step, calc))
  if (start != 0) x <- binop(OP$ADD, x, const_tensor(start, calc))
  pg_cast(x, dt)
}

#' @rdname pg_constructors
#' @export
pg_manual_seed <- function(seed = 0) {
  .pg$seed <- as.numeric(seed) %% 2^64
  .pg$counter <- 0
  invisible(NULL)
}

random_tensor <- function(op, shape, dtype) {
  if (is.null(.pg$seed)) pg_manual_seed(as.numeric(Sys.time()) * 1000 %% 2^31)
  counter <- .pg$counter
  .pg$counter <- counter + 1
  make(op, dtype, shape, list(), list(seed = format(.pg$seed, scientific = FALSE), counter = counter,
                                      shape = shape))
}

#' @rdname pg_constructors
#' @export
pg_rand <- function(..., dtype = "float32") random_tensor(OP$RAND, shape_args(...), check_dtype(dtype))

#' @rdname pg_constructors
#' @export
pg_randn <- function(..., dtype = "float32") random_tensor(OP$RANDN, shape_args(...), check_dtype(dtype))

#' Cast a tensor to another dtype
#' @param x a tensor.
#' @param dtype the new element type.
#' @return a tensor.
#' @export
pg_cast <- function(x, dtype) {
  dt <- check_dtype(dtype)
  if (dt == x$node$dtype) return(x)
  n <- x$node
  if (n$op == OP$CONST && !n$sent && (is_float_dtype(dt) || is.finite(n$arg))) {
    return(const_tensor(n$arg, dt, n$shape))  # fold: a constant of the new dtype
  }
  make(OP$CAST, dt, n$shape, list(x))
}

#' Realize tensors and read values
#'
#' `pg_realize` computes tensors on the daemon (the results stay there); `as.array` and
#' `as.vector` bring values back (an array with `dim` = shape; rank 0 gives a bare value);
#' `pg_item` reads a one-element tensor.
#' @param x a tensor.
#' @param ... more tensors to realize in the same request.
#' @return `pg_realize`: `x`, invisibly.
#' @export
pg_realize <- function(x, ...) {
  ts <- c(list(x), list(...))
  graph_realize(lapply(ts, function(t) t$node), FALSE)
  invisible(x)
}

tensor_value <- function(x) {
  n <- x$node
  if (prod(n$shape) == 0) {
    return(from_row_major(.Call(pg_c_decode, raw(), .dtype_wire[[n$dtype]]), n$shape))
  }
  graph_realize(list(n), TRUE)[[1]]
}

#' @rdname pg_realize
#' @export
as.array.polygrad_tensor <- function(x, ...) tensor_value(x)

#' @rdname pg_realize
#' @param mode as for [base::as.vector].
#' @export
as.vector.polygrad_tensor <- function(x, mode = "any") as.vector(tensor_value(x), mode)

#' @rdname pg_realize
#' @export
as.double.polygrad_tensor <- function(x, ...) as.double(tensor_value(x))

#' @rdname pg_realize
#' @export
pg_item <- function(x) {
  if (prod(x$node$shape) != 1) pg_abort("invalid_argument", sprintf("pg_item needs one element, shape is (%s)",
                                                                   paste(x$node$shape, collapse = ", ")))
  as.vector(tensor_value(x))
}

#' Shape, dtype and device of a tensor
#' @param x a tensor.
#' @return `dim`: the shape (integer; `NULL`-free, `integer(0)` for rank 0); `length`: elements;
#'   `pg_dtype`: the dtype name; `pg_device`: the device name.
#' @export
dim.polygrad_tensor <- function(x) as.integer(x$node$shape)

#' @rdname dim.polygrad_tensor
#' @export
length.polygrad_tensor <- function(x) as.integer(prod(x$node$shape))

#' @rdname dim.polygrad_tensor
#' @export
pg_dtype <- function(x) x$node$dtype

#' @rdname dim.polygrad_tensor
#' @export
pg_device <- function(x) tensor_device(x)

#' Print a tensor
#'
#' Shows the values (realizing the tensor), the dtype and the device.
#' @param x a tensor.
#' @param ... passed to [base::format].
#' @return `format`: a character vector; `print`: `x`, invisibly.
#' @export
format.polygrad_tensor <- function(x, ...) {
  head <- sprintf("<polygrad_tensor %s[%s] on %s>", x$node$dtype, paste(x$node$shape, collapse = ", "),
                  tensor_device(x))
  body <- utils::capture.output(print(tensor_value(x), ...))
  c(head, body)
}

#' @rdname format.polygrad_tensor
#' @export
print.polygrad_tensor <- function(x, ...) {
  cat(format(x, ...), sep = "\n")
  invisible(x)
}
