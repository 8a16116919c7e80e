# Acceptance: a long call can be interrupted with Ctrl-C. The client waits for the daemon's answer
# polling for a user interrupt; on SIGINT it cancels the call, waits for it to end, and R gets its
# `interrupt` condition. The call is held in flight by tests/tools/held-compiler (docs/TESTING.md):
# the daemon compiles through it, and while the gate's `open` file is absent every compile waits,
# so nothing here depends on how fast the machine is.

skip_if_no_daemon()

test_that("SIGINT during a realize cancels the call and raises R's interrupt condition", {
  root <- source_root()
  held <- file.path(root, "tests", "tools", "held-compiler")
  skip_if(!nzchar(root) || !file.exists(held), "needs tests/tools/held-compiler from the source tree")
  binary <- polygrad:::find_daemon_binary()
  work <- tempfile("pg-interrupt-")
  dir.create(work)
  gate <- file.path(work, "gate")
  dir.create(gate)
  file.symlink(held, file.path(gate, "cc"))
  file.create(file.path(gate, "open"))  # open while the daemon starts: its compiler probe runs
  sock <- file.path(work, "d.sock")
  log <- file.path(work, "polygradd.log")
  # --quick-compile=off: the realize waits for its held compile (a quick build would answer it).
  argv <- c(normalizePath(binary), "--listen=", "--metrics-listen=", paste0("--unix-socket=", sock),
            paste0("--cache-dir=", file.path(work, "cache")), paste0("--compiler=", file.path(gate, "cc")),
            "--quick-compile=off")
  daemon <- list(pid = .Call(polygrad:::pg_c_spawn, argv, log), dir = work)
  on.exit({
    file.create(file.path(gate, "open"))  # let anything still held finish
    polygrad:::stop_daemon(daemon)  # stops it and removes `work`
  })
  wait_until(function() file.exists(sock) || !.Call(polygrad:::pg_c_alive, daemon$pid), "the daemon's socket")
  expect_true(file.exists(sock), info = paste(readLines(log), collapse = "\n"))
  unlink(file.path(gate, "open"))  # from now on every compile is held

  pidfile <- file.path(work, "child.pid")
  marker <- file.path(work, "child.result")
  script <- file.path(work, "child.R")
  writeLines(c(
    "library(polygrad)",
    sprintf("writeLines(as.character(Sys.getpid()), %s)", deparse(pidfile)),
    sprintf("pg_connect(%s)", deparse(paste0("unix:", sock))),
    "x <- pg_tensor(c(1, 2, 3))",
    "res <- tryCatch({ as.array(exp(x) * 3 + 1); 'finished' },",
    "                interrupt = function(e) 'interrupted',",
    "                error = function(e) paste('error:', conditionMessage(e)))",
    sprintf("writeLines(res, %s)", deparse(paste0(marker, ".tmp"))),
    sprintf("file.rename(%s, %s)", deparse(paste0(marker, ".tmp")), deparse(marker))), script)
  lib <- paste0("R_LIBS=", paste(.libPaths(), collapse = ":"))
  system2(file.path(R.home("bin"), "Rscript"), shQuote(script), wait = FALSE, env = lib,
          stdout = file.path(work, "child.log"), stderr = file.path(work, "child.log"))

  held_compiles <- function() list.files(gate, pattern = "^held\\.")
  wait_until(function() length(held_compiles()) > 0 || file.exists(marker), "a compile held at the gate")
  expect_false(file.exists(marker))  # the realize is in flight, waiting for its kernel
  tools::pskill(as.integer(readLines(pidfile)), tools::SIGINT)
  wait_until(function() file.exists(marker), "the interrupted R process to report")
  expect_identical(readLines(marker), "interrupted", info = paste(readLines(file.path(work, "child.log")), collapse = "\n"))
  # The call ended while its compile was still held: the daemon saw it cancelled.
  expect_false(file.exists(file.path(gate, "open")))
  # A realize on the session's Execute stream is logged as Execute.realize (unary: Realize).
  cancelled <- function() any(grepl("request failed", readLines(log)) &
                                grepl("method=(Execute\\.realize|Realize)", readLines(log)) &
                                grepl("code=CANCELLED", readLines(log)))
  wait_until(cancelled, "the daemon to log the cancelled Realize")
  expect_true(cancelled())
})
