# Where a tensor lives, as the client reports it without asking the daemon.

test_that("a gradient lives where its target does, whatever the loss's device", {
  # The daemon copies a gradient back to its target's device (a CPU tensor moved to a GPU).
  OP <- polygrad:::OP
  target <- polygrad:::new_node(OP$BUFFER, "float32", 3L)
  moved <- polygrad:::new_node(OP$COPY, "float32", 3L, list(target), list(device = "CUDA"))
  grad <- polygrad:::new_node(OP$GRADIENT, "float32", 3L, list(moved, target))
  back <- polygrad:::new_node(OP$GRADIENT, "float32", 3L, list(target, moved))
  dev <- function(n) polygrad:::tensor_device(list(node = n))
  expect_equal(c(dev(target), dev(moved), dev(grad), dev(back)), c("CPU", "CUDA", "CPU", "CUDA"))
})
