#!/usr/bin/python3
"""polygrad benchmarks against numpy and PyTorch (CPU), all in this one process.

    /usr/bin/python3 bench/bench.py [--repeat N] [--only NAME ...] [--no-cold] [--no-overhead]

Three tables, each from this one run:

1. Workloads. Each runs through the Python client against a daemon (POLYGRAD_ADDRESS, or the
   embedded default), and the same computation in numpy and in PyTorch when it is installed
   (Debian's python3-torch), PyTorch once on one thread and once on every core. Inputs are on the
   daemon before timing starts; a polygrad time covers sending the graph, scheduling, running the
   kernels and (for scalar results) reading the value, the work a training loop pays per step.
   The first run of each workload (which compiles, or loads from the kernel cache) is reported
   separately and not counted; the optimized builds it started in the background land before
   timing. Times are medians. "pg/torch" is polygrad's time over PyTorch's better one (of 1 and
   every thread; "best" says which): above 1 polygrad is slower. The header names the CPU, its
   vector ISA, and the BLAS kernel and threads the references ran (threadpoolctl).
2. Cold compiles: a fresh embedded daemon on an empty kernel cache (a child process) realizes a
   set of distinct one-kernel graphs; each first realize less the same graph's warm realize is
   the time to make that kernel runnable. The median over the set, and a first softmax.
3. Request overhead: a warm realize of a one-element graph against a bare gRPC call (GetInfo) on
   the same channel, both medians over many calls.
4. Scaling: polygrad's workload times on a daemon with one kernel thread (`--threads=1`, in a
   child process) against the run above on every core, with PyTorch's 1-to-N speedup beside it.
   Only where this script started the daemon itself (not with POLYGRAD_ADDRESS).

tinygrad's CPU backend on this machine (the marks issue 3 sets): matmul 1024^2 267 ms,
elementwise chain 6.8 ms, MLP step 20 steps/s eager and 202 steps/s with its JIT.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# References at full speed: OpenBLAS's core overrides go before numpy or torch is loaded (TOOLCHAIN.md).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import full_speed_blas  # noqa: E402
from background_builds import wait_for_background_builds  # noqa: E402
from mlp_task import mlp_train  # noqa: E402

full_speed_blas.unset()  # OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE dropped before numpy/torch load

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from polygrad import Tensor  # noqa: E402
from polygrad.graph import GRAPH  # noqa: E402

try:
  import torch
  torch.set_grad_enabled(False)
except ImportError:  # the table says so
  torch = None

ALL_THREADS = os.cpu_count() or 1


def forget_results():
  """Release dead tensors on the daemon now. A session remembers realized results while their
  tensors live, and an identical graph over the same buffers is answered from them; the
  benchmark must measure computing, so each run starts with the last result released. No
  gc.collect() (the last run's tensors die by reference counting): it made the next run ~0.5 ms
  slower, its caches cold and the daemon's threads idle, which no training loop does between
  steps; timed() checks that every run still launched kernels."""
  GRAPH.flush_releases()


def timed(fn, repeat, polygrad=False):
  fn()  # warm-up: compile or cache load, page faults
  times = []
  for _ in range(repeat):
    if polygrad:
      forget_results()
      before = GRAPH.last_stats
    t0 = time.perf_counter()
    fn()
    if polygrad:
      Tensor.synchronize()  # realizes return once sent: the work is done when the daemon answered
    times.append(time.perf_counter() - t0)
    # A Realize answered from remembered results launches nothing: that would time no work.
    if polygrad and GRAPH.last_stats is not before and GRAPH.last_stats.kernels == 0:
      raise RuntimeError("a timed run launched no kernel: its result was remembered, not computed")
  return statistics.median(times)


def torch_timed(fn, repeat):
  """PyTorch's median time on one thread and on every core (Debian's build defaults to one)."""
  if fn is None:
    return None, None
  out = []
  for threads in (1, ALL_THREADS):
    torch.set_num_threads(threads)
    out.append(timed(fn, repeat))
  return tuple(out)


def first_run(fn):
  """polygrad's first run of `fn`, until the daemon answered all of it."""
  t0 = time.perf_counter()
  fn()
  Tensor.synchronize()
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

  train = mlp_train(l1, l2)
  pg = compile_step(train, opt, px, py).run if compiled else (lambda: train(opt, px, py))

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


def ms(t):
  return f"{t * 1e3:9.2f}ms" if t is not None else f"{'-':>11}"


def cold_kernels():
  """name -> a graph builder; each realizes one kernel not built before in this daemon."""
  def unary(op, n):
    return lambda T: getattr(T.arange(n).float() / n, op)()
  return {
      "add 1M": lambda T: T.arange(1 << 20).float() + 1.5,
      "exp 4096": unary("exp", 4096),
      "sqrt 3000": unary("sqrt", 3000),
      "sigmoid 5000": unary("sigmoid", 5000),
      "sum 1024x512 rows": lambda T: (T.arange(1024 * 512).float().reshape(1024, 512)).sum(1),
      "max 300x700 cols": lambda T: (T.arange(300 * 700).float().reshape(300, 700)).max(0),
      "matmul 128x96x64": lambda T: T.arange(128 * 96).float().reshape(128, 96) @ T.ones(96, 64),
      "where 2000": lambda T: (T.arange(2000) > 700).where(T.arange(2000).float(), 0.5),
  }


