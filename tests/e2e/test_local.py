"""The client's purely local parts: shape rules, broadcasting, dtype promotion and the nodes it
builds. No daemon needed; nothing here realizes."""
import gc
import math
import os

import numpy as np
import pytest

import polygrad
from polygrad import Tensor, dtypes
from polygrad import graph as g, wire
from polygrad.connection import Connection, EmbeddedDaemon
from polygrad.dtype import least_upper_dtype, sum_acc_dtype
from polygrad.v1 import polygrad_pb2 as pb


def ops_of(t, limit=50):
  """Ops of the graph behind t, in id order."""
  seen, stack = {}, [t._node]
  while stack:
    n = stack.pop()
    if n.id not in seen:
      seen[n.id] = n
      stack.extend(n.src)
  return [g.OP_NAMES[seen[k].op] for k in sorted(seen)][:limit]


def f32(*shape):
  return Tensor(np.zeros(shape, dtype=np.float32))


# --- construction ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data,dtype,shape", [
    ([1, 2, 3], dtypes.int32, (3,)),
    ([1.0, 2, 3], dtypes.float32, (3,)),
    ([True, False], dtypes.bool, (2,)),
    ([[1, 2], [3, 4]], dtypes.int32, (2, 2)),
    ([], dtypes.float32, (0,)),
    (3, dtypes.int32, ()),
    (2.5, dtypes.float32, ()),
    (True, dtypes.bool, ()),
    (np.zeros((2, 3), np.float64), dtypes.float64, (2, 3)),
    (np.zeros((2,), np.uint8), dtypes.uint8, (2,)),
    (np.zeros((4, 1), np.int64), dtypes.int64, (4, 1)),
    (np.zeros((2,), np.float16), dtypes.float16, (2,)),
    (np.float32(1.5), dtypes.float32, ()),
])
def test_construction_dtype_and_shape(data, dtype, shape):
  t = Tensor(data)
  assert t.dtype == dtype and t.shape == shape and t.ndim == len(shape)


@pytest.mark.parametrize("arr", [np.zeros(3, np.complex64), np.array(["a"]), np.array([object()]),
                                 np.zeros(2, "datetime64[s]")])
def test_unsupported_numpy_dtype_raises_type_error(arr):
  with pytest.raises(TypeError):
    Tensor(arr)


def test_ragged_list_raises():
  with pytest.raises(ValueError):
    Tensor([[1, 2], [3]])


def test_explicit_dtype_converts_data_locally():
  t = Tensor([1.7, -2.7], dtype=dtypes.int32)
  assert t.dtype == dtypes.int32
  assert np.frombuffer(t._node.arg.tobytes(), "<i4").tolist() == [1, -2]


def test_input_is_copied():
  a = np.ones(3, np.float32)
  t = Tensor(a)
  a[0] = 5
  assert np.frombuffer(t._node.arg.tobytes(), "<f4")[0] == 1.0


def test_bfloat16_rounding():
  t = Tensor(np.array([1.0, 1.00390625, -2.5, np.nan], np.float32), dtype=dtypes.bfloat16)
  raw = t._node.arg
  back = (raw.astype(np.uint32) << 16).view(np.float32)
  assert back[0] == 1.0 and back[2] == -2.5 and np.isnan(back[3])
  assert back[1] in (1.0, 1.0078125)


def test_full_zeros_ones_are_constants():
  for t in (Tensor.zeros(2, 3), Tensor.ones((2, 3)), Tensor.full((2, 3), 7)):
    assert t.shape == (2, 3) and ops_of(t) == ["CONST"]
  assert Tensor.full((2,), 7).dtype == dtypes.int32
  assert Tensor.zeros(2).dtype == dtypes.float32


@pytest.mark.parametrize("args,dtype,n", [((5,), dtypes.int32, 5), ((2, 8, 3), dtypes.int32, 2),
                                          ((0.0, 1.0, 0.25), dtypes.float32, 4), ((5, 0), dtypes.int32, 0)])
def test_arange(args, dtype, n):
  t = Tensor.arange(*args)
  assert t.dtype == dtype and t.shape == (n,)


