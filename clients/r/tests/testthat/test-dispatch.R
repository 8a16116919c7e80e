# Asynchronous dispatch (R/dispatch.R): pg_realize() returns once the command is written while the
# daemon still works; reads and pg_synchronize() wait and raise what failed. Work is held in flight
# by tests/tools/held-compiler (docs/TESTING.md): a realize that needs a new kernel waits at its
# gate, so nothing here depends on how fast the machine is.

skip_if_no_daemon()

# A daemon of this test's own, compiling through the held compiler, connected to: list(daemon, gate,
# watchdog). If R waited for held work it would hang at the gate: a watchdog process opens it after
# 300 s, leaving a mark that fails the test. The caller's on.exit runs held_cleanup().
held_daemon <- function() {
  root <- source_root()
  held <- file.path(root, "tests", "tools", "held-compiler")
  skip_if(!nzchar(root) || !file.exists(held), "needs tests/tools/held-compiler from the source tree")
  work <- tempfile("pg-dispatch-")
  dir.create(work)
  gate <- file.path(work, "gate")
  dir.create(gate)
  file.symlink(held, file.path(gate, "cc"))
  file.create(file.path(gate, "open"))
  sock <- file.path(work, "d.sock")
  argv <- c(normalizePath(polygrad:::find_daemon_binary()), "--listen=", "--metrics-listen=",
            paste0("--unix-socket=", sock), paste0("--cache-dir=", file.path(work, "cache")),
            paste0("--compiler=", file.path(gate, "cc")), "--quick-compile=off")
  h <- list(daemon = list(pid = .Call(polygrad:::pg_c_spawn, argv, file.path(work, "polygradd.log")), dir = work),
            gate = gate, watchdog = file.path(work, "watchdog"), dog_pid = file.path(work, "watchdog.pid"))
  system2("sh", c("-c", shQuote(sprintf("echo $$ > %s; exec sh -c 'sleep 300; touch %s %s'", h$dog_pid, h$watchdog,
                                        file.path(gate, "open")))), wait = FALSE)
  wait_until(function() file.exists(sock), "the daemon's socket")
  pg_connect(paste0("unix:", sock))
  h
}

held_cleanup <- function(h) {
  if (file.exists(h$dog_pid)) tools::pskill(as.integer(readLines(h$dog_pid)))
  file.create(file.path(h$gate, "open"))
  pg_disconnect()
  polygrad:::stop_daemon(h$daemon)
}

# x = (1, 2, 3, 4) on the daemon, then y <- pg_realize(first(x)), a new kernel whose compile is
# held at the gate, and z <- pg_realize(second(y)) sent behind it: list(y, z) once y's compile waits.
held_pair <- function(h, first, second) {
  x <- pg_tensor(c(1, 2, 3, 4))
  pg_realize(x)
  expect_equal(as.array(x), array(c(1, 2, 3, 4)))
  unlink(file.path(h$gate, "open"))  # from now on every compile is held
  y <- pg_realize(first(x))
  z <- pg_realize(second(y))
  wait_until(function() length(list.files(h$gate, pattern = "^held\\.")) > 0, "a compile held at the gate")
  list(y = y, z = z)
}

test_that("pg_realize returns while the daemon computes, and a read waits for it", {
  h <- held_daemon()
  on.exit(held_cleanup(h))
  p <- held_pair(h, function(x) x * 3 + 1, function(y) y - 1)  # z reads y, still being computed
  expect_equal(length(polygrad:::.pg$outstanding), 2L)
  file.create(file.path(h$gate, "open"))
  expect_equal(as.array(p$z), array(c(3, 6, 9, 12)))
  expect_false(file.exists(h$watchdog))
})

test_that("a daemon that dies mid-flight fails the pending work at the next read, never silently", {
  h <- held_daemon()
  on.exit(held_cleanup(h))
  p <- held_pair(h, function(x) x * 7 - 2, function(y) y + 1)
  .Call(polygrad:::pg_c_stop, h$daemon$pid, 0)  # SIGKILL at once: the stream ends under the work
  err <- tryCatch(as.array(p$z), error = function(e) e)
  expect_s3_class(err, "polygrad_unavailable")
  expect_match(conditionMessage(err), "cannot reach polygradd")
  expect_equal(length(polygrad:::.pg$outstanding), 0L)  # everything pending was answered by the end
  expect_false(file.exists(h$watchdog))
})

test_that("a daemon error is raised by the next pg_synchronize, and the session goes on", {
  v <- pg_ones(5000)
  bad <- pg_einsum("i,j,k->", v, v, v)  # 5000^3 products: the daemon's work bound refuses it
  pg_realize(bad)
  err <- tryCatch(pg_synchronize(), error = function(e) e)
  expect_s3_class(err, "polygrad_resource_exhausted")
  expect_match(conditionMessage(err), "EINSUM's product")
  expect_null(pg_synchronize())  # raised once: nothing is outstanding any more
  expect_equal(pg_item(pg_tensor(1) + 1), 2)
})
