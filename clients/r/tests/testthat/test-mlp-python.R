# Acceptance 4: an MLP trained 50 Adam steps from the same initial weights and data gives the
# same losses from R as from the Python client (relative difference <= 1e-6), eager and with
# compile_step. Python runs as a subprocess against the same daemon.

skip_if_no_daemon()

mlp_data <- function() {
  set.seed(7)
  f32 <- function(x) readBin(writeBin(as.double(x), raw(), size = 4), "double", n = length(x), size = 4)
  arr <- function(d) array(f32(rnorm(prod(d)) * 0.5), d)
  list(w1 = arr(c(16, 8)), b1 = arr(16), w2 = arr(c(4, 16)), b2 = arr(4), x = arr(c(32, 8)), y = arr(c(32, 4)))
}

r_losses <- function(a, mode, steps) {
  w1 <- pg_tensor(a$w1); b1 <- pg_tensor(a$b1); w2 <- pg_tensor(a$w2); b2 <- pg_tensor(a$b2)
  for (p in list(w1, b1, w2, b2)) requires_grad(p) <- TRUE
  x <- pg_tensor(a$x)
  y <- pg_tensor(a$y)
  opt <- optim_adam(list(w1, b1, w2, b2), lr = 0.01)
  train <- function(x, y, opt) {
    h <- pg_relu(x %*% t(w1) + b1)
    out <- h %*% t(w2) + b2
    loss <- mean((out - y)^2)
    opt$zero_grad()
    backward(loss)
    opt$step()
    loss
  }
  if (mode == "eager") return(vapply(seq_len(steps), function(i) pg_item(train(x, y, opt)), 0))
  step <- compile_step(train, x = x, y = y, opt = opt)
  vapply(seq_len(steps), function(i) step$run(x = a$x, y = a$y)$loss_value(), 0)
}

py_losses <- function(a, mode, steps) {
  dir <- tempfile("mlp-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  write_arrays(dir, a)
  env <- c(paste0("PYTHONPATH=", file.path(source_root(), "clients", "python")),
           paste0("POLYGRAD_ADDRESS=", polygrad:::.pg$conn$address))
  out <- system2(python_bin(), c(system.file("python", "mlp_losses.py", package = "polygrad"), dir, mode, steps),
                 stdout = TRUE, stderr = TRUE, env = env)
  status <- attr(out, "status")
  if (!is.null(status) && status != 0) stop("python failed: ", paste(out, collapse = "\n"))
  as.numeric(out)
}

for (mode in c("eager", "compiled")) {
  test_that(sprintf("MLP losses match Python (%s, 50 Adam steps)", mode), {
    skip_if(!nzchar(source_root()) || !nzchar(python_bin()), "needs the source tree's Python client")
    a <- mlp_data()
    r <- r_losses(a, mode, 50)
    py <- py_losses(a, mode, 50)
    expect_length(py, 50)
    expect_true(r[50] < r[1])  # it trains
    expect_lte(max(abs(r - py) / abs(py)), 1e-6)
  })
}