# --- dtype promotion ------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,out", [
    (dtypes.int32, dtypes.float32, dtypes.float32),
    (dtypes.bool, dtypes.int32, dtypes.int32),
    (dtypes.int8, dtypes.uint8, dtypes.int16),
    (dtypes.uint32, dtypes.int32, dtypes.int64),
    (dtypes.float16, dtypes.float32, dtypes.float32),
    (dtypes.float16, dtypes.bfloat16, dtypes.float32),
    (dtypes.int64, dtypes.float16, dtypes.float16),
    (dtypes.uint64, dtypes.int64, dtypes.float16),
    (dtypes.float32, dtypes.float64, dtypes.float64),
    (dtypes.bool, dtypes.bool, dtypes.bool),
])
def test_least_upper_dtype(a, b, out):
  assert least_upper_dtype(a, b) == out
  assert least_upper_dtype(b, a) == out


@pytest.mark.parametrize("dt,acc", [(dtypes.bool, dtypes.int32), (dtypes.int8, dtypes.int32),
                                    (dtypes.uint8, dtypes.uint32), (dtypes.int64, dtypes.int64),
                                    (dtypes.float16, dtypes.float32), (dtypes.float64, dtypes.float64)])
def test_sum_acc_dtype(dt, acc):
  assert sum_acc_dtype(dt) == acc


@pytest.mark.parametrize("tdt,scalar,out", [
    (dtypes.float32, 2, dtypes.float32),
    (dtypes.float32, 2.5, dtypes.float32),
    (dtypes.float16, 2.5, dtypes.float16),
    (dtypes.int32, 2, dtypes.int32),
    (dtypes.int32, 2.5, dtypes.float32),
    (dtypes.int8, 2, dtypes.int8),
    (dtypes.bool, 2, dtypes.int32),
    (dtypes.bool, 2.5, dtypes.float32),
    (dtypes.bool, True, dtypes.bool),
])
def test_scalar_operand_dtype(tdt, scalar, out):
  t = Tensor(np.zeros(3, np.float32)).cast(tdt)
  assert (t + scalar).dtype == out
  assert (scalar + t).dtype == out
  assert (t * scalar).shape == (3,)


def test_mixed_tensor_dtypes_cast_explicitly():
  a = Tensor([1, 2, 3])
  b = Tensor([1.0, 2.0, 3.0])
  c = a + b
  assert c.dtype == dtypes.float32
  assert ops_of(c) == ["BUFFER", "BUFFER", "CAST", "ADD"]


@pytest.mark.parametrize("src,dst,shape,out", [
    ("float32", "int32", (2, 3), (2, 3)),
    ("float16", "bfloat16", (), ()),
    ("uint8", "bool", (0, 4), (0, 4)),
    ("float32", "uint8", (2, 3), (2, 12)),
    ("uint8", "float64", (4, 16), (4, 2)),
    ("bool", "int16", (0, 2), (0, 1)),
])
def test_bitcast_node(src, dst, shape, out):
  x = Tensor(np.zeros(shape, getattr(dtypes, src).np))
  y = x.bitcast(getattr(dtypes, dst))
  assert (y.dtype, y.shape) == (getattr(dtypes, dst), out)
  assert ops_of(y) == ["BUFFER", "BITCAST"]
  assert x.bitcast(x.dtype) is x


@pytest.mark.parametrize("shape,dst,why", [
    ((), dtypes.float16, "bitcast from float32 (4 bytes) to float16 (2 bytes) of a 0-d tensor"),
    ((2, 3), dtypes.float64, "bitcast from float32 (4 bytes) to float64 (8 bytes): the last axis (3) must be a "
                             "multiple of 2"),
])
def test_bitcast_shape_rule_raises_locally(shape, dst, why):
  with pytest.raises(ValueError, match=__import__("re").escape(why)):
    Tensor(np.zeros(shape, np.float32)).bitcast(dst)


def test_bitcast_goes_on_the_wire_with_its_dtype():
  t = Tensor(np.zeros((2, 4), np.float32)).bitcast(dtypes.float16)
  n = wire.node(t._node)
  assert (n.op, n.dtype, len(n.src)) == (pb.BITCAST, pb.FLOAT16, 1)


def test_bitcast_result_does_not_require_grad():
  x = Tensor(np.zeros(3, np.float16), requires_grad=True)
  assert not x.bitcast(dtypes.bfloat16).requires_grad


