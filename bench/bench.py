#!/usr/bin/python3
"""polygrad benchmarks against numpy and PyTorch (CPU), all in this one process.

    /usr/bin/python3 bench/bench.py [--repeat N] [--only NAME ...]

Each workload runs through the Python client against a daemon (POLYGRAD_ADDRESS, or the
embedded default), and the same computation in numpy and in PyTorch when it is installed
(Debian's python3-torch). Inputs are on the daemon before timing starts; a polygrad time covers
sending the graph, scheduling, running the kernels and (for scalar results) reading the value,
the work a training loop pays per step. The first run of each workload (which compiles, or
loads from the kernel cache) is reported separately and not counted. Times are medians.
Ratios > 1 mean polygrad is faster.

tinygrad's CPU backend on this machine (the marks issue 3 sets): matmul 1024^2 267 ms,
elementwise chain 6.8 ms, MLP step 20 steps/s eager and 202 steps/s with its JIT.
"""
import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from polygrad import Tensor  # noqa: E402
from polygrad.graph import GRAPH  # noqa: E402

try:
  import torch
  torch.set_grad_enabled(False)
  torch.set_num_threads(os.cpu_count() or 1)  # Debian's build defaults to one thread here
except ImportError:  # the table says so
  torch = None


def forget_results():
  """Release dead tensors on the daemon now. A session remembers realized results while their
  tensors live, and an identical graph over the same buffers is answered from them; the
  benchmark must measure computing, so each run starts with the last result released."""
  gc.collect()
  GRAPH.flush_releases()


def timed(fn, repeat, polygrad=False):
  fn()  # warm-up: compile or cache load, page faults
  times = []
  for _ in range(repeat):
    if polygrad:
      forget_results()
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def first_run(fn):
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


