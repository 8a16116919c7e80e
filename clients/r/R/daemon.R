# The embedded default: with no address configured, the package starts a private polygradd on a
# Unix socket in a temporary directory and stops it when the connection closes or R exits. The
# binary is found as the Python client finds it: POLYGRAD_DAEMON, then build/polygradd of the
# source tree the package was installed from, then polygradd on PATH.

find_daemon_binary <- function() {
  env <- Sys.getenv("POLYGRAD_DAEMON")
  if (nzchar(env)) return(env)
  tried <- character()
  src <- system.file("source_tree", package = "polygrad")  # written by configure, if any
  if (nzchar(src)) {
    cand <- file.path(readLines(src, n = 1L, warn = FALSE), "build", "polygradd")
    tried <- cand
    if (file.exists(cand) && file.access(cand, 1L) == 0L) return(cand)
  }
  found <- Sys.which("polygradd")
  if (nzchar(found)) return(unname(found))
  pg_abort("unavailable", sprintf(paste(
    "cannot reach polygradd at <embedded> (no daemon binary: set POLYGRAD_ADDRESS to a running daemon,",
    "or POLYGRAD_DAEMON to a polygradd binary; looked for %s and PATH)"),
    paste(c(tried, "build/polygradd"), collapse = ", ")[1]))
}

default_cache_dir <- function() {
  base <- Sys.getenv("XDG_CACHE_HOME")
  if (!nzchar(base)) base <- file.path(path.expand("~"), ".cache")
  file.path(base, "polygrad")
}

# Starts a daemon; returns list(pid, dir, socket, address, log). `args` are extra flags.
start_daemon <- function(binary = find_daemon_binary(), args = character(), timeout = 30) {
  dir <- tempfile("polygrad-")
  dir.create(dir, mode = "0700")
  sock <- file.path(dir, "polygradd.sock")
  log <- file.path(dir, "polygradd.log")
  argv <- c(normalizePath(binary), "--listen=", "--metrics-listen=", paste0("--unix-socket=", sock),
            paste0("--cache-dir=", default_cache_dir()), args)
  pid <- .Call(pg_c_spawn, argv, log)
  d <- list(pid = pid, dir = dir, socket = sock, address = paste0("unix:", sock), log = log)
  deadline <- Sys.time() + timeout
  # Waiting for the socket file is a readiness poll with a deadline, not a guess at speed.
  while (!file.exists(sock)) {
    if (!.Call(pg_c_alive, pid)) {
      why <- daemon_log_tail(log)
      unlink(dir, recursive = TRUE)
      pg_abort("unavailable", sprintf("cannot reach polygradd at %s (%s exited before listening; log: %s)",
                                      d$address, binary, why))
    }
    if (Sys.time() > deadline) {
      stop_daemon(d)
      pg_abort("unavailable", sprintf("cannot reach polygradd at %s (socket did not appear)", d$address))
    }
    Sys.sleep(0.02)
  }
  d
}

daemon_log_tail <- function(log) {
  if (!file.exists(log)) return("<empty>")
  txt <- paste(readLines(log, warn = FALSE), collapse = "\n")
  if (!nzchar(txt)) "<empty>" else substr(txt, max(1L, nchar(txt) - 2000L), nchar(txt))
}

stop_daemon <- function(d) {
  .Call(pg_c_stop, d$pid, 10)
  unlink(d$dir, recursive = TRUE)
  invisible(NULL)
}
