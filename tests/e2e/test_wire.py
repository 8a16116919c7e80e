"""The protocol around the ops: big data through Upload/Download, node release, errors (through
the raw stub and through the client), and the embedded-daemon default."""
import gc
import os
import subprocess
import sys
import textwrap

import grpc
import numpy as np
import pytest

from conftest import PY_CLIENT, assert_close, daemon_binary, run_watching_buffers
import polygrad
from polygrad import Tensor, dtypes
from polygrad import graph as g
from polygrad.v1 import polygrad_pb2 as pb

pytestmark = pytest.mark.usefixtures("live_daemon")


def const_node(nid, value, shape):
  return pb.Node(id=nid, op=pb.CONST, dtype=pb.FLOAT32,
                 constant=pb.Constant(float_value=value, shape=shape))


# --- big data -------------------------------------------------------------------------------------

def test_get_info(daemon):
  info = polygrad.get_connection().info
  assert info.version
  assert info.max_inline_bytes > 0
  assert any(d.available for d in info.devices)


def test_large_tensor_round_trip_through_upload_and_download(rng):
  n = 4 << 20  # 4M floats, 16 MiB
  a = rng.standard_normal(n, dtype=np.float32)
  t = Tensor(a)
  uploads = g.GRAPH.stats()["uploads"]
  got = t.numpy()
  assert isinstance(t._node.arg, int) or t._node.arg is None
  assert g.GRAPH.stats()["uploads"] == uploads + 1, "a 16 MiB tensor must go through Upload"
  np.testing.assert_array_equal(got, a)
  twice = (t * 2 + 1).numpy()
  np.testing.assert_array_equal(twice, a * 2 + 1)
  assert_close(t.reshape(1024, 4096).sum(1).numpy(), a.reshape(1024, 4096).astype(np.float64).sum(1),
               rtol=1e-4, atol=1e-4)


def test_many_mid_size_buffers_in_one_graph(rng):
  arrays = [rng.standard_normal((512, 400), dtype=np.float32) for _ in range(6)]  # 800 KiB each
  total = Tensor(arrays[0])
  for a in arrays[1:]:
    total = total + Tensor(a)
  assert_close(total.numpy(), np.sum([a.astype(np.float64) for a in arrays], axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("np_dtype", [np.int32, np.uint8, np.float64])
def test_large_non_float32_round_trip(rng, np_dtype):
  a = rng.integers(0, 200, (3 << 20) // np.dtype(np_dtype).itemsize).astype(np_dtype)
  np.testing.assert_array_equal(Tensor(a).numpy(), a)


def test_upload_and_download_with_raw_stub(raw, rng):
  stub, sid = raw
  a = rng.standard_normal((1000, 700), dtype=np.float32)
  data = a.tobytes()
  step = 1 << 20

  def chunks():
    for i, off in enumerate(range(0, len(data), step)):
      c = pb.UploadChunk(data=data[off:off + step])
      if i == 0:
        c.header.CopyFrom(pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32, shape=[1000, 700]))
      yield c

  up = stub.Upload(chunks(), timeout=60)
  assert up.handle and up.bytes == len(data)
  got = bytearray()
  first = None
  for ch in stub.Download(pb.DownloadRequest(session_id=sid, handle=up.handle, chunk_bytes=300000), timeout=60):
    first = first or ch
    assert ch.offset == len(got)
    got += ch.data
  assert first.dtype == pb.FLOAT32 and list(first.shape) == [1000, 700]
  np.testing.assert_array_equal(np.frombuffer(bytes(got), np.float32).reshape(1000, 700), a)
  # the uploaded buffer is usable in a graph
  resp = stub.Realize(pb.RealizeRequest(
      session_id=sid, want_data=True, outputs=[3],
      nodes=[pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(handle=up.handle, shape=[1000, 700])),
             pb.Node(id=2, op=pb.REDUCE_SUM, src=[1], axes=pb.Axes(axes=[0, 1])),
             pb.Node(id=3, op=pb.RESHAPE, src=[2], shape=pb.Shape(dims=[]))]), timeout=60)
  r = resp.results[0]
  assert r.dtype == pb.FLOAT32 and list(r.shape) == [] and r.has_data
  assert np.frombuffer(r.data, np.float32)[0] == pytest.approx(a.astype(np.float64).sum(), rel=1e-4, abs=1e-2)


# --- node lifetime --------------------------------------------------------------------------------

def test_release_in_a_loop_keeps_client_state_flat(rng):
  a = rng.uniform(-1, 1, (32, 32)).astype(np.float32)
  w = Tensor(a)
  x = Tensor.ones(32, 32)
  ref = np.ones((32, 32), np.float64)
  samples = []
  for i in range(200):
    x = ((x @ w) * 0.1 + 1).relu().realize()
    ref = np.maximum((ref @ a) * 0.1 + 1, 0)
    if i in (20, 199):
      Tensor.synchronize()  # dispatched realizes hold their nodes until their answers are settled
      gc.collect()
      samples.append(g.GRAPH.stats())
  assert_close(x.numpy(), ref, rtol=1e-4, atol=1e-5)
  early, late = samples
  assert late["live_nodes"] <= early["live_nodes"], (early, late)
  assert late["sent_live"] <= early["sent_live"], (early, late)
  assert late["pending_release"] <= 64, late
  assert late["next_id"] > early["next_id"] + 180 * 5


def test_released_nodes_reach_the_daemon(rng):
  t = Tensor(rng.standard_normal(16, dtype=np.float32))
  (t + 1).realize()
  dead_id = t._node.id
  del t
  gc.collect()
  g.GRAPH.flush_releases()
  assert g.GRAPH.stats()["pending_release"] == 0
  # The daemon forgot the id: naming it now is an error.
  conn = polygrad.get_connection()
  bad = pb.Node(id=g.GRAPH._next_id + 1000, op=pb.NEG, src=[dead_id])
  with pytest.raises(polygrad.PolygradError) as e:
    conn.realize([bad], [bad.id], False)
  assert e.value.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)


