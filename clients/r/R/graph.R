# The session-scoped node table (the R twin of clients/python/polygrad/graph.py, so both clients
# send the daemon the same graphs). Each tensor stands for a node (an environment). A node names
# its sources, so they live while a node built on them is unsent. When a sent node is garbage
# collected, its finalizer queues its id; queued ids ride as release_nodes on the next Realize.
# A realized node drops its sources: its id now stands for the daemon's buffer.
#
# Autograd bookkeeping as in Python: a node computed from tensors that require grad is `rg`; when
# realized, its sources move to `keep`, so a later GRADIENT can re-send the history (relazy). A
# `stop` node (pg_detach) is realized on its own before a graph that uses it is sent.

graph_init <- function() {
  .pg$next_id <- 1
  .pg$gen <- 1
  .pg$dead <- numeric()          # sent ids whose nodes were collected
  .pg$dead_handles <- character()  # upload handles to release
  .pg$leaves <- list()           # weak references to tensors with requires_grad = TRUE
  # Weak references to float tensors made from data or random draws with requires_grad unset
  # (NULL): tinygrad's gradient targets when a loss depends on no requires_grad = TRUE tensor. An
  # environment (appending to a list would copy it), pruned of dead entries as it grows.
  .pg$created <- new.env(hash = TRUE, parent = emptyenv())
  .pg$created_n <- 0
  .pg$created_prune_at <- 1024
  .pg$tracing <- NULL            # compile_step's trace: realizes are deferred
  # Which Node.arg each op carries, by op number + 1 (the schema's *_ARG_OPS, looked up once here
  # rather than four %in% per node sent).
  kinds <- character(max(unlist(OP)) + 1L)
  kinds[SHAPE_ARG_OPS + 1L] <- "shape"
  kinds[AXES_ARG_OPS + 1L] <- "axes"
  kinds[PAIRS_ARG_OPS + 1L] <- "pairs"
  kinds[COMPOSITE_ARG_OPS + 1L] <- "composite"
  kinds[OP$CONST + 1L] <- "constant"
  kinds[OP$BUFFER + 1L] <- "buffer"
  .pg$arg_kind <- kinds
  .pg$untracked <- 0L
  .pg$no_grad <- 0L
  dispatch_init()
}

node_died <- function(n) {
  if (isTRUE(n$sent) && identical(n$gen, .pg$gen)) .pg$dead <- c(.pg$dead, n$id)
  if (nzchar(n$upload %||% "")) .pg$dead_handles <- c(.pg$dead_handles, n$upload)
}

new_node <- function(op, dtype, shape, src = list(), arg = NULL, rg = FALSE, stop = FALSE) {
  n <- new.env(parent = emptyenv())
  n$id <- .pg$next_id
  .pg$next_id <- .pg$next_id + 1
  n$op <- op
  n$dtype <- dtype
  n$shape <- as.numeric(shape)
  n$src <- src
  n$arg <- arg
  n$sent <- FALSE
  n$handle <- ""
  n$gen <- 0
  n$cache <- NULL
  n$rg <- rg
  n$stop <- stop
  n$keep <- list()
  n$upload <- ""
  reg.finalizer(n, node_died)
  n
}

graph_forget_session <- function() {
  .pg$gen <- .pg$gen + 1
  .pg$outstanding <- list()
  .pg$deferred <- NULL
  .pg$dead <- numeric()
  .pg$dead_handles <- character()
}

flush_releases <- function() {
  ids <- .pg$dead
  handles <- .pg$dead_handles
  .pg$dead <- numeric()
  .pg$dead_handles <- character()
  if (!length(ids) && !length(handles)) return(invisible(NULL))
  conn <- .pg$conn
  if (!is.null(conn) && conn_stream(conn)) {
    stream_submit(conn, "release", list(node_ids = ids, handles = handles), "Release", release_settled)
  } else {
    tryCatch(rpc("Release", list(node_ids = ids, handles = handles)), polygrad_not_found = function(e) NULL)
  }
  invisible(NULL)
}

