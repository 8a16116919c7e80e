#!/usr/bin/python3
"""polygrad on CUDA against PyTorch on the same GPU.

    /usr/bin/python3 bench/gpu_bench.py [--repeat N]

Workloads: a 4096x4096 float32 matmul, and one training step (forward, backward, SGD update) of
the bench's 784-256-10 ReLU MLP on a batch of 128, run eagerly and as a compiled step (against the
same eager PyTorch step). Inputs and parameters are on the
GPU before timing starts; a polygrad time covers sending the graph, scheduling, running the
kernels and waiting for them (a realize returns when its stream is done); a PyTorch time ends
with torch.cuda.synchronize(). The first run (compiles, or loads from the kernel cache) is not
counted. Times are medians; ratios > 1 mean polygrad is faster.

Without a GPU it prints why each side cannot run (the daemon's reason for polygrad) and exits 0.
"""
import argparse
import gc
import os
import statistics
import sys
import time

# References at full speed: OpenBLAS's core overrides go before numpy or torch is loaded (TOOLCHAIN.md).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import full_speed_blas  # noqa: E402

full_speed_blas.unset()  # OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE dropped before numpy/torch load

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from polygrad import Device, Tensor  # noqa: E402
from polygrad.graph import GRAPH  # noqa: E402

try:
  import torch
except ImportError:
  torch = None


def torch_cuda_reason():
  if torch is None:
    return "PyTorch is not installed"
  if not torch.cuda.is_available():
    return f"this PyTorch ({torch.__version__}) has no usable CUDA"
  return None


def polygrad_cuda_reason():
  entry = Device.find("CUDA")
  if entry is None:
    return "the daemon lists no CUDA device"
  return None if entry.available else entry.detail


def timed(fn, repeat, sync=None):
  fn()
  if sync:
    sync()
  times = []
  for _ in range(repeat):
    gc.collect()
    GRAPH.flush_releases()  # a session answers a repeated graph from its last result otherwise
    t0 = time.perf_counter()
    fn()
    if sync:
      sync()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def matmul(rng, repeat):
  a = rng.standard_normal((4096, 4096), dtype=np.float32)
  b = rng.standard_normal((4096, 4096), dtype=np.float32)
  out = {}
  if polygrad_cuda_reason() is None:
    pa, pb = Tensor(a, device="cuda").realize(), Tensor(b, device="cuda").realize()
    out["polygrad"] = timed(lambda: (pa @ pb).realize(), repeat)
    got = (pa @ pb)[:64, :64].numpy()
    np.testing.assert_allclose(got, a[:64].astype(np.float64) @ b[:, :64], rtol=1e-3, atol=1e-2)
  if torch_cuda_reason() is None:
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out["torch"] = timed(lambda: ta @ tb, repeat, torch.cuda.synchronize)
  return out


def mlp_step(rng, repeat, compiled=False):
  from polygrad.nn import SGD, Linear, compile_step, get_parameters
  x = rng.random((128, 784), dtype=np.float32)
  y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
  out = {}
  if polygrad_cuda_reason() is None:
    old = Device.DEFAULT
    Device.DEFAULT = "CUDA"
    try:
      l1, l2 = Linear(784, 256), Linear(256, 10)
      opt = SGD(get_parameters([l1, l2]), lr=0.01)
      for p in get_parameters([l1, l2]):
        p.realize()
      px, py = Tensor(x).realize(), Tensor(y).realize()

      def train(xb, yb):
        opt.zero_grad()
        loss = -(l2(l1(xb).relu()).log_softmax(-1) * yb).sum(1).mean()
        loss.backward()
        opt.step()
        return loss

      if compiled:
        # One compiled step on the GPU: a run launches its kernels on the session's stream and waits.
        run = compile_step(train, px, py)
        out["polygrad"] = timed(lambda: run.run(), repeat)
      else:
        def step():
          train(px, py)
          l2.weight.realize()
        out["polygrad"] = timed(step, repeat)
    finally:
      Device.DEFAULT = old
  if torch_cuda_reason() is None:
    dev = torch.device("cuda")
    tx, ty = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    tl1, tl2 = torch.nn.Linear(784, 256).to(dev), torch.nn.Linear(256, 10).to(dev)
    topt = torch.optim.SGD(list(tl1.parameters()) + list(tl2.parameters()), lr=0.01)

    def tstep():
      topt.zero_grad()
      loss = -(torch.log_softmax(tl2(torch.relu(tl1(tx))), -1) * ty).sum(1).mean()
      loss.backward()
      topt.step()
    out["torch"] = timed(tstep, repeat, torch.cuda.synchronize)
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=10)
  args = ap.parse_args()
  why_pg, why_torch = polygrad_cuda_reason(), torch_cuda_reason()
  if why_pg:
    print(f"polygrad on CUDA skipped: CUDA unavailable: {why_pg}")
  if why_torch:
    print(f"PyTorch on CUDA skipped: {why_torch}")
  if why_pg and why_torch:
    return 0
  rng = np.random.default_rng(0)
  print(f"host BLAS (the references run cuBLAS on the GPU): {full_speed_blas.describe()}")
  print(f"{'workload':36} {'polygrad':>12} {'torch':>12} {'ratio':>8}")
  workloads = (("matmul 4096^2 float32", matmul), ("MLP 784-256-10 b128 SGD step", mlp_step),
               ("same step, compile_step", lambda rng, n: mlp_step(rng, n, compiled=True)))
  for name, fn in workloads:
    r = fn(rng, args.repeat)
    pg, th = r.get("polygrad"), r.get("torch")
    fmt = lambda t: f"{t * 1e3:10.2f}ms" if t is not None else f"{'-':>12}"  # noqa: E731
    ratio = f"{th / pg:8.2f}" if pg and th else f"{'-':>8}"
    print(f"{name:36} {fmt(pg)} {fmt(th)} {ratio}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
