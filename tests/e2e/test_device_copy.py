"""Device selection and COPY nodes against a real daemon, on any machine: --devices at start, the
COPY op on the wire (op 145), and Tensor.to / device= building COPY nodes. Where CUDA is
unavailable these check the refusals and their reasons; the numerics on a GPU are tests/gpu/."""
import subprocess

import grpc
import numpy as np
import pytest

import os

from conftest import WAIT_LIMIT, daemon_binary, wait_until
from polygrad import Device, PolygradDeviceError, Tensor
from polygrad import graph as g
from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

pytestmark = pytest.mark.usefixtures("live_daemon")


def cuda_entry(stub):
  return next(d for d in stub.GetInfo(pb.GetInfoRequest(), timeout=10).devices if d.name == "CUDA")


def data_node(nid, a):
  return pb.Node(id=nid, op=pb.BUFFER, dtype=pb.FLOAT32,
                 buffer=pb.BufferSource(data=a.astype(np.float32).tobytes(), shape=a.shape))


def copy_node(nid, src, device):
  return pb.Node(id=nid, op=pb.COPY, src=[src], composite=pb.CompositeArg(device=device))


def test_copy_to_cpu_on_the_wire_is_a_transfer(raw):
  stub, sid = raw
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  nodes = [data_node(1, a), copy_node(2, 1, "cpu"),
           pb.Node(id=3, op=pb.MUL, src=[2, 2])]
  r = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=nodes, outputs=[3, 2], want_data=True), timeout=60)
  np.testing.assert_array_equal(np.frombuffer(r.results[0].data, np.float32).reshape(3, 4), a * a)
  np.testing.assert_array_equal(np.frombuffer(r.results[1].data, np.float32).reshape(3, 4), a)
  assert r.stats.kernels == 1  # the multiply; the copy is a transfer, not a kernel


def test_gradients_return_through_a_copy_to_the_source_device():
  # The gradient of a tensor moved with .to() is copied back to the tensor's device (a COPY in
  # the daemon's gradient graph), so it can update the tensor there. On the CPU alone the copy is
  # a transfer and the gradient is the plain one; on a GPU (tests/gpu) it crosses devices.
  a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
  x = Tensor(a, requires_grad=True)
  moved = x.to("cpu")
  (moved * moved * x).sum().backward()
  assert x.grad.device == x.device == "CPU"
  np.testing.assert_allclose(x.grad.numpy(), 3 * a * a, rtol=1e-6)


def test_a_compiled_step_transfers_its_inputs_on_every_run(raw):
  # A COPY of a tensor with a buffer is a transfer before each run, so a fed input reaches the
  # kernels; a COPY of a computed value is UNIMPLEMENTED (a step has one device), naming it.
  stub, sid = raw
  a = np.arange(6, dtype=np.float32)
  nodes = [data_node(1, a), copy_node(2, 1, "cpu"), pb.Node(id=3, op=pb.MUL, src=[2, 2])]
  step = stub.CompileStep(pb.CompileStepRequest(session_id=sid, nodes=nodes, inputs=[1], outputs=[3]), timeout=60)
  for k in range(3):
    x = a + k
    r = stub.RunStep(pb.RunStepRequest(session_id=sid, step_id=step.step_id, want_data=True,
                                       inputs=[pb.StepInput(node_id=1, data=x.tobytes())]), timeout=60)
    np.testing.assert_array_equal(np.frombuffer(r.outputs[0].data, np.float32), x * x)
  computed = [pb.Node(id=4, op=pb.NEG, src=[1]), copy_node(5, 4, "cpu"), pb.Node(id=6, op=pb.MUL, src=[5, 5])]
  with pytest.raises(grpc.RpcError) as e:
    stub.CompileStep(pb.CompileStepRequest(session_id=sid, nodes=computed, outputs=[6]), timeout=60)
  assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
  assert "node COPY float32[6] copies a computed NEG float32[6] to CPU" in e.value.details()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "", "../cpu", "cuda:0:1"])
def test_copy_to_a_malformed_device_is_invalid_argument(raw, device):
  stub, sid = raw
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(pb.RealizeRequest(session_id=sid, nodes=[data_node(1, np.ones(2)), copy_node(2, 1, device)],
                                   outputs=[2]), timeout=30)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
  assert "COPY" in e.value.details() and "device" in e.value.details()


def test_copy_to_unavailable_cuda_fails_with_the_daemons_reason(raw):
  stub, sid = raw
  cuda = cuda_entry(stub)
  if cuda.available:
    pytest.skip("CUDA is available on this daemon (the GPU suite covers it)")
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(pb.RealizeRequest(session_id=sid, nodes=[data_node(1, np.ones(2)), copy_node(2, 1, "cuda")],
                                   outputs=[2]), timeout=30)
  assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
  assert "CUDA:0 is not available" in e.value.details() and cuda.detail in e.value.details()


