"""What the client puts on the wire for composites and autograd, checked locally (no daemon):
composite nodes with their arguments and locally computed shapes/dtypes, GRADIENT nodes, the
requires_grad bookkeeping, optimizer scalars, safetensors bytes from numpy arrays."""
import json
import struct

import numpy as np
import pytest

from polygrad import Tensor, dtypes
from polygrad import graph as g
from polygrad import nn
from polygrad.wire import node as wire_node


def f32(*shape):
  return Tensor(np.zeros(shape, dtype=np.float32))


def top(t):
  return g.OP_NAMES[t._node.op]


def wire(t):
  return wire_node(t._node)


@pytest.mark.parametrize("method,op", [("exp", "EXP"), ("log", "LOG"), ("relu", "RELU"), ("sigmoid", "SIGMOID"),
                                       ("tanh", "TANH"), ("gelu", "GELU"), ("silu", "SILU")])
def test_elementwise_composites_are_one_node(method, op):
  t = getattr(f32(2, 3), method)()
  assert top(t) == op and t.shape == (2, 3) and t.dtype == dtypes.float32
  assert [g.OP_NAMES[s.op] for s in t._node.src] == ["BUFFER"]


def test_int_input_is_cast_before_a_float_composite():
  t = Tensor([1, 2, 3]).exp()
  assert top(t) == "EXP" and t.dtype == dtypes.float32
  assert g.OP_NAMES[t._node.src[0].op] == "CAST"
  assert top(Tensor([1, -2]).relu()) == "RELU" and Tensor([1, -2]).relu().dtype == dtypes.int32


@pytest.mark.parametrize("sa,sb,out", [((3, 4), (4, 5), (3, 5)), ((4,), (4, 5), (5,)), ((3, 4), (4,), (3,)),
                                       ((4,), (4,), ()), ((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2))])
def test_matmul_node(sa, sb, out):
  t = f32(*sa) @ f32(*sb)
  assert top(t) == "MATMUL" and t.shape == out


def test_matmul_errors_are_local():
  with pytest.raises(RuntimeError, match="cannot matmul"):
    f32(3, 4) @ f32(5, 2)
  with pytest.raises(RuntimeError, match="1D"):
    f32(3) @ Tensor(2.0)
  with pytest.raises(RuntimeError, match="batch"):
    f32(2, 3, 4) @ f32(3, 4, 5)


def test_matmul_promotes_and_accumulates_half_in_float32():
  t = Tensor(np.zeros((2, 3), np.float16)) @ Tensor(np.zeros((3, 2), np.float16))
  assert t.dtype == dtypes.float16 and top(t) == "CAST"
  mm = t._node.src[0]
  assert g.OP_NAMES[mm.op] == "MATMUL" and mm.dtype == dtypes.float32
  mixed = Tensor(np.zeros((2, 3), np.int32)) @ f32(3, 2)
  assert mixed.dtype == dtypes.float32 and top(mixed) == "MATMUL"


@pytest.mark.parametrize("call,op,shape,axes,keepdim", [
    (lambda t: t.softmax(), "SOFTMAX", (2, 3, 4), [2], False),
    (lambda t: t.log_softmax(0), "LOG_SOFTMAX", (2, 3, 4), [0], False),
    (lambda t: t.mean(), "MEAN", (), [0, 1, 2], False),
    (lambda t: t.mean((0, -1), keepdim=True), "MEAN", (1, 3, 1), [0, 2], True),
    (lambda t: t.var(1), "VAR", (2, 4), [1], False),
])
def test_reducing_composites_carry_their_arguments(call, op, shape, axes, keepdim):
  t = call(f32(2, 3, 4))
  assert top(t) == op and t.shape == shape
  msg = wire(t)
  assert list(msg.composite.axes) == axes and msg.composite.keepdim == keepdim


def test_var_correction_and_layernorm_arguments():
  assert wire(f32(3, 4).var(0, correction=0)).composite.correction == 0.0
  assert wire(f32(3, 4).var(0)).composite.correction == 1.0
  ln = f32(2, 3, 4).layernorm((-2, -1), eps=1e-3)
  msg = wire(ln)
  assert top(ln) == "LAYERNORM" and msg.composite.normalized_axes == 2 and msg.composite.eps == pytest.approx(1e-3)
  inner = f32(2, 3, 4).layernorm(1)  # not the trailing axes: permuted to the end and back
  assert top(inner) == "PERMUTE" and inner.shape == (2, 3, 4)


def test_logsumexp_over_several_axes_merges_them():
  t = f32(2, 3, 4).logsumexp((0, 2), keepdim=True)
  assert t.shape == (1, 3, 1)
  lse = t._node.src[0]
  assert g.OP_NAMES[lse.op] == "LOGSUMEXP" and lse.shape == (3,)


def test_half_reductions_run_in_float32():
  t = Tensor(np.zeros((2, 3), np.float16)).mean(1)
  assert t.dtype == dtypes.float16 and top(t) == "CAST"
  assert t._node.src[0].dtype == dtypes.float32


def test_backward_builds_gradient_nodes_without_a_round_trip():
  x = Tensor(np.ones((2, 2), np.float32), requires_grad=True)
  w = Tensor(np.ones((2, 2), np.float32), requires_grad=True)
  before = g.GRAPH.stats()["requests"]
  loss = (x @ w).sum()
  loss.backward()
  assert g.GRAPH.stats()["requests"] == before
  for t in (x, w):
    assert top(t.grad) == "GRADIENT" and t.grad.shape == t.shape
    assert t.grad._node.src[1] is t._node


def test_requires_grad_propagates_and_no_grad_marks_stop_nodes():
  x = Tensor([1.0], requires_grad=True)
  assert (x * 2).requires_grad is True and (Tensor([1.0]) * 2).requires_grad is None
  with Tensor.no_grad():
    y = x * 2
  assert y.requires_grad is None and y._node.stop
  d = x.detach()
  assert d._node.stop and d.requires_grad is None


def test_constant_leaf_becomes_a_buffer():
  b = Tensor.zeros(3)
  assert top(b) == "CONST"
  b.requires_grad = True
  assert top(b) == "BUFFER"


def test_optimizer_scalars_travel_as_buffers():
  """The learning rate and Adam's bias corrections change per step: as constants they would change
  the kernels, so they travel as 0-d buffers."""
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = nn.Adam([w], lr=0.123)
  w.grad = Tensor([1.0, 1.0])
  opt.schedule_step()
  nodes = g.GRAPH.toposort(w._node)
  consts = [n.arg for n in nodes if n.op == g.CONST]
  assert not any(c == pytest.approx(0.123) or c == pytest.approx(0.123 / 0.1) for c in consts), consts
  assert any(n.op == g.BUFFER and n.shape == () for n in nodes)


def test_safe_save_from_numpy_needs_no_daemon(tmp_path):
  arr = np.arange(6, dtype=np.float32).reshape(2, 3)
  nn.safe_save({"a": arr, "b": np.array([1, 2], np.int16)}, tmp_path / "x.safetensors")
  raw = (tmp_path / "x.safetensors").read_bytes()
  (n,) = struct.unpack("<Q", raw[:8])
  header = json.loads(raw[8:8 + n])
  assert header["a"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
  assert header["b"] == {"dtype": "I16", "shape": [2], "data_offsets": [24, 28]}
  assert raw[8 + n:] == arr.tobytes() + np.array([1, 2], "<i2").tobytes()
  from polygrad.nn.state import safe_load_numpy
  back = safe_load_numpy(tmp_path / "x.safetensors")
  np.testing.assert_array_equal(back["a"][0], arr)
  assert back["b"][1] == dtypes.int16