def workloads(rng):
  """name -> (polygrad fn, numpy fn, torch fn or None, check fn) built on shared random inputs."""
  out = {}

  a, b = (rng.random((1024, 1024), dtype=np.float32) for _ in range(2))
  pa, pb = Tensor(a).realize(), Tensor(b).realize()
  ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
  out["matmul 1024x1024 f32"] = (lambda: (pa @ pb).realize(), lambda: a @ b,
                                 (lambda: ta @ tb) if torch else None,
                                 lambda: np.abs((pa @ pb).numpy() - a @ b).max() < 1e-2)

  x, y, z = (rng.random(1 << 20, dtype=np.float32) for _ in range(3))
  px, py, pz = (Tensor(v).realize() for v in (x, y, z))
  tx, ty, tz = (torch.from_numpy(v) for v in (x, y, z)) if torch else (None,) * 3
  out["((a+b)*c).relu().exp().sum() 1M"] = (
      lambda: ((px + py) * pz).relu().exp().sum().item(),
      lambda: np.exp(np.maximum((x + y) * z, 0)).sum(),
      (lambda: ((tx + ty) * tz).relu().exp().sum().item()) if torch else None,
      lambda: abs(((px + py) * pz).relu().exp().sum().item() / np.exp(np.maximum((x + y) * z, 0)).astype(np.float64).sum() - 1) < 1e-4)

  s = rng.standard_normal((4096, 1024), dtype=np.float32)
  ps = Tensor(s).realize()
  ts = torch.from_numpy(s) if torch else None

  def np_softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

  def np_layernorm(v):
    m = v.mean(-1, keepdims=True)
    return (v - m) / np.sqrt(((v - m) ** 2).mean(-1, keepdims=True) + 1e-5)

  out["softmax 4096x1024"] = (lambda: ps.softmax(-1).realize(), lambda: np_softmax(s),
                              (lambda: ts.softmax(-1)) if torch else None,
                              lambda: np.abs(ps.softmax(-1).numpy() - np_softmax(s)).max() < 1e-5)
  def pg_layernorm(v):
    d = v - v.mean(-1, keepdim=True)
    return d / ((d * d).mean(-1, keepdim=True) + 1e-5).sqrt()

  out["layernorm 4096x1024"] = (lambda: pg_layernorm(ps).realize(), lambda: np_layernorm(s),
                                (lambda: torch.nn.functional.layer_norm(ts, (1024,))) if torch else None,
                                lambda: np.abs(pg_layernorm(ps).numpy() - np_layernorm(s)).max() < 1e-3)
  out["MLP 784-256-10 b128 SGD step"] = mlp_step(rng)
  out["MLP step, compile_step"] = mlp_step(rng, compiled=True)

  # conv2d 3x3, 64 -> 64 channels, padding 1, on a 32x64x56x56 batch (3.7 GFLOP).
  cx = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
  cw = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05
  pcx, pcw = Tensor(cx).realize(), Tensor(cw).realize()

  def np_conv():
    win = np.lib.stride_tricks.sliding_window_view(np.pad(cx, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    return np.tensordot(win, cw, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)

  tcx, tcw = (torch.from_numpy(cx), torch.from_numpy(cw)) if torch else (None, None)
  out["conv2d 3x3 32x64x56x56"] = (
      lambda: pcx.conv2d(pcw, padding=1).realize(), np_conv,
      (lambda: torch.nn.functional.conv2d(tcx, tcw, padding=1)) if torch else None,
      lambda: np.abs(pcx.conv2d(pcw, padding=1).numpy()[:2] - np_conv()[:2]).max() < 1e-3)
  return out


def mlp_step(rng, compiled=False):
  """One training step (forward, backward, SGD update) of a 784-256-10 ReLU MLP on a batch of
  128 with a one-hot cross-entropy loss, in polygrad, numpy (by hand) and PyTorch. `compiled`:
  polygrad runs it as a compiled step (traced once, then one RunStep per step; tinygrad's JIT
  is the comparable mark)."""
  from polygrad.nn import SGD, Linear, compile_step, get_parameters
  x = rng.random((128, 784), dtype=np.float32)
  labels = rng.integers(0, 10, 128)
  y = np.eye(10, dtype=np.float32)[labels]
  lr = 0.01

  l1, l2 = Linear(784, 256), Linear(256, 10)
  opt = SGD(get_parameters([l1, l2]), lr=lr)
  px, py = Tensor(x).realize(), Tensor(y).realize()
  w1, b1, w2, b2 = (p.numpy().copy() for p in (l1.weight, l1.bias, l2.weight, l2.bias))

  def pg():
    opt.zero_grad()
    loss = -(l2(l1(px).relu()).log_softmax(-1) * py).sum(1).mean()
    loss.backward()
    opt.step()

  if compiled:
    def train(opt, x, y):
      opt.zero_grad()
      loss = -(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean()
      loss.backward()
      opt.step()
      return loss

    pg = compile_step(train, opt, px, py).run

  npw = [w1.copy(), b1.copy(), w2.copy(), b2.copy()]

  def numpy_step():
    W1, B1, W2, B2 = npw
    h = x @ W1.T + B1
    a = np.maximum(h, 0)
    z = a @ W2.T + B2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    dz = (p - y) / len(x)
    dW2, dB2 = dz.T @ a, dz.sum(0)
    da = dz @ W2
    dh = da * (h > 0)
    dW1, dB1 = dh.T @ x, dh.sum(0)
    for w, g in zip(npw, (dW1, dB1, dW2, dB2)):
      w -= lr * g

  tf = None
  if torch:
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    tl1, tl2 = torch.nn.Linear(784, 256), torch.nn.Linear(256, 10)
    with torch.no_grad():
      for t, v in ((tl1.weight, w1), (tl1.bias, b1), (tl2.weight, w2), (tl2.bias, b2)):
        t.copy_(torch.from_numpy(v))
    topt = torch.optim.SGD(list(tl1.parameters()) + list(tl2.parameters()), lr=lr)

    def tf():
      with torch.enable_grad():
        topt.zero_grad()
        loss = -(torch.log_softmax(tl2(torch.relu(tl1(tx))), -1) * ty).sum(1).mean()
        loss.backward()
        topt.step()

  steps = {"pg": 0, "np": 0}

  def check():
    # After the same number of steps from the same weights, polygrad and numpy agree.
    while steps["np"] < steps["pg"]:
      numpy_step()
      steps["np"] += 1
    return np.abs(l2.weight.numpy() - npw[2]).max() < 1e-4 and np.abs(l1.weight.numpy() - npw[0]).max() < 1e-4

  def counted(fn, key):
    def run():
      fn()
      steps[key] += 1
    return run

  return counted(pg, "pg"), counted(numpy_step, "np"), tf, check


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=10)
  ap.add_argument("--only", nargs="*", default=None, help="substrings of workload names to run")
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  rows = []
  for name, (pg, npf, tf, check) in workloads(rng).items():
    if args.only and not any(o in name for o in args.only):
      continue
    cold = first_run(pg)
    ok = check()
    forget_results()
    t_pg = timed(pg, args.repeat, polygrad=True)
    t_np = timed(npf, args.repeat)
    t_t = timed(tf, args.repeat) if tf else None
    rows.append((name, cold, t_pg, t_np, t_t, ok))

  print(f"torch: {torch.__version__ if torch else 'not installed (apt-get install python3-torch)'}; "
        f"numpy {np.__version__}; threads: torch {torch.get_num_threads() if torch else '-'}")
  hdr = f"{'workload':36} {'first run':>10} {'polygrad':>10} {'numpy':>10} {'torch':>10} {'np/pg':>7} {'torch/pg':>8}  correct"
  print(hdr)
  print("-" * len(hdr))
  for name, cold, t_pg, t_np, t_t, ok in rows:
    ms = lambda t: f"{t * 1e3:9.2f}ms" if t is not None else f"{'-':>11}"
    tr = f"{t_t / t_pg:8.2f}" if t_t else f"{'-':>8}"
    print(f"{name:36} {ms(cold)} {ms(t_pg)} {ms(t_np)} {ms(t_t)} {t_np / t_pg:7.2f} {tr}  {'yes' if ok else 'NO'}")
  return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
