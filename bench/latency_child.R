# The R client's side of bench/latency_bench.py (--client r): the same three workloads against
# POLYGRAD_ADDRESS, one JSON line of ms per step (and the client's cost of one dispatched realize,
# in us). POLYGRAD_ASYNC and POLYGRAD_MAX_IN_FLIGHT come from the parent.
suppressMessages(library(polygrad))
args <- commandArgs(trailingOnly = TRUE)
steps <- if (length(args)) as.integer(args[[1]]) else 60L
rounds <- if (length(args) > 1L) as.integer(args[[2]]) else 5L
set.seed(0)
x <- pg_tensor(array(runif(128 * 784), c(128, 784)), dtype = "float32")
hot <- matrix(0, 128, 10)
hot[cbind(1:128, ((0:127) * 7) %% 10 + 1)] <- 1
y <- pg_tensor(hot, dtype = "float32")
pg_realize(x, y)
w1 <- pg_tensor(array(rnorm(256 * 784) * 0.05, c(256, 784)), dtype = "float32")
b1 <- pg_zeros(256)
w2 <- pg_tensor(array(rnorm(10 * 256) * 0.05, c(10, 256)), dtype = "float32")
b2 <- pg_zeros(10)
for (p in list(w1, b1, w2, b2)) requires_grad(p) <- TRUE
opt <- optim_sgd(list(w1, b1, w2, b2), lr = 0.01)
train <- function(x, y, opt) {
  out <- pg_relu(x %*% t(w1) + b1) %*% t(w2) + b2
  loss <- -mean(pg_sum(pg_log_softmax(out, -1) * y, 2))
  opt$zero_grad()
  backward(loss)
  opt$step()
  loss
}

# ms per step over n steps, reads included: a dispatched step is paid for where a read waits.
timed <- function(step, n, warm, every = 0L, read = NULL) {
  for (i in seq_len(warm)) step()
  if (!is.null(read)) read()
  start <- proc.time()[["elapsed"]]
  for (i in seq_len(n)) {
    step()
    if (every > 0L && i %% every == 0L) read()
  }
  if (!is.null(read)) read()
  1000 * (proc.time()[["elapsed"]] - start) / n
}

out <- list()
loss <- NULL
out$eager <- timed(function() loss <<- train(x, y, opt), steps, 5L, 10L, function() pg_item(loss))
step <- compile_step(train, x = x, y = y, opt = opt)
out$compiled <- timed(function() step$run(), steps, 3L, 0L, function() step$loss_value())
t <- pg_realize(pg_tensor(1, dtype = "float32"))
tiny <- function() t <<- pg_realize(t + 1)
out$tiny <- timed(tiny, 4L * steps, 5L, 0L, function() pg_item(t))
# The median of `rounds` rounds (latency_bench.py's ROUNDS).
n <- 4L * steps
us <- vapply(seq_len(rounds), function(r) {
  start <- proc.time()[["elapsed"]]
  for (i in seq_len(n)) tiny()
  sent <- proc.time()[["elapsed"]]
  pg_synchronize()
  1e6 * (sent - start) / n
}, 0)
out$dispatch_us <- sort(us)[rounds %/% 2L + 1L]
cat(sprintf('{"eager": %.6f, "compiled": %.6f, "tiny": %.6f, "dispatch_us": %.3f}\n',
            out$eager, out$compiled, out$tiny, out$dispatch_us))
