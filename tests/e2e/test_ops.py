"""Every Tensor op against numpy on random inputs, computed by a real polygradd."""
import math

import numpy as np
import pytest

from conftest import assert_close
from polygrad import Tensor, dtypes
from polygrad import graph as g
from polygrad.errors import PolygradInvalidArgument

pytestmark = pytest.mark.usefixtures("live_daemon")

F32 = np.float32


def randf(rng, shape, lo=-2.0, hi=2.0):
  return rng.uniform(lo, hi, shape).astype(F32)


# --- elementwise binary with broadcasting ---------------------------------------------------------

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
}
SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 1)), ((1,), (5,)),
               ((), (2, 3)), ((2, 3), ())]


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPE_PAIRS, ids=[f"{a}x{b}" for a, b in SHAPE_PAIRS])
def test_binary_broadcast(rng, name, sa, sb):
  a, b = randf(rng, sa), randf(rng, sb)
  if name == "div":
    b = np.where(np.abs(b) < 0.1, F32(0.5), b).astype(F32)
  ours, ref = BINARY[name]
  got = ours(Tensor(a), Tensor(b)).numpy()
  assert got.dtype == np.float32
  assert_close(got, ref(a.astype(np.float64), b.astype(np.float64)))


@pytest.mark.parametrize("scalar", [3, 2.5, -1.25])
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_scalar_both_sides(rng, op, scalar):
  a = randf(rng, (4, 5), 0.5, 2.0)
  t = Tensor(a)
  f = eval(f"lambda x, s: (x {op} s, s {op} x)")
  left, right = f(t, scalar)
  ref_l, ref_r = f(a.astype(np.float64), scalar)
  assert_close(left.numpy(), ref_l)
  assert_close(right.numpy(), ref_r)


def test_chain_of_scalar_ops_in_one_graph(rng):
  a = randf(rng, (8, 8))
  got = ((Tensor(a) * 3 - 1) / 2 + 0.5 - Tensor(a) * Tensor(a)).numpy()
  a64 = a.astype(np.float64)
  assert_close(got, (a64 * 3 - 1) / 2 + 0.5 - a64 * a64)


# --- unary ----------------------------------------------------------------------------------------