def cold_child():
  """Runs in a child with an empty cache: prints one line per kernel and one for softmax."""
  from polygrad import Tensor as T
  T([1.0, 2.0]).numpy()  # starts the daemon; not timed
  for name, build in cold_kernels().items():
    t0 = time.perf_counter()
    build(T).realize()
    T.synchronize()
    cold = time.perf_counter() - t0
    forget_results()
    warm = timed(lambda: build(T).realize(), 5, polygrad=True)
    print(f"kernel\t{name}\t{cold - warm:.6f}", flush=True)
  x = T.randn(512, 1000).realize()
  T.synchronize()  # realize only dispatches: the input's own compile is not the softmax's
  t0 = time.perf_counter()
  x.softmax(-1).realize()
  T.synchronize()
  print(f"softmax\t{time.perf_counter() - t0:.6f}\t{GRAPH.last_stats.kernels}", flush=True)


def print_cold_compiles():
  with tempfile.TemporaryDirectory(prefix="polygrad-bench-cold-") as cache:
    env = {k: v for k, v in os.environ.items() if k != "POLYGRAD_ADDRESS"}
    env["XDG_CACHE_HOME"] = cache  # the embedded daemon's kernel cache lives under it
    out = subprocess.run([sys.executable, __file__, "--cold-child"], capture_output=True, text=True, timeout=1200,
                         env=env)
  lines = [line.split("\t") for line in out.stdout.splitlines()]
  kernels = {f[1]: float(f[2]) for f in lines if f[0] == "kernel"}
  softmax, softmax_kernels = next(((float(f[1]), f[2]) for f in lines if f[0] == "softmax"), (None, None))
  if not kernels or softmax is None:
    raise RuntimeError(f"the cold-compile child failed:\n{out.stderr[-3000:]}")
  print("\ncold compile on an empty kernel cache (first realize less a warm one):")
  for name, t in kernels.items():
    print(f"  {name:24} {ms(t)}")
  print(f"  {'median per kernel':24} {ms(statistics.median(kernels.values()))}")
  print(f"  {'first softmax 512x1000':24} {ms(softmax)}  ({softmax_kernels} kernel(s), end to end)")


def polygrad_times(rng, repeat, only):
  """name -> polygrad's median time of each selected workload (its first run and background
  builds done first), on the daemon this process talks to."""
  out = {}
  for name, (pg, _, _, _) in workloads(rng).items():
    if only and not any(o in name for o in only):
      continue
    first_run(pg)
    wait_for_background_builds()
    forget_results()
    out[name] = timed(pg, repeat, polygrad=True)
  return out


def print_scaling(rows, args):
  """Each workload again on a private daemon with one kernel thread (a child process), against the
  all-core times in `rows`."""
  env = {k: v for k, v in os.environ.items() if k != "POLYGRAD_ADDRESS"}
  cmd = [sys.executable, __file__, "--threads-child", "--repeat", str(args.repeat),
         "--daemon-args=" + " ".join(a for a in (args.daemon_args, "--threads=1") if a)]
  if args.only:
    cmd += ["--only", *args.only]
  out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
  one = {f[1]: float(f[2]) for f in (line.split("\t") for line in out.stdout.splitlines()) if f[0] == "pg"}
  if not one:
    raise RuntimeError(f"the one-thread child failed:\n{out.stderr[-3000:]}")
  print(f"\nscaling: polygrad on 1 kernel thread (--threads=1) and on {ALL_THREADS} (the table above), medians:")
  print(f"  {'workload':36} {'pg 1T':>10} {f'pg {ALL_THREADS}T':>10} {'speedup':>8} {'torch speedup':>14}")
  for name, _, t_pg, _, t_t1, t_tn, _ in rows:
    if name in one:
      torch_up = f"{t_t1 / t_tn:14.2f}" if t_tn else f"{'-':>14}"
      print(f"  {name:36} {ms(one[name])} {ms(t_pg)} {one[name] / t_pg:8.2f} {torch_up}")


