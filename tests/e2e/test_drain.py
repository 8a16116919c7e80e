"""The real binary drains on SIGTERM: a realize already running finishes and answers, new calls
are refused, the daemon exits 0 and removes its socket."""
import signal
import subprocess
import threading
import time

import grpc
import numpy as np
import pytest

from conftest import daemon_binary

from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

pytestmark = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")


def _many_kernels(k):
  """k reductions of one input, each with its own constant: k kernels to compile (seconds)."""
  nodes = [pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32,
                   buffer={"shape": [64], "data": np.ones(64, np.float32).tobytes()})]
  outputs = []
  for i in range(k):
    base = 10 + 3 * i
    nodes.append(pb.Node(id=base, op=pb.CONST, dtype=pb.FLOAT32,
                         constant={"float_value": i + 0.125, "shape": [64]}))
    nodes.append(pb.Node(id=base + 1, op=pb.MUL, src=[1, base]))
    nodes.append(pb.Node(id=base + 2, op=pb.REDUCE_SUM, src=[base + 1], axes={"axes": [0]}))
    outputs.append(base + 2)
  return nodes, outputs


def test_sigterm_lets_the_running_realize_finish(tmp_path):
  sock = tmp_path / "d.sock"
  log = open(tmp_path / "d.log", "wb")
  proc = subprocess.Popen([str(daemon_binary()), "--listen=", "--metrics-listen=", f"--unix-socket={sock}",
                           f"--cache-dir={tmp_path / 'cache'}", "--shutdown-grace=120s"],
                          stdout=subprocess.DEVNULL, stderr=log)
  try:
    deadline = time.monotonic() + 30
    while not sock.exists():
      assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "d.log").read_text()
      time.sleep(0.02)
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = pb_grpc.PolygradStub(channel)
    sid = stub.CreateSession(pb.CreateSessionRequest(), timeout=30).session_id
    nodes, outputs = _many_kernels(12)
    result = {}

    def run():
      try:
        result["response"] = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=nodes, outputs=outputs,
                                                            want_data=True), timeout=120)
      except grpc.RpcError as e:
        result["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    # Twelve cold compiles take seconds: the realize is still running when the signal arrives.
    time.sleep(0.5)
    assert worker.is_alive(), result
    proc.send_signal(signal.SIGTERM)
    worker.join(timeout=150)
    assert "error" not in result, result.get("error")
    got = [np.frombuffer(r.data, np.float32)[0] for r in result["response"].results]
    assert got == [64 * (i + 0.125) for i in range(12)]
    with pytest.raises(grpc.RpcError):
      stub.CreateSession(pb.CreateSessionRequest(), timeout=5)
    assert proc.wait(timeout=60) == 0
    assert not sock.exists()
    text = (tmp_path / "d.log").read_text()
    assert "signal received" in text and text.index("signal received") < text.rindex("session closed")
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
