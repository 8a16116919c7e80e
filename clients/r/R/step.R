# Compiled training steps: trace fn once (its realizes deferred) into one CompileStep, then run it
# with one small RunStep per step, as the Python client's compile_step does. Tensor arguments are
# the per-run inputs (fed by name in $run()); the tensors of every other argument (models,
# optimizers) are the step's state, updated in place by the daemon after each run.

#' Compile a training step
#'
#' @param fn a function of the arguments in `...`, returning the loss (a tensor, or a list of
#'   tensors whose first is the loss).
#' @param ... named arguments for fn: tensors (the inputs, fed each run) and models/optimizers.
#' @return a compiled step: `$run(x = ..., y = ...)` runs it with new input data (R arrays of the
#'   inputs' shapes), `$loss_value()` is the first output of the last run, `$outputs()` all of
#'   them, `$release()` frees it on the daemon.
#' @export
compile_step <- function(fn, ...) {
  args <- list(...)
  if (is.null(names(args)) || any(!nzchar(names(args)))) {
    names(args) <- names(formals(fn))[seq_along(args)]
  }
  compile_args(fn, args)
}

# compile_step on a named list of arguments; `more_state` and `more_optimizers` join what the
# arguments hold (jit's state, found while fn ran eagerly).
compile_args <- function(fn, args, more_state = list(), more_optimizers = list()) {
  is_in <- vapply(args, is_tensor, TRUE)
  inputs <- args[is_in]
  state <- Filter(function(t) !any(vapply(inputs, identical, TRUE, t)), c(parameters(args[!is_in]), more_state))
  state <- unique_envs(state)
  optimizers <- unique_envs(c(Filter(function(a) inherits(a, "polygrad_optimizer"), args), more_optimizers))
  everything <- c(inputs, state)
  if (length(everything)) graph_realize(lapply(everything, function(t) t$node), FALSE)
  input_nodes <- lapply(inputs, function(t) t$node)
  before <- lapply(state, function(t) t$node)
  grads <- lapply(state, function(t) t$grad)
  first_steps <- vapply(optimizers, function(o) o$steps, numeric(1))
  ok <- FALSE
  on.exit({
    for (i in seq_along(state)) {  # state tensors stand for their buffers, updated by every run
      if (!ok) state[[i]]$grad <- grads[[i]]
      state[[i]]$node <- before[[i]]
      before[[i]]$cache <- NULL
    }
    for (i in seq_along(optimizers)) optimizers[[i]]$steps <- first_steps[[i]]
  })
  tr <- trace_and_compile(fn, args, state, before, input_nodes, optimizers)
  ok <- TRUE
  first_k <- if (length(first_steps)) min(first_steps) + 1 else 1
  step <- new_compiled_step(tr, inputs, input_nodes, optimizers, first_k)
  step$state <- state    # the tensors updated in place...
  step$before <- before  # ... and the nodes they stand for
  step
}

# The environments of `xs`, each once (by identity), in order.
unique_envs <- function(xs) {
  out <- list()
  for (x in xs) if (!any(vapply(out, identical, TRUE, x))) out[[length(out) + 1L]] <- x
  out
}

