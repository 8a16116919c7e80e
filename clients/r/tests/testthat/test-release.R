# Tensors that R garbage collects release their nodes on the daemon: the finalizer queues the id,
# and the next request carries it as release_nodes.

skip_if_no_daemon()

test_that("a collected tensor's node is released with the next request", {
  x <- pg_realize(pg_tensor(c(1, 2, 3)) * 2)
  pg_synchronize()  # a realize outstanding holds its nodes until its answer is settled
  id <- x$node$id
  rm(x)
  invisible(gc())
  expect_true(id %in% polygrad:::.pg$dead)
  expect_equal(as.array(pg_tensor(1) + 1), 2)  # this Realize carries the release
  expect_false(id %in% polygrad:::.pg$dead)
  # The daemon forgot it: releasing the id again is NOT_FOUND.
  err <- tryCatch(polygrad:::rpc("Release", list(node_ids = id)), error = function(e) e)
  expect_s3_class(err, "polygrad_not_found")
})
