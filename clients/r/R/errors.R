# Conditions: every failure is an R condition of class c("polygrad_<status>", "polygrad_error",
# "error", "condition") carrying the daemon's message and gRPC code, so callers can tryCatch a
# particular status (e.g. polygrad_invalid_argument) or every polygrad error.

.status_names <- c("ok", "cancelled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
                   "already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
                   "aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
                   "unauthenticated")

pg_condition <- function(status, message, code = match(status, .status_names) - 1L, call = NULL) {
  structure(class = c(paste0("polygrad_", status), "polygrad_error", "error", "condition"),
            list(message = message, call = call, code = code, status = status))
}

pg_abort <- function(status, message) stop(pg_condition(status, message))

# Turns a C++ call outcome into its value, or signals the condition for its status. An interrupt
# (the call was cancelled on Ctrl-C) is re-raised as R's own interrupt once the call has ended.
rpc_value <- function(out, what, address = "") {
  if (isTRUE(out$interrupted)) {
    signalCondition(structure(class = c("interrupt", "condition"), list(message = "", call = NULL)))
    invokeRestart("abort")
  }
  if (out$code == 0L) return(out$value)
  status <- .status_names[out$code + 1L]
  if (is.na(status)) status <- "unknown"
  msg <- if (status == "unavailable") {
    sprintf("cannot reach polygradd at %s (%s: %s)", address, what, out$message)
  } else {
    sprintf("%s failed: %s: %s", what, toupper(status), out$message)
  }
  stop(pg_condition(status, msg, out$code))
}