UNARY = {
    "neg": (lambda t: -t, np.negative, (-3, 3)),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), (-3, 3)),
    "exp": (lambda t: t.exp(), np.exp, (-3, 3)),
    "log": (lambda t: t.log(), np.log, (0.1, 5)),
    "exp2": (lambda t: t.exp2(), np.exp2, (-3, 3)),
    "log2": (lambda t: t.log2(), np.log2, (0.1, 5)),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, (0, 5)),
    "reciprocal": (lambda t: t.reciprocal(), np.reciprocal, (0.2, 5)),
    "sin": (lambda t: t.sin(), np.sin, (-6, 6)),
    "cos": (lambda t: t.cos(), np.cos, (-6, 6)),
    "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "tanh": (lambda t: t.tanh(), np.tanh, (-3, 3)),
    "abs": (lambda t: t.abs(), np.abs, (-3, 3)),
    "square": (lambda t: t.square(), np.square, (-3, 3)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(rng, name):
  ours, ref, (lo, hi) = UNARY[name]
  a = randf(rng, (5, 7), lo, hi)
  assert_close(ours(Tensor(a)).numpy(), ref(a.astype(np.float64)), rtol=2e-5, atol=2e-6)


# --- comparisons and where ------------------------------------------------------------------------

CMP = ["<", ">", "<=", ">=", "==", "!="]


@pytest.mark.parametrize("op", CMP)
def test_compare_tensors(rng, op):
  a = rng.integers(-2, 3, (4, 5)).astype(F32)
  b = rng.integers(-2, 3, (5,)).astype(F32)
  f = eval(f"lambda x, y: x {op} y")
  got = f(Tensor(a), Tensor(b)).numpy()
  assert got.dtype == np.bool_
  np.testing.assert_array_equal(got, f(a, b))


@pytest.mark.parametrize("op", CMP)
def test_compare_scalar_both_sides(rng, op):
  a = rng.integers(-2, 3, (6,)).astype(np.int32)
  f = eval(f"lambda x: (x {op} 1, 1 {op} x, x {op} 0.5)")
  got = [t.numpy() for t in f(Tensor(a))]
  for gv, rv in zip(got, f(a)):
    assert gv.dtype == np.bool_
    np.testing.assert_array_equal(gv, rv)


@pytest.mark.parametrize("form", ["tensors", "scalar_x", "scalar_y", "scalars", "broadcast", "method"])
def test_where(rng, form):
  c = rng.random((3, 4)) > 0.5
  x, y = randf(rng, (3, 4)), randf(rng, (3, 4))
  cond = Tensor(c)
  if form == "tensors":
    got, ref = Tensor.where(cond, Tensor(x), Tensor(y)), np.where(c, x, y)
  elif form == "scalar_x":
    got, ref = cond.where(1.5, Tensor(y)), np.where(c, F32(1.5), y)
  elif form == "scalar_y":
    got, ref = cond.where(Tensor(x), 0), np.where(c, x, F32(0))
  elif form == "scalars":
    got, ref = cond.where(2.0, -1.0), np.where(c, 2.0, -1.0)
  elif form == "broadcast":
    got, ref = Tensor(c[:, :1]).where(Tensor(x), Tensor(y[0])), np.where(c[:, :1], x, y[0])
  else:
    got, ref = (Tensor(x) > Tensor(y)).where(Tensor(x), Tensor(y)), np.where(x > y, x, y)
  assert_close(got.numpy(), ref)


def test_logical_ops(rng):
  a, b = rng.random(10) > 0.5, rng.random(10) > 0.5
  np.testing.assert_array_equal((Tensor(a) & Tensor(b)).numpy(), a & b)
  np.testing.assert_array_equal((Tensor(a) | Tensor(b)).numpy(), a | b)
  np.testing.assert_array_equal((~Tensor(a)).numpy(), ~a)


# --- dtypes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("bool", "float32"),
                                     ("float32", "bool"), ("int32", "bool"), ("bool", "int32")])
def test_cast(rng, src, dst):
  base = rng.uniform(-5, 5, (4, 6)).astype(F32)
  base[0, :3] = 0
  a = base.astype(src) if src != "bool" else base > 0
  got = Tensor(a).cast(getattr(dtypes, dst)).numpy()
  ref = a.astype(dst)
  assert got.dtype == ref.dtype
  np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8,
                                      np.int16, np.uint32, np.float16, np.bool_])
def test_dtype_round_trip(rng, np_dtype):
  a = (rng.uniform(-100, 100, (3, 5)) if np.dtype(np_dtype).kind == "f" else
       rng.integers(0, 100, (3, 5)) if np.dtype(np_dtype).kind in "iu" else rng.random((3, 5)) > 0.5)
  a = a.astype(np_dtype)
  got = Tensor(a).numpy()
  assert got.dtype == a.dtype
  np.testing.assert_array_equal(got, a)


INT_EXPRS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
    "add_scalar": (lambda a, b: a + 3, lambda a, b: a + 3),
    "rsub_scalar": (lambda a, b: 7 - a, lambda a, b: 7 - a),
    "neg": (lambda a, b: -a, lambda a, b: -a),
    "dot_sum": (lambda a, b: (a * b).sum(), lambda a, b: (a * b).sum()),
    "max_all": (lambda a, b: a.max(), lambda a, b: a.max()),
    "sum_axis0": (lambda a, b: a.sum(0), lambda a, b: a.sum(axis=0)),
    "min_axis1": (lambda a, b: a.min(1), lambda a, b: a.min(axis=1)),
    "where": (lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b)),
}


