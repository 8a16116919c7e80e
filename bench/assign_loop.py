#!/usr/bin/env python3
"""Per-step time of the tinygrad-style hand-written training loop against the same model through
polygrad.nn.SGD (issue 17 acceptance 3 asks for within 1.5x): an MLP 784-256-10 (ReLU), batch 128,
one-hot cross-entropy, lr 0.01, both eager (one Realize per step).

    hand-written:  loss.backward(); w.assign(w.detach() - lr * w.grad); w.grad = None; w.realize()
    nn.SGD:        opt.zero_grad(); loss.backward(); opt.step()

    POLYGRAD_DAEMON=build/polygradd /usr/bin/python3 bench/assign_loop.py [--steps 60] [--rounds 3]

It also prints the time of early and late steps of the hand-written loop (flat when a step does
not carry the ones before it). Timings only: it never fails on speed. The two loops alternate for
--rounds rounds and each reports its best round's median, since the machine may be shared.
"""
from __future__ import annotations

import argparse
import statistics
import os
import sys
import time
from pathlib import Path

# References at full speed: OpenBLAS's core overrides go before numpy or torch is loaded (TOOLCHAIN.md).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import full_speed_blas  # noqa: E402

full_speed_blas.unset()  # OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE dropped before numpy/torch load

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python"))

from polygrad import Tensor  # noqa: E402
from polygrad.nn import SGD  # noqa: E402

LR = 0.01


def data(rng):
  x = Tensor(rng.random((128, 784), dtype=np.float32))
  y = Tensor(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)])
  return x, y


def weights(rng):
  w1 = Tensor((rng.standard_normal((784, 256)) * 0.05).astype(np.float32), requires_grad=True)
  w2 = Tensor((rng.standard_normal((256, 10)) * 0.05).astype(np.float32), requires_grad=True)
  return w1, w2


def loss_of(x, y, w1, w2):
  lo = (x @ w1).relu() @ w2
  return -(lo.log_softmax(-1) * y).sum(-1).mean()


def hand_written(steps: int, rng) -> list:
  x, y = data(rng)
  w1, w2 = weights(rng)
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    loss_of(x, y, w1, w2).backward()
    for w in (w1, w2):
      w.assign(w.detach() - LR * w.grad)
    for w in (w1, w2):
      w.grad = None
    w1.realize(), w2.realize()
    Tensor.synchronize()  # the step's realizes return once sent: timed until answered
    times.append(time.perf_counter() - t0)
  return times


def with_sgd(steps: int, rng) -> list:
  x, y = data(rng)
  w1, w2 = weights(rng)
  opt = SGD([w1, w2], lr=LR)
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad()
    loss_of(x, y, w1, w2).backward()
    opt.step()
    Tensor.synchronize()  # the step's realizes return once sent: timed until answered
    times.append(time.perf_counter() - t0)
  return times


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--steps", type=int, default=60)
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()
  warm = 5  # the first steps compile kernels
  if args.steps <= 2 * warm:
    ap.error("--steps must be more than 10")
  rng = np.random.default_rng(0)
  # The client's own daemon (POLYGRAD_ADDRESS, or one it starts from POLYGRAD_DAEMON).
  best = {"hand-written": float("inf"), "nn.SGD": float("inf")}
  best_times = {}
  for _ in range(args.rounds):
    for name, run in (("hand-written", hand_written), ("nn.SGD", with_sgd)):
      times = run(args.steps, rng)
      if statistics.median(times[warm:]) < best[name]:
        best[name], best_times[name] = statistics.median(times[warm:]), times
  early_late = [statistics.median(part) for part in (best_times["hand-written"][warm:2 * warm],
                                                     best_times["hand-written"][-warm:])]
  print(f"per step (median after {warm} warm-up steps, best of {args.rounds} rounds):")
  for name, t in best.items():
    print(f"  {name:13s} {t * 1e3:8.2f} ms")
  print(f"  hand-written / nn.SGD = {best['hand-written'] / best['nn.SGD']:.2f}x")
  print(f"  hand-written steps {warm}-{2 * warm - 1}: {early_late[0] * 1e3:.2f} ms; "
        f"last {warm}: {early_late[1] * 1e3:.2f} ms")
  return 0


if __name__ == "__main__":
  sys.exit(main())
