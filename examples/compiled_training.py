from polygrad import Tensor
from polygrad.nn import Linear, SGD, get_parameters, compile_step
import numpy as np

Tensor.manual_seed(42)
model = Linear(4, 1)
opt = SGD(get_parameters(model), lr=0.01)

# Sample inputs (shapes must match at runtime)
x = Tensor.rand(8, 4)
y = Tensor.rand(8, 1)

def train_step(model, opt, x, y):
    loss = (model(x) - y).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

# Compile: traces forward + backward + optimizer into one PolyStep
step = compile_step(train_step, model, opt, x, y)

# Run: executes compiled kernels with current buffer data
rng = np.random.default_rng(0)
for i in range(100):
    xb = rng.random((8, 4), dtype=np.float32)
    step.set_input(x, xb)  # update input data in-place (the seed's x._data[:] = ...)
    step.set_input(y, xb.sum(1, keepdims=True) / 4)
    step.run()
    print(f"step {i}: loss = {step.loss_value():.4f}")
