# jit(fn): tinygrad's TinyJit for R, as the Python client's polygrad.TinyJit. The first call runs
# fn as it is and notes the tensors it rebinds and the optimizers it steps (reached as arguments or
# through closures); the second compiles fn with those as state (compile_step's tracer); every later
# call is one RunStep.

#' Compile a function the way tinygrad's TinyJit does
#'
#' @param fn a function of tensors (and other arguments) returning a tensor, a list of tensors or
#'   `NULL`; the models and optimizers it uses may come from its enclosing environment.
#' @return a function with fn's arguments. Its first call runs fn; the second compiles fn into a
#'   step on the daemon and runs it; later calls are one RunStep each, with the tensor arguments
#'   as new inputs and the model's weights and optimizer state updated in place. It returns new
#'   tensors. Other shapes or dtypes of the tensor arguments raise an error; `jit_reset(f)`
#'   forgets the compiled step. A bound variable argument ([pg_bind]) with a new value replays
#'   with that value when fn used it only in symbolic sizes; when fn took it as a number
#'   (`as.numeric(pos)`, a comparison), or it sized nothing, the call compiles fn again (the
#'   daemon's kernels are cached).
#' @export
jit <- function(fn) {
  force(fn)
  st <- new.env(parent = emptyenv())
  st$cnt <- 0L
  st$step <- NULL
  f <- function(...) {
    args <- list(...)
    if (is.null(names(args)) || any(!nzchar(names(args)))) names(args) <- names(formals(fn))[seq_along(args)]
    is_in <- vapply(args, is_tensor, TRUE)
    if (st$cnt == 0L || identical(Sys.getenv("JIT"), "0")) {
      ret <- jit_eager(fn, args, st)
    } else {
      info <- lapply(args[is_in], function(t) list(shape = as.numeric(t$node$shape), dtype = t$node$dtype))
      # A tensor the step updates that was rebound since (another jit's first call): compile again.
      stale <- !is.null(st$step) && any(vapply(seq_along(st$step$state), function(i)
        !identical(st$step$state[[i]]$node, st$step$before[[i]]), TRUE))
      if (stale) {
        st$step$release()
        st$state <- st$step$state
      }
      variables <- NULL
      if (st$cnt > 1L && !stale) {
        if (!identical(names(args)[is_in], st$names) || !identical(info, st$info)) {
          pg_abort("invalid_argument", sprintf("jit: args mismatch: this call's tensors are %s, the compiled step takes %s",
                                               describe_info(names(args)[is_in], info), describe_info(st$names, st$info)))
        }
        variables <- jit_variables(st, bound_values(args))
        if (is.null(variables)) {  # a changed Variable the step cannot take per run: capture again
          st$step$release()
          st$state <- st$step$state
        }
      }
      if (st$cnt == 1L || stale || is.null(variables)) {
        st$step <- jit_capture(fn, args, st)
        st$names <- names(args)[is_in]
        st$info <- info
        variables <- NULL
      }
      ret <- jit_replay(st$step, args[is_in], variables)
    }
    st$cnt <- st$cnt + 1L
    ret
  }
  attr(f, "jit") <- st
  class(f) <- c("polygrad_jit", "function")
  f
}

#' @rdname jit
#' @param f a function made by `jit`.
#' @export
jit_reset <- function(f) {
  st <- attr(f, "jit")
  if (!is.null(st$step)) st$step$release()
  st$step <- NULL
  st$cnt <- 0L
  invisible(f)
}

describe_info <- function(names, info) {
  paste(vapply(seq_along(info), function(i) sprintf("%s %s(%s)", names[[i]], info[[i]]$dtype,
                                                    paste(info[[i]]$shape, collapse = ", ")), ""), collapse = "; ")
}