trace_and_compile <- function(fn, args, state, before, input_nodes, optimizers) {
  conn <- get_conn()
  .pg$tracing <- new.env(parent = emptyenv())
  .pg$tracing$deferred <- list()
  tracing <- .pg$tracing
  seed_before <- .pg$seed
  counter_before <- .pg$counter
  result <- tryCatch(do.call(fn, args), finally = .pg$tracing <- NULL)
  # The random streams the trace drew, which every later run draws anew (as eager calls would). A
  # pg_manual_seed inside fn restarts the counter: the step then keeps the trace's numbers.
  drawn <- (.pg$counter - counter_before) %% 2^32
  random <- if (drawn > 0 && !is.null(.pg$seed) && (is.null(seed_before) || identical(seed_before, .pg$seed))) {
    list(seed = format(.pg$seed, scientific = FALSE), counter_base = counter_before, count = drawn)
  }
  outs <- if (is.null(result)) list() else if (is_tensor(result)) list(result) else result
  changed <- which(vapply(seq_along(state), function(i) !identical(state[[i]]$node, before[[i]]), TRUE))
  for (i in changed) {
    if (!identical(state[[i]]$node$shape, before[[i]]$shape) || state[[i]]$node$dtype != before[[i]]$dtype) {
      pg_abort("invalid_argument", "compile_step: fn changed a state tensor's dtype or shape")
    }
  }
  roots <- c(lapply(outs, function(t) t$node), lapply(changed, function(i) state[[i]]$node))
  todo <- if (length(roots)) unsent_nodes(roots) else list()
  todo_ids <- vapply(todo, function(n) n$id, numeric(1))
  # Optimizer scalars that change per step are inputs of the step, fed by $run().
  scalars <- list()
  for (o in optimizers) {
    for (nm in c("lr_scalar", "count")) {
      s <- o[[nm]]
      n <- if (!is.null(s) && !is.null(s$t)) s$t$node else NULL
      if (!is.null(n) && n$op == OP$BUFFER && (n$sent || n$id %in% todo_ids)) {
        scalars[[length(scalars) + 1L]] <- list(opt = o, name = nm, id = n$id)
      }
    }
  }
  scalar_ids <- sort(vapply(scalars, function(s) s$id, numeric(1)))
  for (n in todo) {
    if (n$op == OP$BUFFER && is.raw(n$arg) && length(n$arg) > conn$max_inline) {
      n$upload <- upload_bytes(n$dtype, n$shape, n$arg)
      n$arg <- n$upload
    }
  }
  wire <- lapply(todo, node_wire)
  deferred_ids <- vapply(tracing$deferred, function(n) n$id, numeric(1))
  sent_ids <- vapply(Filter(function(n) n$sent, tracing$deferred), function(n) n$id, numeric(1))
  materialize <- unique(deferred_ids[deferred_ids %in% c(todo_ids, sent_ids)])
  req <- list(
    nodes = wire, inputs = c(vapply(input_nodes, function(n) n$id, numeric(1)), scalar_ids),
    outputs = vapply(outs, function(t) t$node$id, numeric(1)),
    assigns = lapply(changed, function(i) list(target_node = before[[i]]$id, value = state[[i]]$node$id)),
    materialize = materialize)
  if (!is.null(random)) req$random <- random
  resp <- rpc("CompileStep", req)
  lapply(todo, mark_sent)
  for (n in todo) {
    if (nzchar(n$upload)) {
      .pg$dead_handles <- c(.pg$dead_handles, n$upload)
      n$upload <- ""
    }
  }
  list(resp = resp, outs = lapply(outs, function(t) t$node), scalars = scalars,
       targets = lapply(changed, function(i) before[[i]]), random = random)
}

