"""Compiled training steps (polygrad.nn.compile_step): the seed example, loss curves against the
eager client and PyTorch, per-run inputs, optimizer scalars, errors, and daemon memory."""
import math
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from conftest import PY_CLIENT, REPO, run_watching_buffers
from polygrad import Tensor
from polygrad import graph as g
from polygrad import nn
from polygrad.errors import PolygradError
from polygrad.nn import get_parameters

from mlp_twin import MLP, batches, torch_twin, train_step  # noqa: E402

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")


OPTIMIZERS = {
    "sgd": (lambda p: nn.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum": (lambda p: nn.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "adam": (lambda p: nn.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    "adamw": (lambda p: nn.AdamW(p, lr=0.01, weight_decay=0.1), lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
}


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_mlp_compiled_matches_eager_and_pytorch(opt_name):
  """Issue 4, acceptance 3 (compiled): same init, same data, 50 steps, losses within 1e-3 of
  PyTorch's and of the eager client's; the trained parameters agree too."""
  make_ours, make_theirs = OPTIMIZERS[opt_name]
  data = batches(5, 50)
  Tensor.manual_seed(11)
  mc = MLP(hidden=32)
  Tensor.manual_seed(11)
  me = MLP(hidden=32)
  tm = torch_twin(mc)
  optc, opte, topt = make_ours(get_parameters(mc)), make_ours(get_parameters(me)), make_theirs(tm.parameters())

  x0, y0 = Tensor(data[0][0]), Tensor(data[0][1])
  step = nn.compile_step(train_step, mc, optc, x0, y0)
  assert step.input_names == ["x", "y"]
  assert step.n_kernels > 0 and step.n_intermediates >= 0
  compiled, eager, theirs = [], [], []
  for x, y in data:
    step.run(x=x, y=y)
    compiled.append(step.loss_value())
    eager.append(train_step(me, opte, Tensor(x), Tensor(y)).item())
    topt.zero_grad()
    tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y, dtype=torch.long))
    tl.backward()
    topt.step()
    theirs.append(tl.item())
  compiled, eager, theirs = map(np.array, (compiled, eager, theirs))
  print(f"{opt_name}: max |compiled - torch| {np.abs(compiled - theirs).max():.3g}, "
        f"max |compiled - eager| {np.abs(compiled - eager).max():.3g}; loss {compiled[0]:.4f} -> {compiled[-1]:.4f}")
  assert np.abs(compiled - theirs).max() < 1e-3
  assert np.abs(compiled - eager).max() < 1e-3
  assert compiled[-5:].mean() < 0.7 * compiled[:5].mean(), "the model learns"
  # The Python model sees the trained values.
  for ours, twin in zip(get_parameters(mc), [tm[0].weight, tm[0].bias, tm[2].weight, tm[2].bias]):
    np.testing.assert_allclose(ours.numpy(), twin.detach().numpy(), rtol=1e-4, atol=1e-4)
  assert optc.steps == 50


def test_seed_example_runs_and_matches_numpy(live_daemon):
  """The seed's Compiled Training Steps example (examples/compiled_training.py) against the same
  model trained in numpy: the init manual_seed(42) gives, the data the example feeds."""
  env = dict(os.environ, POLYGRAD_ADDRESS=live_daemon.address,
             PYTHONPATH=os.pathsep.join([str(PY_CLIENT), os.environ.get("PYTHONPATH", "")]))
  r = subprocess.run([sys.executable, str(REPO / "examples" / "compiled_training.py")], env=env,
                     capture_output=True, text=True, timeout=300, cwd=REPO)
  assert r.returncode == 0, r.stderr
  losses = [float(m) for m in re.findall(r"^step \d+: loss = (\d+\.\d{4})$", r.stdout, re.M)]
  assert len(losses) == 100, r.stdout
  gen = np.random.default_rng(42)
  bound = 1 / math.sqrt(4)
  w = gen.uniform(-bound, bound, (1, 4)).astype(np.float32)
  b = gen.uniform(-bound, bound, (1,)).astype(np.float32)
  data = np.random.default_rng(0)
  for i in range(100):
    x = data.random((8, 4), dtype=np.float32)
    t = x.sum(1, keepdims=True) / 4
    err = x @ w.T + b - t
    assert losses[i] == pytest.approx(float((err ** 2).mean()), abs=2e-4), f"step {i}"
    gy = 2 * err / err.size
    w, b = w - np.float32(0.01) * (gy.T @ x), b - np.float32(0.01) * gy.sum(0)