@pytest.mark.parametrize("name", list(INT_EXPRS))
def test_int32_arithmetic(rng, name):
  a = rng.integers(-50, 50, (4, 5)).astype(np.int32)
  b = rng.integers(-50, 50, (4, 5)).astype(np.int32)
  ours, ref = INT_EXPRS[name]
  got = ours(Tensor(a), Tensor(b)).numpy()
  assert got.dtype == np.int32, got.dtype
  np.testing.assert_array_equal(got, np.asarray(ref(a, b)).astype(np.int32))


@pytest.mark.parametrize("expr,ref_expr", [
    ("a / b", "a / b"), ("a / 4", "a / 4"), ("a + 0.5", "a + 0.5"), ("a.mean()", "a.mean()"),
    ("a.sqrt()", "np.sqrt(a)"), ("(a < b).sum()", "(a < b).sum()"),
])
def test_int_promotion_to_float(rng, expr, ref_expr):
  a = rng.integers(1, 50, (4, 5)).astype(np.int32)
  b = rng.integers(1, 50, (4, 5)).astype(np.int32)
  got = eval(expr, {"a": Tensor(a), "b": Tensor(b)}).numpy()
  ref = eval(ref_expr, {"a": a, "b": b, "np": np})
  assert_close(got, ref)
  assert got.dtype == (np.int32 if "sum" in expr else np.float32)


# --- reductions -----------------------------------------------------------------------------------

