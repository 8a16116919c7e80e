"""Reference losses for the R client's MLP test: the same MLP, data and Adam steps with the Python
client. Usage: mlp_losses.py DIR MODE (eager | compiled); DIR holds float32 little-endian,
row-major files w1 b1 w2 b2 x y and shapes.txt ("name d0 d1 ..." lines). Prints one loss a line."""
import sys
from pathlib import Path

import numpy as np

from polygrad import Tensor
from polygrad.nn.optim import Adam
from polygrad.step import compile_step


def load(d: Path):
  shapes = {}
  for line in (d / "shapes.txt").read_text().split("\n"):
    if line.strip():
      name, *dims = line.split()
      shapes[name] = tuple(int(x) for x in dims)
  return {k: np.fromfile(d / k, dtype="<f4").reshape(s) for k, s in shapes.items()}


def main() -> None:
  d, mode, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
  a = load(d)
  w1, b1, w2, b2 = (Tensor(a[k], requires_grad=True) for k in ("w1", "b1", "w2", "b2"))
  x, y = Tensor(a["x"]), Tensor(a["y"])
  opt = Adam([w1, b1, w2, b2], lr=0.01)

  def train(x, y, opt):
    h = x.linear(w1.transpose(), b1).relu()
    out = h.linear(w2.transpose(), b2)
    loss = ((out - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss

  if mode == "eager":
    for _ in range(steps):
      print(repr(train(x, y, opt).item()))
  else:
    step = compile_step(train, x, y, opt)
    for _ in range(steps):
      step.run(x=a["x"], y=a["y"])
      print(repr(step.loss_value()))


if __name__ == "__main__":
  main()