# All or nothing on the daemon: an id it does not know must not fail the batch for good.
release_settled <- function(value, err) {
  if (!is.null(err) && !inherits(err, "polygrad_not_found")) stop(err)
}

node_inputs <- function(n) if (nzchar(n$handle) && length(n$keep)) n$keep else n$src

# Nodes behind root (through node_inputs), sources first; where stop_at is TRUE, not entered.
toposort <- function(root, stop_at = function(n) FALSE) {
  order <- list()
  seen <- new.env(parent = emptyenv())
  visit <- function(n) {
    key <- as.character(n$id)
    if (!is.null(seen[[key]])) return()
    assign(key, TRUE, envir = seen)
    if (!stop_at(n)) for (s in node_inputs(n)) visit(s)
    order[[length(order) + 1L]] <<- n
  }
  visit(root)
  order
}

# root's value as lazy graph down to the gradient targets (see the file comment): realized rg
# nodes on the way, and everything above them, become fresh nodes of the same op.
relazy <- function(root, targets) {
  memo <- new.env(parent = emptyenv())
  is_end <- function(n) n$id %in% targets || n$stop
  for (n in toposort(root, is_end)) {
    key <- as.character(n$id)
    if (is_end(n)) {
      memo[[key]] <- n
      next
    }
    ins <- node_inputs(n)
    new <- lapply(ins, function(s) memo[[as.character(s$id)]])
    changed <- any(vapply(seq_along(ins), function(i) !identical(new[[i]], ins[[i]]), TRUE))
    memo[[key]] <- if ((nzchar(n$handle) && length(n$keep)) || changed) {
      new_node(n$op, n$dtype, n$shape, new, n$arg, rg = TRUE)
    } else n
  }
  memo[[as.character(root$id)]]
}

# Nodes reachable from outputs that the daemon has not seen, sources first (depth first, in the
# order the Python client walks them).
unsent_nodes <- function(outputs) {
  order <- list()
  state <- new.env(parent = emptyenv())
  visit <- function(n) {
    if (n$sent) {
      if (!identical(n$gen, .pg$gen)) pg_abort("failed_precondition",
                                               sprintf("tensor node %s belongs to a closed polygrad session", n$id))
      return()
    }
    key <- as.character(n$id)
    if (!is.null(state[[key]])) return()
    if (!is.null(n$awaited)) {  # an output of a dispatched jit replay: its bytes come with the answer
      pg_synchronize()
      if (!is.null(n$awaited)) pg_abort("failed_precondition",
                                        sprintf("node %s: the command that computes it ended without an answer", n$id))
    }
    assign(key, FALSE, envir = state)
    if (n$op == OP$GRADIENT) n$src <- list(relazy(n$src[[1]], n$src[[2]]$id), n$src[[2]])
    for (s in n$src) visit(s)
    assign(key, TRUE, envir = state)
    order[[length(order) + 1L]] <<- n
  }
  for (n in outputs) visit(n)
  order
}

node_wire <- function(n) {
  w <- list(id = n$id, op = n$op, dtype = .dtype_wire[[n$dtype]],
            src = vapply(n$src, function(s) s$id, numeric(1)))
  a <- n$arg
  # which ops carry which Node.arg is the op schema's (generated tables; .pg$arg_kind)
  switch(.pg$arg_kind[[n$op + 1L]],
    shape = w$shape <- list(dims = a),
    axes = w$axes <- list(axes = a),
    pairs = w$pairs <- list(begin = a$begin, end = a$end),
    composite = w$composite <- a,  # a named list of CompositeArg fields; unset ones are proto3 defaults
    constant = {
      k <- dtype_kind(n$dtype)
      w$constant <- c(list(shape = n$shape), switch(k, f = list(float_value = as.double(a)),
                                                    b = list(bool_value = as.logical(a)),
                                                    u = list(uint_value = a), list(int_value = a)))
    },
    buffer = w$buffer <- if (is.raw(a)) list(data = a, shape = n$shape) else list(handle = a, shape = n$shape))
  # SymbolicDim entries of a RESHAPE, EXPAND or SHRINK with symbolic sizes (variable.R)
  sym <- attr(a, "symbolic", exact = TRUE)
  if (!is.null(sym)) w$symbolic <- sym
  w
}

