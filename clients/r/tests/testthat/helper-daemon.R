# Every test file talks to one daemon that the suite starts on a Unix socket in a temp dir (the
# embedded default: POLYGRAD_DAEMON, then build/polygradd of the source tree, then PATH) and
# stops at the end (teardown_env). POLYGRAD_ADDRESS, when set, names a daemon to use instead.
# Where no daemon binary can be found (R CMD check of the tarball on a machine without polygradd)
# every test skips, unless POLYGRAD_R_REQUIRE_DAEMON=1 (scripts/test) makes that an error.
daemon_error <- NULL
if (is.null(polygrad:::.pg$conn)) {
  daemon_error <- tryCatch({
    polygrad::pg_connect()
    NULL
  }, polygrad_unavailable = function(e) {
    if (Sys.getenv("POLYGRAD_R_REQUIRE_DAEMON") == "1") stop(e)
    conditionMessage(e)
  })
  reg.finalizer(environment(), function(e) polygrad::pg_disconnect(), onexit = TRUE)
}
skip_if_no_daemon <- function() {
  if (!is.null(daemon_error)) testthat::skip(paste("no polygradd:", daemon_error))
}

# The source tree's root when the package was installed from it (for Python and the README).
source_root <- function() {
  f <- system.file("source_tree", package = "polygrad")
  if (nzchar(f)) readLines(f, n = 1L) else ""
}

python_bin <- function() {
  p <- Sys.getenv("POLYGRAD_PYTHON", "/usr/bin/python3")
  if (file.exists(p)) p else ""
}

# Writes arrays as float32 little-endian row-major files plus shapes.txt, for the Python side.
write_arrays <- function(dir, arrays) {
  lines <- character()
  for (nm in names(arrays)) {
    a <- arrays[[nm]]
    d <- if (is.null(dim(a))) length(a) else dim(a)
    v <- if (length(d) > 1) as.vector(aperm(a)) else as.vector(a)
    writeBin(v, file.path(dir, nm), size = 4, endian = "little")
    lines <- c(lines, paste(nm, paste(d, collapse = " ")))
  }
  writeLines(lines, file.path(dir, "shapes.txt"))
}

# Polls `cond` until it holds. The bound is only for a real fault: each condition takes
# milliseconds (the sleep is the polling interval, not a guess at how long anything takes).
wait_until <- function(cond, what, bound = 120) {
  deadline <- Sys.time() + bound
  while (!cond()) {
    if (Sys.time() > deadline) stop("timed out after ", bound, " s waiting for ", what)
    Sys.sleep(0.02)
  }
}
