"""The real binary drains on SIGTERM: a realize already running finishes and answers, new calls
are refused, the daemon exits 0 and removes its socket.

The realize is held in flight by the test, not by a guess at how long compiling takes: the daemon
compiles through tests/tools/held-compiler, whose gate the test keeps closed until the signal has
been delivered and new calls are refused."""
import signal
import threading

import grpc
import numpy as np
import pytest

from conftest import Daemon, HeldCompiler, WAIT_LIMIT, daemon_binary, wait_until

from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

pytestmark = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")


def _many_kernels(k):
  """k reductions of one input, each with its own constant: k kernels to compile."""
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


def _refused(stub) -> bool:
  try:
    stub.CreateSession(pb.CreateSessionRequest(), timeout=WAIT_LIMIT)
  except grpc.RpcError:
    return True
  return False


def test_sigterm_lets_the_running_realize_finish(tmp_path):
  cc = HeldCompiler(tmp_path)
  # --quick-compile=off: the realize waits for its held compile (a quick build would answer it).
  d = Daemon(daemon_binary(), tmp_path, "", f"--compiler={cc.path}", "--shutdown-grace=600s",
             "--quick-compile=off")
  try:
    d.wait_ready()
    channel = grpc.insecure_channel(d.address)
    stub = pb_grpc.PolygradStub(channel)
    sid = stub.CreateSession(pb.CreateSessionRequest(), timeout=WAIT_LIMIT).session_id
    nodes, outputs = _many_kernels(12)
    result = {}

    def run():
      try:
        result["response"] = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=nodes, outputs=outputs,
                                                            want_data=True), timeout=600)
      except grpc.RpcError as e:
        result["error"] = e

    cc.hold()
    worker = threading.Thread(target=run)
    worker.start()
    cc.wait_held(alive=d.proc)  # a kernel is compiling: the realize is in flight until the gate opens
    d.proc.send_signal(signal.SIGTERM)
    # Draining: new work is refused while the held realize still runs.
    wait_until(lambda: _refused(stub), "a new session refused after SIGTERM", alive=d.proc)
    assert worker.is_alive(), result
    cc.release()
    worker.join(timeout=600)
    assert not worker.is_alive(), "the held realize never answered"
    assert "error" not in result, result.get("error")
    got = [np.frombuffer(r.data, np.float32)[0] for r in result["response"].results]
    assert got == [64 * (i + 0.125) for i in range(12)]
    assert d.proc.wait(timeout=WAIT_LIMIT) == 0
    assert not d.socket.exists()
    text = d.log_path.read_text()
    assert "signal received" in text and text.index("signal received") < text.rindex("session closed")
  finally:
    cc.release()
    d.stop()