mark_sent <- function(n) {
  n$sent <- TRUE
  n$gen <- .pg$gen
}

# The daemon holds the bytes now (kept until then: a failed request sends them again).
drop_data <- function(n) if (n$op == OP$BUFFER && is.raw(n$arg)) n$arg <- NULL

# Sends what the daemon lacks and realizes `outputs` (nodes); with want_data, their R values.
graph_realize <- function(outputs, want_data = FALSE) {
  if (!is.null(.pg$tracing)) {  # compile_step: the realize becomes part of the step
    if (want_data) pg_abort("failed_precondition", paste(
      "compile_step: fn read a tensor's value while being traced;",
      "return the tensor from fn instead and read it from the step"))
    .pg$tracing$deferred <- c(.pg$tracing$deferred, outputs)
    return(vector("list", length(outputs)))
  }
  for (n in outputs) if (!is.null(n$awaited)) {  # a jit replay's output: its value comes with the answer
    pg_synchronize()
    break
  }
  if (want_data && all(vapply(outputs, function(n) !is.null(n$cache), TRUE))) {
    return(lapply(outputs, function(n) n$cache))
  }
  conn <- get_conn()
  settle_arrived()
  ids <- vapply(outputs, function(n) n$id, numeric(1))
  uniq <- outputs[!duplicated(ids)]
  todo <- unsent_nodes(uniq)
  stops <- list()
  for (n in todo) {
    if (n$stop) next
    for (s in n$src) if (s$stop && !s$sent && !nzchar(s$handle)) stops[[length(stops) + 1L]] <- s
  }
  stops <- unique_nodes(stops)
  if (length(stops)) {
    graph_realize(stops, FALSE)
    todo <- unsent_nodes(uniq)
  }
  if (!length(todo) && !want_data && all(vapply(uniq, function(n) nzchar(n$handle), TRUE)) &&
      !length(.pg$dead)) {
    return(vector("list", length(outputs)))
  }
  budget <- 3 * 2^20  # inline bytes per request, well under gRPC's message limit
  for (n in todo) {
    if (n$op == OP$BUFFER && is.raw(n$arg)) {
      nb <- length(n$arg)
      if (nb > conn$max_inline || nb > budget) {
        n$upload <- upload_bytes(n$dtype, n$shape, n$arg)
        n$arg <- n$upload
      } else {
        budget <- budget - nb
      }
    }
  }
  if (conn_stream(conn)) return(dispatch_realize(conn, outputs, uniq, todo, want_data))
  wire <- lapply(todo, node_wire)
  release <- .pg$dead
  .pg$dead <- numeric()
  limit <- if (conn$max_nodes > 0) conn$max_nodes else max(1, length(wire))
  start <- 0L
  while (length(wire) - start > limit) {  # node batches past the daemon's limit go first
    rpc("Realize", list(nodes = wire[start + seq_len(limit)]))
    lapply(todo[start + seq_len(limit)], mark_sent)
    lapply(todo[start + seq_len(limit)], drop_data)
    start <- start + limit
  }
  rest <- seq_along(wire) > start
  resp <- tryCatch(
    rpc("Realize", list(nodes = wire[rest], outputs = vapply(uniq, function(n) n$id, numeric(1)),
                        want_data = want_data, release_nodes = release)),
    error = function(e) {
      .pg$dead <- c(release, .pg$dead)
      stop(e)
    })
  lapply(todo[rest], mark_sent)
  lapply(todo[rest], drop_data)
  for (n in todo) {  # a sent BUFFER holds its data: the upload handle itself can go
    if (nzchar(n$upload)) {
      .pg$dead_handles <- c(.pg$dead_handles, n$upload)
      n$upload <- ""
    }
  }
  if (length(.pg$dead_handles)) flush_releases()
  bind_results(uniq, resp)
  if (!want_data) return(vector("list", length(outputs)))
  result_values(outputs, uniq, resp)
}