# The first call: fn as it is, noting what it rebinds and steps; those are realized after it, so
# the compile finds them as buffers to update in place.
jit_eager <- function(fn, args, st) {
  w <- new.env(parent = emptyenv())
  w$assigned <- list()
  w$optimizers <- list()
  .pg$watch <- w
  ret <- tryCatch(do.call(fn, args), finally = .pg$watch <- NULL)
  st$state <- unique_envs(w$assigned)
  st$optimizers <- unique_envs(w$optimizers)
  outs <- if (is_tensor(ret)) list(ret) else Filter(is_tensor, if (is.list(ret)) ret else list())
  todo <- c(outs, st$state)
  if (length(todo)) graph_realize(lapply(todo, function(t) t$node), FALSE)
  ret
}

# The compile, noting the Variables fn took as plain numbers (variable.R) and the bound values.
jit_capture <- function(fn, args, st) {
  uses <- new.env(parent = emptyenv())
  before <- .pg$concrete_uses
  .pg$concrete_uses <- uses
  on.exit(.pg$concrete_uses <- before)
  step <- compile_args(fn, args, st$state, st$optimizers)
  st$concrete <- ls(uses)
  st$bound <- bound_values(args)
  step
}

# (argument, Variable name, value) of every bound Variable argument.
bound_values <- function(args) {
  out <- list()
  for (nm in names(args)) {
    a <- args[[nm]]
    if (inherits(a, "pg_bound")) out[[length(out) + 1L]] <- list(arg = nm, name = a$var$name, value = sym_int(a))
  }
  out
}

# The Variable values (a named list) a replay sends for the call's `bound` values, or NULL when the
# step cannot take them per run: other arguments, or a changed Variable that fn took as a plain
# number while capturing, or that sized no symbolic dim of the step.
jit_variables <- function(st, bound) {
  key <- function(b) vapply(b, function(v) paste(v$arg, v$name, sep = "\r"), "")
  if (!identical(key(bound), key(st$bound))) return(NULL)
  changed <- list()
  for (i in seq_along(bound)) {
    if (bound[[i]]$value != st$bound[[i]]$value) changed[[bound[[i]]$name]] <- bound[[i]]$value
  }
  names_all <- vapply(bound, function(b) b$name, "")
  if (anyDuplicated(names_all)) return(if (length(changed)) NULL else list())
  if (any(names(changed) %in% st$concrete) || !all(names(changed) %in% st$step$variables)) return(NULL)
  st$bound <- bound
  changed[sort(names(changed))]
}

# One RunStep: host data of the tensor arguments travels with it, a realized tensor by handle.
# Dispatched like a compiled step's run: the outputs are new tensors whose bytes (downloaded when
# too large to inline) arrive with the answer; a graph or read that needs one waits for it.
jit_replay <- function(step, tensors, variables = NULL) {
  feeds <- list()
  for (nm in names(tensors)) {
    n <- tensors[[nm]]$node
    id <- step$input_nodes[[nm]]$id
    if (n$op == OP$BUFFER && !isTRUE(n$sent) && is.raw(n$arg)) {
      feeds[[length(feeds) + 1L]] <- list(node_id = id, data = n$arg)
    } else {
      if (!nzchar(n$handle)) graph_realize(list(n), FALSE)
      if (identical(n$handle, "-1")) pg_synchronize()  # its handle comes with the realize's answer
      feeds[[length(feeds) + 1L]] <- list(node_id = id, handle = n$handle)
    }
  }
  nodes <- lapply(step$out_nodes, function(o) {
    n <- new_node(OP$BUFFER, o$dtype, o$shape)
    n$awaited <- TRUE
    n
  })
  step$run_feeds(feeds, variables = variables, on_answer = function(resp) {
    for (i in seq_along(nodes)) {
      o <- step$out_nodes[[i]]
      r <- resp$outputs[[i]]
      v <- step_output_value(o, r)
      nodes[[i]]$arg <- if (isTRUE(r$has_data)) r$data %||% raw() else .Call(pg_c_encode, to_row_major(v), .dtype_wire[[o$dtype]])
      nodes[[i]]$cache <- v  # whatever its size: reading it must not send it back and fetch it again
      nodes[[i]]$awaited <- NULL
    }
  })
  outs <- lapply(nodes, wrap_node)
  if (length(outs) == 1L) outs[[1]] else if (length(outs)) outs else NULL
}