def print_request_overhead(calls):
  """The two calls alternate in one loop, so both meet the same machine state (a VM's idle vCPUs
  wake slowly: a call after a pause costs more than one right after another). Each tiny realize
  computes: the last result's release is sent first (a separate call, not timed), otherwise the
  daemon answers an identical graph over the same buffers from the result it remembers. No
  gc.collect(), as in the workloads: the tensors die by reference count, and a collection before
  every call would leave the client's caches cold for the realize and not for GetInfo."""
  from polygrad import wire
  from polygrad.connection import get_connection
  conn = get_connection()
  one = Tensor([1.0]).realize()
  (one + 1).realize()
  tiny, bare = [], []
  for _ in range(calls):
    GRAPH.flush_releases()
    t0 = time.perf_counter()
    conn.stub.GetInfo(wire.get_info())
    t1 = time.perf_counter()
    (one + 1).realize()
    Tensor.synchronize()  # the whole round trip, as a blocking realize had
    t2 = time.perf_counter()
    bare.append(t1 - t0)
    tiny.append(t2 - t1)
  computed = GRAPH.last_stats.kernels
  tiny, bare = statistics.median(tiny), statistics.median(bare)
  print(f"\nrequest overhead (medians of {calls}, alternating):")
  print(f"  warm one-element realize {ms(tiny)}  ({computed} kernel run per call)")
  print(f"  bare gRPC call (GetInfo) {ms(bare)}")
  print(f"  realize / bare call      {tiny / bare:9.2f}x")


def start_daemon(extra: str):
  """Without POLYGRAD_ADDRESS: a private daemon, as the client would start, on its default limits
  (the conv row's 3.7e9 multiply-adds are within --max-work)."""
  if os.environ.get("POLYGRAD_ADDRESS"):
    return None
  import shlex
  from polygrad.daemon import EmbeddedDaemon
  d = EmbeddedDaemon(extra_args=shlex.split(extra))
  d.wait_for_socket(time.monotonic() + 60)
  os.environ["POLYGRAD_ADDRESS"] = d.address
  return d


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=10)
  ap.add_argument("--only", nargs="*", default=None, help="substrings of workload names to run")
  ap.add_argument("--no-cold", action="store_true", help="skip the cold-compile table")
  ap.add_argument("--no-overhead", action="store_true", help="skip the request-overhead table")
  ap.add_argument("--no-scaling", action="store_true", help="skip the one-thread scaling table")
  ap.add_argument("--threads-child", action="store_true", help=argparse.SUPPRESS)
  ap.add_argument("--cold-child", action="store_true", help=argparse.SUPPRESS)
  ap.add_argument("--daemon-args", default="",
                  help="extra flags for the daemon this script starts (not with POLYGRAD_ADDRESS), e.g. --tune=search")
  args = ap.parse_args()
  if args.cold_child:
    cold_child()
    return 0
  daemon = start_daemon(args.daemon_args)
  if args.threads_child:  # polygrad's side only, one line per workload
    for name, t in polygrad_times(np.random.default_rng(0), args.repeat, args.only).items():
      print(f"pg\t{name}\t{t:.9f}", flush=True)
    return 0
  rng = np.random.default_rng(0)
  rows = []
  for name, (pg, npf, tf, check) in workloads(rng).items():
    if args.only and not any(o in name for o in args.only):
      continue
    cold = first_run(pg)
    ok = check()
    wait_for_background_builds()
    forget_results()
    t_pg = timed(pg, args.repeat, polygrad=True)
    t_np = timed(npf, args.repeat)
    t_t1, t_tn = torch_timed(tf, args.repeat) if torch else (None, None)
    rows.append((name, cold, t_pg, t_np, t_t1, t_tn, ok))

  print(f"machine: {full_speed_blas.machine()}; {time.strftime('%Y-%m-%d')}")
  print(f"torch: {torch.__version__ + ' (' + full_speed_blas.torch_capability(torch) + ')' if torch else 'not installed (apt-get install python3-torch)'}; "
        f"numpy {np.__version__}; torch threads: 1 and {ALL_THREADS}")
  print(f"references' BLAS: {full_speed_blas.describe()}")
  hdr = (f"{'workload':36} {'first run':>10} {'polygrad':>10} {'numpy':>10} {'torch 1T':>10} "
         f"{f'torch {ALL_THREADS}T':>10} {'pg/np':>7} {'pg/torch':>8} {'best':>4}  correct")
  print(hdr)
  print("-" * len(hdr))
  for name, cold, t_pg, t_np, t_t1, t_tn, ok in rows:
    best = min((t, f"{n}T") for t, n in ((t_t1, 1), (t_tn, ALL_THREADS)) if t) if t_tn else None
    tr = f"{t_pg / best[0]:8.2f} {best[1]:>4}" if best else f"{'-':>8} {'':>4}"
    print(f"{name:36} {ms(cold)} {ms(t_pg)} {ms(t_np)} {ms(t_t1)} {ms(t_tn)} {t_pg / t_np:7.2f} {tr}  "
          f"{'yes' if ok else 'NO'}")
  if not args.no_cold:
    print_cold_compiles()
  if not args.no_overhead:
    print_request_overhead(args.repeat * 100)
  if not args.no_scaling:
    if daemon is None:
      print("\nscaling: skipped (POLYGRAD_ADDRESS names a daemon whose threads this script does not set)")
    else:
      print_scaling(rows, args)
  return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
