# The connection: an address (POLYGRAD_ADDRESS, or pg_connect()), or the embedded private daemon;
# one session per connection. Every RPC goes through rpc(), which adds the session id and turns
# failures into classed conditions.

#' Connect to polygradd
#'
#' Opens a connection and a session. With no address (and `POLYGRAD_ADDRESS` unset) a private
#' daemon is started on a Unix socket and stopped when the connection closes or R exits. Tensors
#' made before belong to the old session and cannot be used after reconnecting. If connecting
#' fails, the current connection (if any) is kept.
#'
#' @param address `"host:port"` or `"unix:/path"`; `""` starts the embedded daemon.
#' @param token bearer token sent on every call (daemons started with `--tokens-file`).
#' @param tls_ca path of a PEM CA bundle: TCP addresses then use TLS.
#' @param timeout seconds to wait for the daemon.
#' @return the connection (an environment), invisibly.
#' @export
pg_connect <- function(address = Sys.getenv("POLYGRAD_ADDRESS"), token = Sys.getenv("POLYGRAD_TOKEN"),
                       tls_ca = Sys.getenv("POLYGRAD_TLS_CA"), timeout = 30) {
  # The new connection is made first: when it fails, the current one stays usable.
  conn <- new.env(parent = emptyenv())
  conn$daemon <- NULL
  if (!nzchar(address)) {
    conn$daemon <- start_daemon(timeout = timeout)
    address <- conn$daemon$address
  }
  conn$address <- address
  ca <- if (nzchar(tls_ca)) paste(readLines(tls_ca, warn = FALSE), collapse = "\n") else ""
  conn$xp <- .Call(pg_c_connect, address, token, ca)
  conn$session <- ""
  ok <- FALSE
  on.exit(if (!ok && !is.null(conn$daemon)) stop_daemon(conn$daemon))
  conn$info <- first_info(conn, timeout)
  conn$max_inline <- if (conn$info$max_inline_bytes %||% 0 > 0) conn$info$max_inline_bytes else 1048576
  conn$max_nodes <- conn$info$max_nodes_per_request %||% 0
  conn$chunk <- if (conn$info$chunk_bytes %||% 0 > 0) conn$info$chunk_bytes else 1048576
  conn$session <- rpc_on(conn, "CreateSession", list())$session_id
  # The daemon closes sessions idle for --session-idle-timeout (10 min by default): renew the
  # lease from a C++ thread while this connection lives (POLYGRAD_KEEPALIVE seconds; 0: never).
  keepalive <- as.numeric(Sys.getenv("POLYGRAD_KEEPALIVE", "60"))
  if (!is.na(keepalive) && keepalive > 0) .Call(pg_c_keepalive, conn$xp, conn$session, keepalive)
  # Closing at exit (onexit = TRUE) frees the session and stops a private daemon with R.
  reg.finalizer(conn, close_conn, onexit = TRUE)
  ok <- TRUE
  pg_disconnect()
  .pg$conn <- conn
  invisible(conn)
}

#' Close the connection
#'
#' Closes the session (freeing everything it held on the daemon) and stops a private daemon.
#' @return `NULL`, invisibly.
#' @export
pg_disconnect <- function() {
  conn <- .pg$conn
  .pg$conn <- NULL
  if (!is.null(conn)) {
    graph_forget_session()
    close_conn(conn)
  }
  invisible(NULL)
}

close_conn <- function(conn) {
  if (isTRUE(conn$closed)) return(invisible(NULL))
  conn$closed <- TRUE
  dispatch_close(conn)
  if (nzchar(conn$session %||% "")) {
    try(.Call(pg_c_call, conn$xp, "CloseSession", list(session_id = conn$session), 5), silent = TRUE)
  }
  if (!is.null(conn$daemon)) stop_daemon(conn$daemon)
  invisible(NULL)
}

# GetInfo, retried while the daemon is still coming up: a daemon that refuses connections fails
# after a short grace (2 s) rather than the whole timeout, with gRPC's own message.
first_info <- function(conn, timeout) {
  start <- Sys.time()
  repeat {
    out <- .Call(pg_c_call, conn$xp, "GetInfo", list(), 5)
    if (out$code != 14L) return(rpc_value(out, "GetInfo", conn$address))  # 14: UNAVAILABLE
    waited <- as.numeric(difftime(Sys.time(), start, units = "secs"))
    if (waited >= min(timeout, if (is.null(conn$daemon)) 2 else timeout)) {
      return(rpc_value(out, "GetInfo", conn$address))
    }
    Sys.sleep(0.05)
  }
}

get_conn <- function() {
  if (is.null(.pg$conn)) pg_connect()
  .pg$conn
}

rpc_on <- function(conn, method, request, timeout = 0) {
  rpc_value(.Call(pg_c_call, conn$xp, method, request, timeout), method, conn$address)
}

# A call of this session: session_id is added to the request. One that names nodes, handles or
# steps first waits for what is outstanding on the stream (dispatch.R), which it must not overtake.
rpc <- function(method, request = list(), timeout = 0) {
  conn <- get_conn()
  if (method %in% c("Realize", "Release", "CompileStep", "RunStep", "ReleaseStep")) quiet()
  request$session_id <- conn$session
  rpc_on(conn, method, request, timeout)
}

#' Information about the daemon
#'
#' @return a list: version, devices and the limits (GetInfo).
#' @export
pg_info <- function() get_conn()$info

`%||%` <- function(a, b) if (is.null(a)) b else a