def test_run_is_one_small_request_and_inputs_persist():
  Tensor.manual_seed(1)
  m = nn.Linear(3, 2)
  opt = nn.SGD(get_parameters(m), lr=0.1)
  x = Tensor(np.ones((4, 3), np.float32))

  def fn(model, opt, x):
    loss = model(x).square().sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss, model(x)

  step = nn.compile_step(fn, m, opt, x)
  w0, b0 = m.weight.numpy(), m.bias.numpy()
  requests = g.GRAPH.stats()["requests"]
  step.run()
  assert g.GRAPH.stats()["requests"] == requests, "a run sends RunStep only, no Realize"
  loss1, out1 = step.outputs()
  np.testing.assert_allclose(loss1, ((np.ones((4, 3)) @ w0.T + b0) ** 2).sum(), rtol=1e-5)
  w1, b1 = m.weight.numpy(), m.bias.numpy()
  # fn evaluated model(x) after opt.step(): the updated parameters, as eagerly.
  np.testing.assert_allclose(out1, np.ones((4, 3)) @ w1.T + b1, rtol=1e-5, atol=1e-6)
  assert not np.allclose(w0, w1), "the weight was trained in place"
  # New data through set_input, by tensor; then no data: the input keeps it.
  step.set_input(x, np.zeros((4, 3), np.float32))
  step.run()
  np.testing.assert_allclose(m.weight.numpy(), w1, atol=1e-7)  # zero input: zero weight gradient
  step.run()
  np.testing.assert_allclose(x.numpy(), 0.0)
  last = step.outputs()
  with pytest.raises(ValueError, match="shape"):
    step.run(x=np.zeros((5, 3), np.float32))
  with pytest.raises(KeyError, match="not an input"):
    step.run(z=np.zeros((4, 3), np.float32))
  # A refused run changed nothing: the last run's outputs stay readable, and the step still runs.
  for a, b in zip(step.outputs(), last):
    np.testing.assert_array_equal(a, b)
  b = m.bias.numpy()
  np.testing.assert_allclose(step.run().loss_value(), 4 * (b.astype(np.float64) ** 2).sum(), rtol=1e-5)  # x is zeros


def test_learning_rate_changes_reach_the_compiled_step():
  Tensor.manual_seed(2)
  m = nn.Linear(2, 1)
  opt = nn.SGD(get_parameters(m), lr=0.1)
  x = Tensor(np.array([[1.0, 2.0]], np.float32))

  def fn(model, opt, x):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

  step = nn.compile_step(fn, m, opt, x)
  b0 = m.bias.numpy()
  step.run()
  np.testing.assert_allclose(m.bias.numpy(), b0 - 0.1, atol=1e-6)
  opt.lr = 0.5
  step.run()
  np.testing.assert_allclose(m.bias.numpy(), b0 - 0.6, atol=1e-6)


def test_reading_values_while_tracing_is_an_error():
  m = nn.Linear(2, 1)
  opt = nn.SGD(get_parameters(m), lr=0.1)
  x = Tensor(np.ones((1, 2), np.float32))

  def fn(model, opt, x):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    print(loss.item())
    return loss

  w0 = m.weight.numpy()
  with pytest.raises(PolygradError, match="while being traced"):
    nn.compile_step(fn, m, opt, x)
  # A failed trace leaves the model as it was, and the client still works.
  np.testing.assert_array_equal(m.weight.numpy(), w0)
  assert m.weight.grad is None
  assert m(x).numpy().shape == (1, 1)