# --- errors ---------------------------------------------------------------------------------------

def test_unknown_source_is_invalid_argument_with_node_id(raw):
  stub, sid = raw
  bad = pb.RealizeRequest(session_id=sid, outputs=[4242],
                          nodes=[const_node(4241, 1.0, [2]), pb.Node(id=4242, op=pb.ADD, src=[4241, 999999])])
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(bad, timeout=30)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
  assert "4242" in e.value.details()
  ok = stub.Realize(pb.RealizeRequest(session_id=sid, outputs=[2], want_data=True,
                                      nodes=[const_node(1, 1.5, [3]),
                                             pb.Node(id=2, op=pb.ADD, src=[1, 1])]), timeout=30)
  assert np.frombuffer(ok.results[0].data, np.float32).tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("case", ["shape_mismatch", "dtype_mismatch", "bad_reshape", "bad_permute",
                                  "bad_shrink", "div_int", "stated_dtype_wrong", "forward_reference",
                                  "bitcast_no_dtype", "bitcast_indivisible", "bitcast_0d"])
def test_malformed_graphs_are_invalid_argument(raw, case):
  stub, sid = raw
  i32 = pb.Node(id=2, op=pb.CONST, dtype=pb.INT32, constant=pb.Constant(int_value=1, shape=[3]))
  nodes = {
      "shape_mismatch": [const_node(1, 1.0, [3]), const_node(2, 1.0, [4]), pb.Node(id=7, op=pb.MUL, src=[1, 2])],
      "dtype_mismatch": [const_node(1, 1.0, [3]), i32, pb.Node(id=7, op=pb.ADD, src=[1, 2])],
      "bad_reshape": [const_node(1, 1.0, [3]), pb.Node(id=7, op=pb.RESHAPE, src=[1], shape=pb.Shape(dims=[2, 2]))],
      "bad_permute": [const_node(1, 1.0, [3, 2]), pb.Node(id=7, op=pb.PERMUTE, src=[1], axes=pb.Axes(axes=[0, 0]))],
      "bad_shrink": [const_node(1, 1.0, [3]), pb.Node(id=7, op=pb.SHRINK, src=[1], pairs=pb.Pairs(begin=[1], end=[5]))],
      "div_int": [i32, pb.Node(id=7, op=pb.DIV, src=[2, 2])],
      "stated_dtype_wrong": [const_node(1, 1.0, [3]), pb.Node(id=7, op=pb.CMPLT, dtype=pb.FLOAT32, src=[1, 1])],
      "forward_reference": [pb.Node(id=7, op=pb.NEG, src=[8]), const_node(8, 1.0, [3])],
      "bitcast_no_dtype": [const_node(1, 1.0, [3]), pb.Node(id=7, op=pb.BITCAST, src=[1])],
      "bitcast_indivisible": [const_node(1, 1.0, [3]), pb.Node(id=7, op=pb.BITCAST, dtype=pb.FLOAT64, src=[1])],
      "bitcast_0d": [const_node(1, 1.0, []), pb.Node(id=7, op=pb.BITCAST, dtype=pb.UINT8, src=[1])],
  }[case]
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(pb.RealizeRequest(session_id=sid, nodes=nodes, outputs=[7]), timeout=30)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
  assert "7" in e.value.details()
  if case.startswith("bitcast_") and case != "bitcast_no_dtype":  # both dtypes and sizes named
    assert "float32 (4 bytes)" in e.value.details() and " bytes)" in e.value.details().split("to ")[-1], \
        e.value.details()