@pytest.mark.parametrize("make", [lambda a: a / 2, lambda a: 2 / a, lambda a: a / a, lambda a: a.mean(),
                                  lambda a: a.exp(), lambda a: a.sqrt(), lambda a: a.sin()])
def test_int_true_division_and_float_ops_give_float32(make):
  assert make(Tensor([1, 2, 3])).dtype == dtypes.float32


@pytest.mark.parametrize("op", ["__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__"])
def test_comparisons_are_bool(op):
  a = Tensor(np.zeros((2, 3), np.float32))
  r = getattr(a, op)(Tensor([1, 2, 3]))
  assert r.dtype == dtypes.bool and r.shape == (2, 3)
  assert getattr(a, op)(0.5).dtype == dtypes.bool


def test_eq_le_ge_are_one_op_each():
  a, b = Tensor([1, 2]), Tensor([1, 3])
  assert ops_of(a == b) == ["BUFFER", "BUFFER", "CMPEQ"]
  assert ops_of(a <= b) == ops_of(a >= b) == ["BUFFER", "BUFFER", "CMPLE"]


def test_sum_of_bool_is_int32_and_mean_is_float32():
  b = Tensor([True, False, True])
  assert b.sum().dtype == dtypes.int32
  assert b.mean().dtype == dtypes.float32
  assert Tensor(np.zeros(3, np.float16)).sum().dtype == dtypes.float16


# --- broadcasting ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb,out", [
    ((3, 4), (4,), (3, 4)),
    ((4,), (3, 4), (3, 4)),
    ((2, 1, 4), (3, 1), (2, 3, 4)),
    ((), (2, 3), (2, 3)),
    ((5, 1), (1, 6), (5, 6)),
    ((1,), (0,), (0,)),
])
def test_broadcast_shapes(sa, sb, out):
  assert (f32(*sa) + f32(*sb)).shape == out
  assert (f32(*sb) * f32(*sa)).shape == out


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3, 4), (5, 4))])
def test_broadcast_mismatch_raises_locally(sa, sb):
  with pytest.raises(ValueError):
    f32(*sa) + f32(*sb)


def test_broadcast_is_reshape_then_expand():
  c = f32(3, 4) + f32(4)
  assert ops_of(c) == ["BUFFER", "BUFFER", "RESHAPE", "EXPAND", "ADD"]
  n = c._node
  assert n.src[0].shape == n.src[1].shape == (3, 4)


def test_scalar_becomes_full_shape_const():
  c = f32(2, 3) * 2
  const = c._node.src[1]
  assert g.OP_NAMES[const.op] == "CONST" and const.shape == (2, 3) and const.arg == 2.0


# --- movement -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,new,out", [((2, 3, 4), (6, 4), (6, 4)), ((2, 3, 4), (-1,), (24,)),
                                           ((2, 3, 4), (4, -1), (4, 6)), ((2, 3), (3, 2), (3, 2)),
                                           ((1,), (), ()), ((), (1, 1), (1, 1))])
def test_reshape(shape, new, out):
  assert f32(*shape).reshape(new).shape == out


@pytest.mark.parametrize("new", [(5, -1), (-1, -1), (7,), (2, -2)])
def test_reshape_errors(new):
  with pytest.raises(ValueError):
    f32(2, 3).reshape(new)


def test_movement_shapes():
  x = f32(2, 3, 4)
  assert x.permute(2, 0, 1).shape == (4, 2, 3)
  assert x.transpose(0, 2).shape == (4, 3, 2)
  assert x.T.shape == (2, 4, 3)
  assert x.pad(((1, 2), None, (0, 1))).shape == (5, 3, 5)
  assert x.pad((1, 1)).shape == (2, 3, 6)  # flat, torch order: last axis first
  assert x.shrink(((0, 1), None, (1, 3))).shape == (1, 3, 2)
  assert x.flip(0).shape == x.shape
  assert f32(3, 1).expand(2, 3, 4).shape == (2, 3, 4)
  assert f32(3, 1).expand(-1, 5).shape == (3, 5)
  assert x.squeeze().shape == x.shape and f32(1, 3, 1).squeeze().shape == (3,)
  assert x.unsqueeze(1).shape == (2, 1, 3, 4)
  assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12)
  assert x.repeat(2, 1, 1).shape == (4, 3, 4)
  assert Tensor.cat(x, x, dim=1).shape == (2, 6, 4)
  assert Tensor.stack(x, x).shape == (2, 2, 3, 4)


