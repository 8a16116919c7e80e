"""What a network's latency costs a training loop, with blocking and with asynchronous dispatch.

    POLYGRAD_DAEMON=build/polygradd /usr/bin/python3 bench/latency_bench.py [--delays 0,1,5] [--steps 60]
        [--client python|js|r]

One daemon (a private one on a Unix socket); for each delay a latency proxy (bench/latency_proxy.py,
TCP on loopback, the delay added to each direction: a round trip costs twice it) in front of it,
and for each dispatch mode a fresh client process through that proxy (Python, or with --client the
JavaScript or R client: bench/latency_child.mjs, bench/latency_child.R), running:

- eager: a tinygrad-style loop, MLP 784-256-10 on a batch of 128, cross-entropy, `nn.SGD`, the
  loss read (`item()`) every 10 steps; ms per step;
- compiled: the same step as `compile_step` (one RunStep per step, its loss returned); ms per step;
- tiny: `x = (x + 1).realize()` on one element, read at the end; ms per call;
- and what one dispatched tiny realize() costs the client before its answer (µs), measured with
  room for every call in flight: the median of ROUNDS rounds of the tiny loop (steady state).

"blocking" is POLYGRAD_ASYNC=0 (every realize waits for its answer); "async" the default (realizes
return at once, reads wait; docs/PROTOCOL.md, "Asynchronous dispatch"). Times are the
whole span of the timed steps over their number (reads included), after warm-up steps that compile.
Nothing here asserts a time and no numpy or PyTorch reference is timed; OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are unset all the same (bench/full_speed_blas.py), for this process and its children.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import full_speed_blas  # noqa: E402

# No reference is timed here, but the child processes (and their numpy) inherit this environment:
# the same full-speed BLAS as every bench script (TOOLCHAIN.md), never a generic core.
full_speed_blas.unset()

WORKLOADS = ("eager", "compiled", "tiny")
# Rounds of the dispatch-cost loop (every client reports their median).
ROUNDS = 5


def child(steps: int) -> None:
  """Runs the workloads against POLYGRAD_ADDRESS and prints one JSON line of ms per step."""
  import numpy as np
  from polygrad import Tensor
  from polygrad.nn import SGD, Linear, compile_step, get_parameters
  from mlp_task import mlp_train

  rng = np.random.default_rng(0)
  x = rng.random((128, 784), dtype=np.float32)
  y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
  px, py = Tensor(x).realize(), Tensor(y).realize()
  out = {}

  def timed(step, n: int, warm: int, every: int = 0, read=None) -> float:
    """ms per step over n steps, reads included: with asynchronous dispatch a step's work is
    paid for where the next read waits, so only the whole span says what a step costs."""
    for i in range(warm):
      step()
    if read is not None:
      read()
    t = time.perf_counter()
    for i in range(n):
      step()
      if every and i % every == every - 1:
        read()
    if read is not None:
      read()
    return 1000 * (time.perf_counter() - t) / n

  l1, l2 = Linear(784, 256), Linear(256, 10)
  opt = SGD(get_parameters([l1, l2]), lr=0.01)
  state = {}

  train = mlp_train(l1, l2)

  def eager():
    state["loss"] = train(opt, px, py)

  out["eager"] = timed(eager, steps, 5, every=10, read=lambda: state["loss"].item())
  step = compile_step(train, opt, px, py)
  out["compiled"] = timed(step.run, steps, 3, read=step.loss_value)  # the last run waited for, as JS and R do

  t = {"x": Tensor(np.ones(1, dtype=np.float32)).realize()}

  def tiny():
    t["x"] = (t["x"] + 1).realize()

  out["tiny"] = timed(tiny, 4 * steps, 5, read=lambda: t["x"].item())

  # What a dispatched realize costs the client: building the node and writing the command, with
  # room for every one in flight (POLYGRAD_MAX_IN_FLIGHT set by the parent), then the wait apart.
  # The median of ROUNDS rounds: a steady state, not the first calls' warm-up (a JIT, a collector).
  n = 4 * steps
  rounds = []
  for _ in range(ROUNDS):
    start = time.perf_counter()
    for _ in range(n):
      tiny()
    sent = time.perf_counter()
    Tensor.synchronize()
    rounds.append(1e6 * (sent - start) / n)
  out["dispatch_us"] = sorted(rounds)[ROUNDS // 2]
  print(json.dumps(out), flush=True)


def start_proxy(target: str, delay_ms: float):
  p = subprocess.Popen([sys.executable, str(ROOT / "bench" / "latency_proxy.py"), "--to", target,
                        "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, text=True)
  line = p.stdout.readline().split()
  if len(line) != 2 or line[0] != "listening":
    p.kill()
    raise SystemExit(f"latency proxy did not start (said {line!r})")
  return p, int(line[1])


def child_command(client: str, steps: int) -> list:
  if client == "js":
    return ["node", str(ROOT / "bench" / "latency_child.mjs"), str(steps), str(ROUNDS)]
  if client == "r":
    return ["Rscript", str(ROOT / "bench" / "latency_child.R"), str(steps), str(ROUNDS)]
  return [sys.executable, __file__, "--child", "--steps", str(steps)]


def run_child(client: str, address: str, mode: str, steps: int, in_flight: int = 8) -> dict:
  env = dict(os.environ, POLYGRAD_ADDRESS=address, POLYGRAD_ASYNC="0" if mode == "blocking" else "1",
             POLYGRAD_MAX_IN_FLIGHT=str(in_flight))
  r_lib = ROOT / "build" / "r-lib"
  if client == "r" and r_lib.is_dir():
    env["R_LIBS"] = os.pathsep.join(p for p in (str(r_lib), env.get("R_LIBS", "")) if p)
  r = subprocess.run(child_command(client, steps), env=env, capture_output=True, text=True, timeout=900)
  if r.returncode != 0:
    raise SystemExit(f"{mode} {client} client through {address} failed:\n{r.stderr[-3000:]}")
  return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--delays", default="0,1,5", help="ms added to each direction, comma-separated")
  ap.add_argument("--steps", type=int, default=60)
  ap.add_argument("--client", choices=("python", "js", "r"), default="python")
  ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child:
    return child(args.steps)

  from polygrad.daemon import EmbeddedDaemon
  delays = [float(d) for d in args.delays.split(",") if d.strip()]
  daemon = EmbeddedDaemon()
  try:
    daemon.wait_for_socket(time.monotonic() + 30)
    print(f"{args.client} client, daemon {daemon.binary} on {daemon.address}; {args.steps} steps per workload, "
          "ms per step")
    rows = []
    def measure(address: str) -> dict:
      r = {m: run_child(args.client, address, m, args.steps) for m in ("blocking", "async")}
      r["cost"] = run_child(args.client, address, "async", args.steps, in_flight=4 * args.steps + 10)
      return r

    rows.append(("direct (Unix socket)", measure(daemon.address)))
    for d in delays:
      proxy, port = start_proxy(daemon.address, d)
      try:
        rows.append((f"proxy +{d:g} ms each way", measure(f"127.0.0.1:{port}")))
      finally:
        proxy.kill()
        proxy.wait()
    head = f"{'path':28}" + "".join(f"{w + ' blocking':>18}{w + ' async':>15}{'gain':>7}" for w in WORKLOADS)
    print(head)
    for name, r in rows:
      cells = "".join(f"{r['blocking'][w]:>18.2f}{r['async'][w]:>15.2f}{r['blocking'][w] / r['async'][w]:>6.2f}x"
                      for w in WORKLOADS)
      print(f"{name:28}{cells}")
    print(f"client time per tiny realize() call, before its answer (async; the median of {ROUNDS} more rounds "
          f"of the tiny loop, each with room for all {4 * args.steps} in flight):")
    for name, r in rows:
      print(f"  {name:28}{r['cost']['dispatch_us']:8.1f} us")
  finally:
    daemon.stop()


if __name__ == "__main__":
  main()
