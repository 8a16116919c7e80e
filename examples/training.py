"""The Training Example of the polygrad Python README (seed 001), verbatim.

From the repository root: PYTHONPATH=clients/python python3 examples/training.py
(POLYGRAD_ADDRESS=unix:/path/to/socket uses a running daemon; without it the client starts a
private one from build/polygradd).
"""
from polygrad import Tensor
from polygrad.nn import Linear, SGD, get_parameters

Tensor.manual_seed(42)
model = Linear(2, 1)
opt = SGD(get_parameters(model), lr=0.01)

for i in range(100):
    opt.zero_grad()
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    target = Tensor([[5.0], [11.0]])
    loss = (model(x) - target).square().mean()
    loss.backward()
    opt.step()

print(f"loss: {loss.item():.4f}")
