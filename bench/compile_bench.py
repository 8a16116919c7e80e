#!/usr/bin/env python3
"""Cold-cache compile time: how long a fresh daemon (empty kernel cache) takes to realize a set of
small training graphs whose time is almost all kernel compilation, for this build and for a
reference build of polygradd, measured alternately in the same script.

    /usr/bin/python3 bench/compile_bench.py --reference /path/to/old/build/polygradd [--rounds 3]

Each round runs the workload in a child process against a new embedded daemon whose cache
directory is a fresh temporary one, so every kernel is compiled; the daemon start and one
warm-up realize are not timed. The best round per build is reported, and the ratio. Timings
only: it never fails on speed.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def workload() -> float:
  """Forward and backward of three MLPs with layernorm and softmax, at distinct sizes (distinct
  kernels); returns the seconds it took after a warm-up realize."""
  sys.path.insert(0, str(REPO / "clients" / "python"))
  from polygrad import Tensor

  Tensor([1.0, 2.0]).numpy()  # starts the daemon
  t0 = time.perf_counter()
  for hidden in (24, 40, 56):
    x = Tensor.randn(16, 32)
    w1 = Tensor.randn(32, hidden, requires_grad=True)
    w2 = Tensor.randn(hidden, 10, requires_grad=True)
    h = (x @ w1).layernorm().gelu()
    loss = (h @ w2).log_softmax().mean()
    loss.backward()
    w1.grad.numpy()
    w2.grad.numpy()
  return time.perf_counter() - t0


def run_child(binary: str) -> float:
  with tempfile.TemporaryDirectory(prefix="polygrad-compile-bench-") as cache:
    env = {k: v for k, v in os.environ.items() if k != "POLYGRAD_ADDRESS"}
    env.update(POLYGRAD_DAEMON=binary, XDG_CACHE_HOME=cache)
    out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, timeout=1200, env=env)
  m = re.search(r"seconds ([\d.]+)", out.stdout)
  if not m:
    raise RuntimeError(f"{binary}: the workload failed:\n{out.stderr[-3000:]}")
  return float(m.group(1))


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--daemon", default=str(REPO / "build" / "polygradd"), help="this build's polygradd")
  ap.add_argument("--reference", help="another build's polygradd to compare with")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--child", action="store_true", help="run the workload once (used by the parent)")
  args = ap.parse_args()
  if args.child:
    print(f"seconds {workload():.3f}")
    return 0
  builds = {"this build": args.daemon}
  if args.reference:
    builds["reference"] = args.reference
  best = {name: float("inf") for name in builds}
  for r in range(args.rounds):
    for name, binary in builds.items():
      s = run_child(binary)
      best[name] = min(best[name], s)
      print(f"round {r + 1}: {name:10s} {s:7.2f} s", flush=True)
  print(f"\ncold-cache realizes (best of {args.rounds}, {os.cpu_count()} CPUs):")
  for name, binary in builds.items():
    print(f"  {name:10s} {best[name]:7.2f} s  ({binary})")
  if args.reference:
    print(f"  reference / this build: {best['reference'] / best['this build']:.2f}x")
  return 0


if __name__ == "__main__":
  sys.exit(main())
