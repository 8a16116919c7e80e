#!/usr/bin/env python3
"""What a generated token costs at each position of a long KV cache (issue 34: a token's cost grows
with its position, not with the window): a random GPT-2 (4 layers, width 256, 8 heads, vocabulary
1000) with a 2048-position cache, greedy steps of polygrad.kv_cache at positions near 50, 1000 and
2000, interleaved over several rounds; medians in ms/token.

    POLYGRAD_DAEMON=build/polygradd /usr/bin/python3 bench/kv_position_bench.py [--window 2048] [--rounds 4]

Timings only: it never fails on speed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python"))
sys.path.insert(0, str(REPO / "bench"))

import full_speed_blas  # noqa: E402

full_speed_blas.unset()  # before numpy loads: this script times no BLAS reference, but keeps the rule

from polygrad import Tensor  # noqa: E402
from polygrad.hf import GPT2, GPT2Config  # noqa: E402
from polygrad.kv_cache import KVCache  # noqa: E402


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--window", type=int, default=2048)
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--tokens", type=int, default=30, help="timed tokens per position and round")
  args = ap.parse_args()
  w = args.window
  cfg = GPT2Config(vocab_size=1000, n_positions=w, n_embd=256, n_layer=4, n_head=8)
  Tensor.manual_seed(0)
  cache = KVCache(GPT2(cfg), 1, w)
  for p in range(4):  # capture, and the kernels' optimized builds
    cache.step_greedy([1], [p])
  positions = [50, w // 2, w - 8]
  times = {p: [] for p in positions}
  for _ in range(args.rounds):
    for p in positions:
      t = time.perf_counter()
      for i in range(args.tokens):
        cache.step_greedy([i % cfg.vocab_size], [p + i % 5])
      times[p].append((time.perf_counter() - t) / args.tokens * 1e3)
  print(f"machine: {full_speed_blas.machine()}")
  print(f"greedy GPT-2 steps (4 layers, width 256, 8 heads) on a {w}-position KV cache, medians of {args.rounds} rounds")
  for p in positions:
    print(f"  position ~{p:>5}: {statistics.median(times[p]):6.2f} ms/token")
  print(f"  kernels per token: {cache.n_kernels}")


if __name__ == "__main__":
  main()
