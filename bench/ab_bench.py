#!/usr/bin/python3
"""Two polygradd builds (or one build with two sets of flags) on the same workloads, alternating.

    /usr/bin/python3 bench/ab_bench.py --new build/polygradd --old OTHER/polygradd [--rounds 3]
        [--new-args "--tune=search"] [--old-args ""] [--new-env "POLYGRAD_ASYNC=0"] [softmax layernorm chain matmul conv step eager]

Each round starts each daemon afresh on an empty kernel cache, runs every workload in a child
process (two warm-up runs, which compile and, with --tune=search, search; then the median of
several), and stops it. --new-env/--old-env set variables in that side's client process. The best median over the rounds is reported for each side, and new/old:
below 1 the new side is faster. Rounds alternate so that a machine whose speed drifts (a shared
VM) slows both sides alike.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

# References at full speed: OpenBLAS's core overrides go before numpy or torch is loaded (TOOLCHAIN.md).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import full_speed_blas  # noqa: E402

full_speed_blas.unset()  # OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE dropped before numpy/torch load

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("softmax", "layernorm", "chain", "matmul", "conv", "step", "eager")


def child(names):
  sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
  import gc
  import numpy as np
  from polygrad import Tensor
  from polygrad.graph import GRAPH
  rng = np.random.default_rng(0)
  w = {}
  if {"softmax", "layernorm"} & set(names):
    ps = Tensor(rng.standard_normal((4096, 1024), dtype=np.float32)).realize()

    def layernorm(v):
      d = v - v.mean(-1, keepdim=True)
      return d / ((d * d).mean(-1, keepdim=True) + 1e-5).sqrt()

    w["softmax"] = lambda: ps.softmax(-1).realize()
    w["layernorm"] = lambda: layernorm(ps).realize()
  if "matmul" in names:
    pa, pb = (Tensor(rng.random((1024, 1024), dtype=np.float32)).realize() for _ in range(2))
    w["matmul"] = lambda: (pa @ pb).realize()
  if "chain" in names:
    px, py, pz = (Tensor(rng.random(1 << 20, dtype=np.float32)).realize() for _ in range(3))
    w["chain"] = lambda: ((px + py) * pz).relu().exp().sum().item()
  if "conv" in names:
    pcx = Tensor(rng.standard_normal((32, 64, 56, 56), dtype=np.float32)).realize()
    pcw = Tensor(rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05).realize()
    w["conv"] = lambda: pcx.conv2d(pcw, padding=1).realize()
  if {"step", "eager"} & set(names):  # bench.py's MLP step rows, compiled and eager
    sys.path.insert(0, HERE)
    from mlp_task import mlp_train
    from polygrad.nn import SGD, Linear, compile_step, get_parameters
    x = Tensor(rng.random((128, 784), dtype=np.float32)).realize()
    y = Tensor(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]).realize()
    for name in ("step", "eager"):
      l1, l2 = Linear(784, 256), Linear(256, 10)
      opt = SGD(get_parameters([l1, l2]), lr=0.01)
      train = mlp_train(l1, l2)
      if name == "step":
        w[name] = lambda s=compile_step(train, opt, x, y): s.run().loss_value()  # the loss read back
      else:
        w[name] = lambda t=train, o=opt: t(o, x, y).item()
  sys.path.insert(0, HERE)
  from background_builds import wait_for_background_builds
  out = {}
  for n in names:
    f = w[n]
    f()
    f()
    wait_for_background_builds()  # time the optimized kernels, not the quick tier's
    f()
    times = []
    for _ in range(3 if n == "conv" else 50 if n in ("step", "eager") else 7):
      gc.collect()
      GRAPH.flush_releases()  # a released result is computed again, not answered from the session
      t0 = time.perf_counter()
      f()
      Tensor.synchronize()  # realizes return once sent: timed until the daemon answered
      times.append(time.perf_counter() - t0)
    out[n] = statistics.median(times)
  print(json.dumps(out))


def run(binary, extra, names, client_env):
  with tempfile.TemporaryDirectory(prefix="pg-ab-") as d:
    sock = os.path.join(d, "s.sock")
    p = subprocess.Popen([binary, "--listen=", "--metrics-listen=", f"--unix-socket={sock}", f"--cache-dir={d}/cache",
                          *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
      deadline = time.time() + 60
      while not os.path.exists(sock):
        if p.poll() is not None or time.time() > deadline:
          raise SystemExit(f"{binary} did not start")
        time.sleep(0.05)
      r = subprocess.run([sys.executable, __file__, "--child", *names], capture_output=True, text=True,
                         env=dict(os.environ, **client_env, POLYGRAD_ADDRESS=f"unix:{sock}"))
      if r.returncode:
        raise SystemExit(r.stderr[-3000:])
      return json.loads(r.stdout)
    finally:
      p.terminate()
      p.wait()


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    return child(sys.argv[2:])
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--new", required=True)
  ap.add_argument("--old", required=True)
  ap.add_argument("--new-args", default="")
  ap.add_argument("--old-args", default="")
  ap.add_argument("--new-env", default="", help="NAME=VALUE ... for the new side's client")
  ap.add_argument("--old-env", default="", help="NAME=VALUE ... for the old side's client")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("workloads", nargs="*", default=["softmax", "layernorm", "chain", "matmul"], choices=WORKLOADS)
  a = ap.parse_args()
  results = {"new": [], "old": []}
  envs = {k: dict(kv.split("=", 1) for kv in shlex.split(getattr(a, k + "_env"))) for k in results}
  for _ in range(a.rounds):
    for k in results:
      results[k].append(run(getattr(a, k), shlex.split(getattr(a, k + "_args")), a.workloads, envs[k]))
  print(f"new: {a.new} {a.new_args} {a.new_env}\nold: {a.old} {a.old_args} {a.old_env}\n(best of {a.rounds} rounds' medians)")
  for n in a.workloads:
    new, old = (min(r[n] for r in results[k]) for k in ("new", "old"))
    print(f"{n:10s} new {new * 1e3:8.2f} ms   old {old * 1e3:8.2f} ms   new/old {new / old:.2f}")


if __name__ == "__main__":
  main()
