"""The seed README's examples (examples/*.py, copied verbatim) run against the test daemon and
print what the README says."""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import PY_CLIENT, REPO

pytestmark = pytest.mark.usefixtures("live_daemon")


def run_example(daemon, name):
  env = dict(os.environ, POLYGRAD_ADDRESS=daemon.address,
             PYTHONPATH=os.pathsep.join([str(PY_CLIENT), os.environ.get("PYTHONPATH", "")]))
  r = subprocess.run([sys.executable, str(REPO / "examples" / name)], env=env, capture_output=True, text=True,
                     timeout=300, cwd=REPO)
  assert r.returncode == 0, f"{name} failed:\n{r.stdout}\n{r.stderr}"
  return r.stdout


def test_quick_start(daemon):
  out = run_example(daemon, "quick_start.py")
  lines = out.strip().splitlines()
  assert lines[-1].split() == ["[2.", "4.", "6.]"], out  # x.grad
  probs = np.array([[float(v) for v in re.findall(r"[-+0-9.e]+", ln)] for ln in lines[:-1]])
  assert probs.shape == (3, 5), out  # (a @ b).softmax(-1) of a 3x4 and a 4x5
  np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
  assert (probs > 0).all()


def test_training_example(daemon):
  out = run_example(daemon, "training.py")
  m = re.fullmatch(r"loss: (\d+\.\d{4})", out.strip())
  assert m, out
  loss = float(m.group(1))
  assert loss < 0.05, "100 SGD steps on a linear problem bring the loss down"
  # The same model in plain numpy (float32): the init the client draws after manual_seed(42)
  # (U(-1/sqrt(2), 1/sqrt(2)) for the weight, then the bias), then 100 gradient steps.
  r = np.random.default_rng(42)
  bound = 1 / math.sqrt(2)
  w = r.uniform(-bound, bound, (1, 2)).astype(np.float32)
  b = r.uniform(-bound, bound, (1,)).astype(np.float32)
  x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
  t = np.array([[5.0], [11.0]], np.float32)
  for _ in range(100):
    err = x @ w.T + b - t
    loss_ref = float((err ** 2).mean())
    gy = 2 * err / err.size
    w, b = w - np.float32(0.01) * (gy.T @ x), b - np.float32(0.01) * gy.sum(0)
  assert loss == pytest.approx(loss_ref, abs=1.5e-4)
