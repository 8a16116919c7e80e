"""The Quick Start of the polygrad Python README (seed 001), verbatim.

From the repository root: PYTHONPATH=clients/python python3 examples/quick_start.py
(POLYGRAD_ADDRESS=unix:/path/to/socket uses a running daemon; without it the client starts a
private one from build/polygradd).
"""
from polygrad import Tensor

# Create tensors
a = Tensor.rand(3, 4)
b = Tensor.rand(4, 5)

# Matrix multiply + softmax
c = (a @ b).softmax(-1)
print(c.numpy())

# Autograd
x = Tensor([1.0, 2.0, 3.0])
x.requires_grad = True
loss = (x * x).sum()
loss.backward()
print(x.grad.numpy())  # [2.0, 4.0, 6.0]