new_compiled_step <- function(tr, inputs, input_nodes, optimizers, first_k) {
  s <- new.env(parent = emptyenv())
  s$step_id <- tr$resp$step_id
  s$stats <- tr$resp$stats
  s$k <- first_k
  s$values <- NULL
  s$sent_scalar <- list()
  s$gen <- .pg$gen
  s$input_nodes <- input_nodes
  s$out_nodes <- tr$outs
  s$variables <- as.character(unlist(tr$resp$variables))  # the Variables whose symbolic dims it takes per run
  s$run <- function(...) {
    feeds <- list()
    data <- list(...)
    for (nm in names(data)) {
      n <- input_nodes[[nm]]
      if (is.null(n)) pg_abort("invalid_argument", sprintf("compile_step: %s is not an input of this step (inputs: %s)",
                                                           nm, paste(names(input_nodes), collapse = ", ")))
      v <- data[[nm]]
      vshape <- if (!is.null(dim(v))) dim(v) else if (length(v) == 1L) numeric() else length(v)
      if (!identical(as.numeric(vshape), n$shape)) {
        pg_abort("invalid_argument", sprintf("input %s: got shape (%s), the step takes (%s)", nm,
                                             paste(vshape, collapse = ", "), paste(n$shape, collapse = ", ")))
      }
      feeds[[length(feeds) + 1L]] <- list(node_id = n$id, data = .Call(pg_c_encode, to_row_major(v), .dtype_wire[[n$dtype]]))
      n$cache <- NULL
    }
    # Dispatched: outputs() and loss_value() wait for the answer (dispatch.R).
    s$values <- NULL
    s$waiting <- TRUE
    s$run_feeds(feeds, on_answer = function(resp) {
      s$values <- lapply(seq_along(tr$outs), function(i) step_output_value(tr$outs[[i]], resp$outputs[[i]]))
      s$waiting <- FALSE
    })
    invisible(s)
  }
  # One RunStep with `feeds` (node_id and data or handle) and the optimizer scalars: the response;
  # with `on_answer`, sent on the session's stream without waiting, on_answer(response) called once
  # it is settled (at once where there is no stream). `variables`: new values (by name) of the
  # Variables in s$variables, kept by the daemon for later runs.
  s$run_feeds <- function(feeds, on_answer = NULL, variables = NULL) {
    for (sc in tr$scalars) {
      value <- optimizer_scalars(sc$opt, s$k)[[sc$name]]
      key <- as.character(sc$id)
      if (!is.null(value) && !identical(s$sent_scalar[[key]], value)) {
        feeds[[length(feeds) + 1L]] <- list(node_id = sc$id, data = .Call(pg_c_encode, value, 12L))
        s$sent_scalar[[key]] <- value
      }
    }
    if (!identical(s$gen, .pg$gen)) pg_abort("failed_precondition", "compile_step: this step belongs to a closed session")
    req <- list(step_id = s$step_id, inputs = feeds, want_data = TRUE)
    if (length(variables)) {
      req$variables <- lapply(names(variables), function(nm) list(name = nm, value = variables[[nm]]))
    }
    # The first run draws what the trace drew; every later one the next counters, as eagerly.
    if (!is.null(tr$random) && s$runs > 0) {
      seed <- if (is.null(.pg$seed)) tr$random$seed else format(.pg$seed, scientific = FALSE)
      req$random <- list(seed = seed, counter_base = .pg$counter)
      .pg$counter <- (.pg$counter + tr$random$count) %% 2^32
    }
    resp <- run_step_request(req, on_answer)
    for (o in optimizers) o$steps <- s$k
    s$k <- s$k + 1
    for (n in tr$targets) n$cache <- NULL  # the daemon changed these buffers in place
    for (n in input_nodes) n$cache <- NULL
    s$runs <- s$runs + 1
    resp
  }
  s$runs <- 0
  s$outputs <- function() {
    if (is.null(s$values) && isTRUE(s$waiting)) pg_synchronize()
    if (is.null(s$values)) pg_abort("failed_precondition", "compile_step: run() the step before reading its outputs")
    s$values
  }
  s$loss_value <- function() {
    v <- s$outputs()
    if (!length(v)) pg_abort("failed_precondition", "compile_step: fn returned no tensor")
    as.double(v[[1]])
  }
  s$release <- function() {
    if (identical(s$gen, .pg$gen)) rpc("ReleaseStep", list(step_id = s$step_id))
    invisible(NULL)
  }
  class(s) <- "polygrad_step"
  s
}

#' @export
print.polygrad_step <- function(x, ...) {
  cat(sprintf("<polygrad compiled step: %s kernels, %d runs>\n", format(x$stats$kernels %||% 0), x$k - 1))
  invisible(x)
}

# RunStep output `r` of the step output node `o` as an R value: its bytes, or downloaded from the
# daemon's copy of a large one, whose handle the caller owns: released with the next request.
step_output_value <- function(o, r) {
  if (isTRUE(r$has_data)) return(decode_result(o, r$dtype, r$shape, r$data %||% raw()))
  v <- download_node(list2env(list(handle = r$handle, dtype = o$dtype, shape = o$shape)))
  .pg$dead_handles <- c(.pg$dead_handles, r$handle)
  v
}

# One RunStep. Without `on_answer`: its response (on the session's stream when there is one, one
# message behind what is outstanding, waiting for it). With: sent without waiting where there is a
# stream, on_answer(response) called once it is settled (at once without a stream), and NULL.
run_step_request <- function(request, on_answer = NULL) {
  conn <- get_conn()
  if (!conn_stream(conn)) {
    resp <- rpc("RunStep", request)
    if (!is.null(on_answer)) on_answer(resp)
    return(resp)
  }
  got <- new.env(parent = emptyenv())
  stream_submit(conn, "run_step", request, "RunStep", function(value, err) {
    if (is.null(on_answer)) {
      got$value <- value
      got$err <- err
    } else {
      if (!is.null(err)) stop(err)
      on_answer(value)
    }
  })
  if (!is.null(on_answer)) return(invisible(NULL))
  pg_synchronize()
  if (!is.null(got$err)) stop(got$err)
  got$value
}