# A Realize's answer: each output's id now stands for its buffer, so the graph behind it goes
# (kept for a later gradient when it is tracked).
bind_results <- function(uniq, resp) {
  results <- resp$results
  if (length(results) != length(uniq)) {
    pg_abort("internal", sprintf("Realize returned %d results for %d outputs", length(results), length(uniq)))
  }
  for (i in seq_along(uniq)) {
    n <- uniq[[i]]
    n$handle <- results[[i]]$handle %||% "-1"
    if (n$rg && length(n$src)) n$keep <- n$src  # for a later gradient through this value
    n$src <- list()
  }
}

result_values <- function(outputs, uniq, resp) {
  values <- list()
  for (i in seq_along(uniq)) {
    n <- uniq[[i]]
    r <- resp$results[[i]]
    v <- if (isTRUE(r$has_data)) decode_result(n, r$dtype, r$shape, r$data %||% raw())
         else download_node(n)
    if (length(v) * .dtype_size[[n$dtype]] <= 65536) n$cache <- v
    values[[as.character(n$id)]] <- v
  }
  lapply(outputs, function(n) values[[as.character(n$id)]])
}

# graph_realize on the session's Execute stream (dispatch.R). Until its answer is settled the
# outputs count as realized (handle "-1") and the sent nodes as sent; both are undone if it
# fails. Queued node releases ride along as release_nodes (the daemon accepts the ids of failed
# requests there).
dispatch_realize <- function(conn, outputs, uniq, todo, want_data) {
  if (length(.pg$dead_handles)) {
    handles <- .pg$dead_handles
    .pg$dead_handles <- character()
    stream_submit(conn, "release", list(handles = handles), "Release", release_settled)
  }
  limit <- if (conn$max_nodes > 0) conn$max_nodes else max(1, length(todo))
  start <- 0L
  while (length(todo) - start > limit) {  # node batches past the daemon's limit go first
    batch <- todo[start + seq_len(limit)]
    flight <- new_flight(batch, list(), numeric())
    stream_submit(conn, "realize", list(nodes = lapply(batch, node_wire)), "Realize",
                  function(value, err) realize_settled(flight, value, err))
    lapply(batch, mark_sent)
    start <- start + limit
  }
  send <- todo[seq_along(todo) > start]
  release <- .pg$dead
  .pg$dead <- numeric()
  flight <- new_flight(send, uniq, release)
  req <- list(nodes = lapply(send, node_wire), outputs = vapply(uniq, function(n) n$id, numeric(1)),
              want_data = want_data, release_nodes = release)
  lapply(send, mark_sent)
  for (n in uniq) {
    flight$saved[[length(flight$saved) + 1L]] <- list(node = n, src = n$src, keep = n$keep, handle = n$handle)
    if (length(n$src)) {
      if (n$rg) n$keep <- n$src
      n$src <- list()
    }
    if (!nzchar(n$handle)) n$handle <- "-1"
  }
  stream_submit(conn, "realize", req, "Realize", function(value, err) realize_settled(flight, value, err))
  if (!want_data) return(vector("list", length(outputs)))
  pg_synchronize()
  result_values(outputs, uniq, flight$response)
}

new_flight <- function(send, outputs, release) {
  f <- new.env(parent = emptyenv())
  f$send <- send
  f$outputs <- outputs
  f$release <- release
  f$saved <- list()
  f$response <- NULL
  f
}