def test_step_release_and_session_close_free_daemon_buffers(tmp_path):
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      import polygrad
      from polygrad import Tensor, nn
      b0 = buffers()
      Tensor.manual_seed(0)
      m = nn.Linear(16, 4)
      opt = nn.SGD(nn.get_parameters(m), lr=0.1)
      x = Tensor.rand(8, 16)
      def fn(model, opt, x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
      steps = [nn.compile_step(fn, m, opt, x) for _ in range(3)]
      for s in steps:
        for _ in range(5):
          s.run(x=np.random.rand(8, 16))
      b1 = buffers()
      steps[0].release()
      steps.pop(0)
      b2 = buffers()
      steps.pop(0)  # dropped without release(): freed by the next run
      steps[0].run()
      b3 = buffers()
      polygrad.close_connection()
      print(b0, b1, b2, b3, buffers())
  """)
  b0, b1, b2, b3, b4 = map(float, out.split())
  assert b1 > b0
  assert b2 < b1, "a released step frees its buffers"
  assert b3 < b2, "a collected step is released with the next call"
  assert b4 == b0, f"closing the session freed every step: {b0} before, {b4} after"


def test_data_made_while_tracing_is_reported():
  m = nn.Linear(4, 4)
  opt = nn.SGD(get_parameters(m), lr=0.1)
  x = Tensor(np.ones((2, 4), np.float32))

  def fn(model, opt, x):
    loss = (model(x) * Tensor(np.full((2, 4), 0.5, np.float32))).sum()  # data made inside fn
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

  with pytest.warns(UserWarning, match="baked into the step"):
    step = nn.compile_step(fn, m, opt, x)
  step.run()

  def drawing(model, opt, x):
    loss = (model(x) * Tensor.rand(2, 4)).sum()  # random numbers are drawn anew every run
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

  with warnings.catch_warnings():
    warnings.simplefilter("error")
    nn.compile_step(drawing, m, opt, x).run()


def test_embedding_layernorm_adamw_with_scheduler_matches_eager():
  """Integer inputs, Embedding/LayerNorm/GELU, AdamW bias corrections and a cosine schedule:
  every per-step scalar reaches the compiled step, so it tracks the eager client exactly."""

  class Model:
    def __init__(self):
      self.emb = nn.Embedding(20, 16)
      self.ln = nn.LayerNorm(16)
      self.out = nn.Linear(16, 20)

    def __call__(self, tok):
      return self.out(self.ln(self.emb(tok)).gelu())

  def fn(model, opt, tok, tgt):
    loss = model(tok).reshape(-1, 20).cross_entropy(tgt.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

  r = np.random.default_rng(0)
  data = [(r.integers(0, 20, (4, 8)).astype(np.int32), r.integers(0, 20, (4, 8)).astype(np.int32)) for _ in range(8)]
  Tensor.manual_seed(3)
  mc = Model()
  Tensor.manual_seed(3)
  me = Model()
  oc, oe = nn.AdamW(get_parameters(mc), lr=0.01), nn.AdamW(get_parameters(me), lr=0.01)
  sc, se = nn.CosineAnnealingLR(oc, T_max=8), nn.CosineAnnealingLR(oe, T_max=8)
  step = nn.compile_step(fn, mc, oc, Tensor(data[0][0]), Tensor(data[0][1]))
  for tok, tgt in data:
    step.run(tok=tok, tgt=tgt)
    sc.step()
    eager = fn(me, oe, Tensor(tok), Tensor(tgt)).item()
    se.step()
    assert step.loss_value() == pytest.approx(eager, abs=1e-5)
  for a, b in zip(get_parameters(mc), get_parameters(me)):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
