# Asynchronous dispatch (docs/PROTOCOL.md, "Asynchronous dispatch"; the R twin of the Python
# client's dispatch.py). pg_realize(), optimizer steps and releases go on the session's Execute
# stream (src/stream.cpp) and return once written: the daemon runs the stream's commands in order,
# and a graph sent next reads their outputs by node id. Reads (as.array, pg_item, ...) and
# pg_synchronize() wait, and raise the first error of what was sent before them. At most
# POLYGRAD_MAX_IN_FLIGHT commands (default 8) are outstanding: past that, the oldest is waited for.
# POLYGRAD_ASYNC=0 keeps every call unary and waiting; so does a daemon (or proxy) without the
# stream. Each command's answer is applied, oldest first, by the on_settle function it was sent
# with (graph.R), when a later call settles it.

dispatch_init <- function() {
  .pg$outstanding <- list()  # list(rid, what, on_settle, conn), oldest first
  .pg$deferred <- NULL       # a dispatched command's failure, for the next read or pg_synchronize()
}

max_in_flight <- function() {
  v <- suppressWarnings(as.integer(Sys.getenv("POLYGRAD_MAX_IN_FLIGHT", "8")))
  if (is.na(v) || v < 1L) 8L else v
}

# Whether `conn` has an open Execute stream (opened here on first use).
conn_stream <- function(conn) {
  if (identical(Sys.getenv("POLYGRAD_ASYNC"), "0") || isTRUE(conn$stream_refused)) return(FALSE)
  if (isTRUE(conn$stream_open)) return(TRUE)
  out <- .Call(pg_c_stream_open, conn$xp, conn$session)
  if (out$code == 0L) {
    conn$stream_open <- TRUE
    conn$max_in_flight <- max_in_flight()
  } else if (out$code == 14L) {
    rpc_value(out, "Execute", conn$address)  # the daemon is gone: that is the error
  } else {
    conn$stream_refused <- TRUE  # e.g. UNIMPLEMENTED from a proxy that passes unary calls only
  }
  isTRUE(conn$stream_open)
}

# Writes one command ("realize", "release", "run_step") without waiting for its answer.
# on_settle(value, error) is called by settle(), in order, once the answer is in.
stream_submit <- function(conn, kind, request, what, on_settle = NULL) {
  while (length(.pg$outstanding) >= conn$max_in_flight) settle_oldest(TRUE)
  rid <- .Call(pg_c_stream_submit, conn$xp, kind, request)
  .pg$outstanding[[length(.pg$outstanding) + 1L]] <- list(rid = rid, what = what, on_settle = on_settle, conn = conn)
  invisible(rid)
}

# Applies the oldest outstanding answer (waiting for it with `block`); FALSE when none was applied.
# An error goes to .pg$deferred (the first one kept) for the next read or pg_synchronize().
settle_oldest <- function(block) {
  if (!length(.pg$outstanding)) return(FALSE)
  p <- .pg$outstanding[[1L]]
  out <- .Call(pg_c_stream_take, p$conn$xp, p$rid, block)
  if (is.null(out)) return(FALSE)
  .pg$outstanding[[1L]] <- NULL
  err <- if (out$code == 0L) NULL else tryCatch(rpc_value(out, p$what, p$conn$address), error = function(e) e)
  failed <- tryCatch({
    if (!is.null(p$on_settle)) p$on_settle(out$value, err) else if (!is.null(err)) stop(err)
    NULL
  }, polygrad_error = function(e) e)
  if (!is.null(failed) && is.null(.pg$deferred)) .pg$deferred <- failed
  TRUE
}

# Applies the answers already in, without waiting.
settle_arrived <- function() {
  while (settle_oldest(FALSE)) NULL
  invisible(NULL)
}

#' Wait for everything sent to the daemon
#'
#' `pg_realize()`, optimizer steps and releases return once sent (asynchronous dispatch); this
#' waits until the daemon has run all of it and raises the first error among it. Reads
#' (`as.array`, `pg_item`, ...) wait the same way.
#' @return `NULL`, invisibly.
#' @export
pg_synchronize <- function() {
  while (settle_oldest(TRUE)) NULL
  err <- .pg$deferred
  .pg$deferred <- NULL
  if (!is.null(err)) stop(err)
  invisible(NULL)
}

# Before a unary call that names nodes, handles or steps: nothing outstanding may come after it.
quiet <- function() if (length(.pg$outstanding)) pg_synchronize()

# The connection's stream goes with it; what was outstanding is answered by its end.
dispatch_close <- function(conn) {
  if (isTRUE(conn$stream_open)) .Call(pg_c_stream_close, conn$xp)
  conn$stream_open <- FALSE
  .pg$outstanding <- list()
  .pg$deferred <- NULL
}