def test_other_sessions_handle_is_not_found(daemon, raw):
  stub, sid = raw
  other = stub.CreateSession(pb.CreateSessionRequest(), timeout=10).session_id
  try:
    up = stub.Upload(iter([pb.UploadChunk(header=pb.UploadHeader(session_id=other, dtype=pb.FLOAT32, shape=[2]),
                                          data=np.ones(2, np.float32).tobytes())]), timeout=30)
    with pytest.raises(grpc.RpcError) as e:
      list(stub.Download(pb.DownloadRequest(session_id=sid, handle=up.handle), timeout=30))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
  finally:
    stub.CloseSession(pb.CloseSessionRequest(session_id=other), timeout=10)


def test_unknown_session_is_not_found(raw):
  stub, _ = raw
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(pb.RealizeRequest(session_id="no-such-session", nodes=[const_node(1, 1.0, [1])], outputs=[1]),
                 timeout=30)
  assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_client_maps_server_errors_and_recovers(rng):
  a = Tensor(rng.standard_normal(6, dtype=np.float32))
  # A node the client's own checks would never build: RESHAPE to a different element count.
  bad = Tensor(g.GRAPH.node(g.RESHAPE, dtypes.float32, (4,), (a._node,), (4,)))
  with pytest.raises(polygrad.PolygradInvalidArgument) as e:
    bad.numpy()
  assert isinstance(e.value, ValueError)
  assert str(bad.node_id) in str(e.value)
  # The session is still usable, including the tensor that was part of the failed request.
  assert_close((a * 2).numpy(), a.numpy() * 2)


# --- the embedded default -------------------------------------------------------------------------

def test_embedded_daemon_when_no_address(tmp_path):
  program = textwrap.dedent(f"""
      import os, sys
      sys.path.insert(0, {str(PY_CLIENT)!r})
      import numpy as np
      from polygrad import Tensor, get_connection
      a = np.arange(6, dtype=np.float32).reshape(2, 3)
      out = (Tensor(a) @ Tensor(a).T).numpy()
      assert np.allclose(out, a @ a.T), out
      c = get_connection()
      print("PID", c.daemon.proc.pid, "DIR", c.daemon.tmpdir, "ADDR", c.address)
  """)
  env = {k: v for k, v in os.environ.items() if k != "POLYGRAD_ADDRESS"}
  env["POLYGRAD_DAEMON"] = str(daemon_binary())
  env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
  r = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  words = r.stdout.split()
  pid, tmpdir, addr = int(words[words.index("PID") + 1]), words[words.index("DIR") + 1], words[words.index("ADDR") + 1]
  assert addr.startswith("unix:")
  assert not os.path.exists(tmpdir), "the embedded daemon's temp dir must be removed at exit"
  with pytest.raises(ProcessLookupError):
    os.kill(pid, 0)  # stopped (and reaped) at exit


