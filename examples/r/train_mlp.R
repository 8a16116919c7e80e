# Trains a small MLP on a synthetic regression task with polygrad from R: eagerly for a few
# steps, then as a compiled step (one small request per step). Run: Rscript examples/r/train_mlp.R
library(polygrad)

set.seed(1)
n <- 64
x_data <- matrix(runif(n * 4, -1, 1), n, 4)
y_data <- matrix(sin(rowSums(x_data)), n, 1)

pg_manual_seed(0)
l1 <- nn_linear(4, 32)
l2 <- nn_linear(32, 1)
model <- function(x) l2(pg_relu(l1(x)))
opt <- optim_adam(parameters(list(l1, l2)), lr = 0.01)

train <- function(x, y, opt) {
  loss <- mean((model(x) - y)^2)
  opt$zero_grad()
  backward(loss)
  opt$step()
  loss
}

x <- pg_tensor(x_data)
y <- pg_tensor(y_data)
first <- pg_item(train(x, y, opt))
step <- compile_step(train, x = x, y = y, opt = opt)
for (i in 1:100) step$run(x = x_data, y = y_data)
last <- step$loss_value()
cat(sprintf("loss %.4f -> %.4f\n", first, last))
stopifnot(last < first / 2)
