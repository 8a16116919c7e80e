#!/usr/bin/env python3
"""Attention of one query over the first `pos` rows of a key/value cache, as a KV-cache decoder
runs it per token: with a symbolic dim (tinygrad's Variable, `cache[:, :pos]`), whose loops stop
at pos, against the same attention over the whole window with the rows past pos masked off (what
polygrad.kv_cache does today). Both are TinyJits, so every call is one RunStep; the symbolic one
replays every position without capturing again.

Reports microseconds per call at a few positions for both, their ratio, and the kernel builds
after the first position (from the daemon's /metrics; symbolic dims promise none).

    POLYGRAD_DAEMON=build/polygradd /usr/bin/python3 bench/symbolic_bench.py [--heads 12 --window 1024]

Timings only: it never fails on speed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python"))
sys.path.insert(0, str(REPO / "bench"))

import full_speed_blas  # noqa: E402

full_speed_blas.unset()  # before numpy loads: this script times no BLAS reference, but keeps the rule

import numpy as np  # noqa: E402

from generate_bench import kernel_builds, metrics_url  # noqa: E402
from polygrad import Tensor, TinyJit, Variable  # noqa: E402
from polygrad.daemon import EmbeddedDaemon  # noqa: E402


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--heads", type=int, default=12)
  ap.add_argument("--window", type=int, default=1024)
  ap.add_argument("--head-dim", type=int, default=64)
  ap.add_argument("--calls", type=int, default=40, help="timed calls per position and round")
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()

  daemon = EmbeddedDaemon(extra_args=["--metrics-listen=127.0.0.1:0", "--quick-compile=off"])
  os.environ["POLYGRAD_ADDRESS"] = daemon.address
  url = metrics_url(daemon)
  try:
    run(args, lambda: kernel_builds(url))
  finally:
    daemon.stop()


def run(args, builds) -> None:
  h, w, hd = args.heads, args.window, args.head_dim

  rng = np.random.default_rng(0)
  K = Tensor(rng.standard_normal((h, w, hd)).astype(np.float32)).realize()
  V = Tensor(rng.standard_normal((h, w, hd)).astype(np.float32)).realize()
  q = Tensor(rng.standard_normal((h, 1, hd)).astype(np.float32)).realize()
  ar = Tensor(np.arange(w, dtype=np.int32).reshape(1, 1, w)).realize()
  scale = 1 / hd ** 0.5
  start_pos = Variable("start_pos", 0, w - 1)

  @TinyJit
  def symbolic(x, pos):
    keys, values = K[:, :pos + 1], V[:, :pos + 1]
    return ((x @ keys.transpose(1, 2)) * scale).softmax(-1).matmul(values).realize()

  @TinyJit
  def masked(x, pos):  # pos: an int32 (1, 1, 1) Tensor, data as polygrad.kv_cache's positions are
    att = ((x @ K.transpose(1, 2)) * scale)
    return (ar <= pos).where(att, float("-inf")).softmax(-1).matmul(V).realize()

  positions = [p for p in (16, w // 4, w // 2, w - 1) if p < w]
  for p in (1, 2, 3):  # eager, capture, first replay
    symbolic(q, start_pos.bind(p)).numpy()
    masked(q, Tensor(np.array([[[p]]], np.int32))).numpy()
  before = builds()
  times = {("symbolic", p): [] for p in positions} | {("masked", p): [] for p in positions}
  for _ in range(args.rounds):
    for p in positions:
      for kind in ("symbolic", "masked"):
        fn = symbolic if kind == "symbolic" else masked
        arg = start_pos.bind(p) if kind == "symbolic" else Tensor(np.array([[[p]]], np.int32))
        fn(q, arg).numpy()
        t = time.perf_counter()
        for _ in range(args.calls):
          out = fn(q, arg)
        out.numpy()
        times[(kind, p)].append((time.perf_counter() - t) / args.calls * 1e6)
  got, want = symbolic(q, start_pos.bind(positions[-1])).numpy(), masked(q, Tensor(np.array([[[positions[-1]]]], np.int32))).numpy()
  after = builds()

  print(f"machine: {full_speed_blas.machine()}")
  print(f"attention of 1 query over a {h}x{w}x{hd} float32 key/value cache, one TinyJit replay per call "
        f"(medians of {args.rounds} rounds of {args.calls})")
  print(f"  {'position':>8}  {'symbolic us':>12}  {'masked us':>10}  symbolic/masked")
  for p in positions:
    s, m = statistics.median(times[("symbolic", p)]), statistics.median(times[("masked", p)])
    print(f"  {p:>8}  {s:>12.0f}  {m:>10.0f}  {s / m:.2f}")
  print(f"  kernel builds after the first positions: {after - before:.0f}")
  print(f"  results agree: {bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))}")


if __name__ == "__main__":
  main()
