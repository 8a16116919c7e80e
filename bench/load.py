#!/usr/bin/env python3
"""Load test (issue 5, acceptance 5; a benchmark, not a test): N concurrent clients hammer one
polygradd on loopback with mixed Realize, Upload and Download traffic for a fixed time.

    /usr/bin/python3 bench/load.py [--clients 32] [--duration 60] [--warmup 10] [--address HOST:PORT]

Without --address it starts build/polygradd on 127.0.0.1 (a free port, a fresh cache dir) and
stops it afterwards. Each client is its own process with its own channel and session. Reports,
for after the warm-up: errors, p50/p99 latency and rate per kind, bytes moved, and the daemon's
RSS at the end of the warm-up and at the end (own daemon only). Steps are not exercised yet.
Exit status 1 when any request failed.
"""
import argparse
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "clients" / "python"))

from measures import percentile, rss_bytes  # noqa: E402

UPLOAD_BYTES = 256 << 10
WIDTH = 1024
CONSTANTS = 8  # distinct realize graphs: kernels come from the cache after their first compile


def client(idx: int, address: str, times, go, out) -> None:
  import grpc
  # numpy only makes payloads here; nothing is timed against it, so OPENBLAS_CORETYPE and
  # OPENBLAS_L2_SIZE stay as the environment set them (TOOLCHAIN.md).
  import numpy as np
  from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc
  rng = np.random.default_rng(idx)
  ch = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", -1)])
  stub = pb_grpc.PolygradStub(ch)
  lat = {"realize": [], "upload": [], "download": []}
  errors = {}
  moved = 0
  sid = stub.CreateSession(pb.CreateSessionRequest()).session_id
  payload = rng.integers(0, 255, UPLOAD_BYTES, dtype=np.uint8).tobytes()
  x = np.arange(WIDTH, dtype=np.float32).tobytes()
  handles = []
  out.put("ready")  # connected with a session: the clock starts when every client is
  go.wait()
  t_warm, t_end = times[0], times[1]
  while True:
    now = time.time()
    if now >= t_end:
      break
    kind = rng.choice(["realize", "upload", "download"], p=[0.5, 0.25, 0.25])
    if kind == "download" and not handles:
      kind = "upload"
    t0 = time.perf_counter()
    try:
      if kind == "realize":
        c = float(rng.integers(CONSTANTS))
        nodes = [pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=x, shape=[WIDTH])),
                 pb.Node(id=2, op=pb.CONST, dtype=pb.FLOAT32, constant=pb.Constant(float_value=c, shape=[WIDTH])),
                 pb.Node(id=3, op=pb.MUL, src=[1, 2]), pb.Node(id=4, op=pb.EXP2, src=[3]),
                 pb.Node(id=5, op=pb.REDUCE_SUM, src=[4], axes=pb.Axes(axes=[0]))]
        r = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=nodes, outputs=[5], want_data=True,
                                           release_nodes=[1, 2, 3, 4, 5]), timeout=60)
        assert r.results[0].has_data
        moved += len(x)
      elif kind == "upload":
        def chunks():
          yield pb.UploadChunk(header=pb.UploadHeader(session_id=sid, dtype=pb.UINT8, shape=[UPLOAD_BYTES]),
                               data=payload, last=True)
        handles.append(stub.Upload(chunks(), timeout=60).handle)
        moved += UPLOAD_BYTES
        if len(handles) > 4:
          stub.Release(pb.ReleaseRequest(session_id=sid, handles=[handles.pop(0)]), timeout=60)
      else:
        h = handles[int(rng.integers(len(handles)))]
        got = b"".join(m.data for m in stub.Download(pb.DownloadRequest(session_id=sid, handle=h), timeout=60))
        assert got == payload
        moved += len(got)
    except Exception as e:  # counted, reported, and the client goes on
      key = f"{kind}: {type(e).__name__}: {getattr(e, 'details', lambda: str(e))()}"[:200]
      errors[key] = errors.get(key, 0) + 1
      continue
    if now >= t_warm:
      lat[kind].append(time.perf_counter() - t0)
  if handles:
    stub.Release(pb.ReleaseRequest(session_id=sid, handles=handles))
  stub.CloseSession(pb.CloseSessionRequest(session_id=sid))
  ch.close()
  out.put((lat, errors, moved))


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--clients", type=int, default=32)
  p.add_argument("--duration", type=float, default=60.0, help="seconds of measured load, after the warm-up")
  p.add_argument("--warmup", type=float, default=10.0)
  p.add_argument("--address", default=None)
  p.add_argument("--daemon", default=str(REPO / "build" / "polygradd"))
  args = p.parse_args()

  proc = tmp = None
  address = args.address
  if address is None:
    tmp = tempfile.mkdtemp(prefix="pgload-")
    log = open(os.path.join(tmp, "polygradd.log"), "wb")
    proc = subprocess.Popen([args.daemon, "--listen=127.0.0.1:0", "--metrics-listen=", "--unix-socket=",
                             f"--cache-dir={tmp}/cache", f"--max-sessions={max(1024, args.clients * 2)}"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while not (m := re.search(r"grpc=(127\.0\.0\.1:\d+)", Path(tmp, "polygradd.log").read_text())):
      if proc.poll() is not None or time.time() > deadline:
        print(Path(tmp, "polygradd.log").read_text(), file=sys.stderr)
        return 2
      time.sleep(0.05)
    address = m.group(1)

  ctx = mp.get_context("spawn")
  out = ctx.Queue()
  times = ctx.Array("d", 2)
  go = ctx.Event()
  procs = [ctx.Process(target=client, args=(i, address, times, go, out)) for i in range(args.clients)]
  for pr in procs:
    pr.start()
  for _ in procs:
    assert out.get(timeout=300) == "ready"
  times[0] = time.time() + args.warmup
  times[1] = times[0] + args.duration
  go.set()
  rss_warm = rss_end = rss_closed = None
  if proc is not None:
    time.sleep(max(0.0, times[0] - time.time()))
    rss_warm = rss_bytes(proc.pid)
    time.sleep(max(0.0, times[1] - time.time() - 0.5))
    rss_end = rss_bytes(proc.pid)  # still under load, sessions open
  results = [out.get(timeout=args.duration + args.warmup + 300) for _ in procs]
  if proc is not None:
    rss_closed = rss_bytes(proc.pid)
  for pr in procs:
    pr.join()

  lat = {"realize": [], "upload": [], "download": []}
  errors = {}
  moved = 0
  for l, e, m in results:
    for k, v in l.items():
      lat[k].extend(v)
    for k, v in e.items():
      errors[k] = errors.get(k, 0) + v
    moved += m
  n_err = sum(errors.values())
  print(f"polygradd load: {args.clients} clients x {args.duration:.0f} s measured (after {args.warmup:.0f} s warm-up) "
        f"on {address}")
  print(f"{'kind':10} {'count':>8} {'per s':>9} {'p50 ms':>9} {'p99 ms':>9}")
  total = 0
  for k, v in lat.items():
    total += len(v)
    print(f"{k:10} {len(v):8d} {len(v) / args.duration:9.1f} {percentile(v, 0.5) * 1e3:9.2f} "
          f"{percentile(v, 0.99) * 1e3:9.2f}")
  print(f"{'all':10} {total:8d} {total / args.duration:9.1f}")
  print(f"bytes moved (incl. warm-up): {moved / 1e6:.1f} MB")
  print(f"errors: {n_err}")
  for k, v in sorted(errors.items(), key=lambda kv: -kv[1])[:10]:
    print(f"  {v:6d} x {k}")
  if rss_warm is not None:
    print(f"daemon RSS: {rss_warm / 2**20:.1f} MiB after warm-up, {rss_end / 2**20:.1f} MiB at the end of the load "
          f"({(rss_end - rss_warm) / rss_warm * 100:+.1f}%), {rss_closed / 2**20:.1f} MiB after every client closed")
  if proc is not None:
    proc.terminate()
    proc.wait(timeout=30)
    shutil.rmtree(tmp, ignore_errors=True)
  return 1 if n_err else 0


if __name__ == "__main__":
  sys.exit(main())
