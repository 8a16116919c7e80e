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
  track <- FALSE
  if (.pg$no_grad == 0L && .pg$untracked == 0L) {
    for (t in src) {
      if (isTRUE(t$rg) || t$node$rg) {
        track <- TRUE
        break
      }
    }
  }
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
  note_created(t)
  t
}

#' Read a tensor from a URL
#'
#' The bytes at an http(s) URL as a 1-D uint8 tensor (tinygrad's `Tensor.from_url`);
#' `gunzip = TRUE` decompresses them first. Other schemes are refused.
#' @param url an http:// or https:// URL.
#' @param gunzip decompress gzip data.
#' @param timeout seconds to wait for the server.
#' @return a uint8 tensor.
#' @export
pg_from_url <- function(url, gunzip = FALSE, timeout = 60) {
  if (!is.character(url) || length(url) != 1L || !grepl("^https?://", url)) {
    pg_abort("invalid_argument", sprintf("pg_from_url reads http:// and https:// URLs, got '%s'", substr(paste(url, collapse = " "), 1, 100)))
  }
  old <- options(timeout = timeout)
  on.exit(options(old), add = TRUE)
  con <- url(url, open = "rb")
  on.exit(close(con), add = TRUE)
  chunks <- list()
  repeat {
    chunk <- readBin(con, "raw", n = 1048576L)
    if (!length(chunk)) break
    chunks[[length(chunks) + 1L]] <- chunk
  }
  bytes <- if (length(chunks)) do.call(c, chunks) else raw()
  if (isTRUE(gunzip)) bytes <- memDecompress(bytes, type = "gzip")
  pg_from_bytes(bytes, "uint8")
}

#' Make a tensor from raw bytes, or read a tensor's bytes
#'
#' `pg_from_bytes` makes a tensor whose elements are `bytes` read as `dtype`: the wire layout,
#' little-endian and row-major (the last axis varies fastest), bool one byte (0 or 1), float16 and
#' bfloat16 their 16 bits. It is the exact way to make 64-bit integers past 2^53, which R's
#' doubles cannot hold. `pg_bytes` realizes a tensor and returns its bytes in the same layout
#' (exact where `as.array` gives 64-bit integers as doubles).
#' @param bytes a raw vector.
#' @param dtype the element type.
#' @param shape the shape (default: 1-D, as many elements as the bytes hold).
#' @param x a tensor.
#' @return `pg_from_bytes`: a tensor; `pg_bytes`: a raw vector.
#' @export
pg_from_bytes <- function(bytes, dtype, shape = NULL) {
  if (!is.raw(bytes)) pg_abort("invalid_argument", sprintf("pg_from_bytes takes a raw vector, not an R %s", typeof(bytes)))
  dt <- check_dtype(dtype)
  size <- .dtype_size[[dt]]
  if (length(bytes) %% size != 0) {
    pg_abort("invalid_argument", sprintf("%d bytes are not a whole number of %s elements (%d bytes each)",
                                         length(bytes), dt, size))
  }
  shape <- if (is.null(shape)) length(bytes) / size else as.numeric(shape)
  if (any(shape < 0) || prod(shape) * size != length(bytes)) {
    pg_abort("invalid_argument", sprintf("shape (%s) of %s needs %s bytes, got %d", paste(shape, collapse = ", "),
                                         dt, format(prod(shape) * size), length(bytes)))
  }
  if (dt == "bool" && any(bytes > as.raw(1))) pg_abort("invalid_argument", "bool bytes must be 0 or 1")
  wrap_node(new_node(OP$BUFFER, dt, shape, list(), bytes))
}

#' @rdname pg_from_bytes
#' @export
pg_bytes <- function(x) {
  if (prod(x$node$shape) == 0) return(raw())
  realized_bytes(x)$data
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
    # A gradient lives where its target does (the daemon copies it back there).
    if (n$op == OP$GRADIENT) {
      n <- n$src[[2]]
      next
    }
    if (n$op == OP$BUFFER || !length(n$src)) return("CPU")
    n <- n$src[[1]]
  }
}

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
