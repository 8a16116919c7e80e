"""A small tanh MLP in polygrad and its PyTorch twin with the same weights: the reference pair
of the optimizer and compiled-step loss-curve tests."""
import numpy as np

from polygrad import nn


class MLP:
  def __init__(self, n_in=6, hidden=16, n_out=3):
    self.l1 = nn.Linear(n_in, hidden)
    self.l2 = nn.Linear(hidden, n_out)

  def __call__(self, x):
    return self.l2(self.l1(x).tanh())


def train_step(model, opt, x, y):
  """One eager training step of a classifier: the loss (the function compile_step traces)."""
  loss = model(x).cross_entropy(y)
  loss.backward()
  opt.step()
  opt.zero_grad()
  return loss


def torch_twin(m: MLP):
  import torch
  t = torch.nn.Sequential(torch.nn.Linear(*m.l1.weight.shape[::-1]), torch.nn.Tanh(),
                          torch.nn.Linear(*m.l2.weight.shape[::-1]))
  with torch.no_grad():
    for ours, theirs in ((m.l1, t[0]), (m.l2, t[2])):
      theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
      theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
  return t


def batches(seed, steps, batch=32, n_in=6, n_cls=3):
  """A synthetic classification problem for MLP, a different mini-batch every step."""
  r = np.random.default_rng(seed)
  w = r.standard_normal((n_in, n_cls))
  out = []
  for _ in range(steps):
    x = r.standard_normal((batch, n_in)).astype(np.float32)
    y = np.argmax(x @ w + 0.3 * r.standard_normal((batch, n_cls)), axis=1).astype(np.int32)
    out.append((x, y))
  return out