@pytest.mark.parametrize("device, code", [("cpu", None), ("", None), ("tpu", grpc.StatusCode.INVALID_ARGUMENT),
                                          ("cuda", "unless-available")])
def test_default_device_of_a_realize(raw, device, code):
  """Outputs of constants alone are computed on the request's default_device."""
  stub, sid = raw
  if code == "unless-available":
    code = None if cuda_entry(stub).available else grpc.StatusCode.FAILED_PRECONDITION
  req = pb.RealizeRequest(session_id=sid, outputs=[1], want_data=True, default_device=device,
                          nodes=[pb.Node(id=1, op=pb.CONST, dtype=pb.FLOAT32,
                                         constant=pb.Constant(float_value=2.5, shape=[3]))])
  if code is None:
    r = stub.Realize(req, timeout=60)
    assert np.frombuffer(r.results[0].data, np.float32).tolist() == [2.5, 2.5, 2.5]
    return
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(req, timeout=60)
  assert e.value.code() == code and "default_device" in e.value.details() or "CUDA:0" in e.value.details()


def test_tensor_to_cuda_is_a_copy_node_or_the_reason():
  t = Tensor([1.0, 2.0, 3.0])
  if not Device.cuda_available():
    with pytest.raises(PolygradDeviceError, match="not available"):
      t.to("cuda")
    with pytest.raises(PolygradDeviceError, match="not available"):
      Tensor([1.0], device="cuda")
    return
  c = t.to("cuda")
  assert c.device == "CUDA" and c._node.op == g.COPY and c.to("cuda:0") is c
  assert (c * 2).device == "CUDA"
  assert (c * 2).cpu().device == "CPU"
  np.testing.assert_array_equal((c * 2).numpy(), [2.0, 4.0, 6.0])


def start(tmp_path, *flags):
  """polygradd with extra flags; returns (Daemon, exit code or None while it runs)."""
  tmp_path.mkdir(parents=True, exist_ok=True)
  sock = tmp_path / "d.sock"
  proc = subprocess.Popen([str(daemon_binary()), "--listen=", "--metrics-listen=", f"--unix-socket={sock}",
                           f"--cache-dir={tmp_path / 'cache'}", *flags],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  return proc, sock


def test_devices_flag(tmp_path):
  # --devices cpu: CUDA is listed, not enabled, with the reason the operator chose.
  proc, sock = start(tmp_path / "cpu", "--devices=cpu")
  try:
    wait_until(sock.exists, "polygradd creating its socket", alive=proc)
    with grpc.insecure_channel(f"unix:{sock}") as ch:
      # The socket file exists from bind(), a moment before the daemon listens on it.
      grpc.channel_ready_future(ch).result(timeout=WAIT_LIMIT)
      cuda = cuda_entry(pb_grpc.PolygradStub(ch))
    assert not cuda.available and "not enabled (--devices)" in cuda.detail
  finally:
    proc.terminate()
    proc.wait(timeout=30)
  # --devices cpu,cuda:0 where CUDA is unavailable: refuses to start, saying why.
  with grpc.insecure_channel(os.environ["POLYGRAD_ADDRESS"]) as ch:
    here = cuda_entry(pb_grpc.PolygradStub(ch))
  if here.available:
    pytest.skip("CUDA is available here: --devices cpu,cuda:0 starts")
  proc, _ = start(tmp_path / "cuda", "--devices=cpu,cuda:0")
  out, _ = proc.communicate(timeout=60)
  assert proc.returncode != 0
  assert "CUDA:0 is not available: " in out and here.detail in out
  # A malformed name is refused the same way.
  proc, _ = start(tmp_path / "bad", "--devices=cpu,tpu")
  out, _ = proc.communicate(timeout=60)
  assert proc.returncode != 0 and 'device "tpu"' in out


def test_device_default_places_tensors_made_from_data():
  old = Device.DEFAULT
  Device.DEFAULT = "CUDA"
  try:
    if not Device.cuda_available():
      for make in (lambda: Tensor([1.0, 2.0]), lambda: Tensor.zeros(2)):
        with pytest.raises(PolygradDeviceError, match="not available"):
          make()
      return
    assert Tensor.zeros(2).device == "CUDA"  # constants follow the default
    t = Tensor([1.0, 2.0])
    assert t.device == "CUDA" and t._node.op == g.COPY
    np.testing.assert_array_equal((t + Tensor.ones(2)).numpy(), [2.0, 3.0])
  finally:
    Device.DEFAULT = old
  assert Tensor([1.0]).device == "CPU"