AXES = [None, 0, 1, 2, -1, (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=[str(a) for a in AXES])
@pytest.mark.parametrize("fn", ["sum", "max", "min", "mean"])
def test_reduce(rng, fn, axis, keepdim):
  a = randf(rng, (3, 4, 5))
  got = getattr(Tensor(a), fn)(axis, keepdim=keepdim).numpy()
  ref = getattr(a.astype(np.float64), fn)(axis=axis, keepdims=keepdim)
  assert_close(got, ref)


@pytest.mark.parametrize("view", ["permute", "shrink", "flip", "pad", "expand", "transpose", "getitem_step",
                                  "pad_value", "reshape_permute", "chain"])
@pytest.mark.parametrize("axis", [0, 1])
def test_non_contiguous_views_then_reduce(rng, view, axis):
  a = randf(rng, (4, 6))
  t = Tensor(a)
  if view == "permute":
    got, ref = t.permute(1, 0), a.T
  elif view == "shrink":
    got, ref = t.shrink(((1, 3), (2, 6))), a[1:3, 2:6]
  elif view == "flip":
    got, ref = t.flip(1), a[:, ::-1]
  elif view == "pad":
    got, ref = t.pad(((1, 2), (0, 3))), np.pad(a, ((1, 2), (0, 3)))
  elif view == "expand":
    got, ref = t[:, :1].expand(4, 5), np.broadcast_to(a[:, :1], (4, 5))
  elif view == "transpose":
    got, ref = t.T * 2, a.T * 2
  elif view == "getitem_step":
    got, ref = t[::-1, 1::2], a[::-1, 1::2]
  elif view == "pad_value":
    got, ref = t.pad(((1, 0), (2, 1)), value=-3.0), np.pad(a, ((1, 0), (2, 1)), constant_values=-3.0)
  elif view == "reshape_permute":
    got, ref = t.reshape(2, 12).permute(1, 0).reshape(6, 4), a.reshape(2, 12).T.reshape(6, 4)
  else:
    got = t.permute(1, 0).flip(0).shrink(((1, 5), None)).pad(((0, 0), (1, 1)))
    ref = np.pad(a.T[::-1][1:5], ((0, 0), (1, 1)))
  assert_close(got.numpy(), ref)
  assert_close(got.sum(axis).numpy(), ref.astype(np.float64).sum(axis))
  assert_close(got.max(axis, keepdim=True).numpy(), ref.max(axis, keepdims=True))


def test_reduce_then_elementwise_then_reduce(rng):
  a = randf(rng, (6, 7))
  t = Tensor(a)
  var = ((t - t.mean(1, keepdim=True)) ** 2).mean(1)
  assert_close(var.numpy(), a.astype(np.float64).var(1), rtol=1e-4, atol=1e-6)
  assert_close(t.std(0).numpy(), a.astype(np.float64).std(0, ddof=1), rtol=1e-4, atol=1e-6)


# --- matmul and softmax ---------------------------------------------------------------------------

MATMUL = [((3, 4), (4, 5)), ((64, 32), (32, 16)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
          ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((1, 3, 4), (5, 4, 2)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("sa,sb", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
def test_matmul(rng, sa, sb):
  a, b = randf(rng, sa), randf(rng, sb)
  assert_close((Tensor(a) @ Tensor(b)).numpy(), np.matmul(a.astype(np.float64), b.astype(np.float64)),
               rtol=1e-5, atol=1e-5)


def test_matmul_int32(rng):
  a = rng.integers(-5, 5, (3, 4)).astype(np.int32)
  b = rng.integers(-5, 5, (4, 2)).astype(np.int32)
  got = (Tensor(a) @ Tensor(b)).numpy()
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, a @ b)


def _np_softmax(x, axis):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_and_log_softmax(rng, axis):
  a = randf(rng, (5, 9), -4, 4).astype(np.float64)
  t = Tensor(a.astype(F32))
  assert_close(t.softmax(axis).numpy(), _np_softmax(a, axis))
  assert_close(t.log_softmax(axis).numpy(), np.log(_np_softmax(a, axis)), rtol=1e-5, atol=1e-5)


def test_softmax_of_matmul_in_one_graph(rng):
  a, b = randf(rng, (16, 32)), randf(rng, (32, 24))
  got = (Tensor(a) @ Tensor(b)).softmax(-1).numpy()
  ref = _np_softmax(a.astype(np.float64) @ b.astype(np.float64), -1)
  assert np.max(np.abs(got - ref)) < 1e-5


def test_two_layer_mlp_forward(rng):
  x, w1, w2 = randf(rng, (8, 10)), randf(rng, (10, 16)), randf(rng, (16, 3))
  got = (Tensor(x) @ Tensor(w1)).relu().matmul(Tensor(w2)).log_softmax().numpy()
  h = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
  assert_close(got, np.log(_np_softmax(h, -1)), rtol=1e-5, atol=1e-5)


# --- 0-d, item, tolist, constructors --------------------------------------------------------------

def test_zero_dim_and_item(rng):
  a = randf(rng, (3, 4))
  s = Tensor(a).sum()
  assert s.shape == ()
  assert math.isclose(s.item(), float(a.astype(np.float64).sum()), rel_tol=1e-5, abs_tol=1e-5)
  assert Tensor(3.5).item() == 3.5
  assert (Tensor(2) + 3).item() == 5 and isinstance((Tensor(2) + 3).item(), int)
  assert_close((Tensor(a) * Tensor(np.float32(2.0))).numpy(), a * 2)
  assert Tensor(a)[1, 2].item() == pytest.approx(float(a[1, 2]))
  assert (Tensor(True) == Tensor(False)).item() is False


def test_tolist(rng):
  a = rng.integers(-9, 9, (2, 3)).astype(np.int32)
  assert Tensor(a).tolist() == a.tolist()
  assert (Tensor(a) * 2).tolist() == (a * 2).tolist()
  assert Tensor([[True], [False]]).tolist() == [[True], [False]]


def test_constructors():
  np.testing.assert_array_equal(Tensor.zeros(2, 3).numpy(), np.zeros((2, 3), F32))
  np.testing.assert_array_equal(Tensor.ones(4).numpy(), np.ones(4, F32))
  np.testing.assert_array_equal(Tensor.full((2, 2), 7).numpy(), np.full((2, 2), 7, np.int32))
  np.testing.assert_array_equal(Tensor.arange(2, 11, 3).numpy(), np.arange(2, 11, 3, dtype=np.int32))
  np.testing.assert_allclose(Tensor.arange(0.0, 1.0, 0.25).numpy(), np.arange(0.0, 1.0, 0.25, dtype=F32))
  np.testing.assert_array_equal(Tensor.eye(3).numpy(), np.eye(3, dtype=F32))
  np.testing.assert_array_equal((Tensor.ones(2, 3) + Tensor.arange(3)).numpy(), 1 + np.arange(3, dtype=F32)[None].repeat(2, 0))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"])
def test_linspace_and_eye_match_numpy(rng, dtype):
  # The daemon computes them (LINSPACE in float64, then cast; EYE): numpy's values bit for bit.
  for _ in range(6):
    start, stop = (float(v) for v in rng.uniform(-50, 50, 2) * rng.choice([1, 0.01]))
    if dtype in ("uint8", "bool"):
      start, stop = abs(start), abs(stop)
    steps = int(rng.integers(1, 40))
    want = np.linspace(start, stop, steps, dtype=np.float64).astype(dtype)
    got = Tensor.linspace(start, stop, steps, dtype=dtype).numpy()
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=f"{start} {stop} {steps}")
    n, m = (int(v) for v in rng.integers(1, 9, 2))
    np.testing.assert_array_equal(Tensor.eye(n, m, dtype=dtype).numpy(), np.eye(n, m, dtype=dtype))
  assert Tensor.linspace(0, 1, 0).shape == (0,) and Tensor.eye(0, 3).shape == (0, 3)


def test_cat_stack_repeat(rng):
  a, b = randf(rng, (2, 3)), randf(rng, (2, 5))
  assert_close(Tensor.cat(Tensor(a), Tensor(b), dim=1).numpy(), np.concatenate([a, b], 1))
  assert_close(Tensor.stack(Tensor(a), Tensor(a) * 2, dim=1).numpy(), np.stack([a, a * 2], 1))
  assert_close(Tensor(a).repeat(2, 3).numpy(), np.tile(a, (2, 3)))


def test_cat_is_one_op_that_keeps_every_bit_and_routes_gradients(rng):
  # CAT selects each piece where it lies rather than summing zero-padded pieces, so -0.0, nan
  # payloads and infinities come back as they went in; its gradient hands each piece its slice.
  a = np.array([[-0.0, np.inf], [np.nan, -np.inf]], np.float32)
  b = randf(rng, (2, 3))
  out = Tensor.cat(Tensor(a), Tensor(b), Tensor(-a), dim=1)
  np.testing.assert_array_equal(out.numpy().view(np.uint32), np.concatenate([a, b, -a], 1).view(np.uint32))
  xs = [Tensor(randf(rng, (k, 3)), requires_grad=True) for k in (1, 0, 4)]
  w = randf(rng, (5, 3))
  (Tensor.cat(*xs) * Tensor(w)).sum().backward()
  for x, want in zip(xs, np.split(w, [1, 1])):
    np.testing.assert_array_equal(x.grad.numpy(), want)
  # More pieces than one CAT takes are joined in groups by the client; the daemon refuses a node
  # with more sources than the schema's max_arity.
  pieces = [randf(rng, (1, 2)) for _ in range(2 * 4096 + 5)]
  np.testing.assert_array_equal(Tensor.cat(*[Tensor(p) for p in pieces]).numpy(), np.concatenate(pieces))
  with pytest.raises(PolygradInvalidArgument, match=r"\(CAT\): takes 1 to 4096 source"):
    ones = Tensor.ones(1)
    Tensor._make(g.CAT, ones.dtype, (4097,), (ones,) * 4097, g.Composite(axes=(0,))).realize().synchronize()


def test_realize_several_outputs_at_once(rng):
  a = randf(rng, (4, 4))
  t = Tensor(a)
  x, y = (t + 1), (t * t).sum(0)
  x.realize(y)
  assert x.is_realized and y.is_realized
  assert_close(x.numpy(), a + 1)
  assert_close(y.numpy(), (a.astype(np.float64) ** 2).sum(0))
  # a realized tensor keeps serving as a source of later graphs
  assert_close((x - y).numpy(), (a + 1) - (a.astype(np.float64) ** 2).sum(0))


def test_pow(rng):
  a = randf(rng, (3, 4), 0.5, 2)
  assert_close((Tensor(a) ** 3).numpy(), a.astype(np.float64) ** 3)
  assert_close((Tensor(a) ** 0.5).numpy(), np.sqrt(a.astype(np.float64)))
  assert_close((2 ** Tensor(a)).numpy(), 2 ** a.astype(np.float64))


# --- every dtype through the common ops -----------------------------------------------------------

DTYPE_NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
               "float32", "float64"]
DTYPE_OPS = {
    "add": (lambda x, y: x + y, lambda x, y: (x | y) if x.dtype == np.bool_ else x + y),
    "mul": (lambda x, y: x * y, lambda x, y: (x & y) if x.dtype == np.bool_ else x * y),
    "maximum": (lambda x, y: x.maximum(y), np.maximum),
    "minimum": (lambda x, y: x.minimum(y), np.minimum),
    "lt": (lambda x, y: x < y, lambda x, y: x < y),
    "eq": (lambda x, y: x == y, lambda x, y: x == y),
    "where": (lambda x, y: (x < y).where(x, y), lambda x, y: np.where(x < y, x, y)),
    "max_axis": (lambda x, y: x.max(1), lambda x, y: x.max(1)),
    "min_axis": (lambda x, y: x.min(0), lambda x, y: x.min(0)),
    "cast_float32": (lambda x, y: x.cast(dtypes.float32), lambda x, y: x.astype(np.float32)),
    "permute_pad": (lambda x, y: x.permute(1, 0).pad(((1, 0), (0, 2))), lambda x, y: np.pad(x.T, ((1, 0), (0, 2)))),
}


@pytest.mark.parametrize("op", list(DTYPE_OPS))
@pytest.mark.parametrize("dt", DTYPE_NAMES)
def test_dtype_ops(rng, dt, op):
  if dt == "bool":
    a, b = rng.random((3, 5)) > 0.5, rng.random((3, 5)) > 0.5
  elif dt.startswith("float"):
    a, b = rng.uniform(-3, 3, (3, 5)).astype(dt), rng.uniform(-3, 3, (3, 5)).astype(dt)
  else:
    a, b = rng.integers(0, 100, (3, 5)).astype(dt), rng.integers(0, 100, (3, 5)).astype(dt)
  ours, ref = DTYPE_OPS[op]
  got = ours(Tensor(a), Tensor(b)).numpy()
  expected = np.asarray(ref(a, b))
  assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
  np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("np_dtype", [np.int8, np.uint8, np.int16, np.int64, np.uint32, np.float64])
def test_sum_accumulates_like_tinygrad(rng, np_dtype):
  a = rng.integers(0, 100, (4, 6)).astype(np_dtype)
  got = Tensor(a).sum(1).numpy()
  # tinygrad: small ints sum in int32 (unsigned in uint32), wider types keep their own dtype
  want = {np.int8: np.int32, np.uint8: np.uint32, np.int16: np.int32}.get(np_dtype, np_dtype)
  assert got.dtype == want
  np.testing.assert_array_equal(got, a.astype(np.float64).sum(1).astype(want))


# --- special values -------------------------------------------------------------------------------

SPECIAL = np.array([0.0, -1.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 100.0], np.float32)


@pytest.mark.parametrize("name,ours,ref", [
    ("log", lambda t: t.log(), np.log), ("sqrt", lambda t: t.sqrt(), np.sqrt),
    ("reciprocal", lambda t: t.reciprocal(), np.reciprocal), ("neg", lambda t: -t, np.negative),
    ("exp", lambda t: t.exp(), np.exp), ("isnan", lambda t: t.isnan(), np.isnan),
    ("ne_self", lambda t: t != t, lambda x: x != x), ("lt_one", lambda t: t < 1, lambda x: x < 1),
], ids=lambda v: v if isinstance(v, str) else "")
def test_special_values(name, ours, ref):
  with np.errstate(all="ignore"):
    expected = ref(SPECIAL)
  got = ours(Tensor(SPECIAL)).numpy()
  assert got.dtype == expected.dtype
  if got.dtype.kind == "f":
    np.testing.assert_allclose(got, expected, rtol=1e-6, equal_nan=True)
  else:
    np.testing.assert_array_equal(got, expected)


def test_integer_wraparound_and_int_true_division():
  np.testing.assert_array_equal((Tensor(np.array([250], np.uint8)) + 10).numpy(), np.array([4], np.uint8))
  np.testing.assert_array_equal((Tensor(np.array([1, 2], np.uint32)) - 3).numpy(),
                                np.array([1, 2], np.uint32) - np.uint32(3))
  big = np.array([2 ** 40, -(2 ** 41)], np.int64)
  np.testing.assert_array_equal((Tensor(big) * 3).numpy(), big * 3)
  ints = np.array([-7, 7, -8], np.int32)
  np.testing.assert_array_equal((Tensor(ints) / 2).numpy(), (ints / 2).astype(np.float32))


def test_numpy_operands_on_either_side(rng):
  a, b = randf(rng, (3, 4)), randf(rng, (4,))
  t = Tensor(a)
  for got, ref in [(b + t, b + a), (t - b, a - b), (np.float32(2.5) * t, 2.5 * a), (b * t, b * a),
                   (t / np.float32(4), a / 4)]:
    assert isinstance(got, Tensor)
    assert_close(got.numpy(), ref)


# min, minimum and argmin at every integer dtype's extremes, where a negated max wraps (-(-2^31)
# is -2^31 in int32), against numpy; rows chosen so the extreme is the answer or ties with it.
@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "uint8", "uint32", "uint64"])
def test_min_minimum_argmin_at_integer_extremes(rng, dt):
  info = np.iinfo(dt)
  pool = np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1], dtype=dt)
  a, b = rng.choice(pool, (4, 6)), rng.choice(pool, (4, 6))
  a[0, 3] = info.min  # each of these rows holds the dtype's lowest value at least once
  b[1, 0] = info.min
  ta, tb = Tensor(a), Tensor(b)
  np.testing.assert_array_equal(ta.min(1).numpy(), a.min(1))
  np.testing.assert_array_equal(ta.min().numpy(), a.min())
  np.testing.assert_array_equal(ta.argmin(1).numpy(), a.argmin(1))
  np.testing.assert_array_equal(ta.minimum(tb).numpy(), np.minimum(a, b))


def test_sort_and_scans_over_an_empty_axis_give_int32_indices():
  # The indices of an empty axis were the (float) values, which the daemon refused as int32.
  x = Tensor(np.zeros((2, 0, 3), np.float32))
  for values, indices in (x.sort(1), x.cummax(1), x.cummin(1)):
    assert indices.dtype == dtypes.int32 and indices.numpy().shape == (2, 0, 3) and values.numpy().shape == (2, 0, 3)


@pytest.mark.parametrize("p", [-1.0, -3.0, float("-inf")])
def test_normalize_with_a_negative_p_is_torchs(p):
  torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional.normalize")
  a = np.random.default_rng(3).uniform(-2, 2, (5, 7)).astype(np.float32)
  want = torch.nn.functional.normalize(torch.tensor(a), p=p, dim=1).numpy()
  np.testing.assert_allclose(Tensor(a).normalize(p=p, dim=1).numpy(), want, rtol=1e-5, atol=1e-6)