@pytest.mark.parametrize("bad", [
    lambda x: x.permute(0, 0, 1), lambda x: x.permute(0, 1), lambda x: x.expand(4, 3, 4),
    lambda x: x.shrink(((0, 3), None, None)), lambda x: x.shrink(((1, 0), None, None)),
    lambda x: x.pad(((0, 1), (0, 1))), lambda x: x.sum(3), lambda x: x.sum((0, 0)),
    lambda x: x @ f32(3, 4), lambda x: x.transpose(0, 5), lambda x: x.flip(3),
])
def test_shape_errors_before_any_round_trip(bad):
  x = f32(2, 3, 4)
  with pytest.raises((ValueError, RuntimeError, IndexError)):
    bad(x)


@pytest.mark.parametrize("idx", [1, -1, slice(None), slice(1, None), slice(None, None, -1), slice(0, 3, 2),
                                 (slice(None), 2), (Ellipsis, 1), (None, 0), (0, slice(None, None, 3), None),
                                 (slice(2, 0, -1), Ellipsis, slice(1, 4, 2))])
def test_getitem_shapes_match_numpy(idx):
  ref = np.zeros((3, 4, 5))
  assert Tensor(ref.astype(np.float32))[idx].shape == ref[idx].shape


def test_no_op_movements_add_no_nodes():
  x = f32(2, 3)
  assert x.reshape(2, 3) is x and x.permute(0, 1) is x and x.expand(2, 3) is x
  assert x.pad(((0, 0), (0, 0))) is x and x.cast(dtypes.float32) is x


# --- reductions and composites ---------------------------------------------------------------------

@pytest.mark.parametrize("axis,keepdim,out", [(None, False, ()), (None, True, (1, 1, 1)), (0, False, (3, 4)),
                                              (1, True, (2, 1, 4)), (-1, False, (2, 3)), ((0, 2), False, (3,)),
                                              ((0, 2), True, (1, 3, 1))])
def test_reduce_shapes(axis, keepdim, out):
  x = f32(2, 3, 4)
  for fn in ("sum", "max", "min", "mean"):
    assert getattr(x, fn)(axis, keepdim=keepdim).shape == out, fn


def test_reduce_keeps_axes_on_the_wire():
  s = f32(2, 3, 4).sum(1)
  red = s._node.src[0]
  assert g.OP_NAMES[red.op] == "REDUCE_SUM" and red.shape == (2, 1, 4) and red.arg == (1,)


@pytest.mark.parametrize("sa,sb,out", [((3, 4), (4, 5), (3, 5)), ((64, 32), (32, 16), (64, 16)),
                                       ((2, 3, 4), (4, 5), (2, 3, 5)), ((2, 3, 4), (2, 4, 5), (2, 3, 5)),
                                       ((4,), (4, 5), (5,)), ((3, 4), (4,), (3,)), ((4,), (4,), ()),
                                       ((1, 3, 4), (5, 4, 2), (5, 3, 2))])
def test_matmul_shapes(sa, sb, out):
  assert (f32(*sa) @ f32(*sb)).shape == np.matmul(np.zeros(sa), np.zeros(sb)).shape == out


def test_softmax_shape_and_dtype():
  s = Tensor([[1, 2], [3, 4]]).softmax()
  assert s.shape == (2, 2) and s.dtype == dtypes.float32


def test_repr_does_not_realize():
  t = f32(2, 3) + 1
  r = repr(t)
  assert "(2, 3)" in r and "float32" in r and "lazy" in r
  with pytest.raises(TypeError):
    bool(t)


# --- node lifetime (no sending: unsent nodes are never queued for release) ---------------------

def test_dead_unsent_nodes_are_not_released():
  # Garbage of earlier tests (a model and its KV cache refer to each other) dies in the collection
  # below too, and its sent nodes are queued: collect and send it first, then count only ours.
  gc.collect()
  g.GRAPH.flush_releases()
  before = g.GRAPH.stats()
  for _ in range(100):
    x = f32(4) + 1
  del x
  gc.collect()
  after = g.GRAPH.stats()
  assert after["pending_release"] == before["pending_release"]
  assert after["live_nodes"] <= before["live_nodes"] + 1


