"""wire.realize_bytes writes Realize requests by hand (the protobuf runtime's reflection is slow):
its bytes must be what polygrad_pb2 serializes for the same values, for every kind of node the
client makes. No daemon needed."""
import numpy as np
import pytest

from polygrad import Tensor, dtypes
from polygrad import graph as g, wire
from polygrad.dtype import ALL_DTYPES
from polygrad.v1 import polygrad_pb2 as pb


def nodes_behind(*tensors):
  """Every node behind the tensors, sources first."""
  seen, order, stack = set(), [], [(t._node, False) for t in tensors]
  while stack:
    n, done = stack.pop()
    if done:
      order.append(n)
    elif n.id not in seen:
      seen.add(n.id)
      stack.append((n, True))
      stack.extend((s, False) for s in n.src)
  return order


def reference(session_id, nodes, outputs, want_data, release, device):
  return pb.RealizeRequest(session_id=session_id, nodes=[wire.node(n) for n in nodes], outputs=outputs,
                           want_data=want_data, release_nodes=release, default_device=device).SerializeToString()


def graphs():
  """Tensors whose graphs hold every argument kind: shapes, axes, pairs, constants of each dtype
  kind, inline and uploaded buffers, composites."""
  a = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
  b = Tensor(np.arange(6, dtype=np.int64).reshape(2, 3) - 3)
  yield "elementwise", [(a + 1) * a - 2.5, (a / 3).exp().relu()]
  yield "movement", [a.reshape(6, 4).permute(1, 0).flip(0), a[:, 1:, ::2].pad(((1, 0), (0, 2), (0, 0)))]
  yield "scalar reshape", [Tensor([7.0]).reshape(())]
  yield "expand", [Tensor([[1.0], [2.0]]).expand(2, 5)]
  yield "reductions", [a.sum(2), a.max((0, 1)), a.prod(1, keepdim=True), a.mean(), a.var(1)]
  yield "composites", [a.softmax(-1), a.layernorm(), a.cumsum(1), a.argmax(2), a.tril(), a.topk(2)[0]]
  yield "conv", [Tensor(np.ones((1, 2, 5, 5), np.float32)).conv2d(Tensor(np.ones((3, 2, 3, 3), np.float32)),
                                                                   padding=1, stride=2)]
  yield "ints", [b * -9, (b - 2**40) // 3, b.cast(dtypes.uint32) + 4000000000, b < 0, ~(b > 1)]
  yield "constants of every dtype", [Tensor.full((2,), 1, dtype=dt) for dt in ALL_DTYPES]
  yield "extreme integers", [Tensor([1], dtype=dtypes.int64) + (-2**63), Tensor([1], dtype=dtypes.int64) * (2**63 - 1),
                             Tensor([1], dtype=dtypes.uint64) + (2**64 - 1), Tensor([1], dtype=dtypes.int64) - 128]
  yield "special floats", [Tensor([1.0]) * float("inf"), Tensor([1.0]) + float("-0.0"), Tensor([1.0]).maximum(float("nan"))]
  yield "random", [Tensor.rand(3, 2), Tensor.randint(4, low=-5, high=5)]
  yield "empty and scalar buffers", [Tensor(np.zeros((0, 3), np.float32)) + 1, Tensor(np.float64(2.5)) * 2]
  yield "strided buffer", [Tensor(np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]) + 1]
  yield "bool and half buffers", [Tensor(np.array([True, False])) | True, Tensor(np.ones(3, np.float16)) + 1]
  yield "uploaded buffer", [Tensor._wrap(g.GRAPH.node(g.BUFFER, dtypes.float32, (2, 2), (), 2**33 + 5)) + 1]


@pytest.mark.parametrize("name,tensors", list(graphs()), ids=[n for n, _ in graphs()])
def test_each_node_encodes_as_protobuf_does(name, tensors):
  nodes = nodes_behind(*tensors)
  for n in nodes:
    assert wire._node_bytes(n) == wire.node(n).SerializeToString(), (name, n)
  outputs = [t._node.id for t in tensors]
  for want_data, release, device in [(False, [], ""), (True, [5, 2**40, 1], "CUDA")]:
    got = wire.realize_bytes("a1b2-session", nodes, outputs, want_data, release, device)
    assert got == reference("a1b2-session", nodes, outputs, want_data, release, device)
    assert pb.RealizeRequest.FromString(got).nodes[-1].id == nodes[-1].id


def test_messages_given_as_protobuf_pass_through():
  msgs = [pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=b"\0" * 12, shape=[3])),
          pb.Node(id=2, op=pb.ADD, src=[1, 1])]
  got = wire.realize_bytes("", msgs, [2], True, [], "")
  assert got == pb.RealizeRequest(nodes=msgs, outputs=[2], want_data=True).SerializeToString()


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**53 + 1, 2**63 - 1, -1, -128, -2**63])
def test_int64_constants_round_trip(value):
  n = Tensor.full((3,), value, dtype=dtypes.int64)._node
  assert pb.Node.FromString(wire._node_bytes(n)).constant.int_value == value


@pytest.mark.parametrize("value", [2**63, 2**64 - 1])
def test_uint64_constants_round_trip(value):
  n = Tensor.full((1,), value, dtype=dtypes.uint64)._node
  assert pb.Node.FromString(wire._node_bytes(n)).constant.uint_value == value


@pytest.mark.parametrize("value", [2**64, -2**63 - 1])
def test_out_of_range_integers_are_refused_like_protobuf(value):
  out = bytearray()
  with pytest.raises(ValueError, match="does not fit"):
    wire._varint(value, out)


@pytest.mark.parametrize("rid", [1, 127, 128, 2**40])
def test_execute_requests_wrap_their_command_bytes_as_protobuf_does(rid):
  """dispatch.py splices a command's bytes into an ExecuteRequest; run_step's field (41) needs a
  two-byte tag."""
  commands = {3: ("realize", pb.RealizeRequest(outputs=[7], release_nodes=[3, 4])),
              4: ("release", pb.ReleaseRequest(node_ids=[9], handles=[2])),
              41: ("run_step", pb.RunStepRequest(step_id=5, want_data=True))}
  for field, (name, msg) in commands.items():
    got = wire.execute_bytes(rid, field, msg.SerializeToString())
    assert pb.ExecuteRequest.FromString(got) == pb.ExecuteRequest(request_id=rid, **{name: msg})