def test_unreachable_address_in_subprocess(tmp_path):
  program = textwrap.dedent(f"""
      import sys
      sys.path.insert(0, {str(PY_CLIENT)!r})
      import polygrad
      try:
        polygrad.Tensor([1.0]).numpy()
      except polygrad.PolygradConnectionError as e:
        print("ERR", e)
  """)
  env = dict(os.environ, POLYGRAD_ADDRESS=f"unix:{tmp_path}/nothing.sock", POLYGRAD_CONNECT_TIMEOUT="1")
  r = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  assert f"ERR cannot reach polygradd at unix:{tmp_path}/nothing.sock" in r.stdout


def test_daemon_buffers_stay_flat_in_a_loop(tmp_path):
  """A 200-step loop against a daemon of its own, watching its live-buffer gauge on /metrics."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor
      w = Tensor(np.random.default_rng(0).uniform(-1, 1, (16, 16)).astype(np.float32))
      x = Tensor.ones(16, 16)
      seen = []
      for i in range(200):
        x = ((x @ w) * 0.1 + Tensor(np.full((16, 16), i, np.float32)) * 0.01).relu().realize()
        if i in (20, 199):
          seen.append(buffers())
      print("BUFFERS", *seen)
  """)
  words = out.split()
  early, late = float(words[words.index("BUFFERS") + 1]), float(words[words.index("BUFFERS") + 2])
  assert late <= early, f"daemon buffers grew from {early} to {late} over 180 iterations"


def test_small_results_are_cached_on_the_tensor(rng):
  a = rng.standard_normal((4, 4), dtype=np.float32)
  t = (Tensor(a) * 3).sum(0)
  first = t.numpy()
  requests = g.GRAPH.stats()["requests"]
  first[0] = 1e9  # the caller's copy: mutating it must not leak into the cache
  again = t.numpy()
  assert g.GRAPH.stats()["requests"] == requests, "a realized small result needs no second round trip"
  assert_close(again, (a.astype(np.float64) * 3).sum(0))
  assert t.tolist() == again.tolist()


@pytest.mark.parametrize("case", ["max_elements", "max_rank"])
def test_limits_are_resource_exhausted(case):
  t = Tensor.zeros(2 ** 20, 2 ** 12) if case == "max_elements" else Tensor.zeros(*([1] * 17))
  with pytest.raises(polygrad.PolygradResourceExhausted) as e:
    t.sum().item()
  assert case in str(e.value)
  assert (Tensor.ones(3) * 2).tolist() == [2.0, 2.0, 2.0]  # still usable


def test_closed_session_is_reported_and_a_new_one_starts(rng):
  a = rng.standard_normal(5, dtype=np.float32)
  old = (Tensor(a) + 1).realize()
  polygrad.close_connection()
  with pytest.raises(polygrad.PolygradError, match="closed polygrad session"):
    (old * 2).numpy()
  assert_close((Tensor(a) * 2).numpy(), a * 2)  # a new session on the same daemon


def test_a_convolution_is_bounded_by_its_work_not_by_a_virtual_tensor(tmp_path):
  # The output-by-window grid of a convolution is computed, never allocated: --max-work bounds it,
  # not --max-elements (a default daemon refused a ResNet layer at batch 32 this way).
  out = run_watching_buffers(tmp_path, """
    import numpy as np, polygrad
    from polygrad import Tensor
    x, w = Tensor(np.ones((1, 16, 32, 32), np.float32)), Tensor(np.ones((16, 16, 3, 3), np.float32))
    print("SUM", x.conv2d(w, padding=1).sum().item())  # work 16*32*32 * 16*9: over max_elements
    try:
      Tensor(np.ones((1, 64, 32, 32), np.float32)).conv2d(Tensor(np.ones((64, 64, 3, 3), np.float32))).sum().item()
    except polygrad.PolygradResourceExhausted as e:
      print("REFUSED", "max_work" in str(e))
  """, "--max-elements=1000000", "--max-work=3000000")
  # Each of the 16 outputs sums 16 channels over windows of 2 or 3 rows and columns: 94 per axis.
  assert f"SUM {16 * 16 * 94 * 94}.0" in out, out
  assert "REFUSED True" in out, out
