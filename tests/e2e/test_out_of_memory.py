"""An allocation that fails (out of memory) fails that request only: the daemon, run under an
address-space limit so the failure is real and harmless, answers RESOURCE_EXHAUSTED and keeps
serving the same session."""
import resource
import subprocess

import grpc
import numpy as np
import pytest

from conftest import WAIT_LIMIT, daemon_binary, wait_until

from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

pytestmark = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")

LIMIT = 3 << 30            # address space of the daemon (it uses well under 1 GiB)
HUGE = [1 << 30]           # float32: 4 GiB, more than the limit


def _limit_address_space():
  resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_failed_allocation_fails_only_that_request(tmp_path):
  sock = tmp_path / "d.sock"
  log = tmp_path / "d.log"
  proc = subprocess.Popen([str(daemon_binary()), "--listen=", "--metrics-listen=", f"--unix-socket={sock}",
                           f"--cache-dir={tmp_path / 'cache'}", "--threads=2"],
                          stdout=subprocess.DEVNULL, stderr=open(log, "wb"), preexec_fn=_limit_address_space)
  try:
    wait_until(sock.exists, f"polygradd creating its socket ({log})", alive=proc)
    channel = grpc.insecure_channel(f"unix:{sock}")
    # The socket file exists from bind(), a moment before the daemon listens on it.
    grpc.channel_ready_future(channel).result(timeout=WAIT_LIMIT)
    stub = pb_grpc.PolygradStub(channel)
    sid = stub.CreateSession(pb.CreateSessionRequest(), timeout=30).session_id

    # An upload whose buffer cannot be allocated: refused at its header.
    header = pb.UploadChunk(header={"session_id": sid, "dtype": pb.FLOAT32, "shape": HUGE})
    with pytest.raises(grpc.RpcError) as e:
      stub.Upload(iter([header]), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert "cannot allocate 4294967296 bytes" in e.value.details()

    # A realize whose kernel output cannot be allocated.
    big = [pb.Node(id=1, op=pb.CONST, dtype=pb.FLOAT32, constant={"float_value": 1.0, "shape": HUGE}),
           pb.Node(id=2, op=pb.EXP2, src=[1])]
    with pytest.raises(grpc.RpcError) as e:
      stub.Realize(pb.RealizeRequest(session_id=sid, nodes=big, outputs=[2]), timeout=120)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert "cannot allocate 4294967296 bytes" in e.value.details()

    # The same session, and the same node ids, still work.
    small = [pb.Node(id=1, op=pb.CONST, dtype=pb.FLOAT32, constant={"float_value": 3.0, "shape": [4]}),
             pb.Node(id=2, op=pb.EXP2, src=[1])]
    r = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=small, outputs=[2], want_data=True), timeout=120)
    assert np.frombuffer(r.results[0].data, np.float32).tolist() == [8.0] * 4
    assert proc.poll() is None
  finally:
    proc.terminate()
    assert proc.wait(timeout=30) == 0
