"""polygrad.Device against the daemon's own GetInfo answer (asked here through a raw stub):
tensors live on the CPU by default, `.to('cpu')` is a no-op, and a device the daemon lacks or
lists as unavailable raises PolygradDeviceError quoting the daemon's reason, before anything is
built or sent (test_device_copy.py: moving tensors where CUDA is offered)."""
import os
import subprocess
import sys

import grpc
import pytest

from conftest import PY_CLIENT, REPO
import polygrad
from polygrad import Device, PolygradDeviceError, Tensor
from polygrad import graph as g
from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

pytestmark = pytest.mark.usefixtures("live_daemon")


@pytest.fixture(scope="module")
def daemon_devices(daemon):
  """{name: (available, detail)} as the daemon answers GetInfo, independently of the client."""
  with grpc.insecure_channel(daemon.address) as ch:
    info = pb_grpc.PolygradStub(ch).GetInfo(pb.GetInfoRequest(), timeout=10)
  return {d.name: (d.available, d.detail) for d in info.devices}


def test_default_is_cpu_and_tensors_say_so():
  assert Device.DEFAULT == "CPU"
  t = Tensor([1.0, 2.0])
  assert t.device == "CPU"
  assert (t * 2).device == "CPU"
  assert "device=CPU" in repr(t)


def test_list_matches_get_info(daemon_devices):
  assert {d.name: (d.available, d.detail) for d in Device.list()} == daemon_devices
  assert daemon_devices["CPU"][0], "the daemon always executes on its CPU"


def test_cuda_available_is_the_daemons_answer(daemon_devices):
  want = any(avail for name, (avail, _) in daemon_devices.items() if name.upper().startswith("CUDA"))
  assert Device.cuda_available() is want


@pytest.mark.parametrize("name", ["cpu", "CPU", "Cpu", "cpu:0", None])
def test_to_cpu_is_a_no_op(name):
  t = Tensor([1.0, 2.0, 3.0]) * 2
  assert t.to(name) is t
  assert t.cpu() is t
  assert t.numpy().tolist() == [2.0, 4.0, 6.0]


@pytest.mark.parametrize("move", [lambda t: t.to("cuda"), lambda t: t.to("CUDA:0"), lambda t: t.cuda(),
                                  lambda t: t.to_("cuda")])
def test_to_cuda_raises_quoting_the_daemon(daemon_devices, move):
  avail, detail = daemon_devices["CUDA"]
  if avail:
    pytest.skip("CUDA is available: to('cuda') makes a COPY node (test_device_copy.py, tests/gpu)")
  t = Tensor([1.0, 2.0])
  with pytest.raises(PolygradDeviceError) as e:
    move(t)
  assert "CUDA" in str(e.value) and detail in str(e.value)
  assert ("not available" in str(e.value)) is (not avail)
  assert isinstance(e.value, polygrad.PolygradError)
  assert t.numpy().tolist() == [1.0, 2.0]  # the tensor and the session are fine


@pytest.mark.parametrize("make", [
    lambda d: Tensor([1.0], device=d), lambda d: Tensor.zeros(2, device=d), lambda d: Tensor.ones(2, 2, device=d),
    lambda d: Tensor.full((2,), 3.0, device=d), lambda d: Tensor.empty(3, device=d),
    lambda d: Tensor.rand(2, device=d), lambda d: Tensor.randn(2, device=d), lambda d: Tensor.randint(2, device=d),
    lambda d: Tensor.uniform(2, device=d), lambda d: Tensor.arange(4, device=d), lambda d: Tensor.eye(2, device=d),
    lambda d: Tensor.linspace(0, 1, 3, device=d), lambda d: Tensor.glorot_uniform(2, 2, device=d),
    lambda d: Tensor.kaiming_normal(2, 2, device=d), lambda d: Tensor([1.0]).zeros_like(device=d),
    lambda d: Tensor([1.0]).rand_like(device=d)])
def test_creation_helpers_take_device(make):
  assert make("cpu").device == "CPU"
  if Device.cuda_available():
    make("cuda")  # accepted: the daemon offers CUDA
    return
  with pytest.raises(PolygradDeviceError, match="CUDA"):
    make("cuda")


def test_unknown_device_lists_what_the_daemon_has(daemon_devices):
  with pytest.raises(PolygradDeviceError) as e:
    Tensor([1.0]).to("tpu")
  assert "no device TPU" in str(e.value)
  for name in daemon_devices:
    assert name in str(e.value)
  with pytest.raises(PolygradDeviceError, match="no device CUDA:3"):
    Tensor([1.0]).to("cuda:3")


@pytest.mark.parametrize("bad, exc", [("", ValueError), ("cuda:x", ValueError), ("../cpu", ValueError),
                                      (3, TypeError), ("cu da", ValueError)])
def test_malformed_device_names_fail_locally(bad, exc):
  requests = g.GRAPH.stats()["requests"]
  with pytest.raises(exc):
    Tensor([1.0]).to(bad)
  assert g.GRAPH.stats()["requests"] == requests


def test_canonicalize():
  assert Device.canonicalize("cuda:1") == "CUDA:1"
  assert Device.canonicalize(None) == "CPU"
  assert Device.canonicalize(" gpu ") == "GPU"


def test_devices_example(daemon):
  env = dict(os.environ, POLYGRAD_ADDRESS=daemon.address,
             PYTHONPATH=os.pathsep.join([str(PY_CLIENT), os.environ.get("PYTHONPATH", "")]))
  r = subprocess.run([sys.executable, str(REPO / "examples" / "devices.py")], env=env, capture_output=True,
                     text=True, timeout=120, cwd=REPO)
  assert r.returncode == 0, r.stdout + r.stderr
  assert r.stdout.strip() == ("CUDA" if Device.cuda_available() else "CPU")


def test_a_gradient_lives_where_its_target_does():
  # The daemon copies a gradient back to its target's device (a CPU tensor moved to a GPU gets
  # a CPU gradient): the node says so without asking the daemon, whatever the loss's device.
  target = g.GRAPH.node(g.BUFFER, polygrad.dtypes.float32, (3,), (), None)
  moved = g.GRAPH.node(g.COPY, polygrad.dtypes.float32, (3,), (target,), g.Composite(device="CUDA"))
  grad = g.GRAPH.node(g.GRADIENT, polygrad.dtypes.float32, (3,), (moved, target), None)
  assert (target.device, moved.device, grad.device) == ("CPU", "CUDA", "CPU")
  assert g.GRAPH.node(g.GRADIENT, polygrad.dtypes.float32, (3,), (target, moved), None).device == "CUDA"