# A dispatched realize's answer, applied in order by settle_oldest.
realize_settled <- function(flight, value, err) {
  if (is.null(err)) {
    err <- tryCatch({
      bind_results(flight$outputs, value)
      NULL
    }, polygrad_error = function(e) e)
  }
  if (is.null(err)) {
    flight$response <- value
    for (n in flight$send) {
      drop_data(n)
      if (nzchar(n$upload)) {  # the daemon's node holds the buffer now
        .pg$dead_handles <- c(.pg$dead_handles, n$upload)
        n$upload <- ""
      }
    }
    return(invisible(NULL))
  }
  # The daemon added none of the request's nodes: they are unsent again, the outputs unrealized,
  # and its releases still to do (unless one of them is what it refused).
  if (!(inherits(err, "polygrad_not_found") && grepl("release_nodes", conditionMessage(err), fixed = TRUE))) {
    .pg$dead <- c(flight$release, .pg$dead)
  }
  for (n in flight$send) n$sent <- FALSE
  for (s in flight$saved) {
    if (!nzchar(s$handle)) {  # an output realized (or dispatched) before keeps that state
      s$node$src <- s$src
      s$node$keep <- s$keep
      s$node$handle <- s$handle
    }
  }
  stop(err)
}

unique_nodes <- function(nodes) {
  if (!length(nodes)) return(list())
  nodes[!duplicated(vapply(nodes, function(n) n$id, numeric(1)))]
}

upload_bytes <- function(dtype, shape, bytes) {
  conn <- get_conn()
  out <- .Call(pg_c_upload, conn$xp, conn$session, .dtype_wire[[dtype]], as.numeric(shape), bytes, conn$chunk)
  rpc_value(out, "Upload", conn$address)$handle
}

download_node <- function(n) {
  conn <- get_conn()
  quiet()
  d <- rpc_value(.Call(pg_c_download, conn$xp, conn$session, n$handle), "Download", conn$address)
  decode_result(n, d$dtype, d$shape, d$data)
}

# A result's bytes as an R value shaped like the node: an array with dim = shape (R's
# column-major order, converted from the wire's row-major), or a bare value for rank 0.
decode_result <- function(n, wire_dtype, shape, data) {
  dt <- if (is.null(wire_dtype) || wire_dtype == 0) n$dtype else dtype_from_wire(wire_dtype)
  shape <- as.numeric(shape %||% numeric())
  if (dt != n$dtype) pg_abort("internal", sprintf("daemon returned dtype %s for node %s, expected %s", dt, n$id, n$dtype))
  if (!identical(shape, n$shape)) {
    pg_abort("internal", sprintf("daemon returned shape (%s) for node %s, expected (%s)",
                                 paste(shape, collapse = ", "), n$id, paste(n$shape, collapse = ", ")))
  }
  count <- prod(shape)
  if (length(data) != count * .dtype_size[[dt]]) {
    pg_abort("internal", sprintf("daemon returned %d bytes for node %s", length(data), n$id))
  }
  from_row_major(.Call(pg_c_decode, data, .dtype_wire[[dt]]), shape)
}

from_row_major <- function(v, shape) {
  if (!length(shape)) return(v)
  if (length(shape) == 1L) return(array(v, dim = shape))
  aperm(array(v, dim = rev(shape)))
}

to_row_major <- function(x) {
  d <- dim(x)
  if (length(d) <= 1L) return(as.vector(x))
  as.vector(aperm(x))
}

# The daemon's view of a tensor: its realized buffer's dtype, shape and raw wire bytes
# (little-endian, row-major), for byte-level comparisons such as the conformance corpus.
realized_bytes <- function(x) {
  graph_realize(list(x$node), FALSE)
  conn <- get_conn()
  quiet()
  d <- rpc_value(.Call(pg_c_download, conn$xp, conn$session, x$node$handle), "Download", conn$address)
  list(dtype = dtype_from_wire(d$dtype), shape = as.numeric(d$shape), data = d$data)
}
