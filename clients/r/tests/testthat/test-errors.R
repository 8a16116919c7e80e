# Acceptance 7: a shape mismatch, an unreachable daemon and a wrong token each give the condition
# class of their gRPC status, with the daemon's (or gRPC's) message.

skip_if_no_daemon()

test_that("a shape mismatch is polygrad_invalid_argument with the daemon's message", {
  a <- pg_tensor(matrix(1, 2, 3))
  b <- pg_tensor(matrix(1, 3, 2))
  err <- tryCatch(a + b, error = function(e) e)
  expect_s3_class(err, c("polygrad_invalid_argument", "polygrad_error", "error", "condition"), exact = TRUE)
  expect_match(conditionMessage(err), "INVALID_ARGUMENT")
  expect_match(conditionMessage(err), "node [0-9]+ \\(ADD\\)")  # the daemon names the node and op
  expect_equal(err$code, 3L)
  err2 <- tryCatch(pg_matmul(a, a), error = function(e) e)
  expect_s3_class(err2, "polygrad_invalid_argument")
  expect_match(conditionMessage(err2), "MATMUL")
  expect_equal(as.array(a + 1), matrix(2, 2, 3))  # the session is still usable
})

test_that("an unreachable daemon is polygrad_unavailable, and the current connection stays", {
  addr <- paste0("unix:", tempfile("nowhere-"), ".sock")
  err <- tryCatch(pg_connect(addr, timeout = 5), error = function(e) e)
  expect_s3_class(err, "polygrad_unavailable")
  expect_s3_class(err, "polygrad_error")
  expect_match(conditionMessage(err), paste0("cannot reach polygradd at ", addr), fixed = TRUE)
  expect_equal(as.array(pg_tensor(2) * 3), 6)
})

test_that("a wrong token is polygrad_unauthenticated with the daemon's message", {
  tokens <- tempfile("tokens-")
  writeLines("3f9c0a77d1e24b1b8f0e2f6a5c4d3b21 tenant-a", tokens)
  d <- polygrad:::start_daemon(args = paste0("--tokens-file=", tokens))
  on.exit({ polygrad:::stop_daemon(d); unlink(tokens) })
  err <- tryCatch(pg_connect(d$address, token = "wrong-token"), error = function(e) e)
  expect_s3_class(err, "polygrad_unauthenticated")
  expect_match(conditionMessage(err), "UNAUTHENTICATED")
  expect_equal(as.array(pg_tensor(2) + 3), 5)  # still on the suite's daemon
})

test_that("conditions can be caught by status class", {
  caught <- tryCatch(pg_tensor(matrix(1, 2, 2)) + pg_tensor(matrix(1, 3, 3)),
                     polygrad_invalid_argument = function(e) "invalid")
  expect_equal(caught, "invalid")
})