def test_sources_live_while_a_dependent_lives():
  a = f32(3)
  b = a * 2
  src_ref = b._node.src[0]
  del a
  gc.collect()
  assert src_ref.shape == (3,)  # still referenced from b's node


# --- connection errors ----------------------------------------------------------------------------

def test_unreachable_address_raises_connection_error():
  with pytest.raises(polygrad.PolygradConnectionError, match="cannot reach polygradd at unix:/nonexistent"):
    Connection("unix:/nonexistent/polygradd.sock", connect_timeout=0.5)


def test_missing_daemon_binary_raises_connection_error(monkeypatch):
  monkeypatch.setenv("POLYGRAD_DAEMON", "/nonexistent/polygradd")
  with pytest.raises(polygrad.PolygradConnectionError, match="cannot reach polygradd"):
    EmbeddedDaemon()


def test_daemon_that_exits_raises_connection_error(monkeypatch):
  monkeypatch.delenv("POLYGRAD_ADDRESS", raising=False)
  monkeypatch.setenv("POLYGRAD_DAEMON", "/bin/false")
  with pytest.raises(polygrad.PolygradConnectionError, match="exited with status 1"):
    Connection(connect_timeout=10)


def test_error_mapping():
  import grpc
  from polygrad.errors import from_rpc_error

  class Err(grpc.RpcError):
    def code(self):
      return grpc.StatusCode.INVALID_ARGUMENT

    def details(self):
      return "node 7 (ADD): shapes differ"

  e = from_rpc_error(Err(), "Realize")
  assert isinstance(e, polygrad.PolygradError) and isinstance(e, ValueError)
  assert "node 7 (ADD): shapes differ" in str(e) and e.code == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("op", [lambda x: x & x, lambda x: x | 1, lambda x: x ^ x, lambda x: ~x, lambda x: x.idiv(2),
                                lambda x: x << 1, lambda x: x >> 1])
def test_integer_only_ops_refuse_floats(op):
  with pytest.raises(TypeError, match="integer"):
    op(Tensor(np.ones(3, np.float32)))


@pytest.mark.parametrize("shift", [-1, 32, 1.5, True])
def test_shifts_take_a_shift_inside_the_dtype(shift):
  with pytest.raises(ValueError, match=r"shift in \[0, 32\)"):
    Tensor(np.ones(3, np.int32)) << shift


def test_cat_stack_arange_and_a_conv_bias_are_one_wire_op_each():
  a, b = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((2, 1), np.float32))
  assert ops_of(Tensor.cat(a, b, a, dim=1)) == ["BUFFER", "BUFFER", "CAT"]
  assert ops_of(Tensor.stack(a, a)).count("CAT") == 1 and "PAD" not in ops_of(Tensor.stack(a, a))
  assert ops_of(Tensor.arange(3, 9, 2)) == ["CONST", "CONST", "ARANGE"]
  x, w, bias = Tensor(np.ones((1, 3, 4, 4), np.float32)), Tensor(np.ones((2, 3, 3, 3), np.float32)), Tensor(np.ones(2, np.float32))
  assert ops_of(x.conv2d(w, bias))[-1] == "CONV2D" and "ADD" not in ops_of(x.conv2d(w, bias))


def test_integer_division_and_bit_ops_build_the_wire_ops():
  a, b = Tensor(np.arange(6, dtype=np.int32)), Tensor(np.full(6, 4, np.int32))
  assert ops_of(a // b)[-1] == "FLOOR_DIVIDE" and ops_of(a % b)[-1] == "REMAINDER"
  assert ops_of(a.fmod(b))[-1] == "FMOD" and ops_of(a ** b)[-1] == "INT_POW" and ops_of(a.idiv(b))[-1] == "IDIV"
  assert ops_of(a << 2)[-1] == "LSHIFT" and ops_of(a >> b)[-1] == "RSHIFT"
  assert ops_of(a & b)[-1] == "AND" and ops_of(a | b)[-1] == "OR" and ops_of(a ^ b)[-1] == "XOR"
  assert (a // b).dtype == dtypes.int32 and (a.cast(dtypes.uint8) // 3).dtype == dtypes.uint8
