"""The PyTorch parity suite (issue 3, acceptance 1): every op the Python client exposes, forward
and backward, against PyTorch on random inputs, computed by a real polygradd.

The suite is one table, OPS. Each entry names an op, how to call it in polygrad and in torch,
the argument shapes it is tried on (broadcasting, size-1 and size-0 axes included), the dtypes
it is defined for, the value domain of its inputs and whether it is differentiable. Every test
is one (op, dtype) over all layouts and shapes; a layout decides how each input tensor is made from a leaf —
contiguous, permuted, shrunk (sliced out of a larger tensor), flipped, expanded from a size-1
axis, or strided — the same way in both libraries. All cases of one test are realized in ONE
request (forward values and gradients of every case, concatenated on the device per result
dtype), so there are few kernels to compile and the file stays fast.

Backward: the gradient of sum(out * w) for random w, taken with respect to the leaves (so the
movement ops that make a layout are differentiated too), compared with torch's autograd.
References are computed in float64 on the same (dtype-rounded) inputs, then compared with a
tolerance per dtype; integer and bool results must match exactly.

    pytest tests/e2e/test_torch_parity.py --collect-only -q   # the number of tests
    python3 tests/e2e/test_torch_parity.py                     # ops, tests and cases
    POLYGRAD_PARITY=full pytest tests/e2e/test_torch_parity.py # every case in every dtype

CASES is the count of (op, dtype, layout, shape variant) cases the tests check."""
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

if __name__ == "__main__":  # counting the cases needs the client, not a daemon
  from pathlib import Path
  sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

try:
  import torch
  import torch.nn.functional as F
except ImportError:  # counted below without torch; the tests skip
  torch = None

from polygrad import Tensor, dtypes

pytestmark = pytest.mark.usefixtures("live_daemon")

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int8", "int16", "int32", "int64", "uint8")
F32_ONLY = ("float32", "float64")
ALL_NUM = FLOATS + INTS
BOOL_REDUCE_DTYPES = ("bool", "float32", "int32", "float16")

# (rtol, atol) per dtype; atol scales with the largest reference magnitude (sums grow).
TOL = {"float32": (2e-4, 2e-5), "float64": (1e-9, 1e-10), "float16": (1.5e-2, 1e-2),
       "bfloat16": (6e-2, 5e-2)}
# Gradients go through more ops than forward values.
GRAD_TOL = {"float32": (1e-3, 1e-4), "float64": (1e-8, 1e-9), "float16": (5e-2, 3e-2),
            "bfloat16": (1.5e-1, 1e-1)}


@dataclass
class Variant:
  """One call of the op: the shapes of its tensor arguments and its keyword parameters."""
  shapes: Tuple[Tuple[int, ...], ...]
  params: Dict = field(default_factory=dict)


@dataclass
class Op:
  name: str
  pg: Callable  # (params, *polygrad tensors) -> Tensor or list of Tensors
  th: Callable  # (params, *torch tensors) -> torch tensor or list
  variants: List[Variant]
  dtypes: Sequence[str] = FLOATS
  domain: Tuple[float, float] = (-2.0, 2.0)
  grad: bool = True
  # Per argument: "x" data (takes the layout), "i" integer indices in [0, params["n"]), "b" bool,
  # "c" data of the op's dtype that keeps a contiguous layout and gets no gradient.
  kinds: str = ""
  layouts: Sequence[str] = ()
  tol_scale: float = 1.0
  gen: Optional[Callable] = None  # (rng, shape, dtype_name, params) -> float64/int64 array, per "x" arg
  out: Optional[str] = None  # the float result's dtype when it is not the input's
  int_gen: Optional[Callable] = None  # like gen, for integer dtypes (default: integers in [-5, 5])
  # Layouts the default run checks (FULL: all). Windowed ops over permuted, flipped or strided
  # views each need kernels of their own (about 100 s more for the six float32 windowed tests,
  # measured on the 2-core CI VM, all passing), so the default run leaves them to the full run.
  quick_layouts: Optional[Sequence[str]] = None


def V(*shapes, **params) -> Variant:
  return Variant(tuple(tuple(s) for s in shapes), params)


ALL_LAYOUTS = ("contiguous", "permuted", "shrunk", "flipped", "expanded", "strided")
QUICK_WINDOWED = ("contiguous", "shrunk")
LINALG_LAYOUTS = ("contiguous", "permuted", "shrunk", "flipped", "strided")


def same(f):
  """An op spelled the same way in both libraries."""
  return f, f


# --- shape sets ---------------------------------------------------------------------------------

UNARY_SHAPES = [V((3, 4)), V((2, 3, 5)), V((1, 7)), V(()), V((0, 3)), V((6,))]
BINARY_SHAPES = [V((3, 4), (3, 4)), V((3, 4), (4,)), V((2, 1, 4), (3, 1)), V((1,), (5,)), V((), (2, 3)),
                 V((0, 3), (1, 3)), V((4, 1), (1, 0))]
REDUCE_SHAPES = [V((3, 4), axis=None), V((3, 4), axis=1), V((2, 3, 4), axis=(0, 2)), V((2, 3, 4), axis=-2, keepdim=True),
                 V((1, 5), axis=0), V((5,), axis=0, keepdim=True)]
REDUCE_EMPTY = [V((0, 3), axis=0), V((3, 0), axis=0)]  # sums over / beside an empty axis


def _axis(p):
  return p.get("axis")


def _dims(p, t):
  a = _axis(p)
  if a is None:
    return tuple(range(t.dim()))
  return a if isinstance(a, tuple) else (a,)


def _tsum(p, t):
  return t.sum(dim=_dims(p, t), keepdim=p.get("keepdim", False)) if t.dim() else t


# --- the op table -------------------------------------------------------------------------------

def _unary(name, pg, th, domain=(-2.0, 2.0), dts=FLOATS, grad=True, **kw):
  return Op(name, lambda p, x: pg(x), lambda p, x: th(x), UNARY_SHAPES, dts, domain, grad, **kw)


def _binary(name, pg, th, domain=(-2.0, 2.0), dts=FLOATS, grad=True, **kw):
  return Op(name, lambda p, a, b: pg(a, b), lambda p, a, b: th(a, b), BINARY_SHAPES, dts, domain, grad, **kw)


def _pos_gen(lo, hi):
  return lambda rng, shape, dt, p: rng.uniform(lo, hi, shape)


def _away_from_ints(rng, shape, dt, p):
  """Values not near the jumps of floor/ceil/round (so both sides agree after dtype rounding)."""
  base = rng.integers(-4, 4, shape).astype(np.float64)
  return base + rng.choice([0.2, 0.3, 0.7, 0.8], size=shape)


def _exact_quotients(rng, shape, dt, p):
  """Dividends away from integers over power-of-two divisors: every quotient is exact in each
  dtype and a rounding-mode division never sits on a jump."""
  if p["_arg"] == 1:
    return rng.choice([-4.0, -2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 4.0], size=shape)
  return _away_from_ints(rng, shape, dt, p)


def _via_double(x, f):
  """f on float64 for integer x (torch has no integer pooling), cast back: exact for small ints."""
  return f(x) if x.dtype.is_floating_point else f(x.double()).to(x.dtype)


def _distinct(rng, shape, dt, p):
  """Values in [-2, 2] without repeats in the dtype, so a max has no ties (tinygrad splits a
  tie's gradient, torch's max_pool2d gives it to one element); bfloat16 ties often otherwise."""
  n = int(np.prod(shape))
  if dt in ("float16", "bfloat16"):
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(_torch_dtype(dt)).double().numpy()
    grid = np.unique(every[np.isfinite(every) & (np.abs(every) <= 2)])
    return rng.choice(grid, size=n, replace=False).reshape(shape)
  return rng.permutation(n).reshape(shape) * (4.0 / max(1, n)) - 2.0


def _away_from(*points, lo=-2.0, hi=2.0):
  def gen(rng, shape, dt, p):
    x = rng.uniform(lo, hi, shape)
    for v in points:
      x = np.where(np.abs(x - v) < 0.02, x + 0.05, x)
    return x
  return gen


def _svd_product(usv):
  u, sv, vh = usv
  return (u * sv.unsqueeze(-2)) @ vh


def _with_zeros(rng, shape, dt, p):
  """Values in [-2, 2) with about one in four exactly zero (where prod's gradient is special)."""
  return np.where(rng.random(shape) < 0.25, 0.0, rng.uniform(-2.0, 2.0, shape))


def _tprod(p, t):
  """torch.prod over several axes (it takes one at a time)."""
  dims = sorted({d % t.dim() for d in _dims(p, t)}, reverse=True)
  for d in dims:
    t = t.prod(d, keepdim=True)
  if not p.get("keepdim", False):
    t = t.reshape([s for i, s in enumerate(t.shape) if i not in dims])
  return t


def _batchnorm_th(p, x, w, b, m, s):
  axes = [a % x.ndim for a in ((p.get("axis", 1),) if isinstance(p.get("axis", 1), int) else p["axis"])]
  shape = [n if i in axes else 1 for i, n in enumerate(x.shape)]
  invstd = s.reshape(shape) if s.ndim == len(axes) else s
  return (x - m.reshape(shape)) * w.reshape(shape) * invstd + b.reshape(shape)


def _rms_norm(x, n):
  return x * torch.rsqrt(x.square().mean(dim=tuple(range(-n, 0)), keepdim=True) + 1e-6)


def _first_key(m):
  """A mask that keeps every query's first key, so no softmax row is all -inf."""
  keep = np.zeros(tuple(m.shape), dtype=np.bool_)
  keep[..., 0] = True
  return torch.tensor(keep) if torch is not None and isinstance(m, torch.Tensor) else Tensor(keep)


def _sdpa(q, k, v, mask, causal):
  """PyTorch 2's F.scaled_dot_product_attention, written out (the reference torch may be 1.x)."""
  s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
  if mask is not None:
    s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
  if causal:
    s = s.masked_fill(~torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril(), float("-inf"))
  return s.softmax(-1) @ v


def _nonzero(b):
  """b with zeros replaced by 1, in either library."""
  return (b == 0).where(1, b) if isinstance(b, Tensor) else torch.where(b == 0, torch.ones_like(b), b)


MAX_POOL_INDEX_SHAPES = [
    V((2, 2, 7, 8), k=(3, 3), kw=dict(stride=2, padding=1)), V((1, 2, 9, 7), k=(3, 2), kw=dict(stride=1, dilation=2)),
    V((1, 1, 7, 7), k=(3, 3), kw=dict(stride=2, padding=1, dilation=2, ceil_mode=True)),
    V((2, 3, 11), k=(3,), kw=dict(stride=2, padding=1, ceil_mode=True)),
    V((1, 1, 6, 5, 5), k=(3, 3, 3), kw=dict(stride=2, padding=1, dilation=(1, 2, 1), ceil_mode=True))]


def _max_pool_th(p, x):
  """torch's max_pool1d/2d/3d(return_indices=True) over len(k) axes (float64 for integer x)."""
  f = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(p["k"])]
  v, i = f(x if x.dtype.is_floating_point else x.double(), p["k"], return_indices=True, **p["kw"])
  return v.to(x.dtype), i


SORT_SHAPES = [V((3, 5), dim=1), V((4, 3), dim=0, desc=True), V((2, 3, 4), dim=-1), V((6,), dim=0, desc=True),
               V((2, 0), dim=1), V((1, 4), dim=0)]
TOPK_SHAPES = [V((3, 5), k=2, dim=1), V((4, 6), k=3, dim=0, largest=False), V((7,), k=7, dim=0), V((3, 4), k=0, dim=1)]
CUM_SHAPES = [V((3, 5), axis=1), V((4, 3), axis=0), V((6,), axis=0), V((2, 0), axis=1), V((2, 3, 4), axis=-1)]


def _topk_th(p, x):
  return torch.topk(x, p["k"], p["dim"], largest=p.get("largest", True))


def _tbool_reduce(p, t, f):
  """torch.any/all over several axes (torch 1.x takes one at a time); True over no elements."""
  if t.dim() == 0:
    return f(t)
  dims = sorted({d % t.dim() for d in _dims(p, t)}, reverse=True)
  for d in dims:
    t = f(t, d, keepdim=True)
  if not p.get("keepdim", False):
    t = t.reshape([s for i, s in enumerate(t.shape) if i not in dims])
  return t


def _eighths(rng, shape, dt, p):
  """Multiples of 1/8 in [-2, 2]: exact in every dtype, so isclose's bounds are never a rounding apart."""
  return rng.integers(-16, 17, shape) / 8.0


def _cross_entropy_th(p, x, y):
  return F.cross_entropy(x, y.long(), label_smoothing=p.get("ls", 0.0), reduction=p.get("red", "mean"))


def _sparse_cce_th(p, x, y):
  # torch's ignore_index rows count for nothing in the mean, as tinygrad's ignore_index.
  loss = F.cross_entropy(x.reshape(-1, x.shape[-1]), y.reshape(-1).long(), label_smoothing=p.get("ls", 0.0),
                         ignore_index=p.get("ign", -100), reduction=p.get("red", "mean"))
  return loss.reshape(y.shape) if p.get("red") == "none" else loss


def _distinct_index(shape, n, dim, seed):
  """An index of `shape` whose entries along `dim` are distinct positions in [0, n): scatter's
  winner is undefined in torch where two updates land on one position."""
  r = np.random.default_rng(seed)
  moved = np.moveaxis(np.zeros(shape, dtype=np.int64), dim, -1)
  out = np.stack([r.permutation(n)[:moved.shape[-1]] for _ in range(int(np.prod(moved.shape[:-1])))])
  return np.moveaxis(out.reshape(moved.shape), -1, dim)


def _pg_or_th_index(p, like):
  return torch.tensor(p["idx"]) if isinstance(like, torch.Tensor) else Tensor(p["idx"].astype(np.int32))


SCATTER_SHAPES = [V((3, 5), (3, 4), dim=1, idx=_distinct_index((3, 4), 5, 1, 1)),
                  V((4, 3), (2, 3), dim=0, idx=_distinct_index((2, 3), 4, 0, 2)),
                  V((2, 3, 4), (2, 3, 4), dim=-1, idx=_distinct_index((2, 3, 4), 4, 2, 3)),
                  V((5,), (6,), dim=0, idx=_distinct_index((3,), 5, 0, 4)),
                  # an index smaller than x off dim updates that corner (torch)
                  V((4, 5), (3, 4), dim=1, idx=_distinct_index((2, 3), 5, 1, 5))]
# Indices drawn freely: several updates land on one position.
SCATTER_REDUCE_SHAPES = [V((3, 5), (3, 4), (3, 4), dim=1, n=5), V((4, 3), (6, 3), (6, 3), dim=0, n=4),
                         V((4, 6), (2, 5), (3, 5), dim=1, n=6),
                         V((2, 3, 4), (2, 3, 6), (2, 3, 7), dim=2, n=4), V((6,), (9,), (9,), dim=0, n=6)]


def _scatter_reduce_op(reduce, include_self, dts, grad):
  return Op(f"scatter_reduce_{reduce}" + ("" if include_self else "_exclude_self"),
            lambda p, x, i, s: x.scatter_reduce(p["dim"], i, s, reduce, include_self=include_self),
            lambda p, x, i, s: x.scatter_reduce(p["dim"], i.long(), s[tuple(slice(0, d) for d in i.shape)], reduce,
                                                include_self=include_self),
            SCATTER_REDUCE_SHAPES, dts, kinds="xix", grad=grad)


def _nll_gen(rng, shape, dt, p):
  return rng.uniform(0.5, 2.0, shape) if p["_arg"] == 2 else rng.uniform(-3.0, 0.0, shape)


def _nll_th(p, x, y, w=None):
  ignore = p.get("ignore", -100)
  # contiguous(): torch 1.13's nll_loss backward refuses a non-contiguous input ("grad_input must
  # be contiguous"); the copy changes no value or gradient.
  return F.nll_loss(x.contiguous(), y.long(), weight=w, ignore_index=ignore, reduction=p.get("red", "mean"))


NLL_SHAPES = [V((4, 5), (4,), n=5), V((4, 5), (4,), n=5, red="sum"), V((6, 3), (6,), n=3, red="none", ignore=1),
              V((2, 3, 4), (2, 4), n=3), V((2, 4, 2, 3), (2, 2, 3), n=4, red="none"), V((5,), (), n=5)]
NLL_WEIGHT_SHAPES = [V((4, 5), (4,), (5,), n=5), V((6, 3), (6,), (3,), n=3, ignore=0),
                     V((2, 3, 4), (2, 4), (3,), n=3, red="sum"), V((3, 4, 2), (3, 2), (4,), n=4, red="none")]
_TORCH_MODE = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _interp_th(p, x):
  size = p["size"]
  mode = _TORCH_MODE[len(size)] if p["mode"] == "linear" else p["mode"]
  kw = {"align_corners": p.get("ac", False)} if p["mode"] == "linear" else {}
  if not x.dtype.is_floating_point:  # torch's nearest has no integer kernels: it selects, so float64 is exact
    return F.interpolate(x.double(), size=size, mode=mode, **kw).to(x.dtype)
  return F.interpolate(x, size=size, mode=mode, **kw)


def _interp_shapes(mode):
  ac = [False, True] if mode == "linear" else [False]
  return [V(shape, size=size, mode=mode, ac=a) for a in ac
          for shape, size in [((2, 3, 5), (8,)), ((1, 2, 4, 6), (3, 9)), ((1, 1, 3, 4, 2), (5, 2, 3)),
                              ((2, 1, 7), (3,)), ((1, 1, 1, 5), (4, 1))]]


def _zeros_gen(rng, shape, dt, p):
  """Values with many zeros, for nonzero and masked_select."""
  return rng.integers(-1, 2, shape) * rng.uniform(0.5, 2.0, shape)


OPS: List[Op] = [
    # arithmetic
    _binary("add", lambda a, b: a + b, lambda a, b: a + b, dts=ALL_NUM),
    _binary("sub", lambda a, b: a - b, lambda a, b: a - b, dts=FLOATS + ("int32", "int64", "int8")),
    _binary("mul", lambda a, b: a * b, lambda a, b: a * b, dts=ALL_NUM),
    _binary("div", lambda a, b: a / b, lambda a, b: a / b, gen=_pos_gen(0.5, 2.0)),
    _binary("div_trunc", lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="trunc"),
            dts=F32_ONLY, gen=_exact_quotients, grad=False),
    _binary("div_floor", lambda a, b: a.div(b, rounding_mode="floor"), lambda a, b: torch.div(a, b, rounding_mode="floor"),
            dts=F32_ONLY, gen=_exact_quotients, grad=False),
    _binary("maximum", lambda a, b: a.maximum(b), torch.maximum if torch else None, dts=ALL_NUM),
    _binary("minimum", lambda a, b: a.minimum(b), torch.minimum if torch else None, dts=ALL_NUM),
    _binary("pow", lambda a, b: a ** b, lambda a, b: a ** b, gen=_pos_gen(0.5, 2.0)),
    _unary("neg", lambda x: -x, lambda x: -x, dts=FLOATS + ("int8", "int32", "int64")),
    _unary("pow_int_scalar", lambda x: x ** 3, lambda x: x ** 3, dts=FLOATS + ("int32",)),
    _unary("pow_neg_scalar", lambda x: x ** -2, lambda x: x ** -2, gen=_pos_gen(0.5, 2.0)),
    _unary("pow_frac_scalar", lambda x: x ** 0.5, lambda x: x ** 0.5, gen=_pos_gen(0.2, 3.0)),
    _unary("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x),
    _unary("scalar_chain", lambda x: (x * 3 - 1) / 2 + 0.5, lambda x: (x * 3 - 1) / 2 + 0.5),
    # comparisons and logic (bool results; no gradient)
    _binary("lt", lambda a, b: a < b, lambda a, b: a < b, dts=ALL_NUM, grad=False),
    _binary("gt", lambda a, b: a > b, lambda a, b: a > b, dts=ALL_NUM, grad=False),
    _binary("le", lambda a, b: a <= b, lambda a, b: a <= b, dts=ALL_NUM, grad=False),
    _binary("ge", lambda a, b: a >= b, lambda a, b: a >= b, dts=ALL_NUM, grad=False),
    _binary("eq", lambda a, b: a == b, lambda a, b: a == b, dts=INTS + ("float32",), grad=False),
    _binary("ne", lambda a, b: a != b, lambda a, b: a != b, dts=INTS + ("float32",), grad=False),
    _binary("logical_and", lambda a, b: a & b, lambda a, b: a & b, dts=("bool",), grad=False),
    _binary("logical_or", lambda a, b: a | b, lambda a, b: a | b, dts=("bool",), grad=False),
    _unary("logical_not", lambda x: x.logical_not(), lambda x: x.logical_not(), dts=("bool",) + FLOATS, grad=False),
    # integer division (torch raises on a zero divisor, polygrad gives 0: divisors here are nonzero) and bits
    _binary("floor_divide", lambda a, b: a // _nonzero(b), lambda a, b: torch.div(a, _nonzero(b), rounding_mode="floor"),
            dts=INTS, grad=False),
    _binary("remainder", lambda a, b: a % _nonzero(b), lambda a, b: torch.remainder(a, _nonzero(b)), dts=INTS,
            grad=False),
    _binary("fmod", lambda a, b: a.fmod(_nonzero(b)), lambda a, b: torch.fmod(a, _nonzero(b)), dts=INTS, grad=False),
    _binary("idiv", lambda a, b: a.idiv(_nonzero(b)), lambda a, b: torch.div(a, _nonzero(b), rounding_mode="trunc"),
            dts=INTS, grad=False),
    _binary("floor_divide_float", lambda a, b: a // b, lambda a, b: torch.div(a, b, rounding_mode="floor"),
            dts=("float32", "float64"), gen=_pos_gen(0.5, 2.0), grad=False),
    _binary("remainder_float", lambda a, b: a % b, lambda a, b: torch.remainder(a, b), dts=("float32", "float64"),
            gen=_pos_gen(0.5, 2.0), grad=False),
    _binary("bitwise_and", lambda a, b: a & b, lambda a, b: a & b, dts=INTS, grad=False),
    _binary("bitwise_or", lambda a, b: a | b, lambda a, b: a | b, dts=INTS, grad=False),
    _binary("bitwise_xor", lambda a, b: a ^ b, lambda a, b: a ^ b, dts=INTS + ("bool",), grad=False),
    _unary("bitwise_not", lambda x: ~x, lambda x: ~x, dts=INTS + ("bool",), grad=False),
    _unary("shifts", lambda x: (x << 3) ^ (x >> 1), lambda x: (x << 3) ^ (x >> 1), dts=INTS, grad=False),
    # shift amounts from a tensor, broadcast like any binary op
    _binary("shifts_by_tensor", lambda a, b: (a << b) ^ (a >> b), lambda a, b: (a << b) ^ (a >> b), dts=INTS,
            grad=False, int_gen=lambda rng, s, dt, p: rng.integers(0, 4, s) if p["_arg"] else rng.integers(-60, 60, s)),
    # The sign bit's shift: 2**(bits-1) does not fit a signed dtype, so it is not one floor division.
    _unary("rshift_sign_bit", lambda x: x >> (8 * x.dtype.itemsize - 1), lambda x: x >> (8 * x.element_size() - 1),
           dts=INTS, grad=False),
    Op("where", lambda p, c, a, b: c.where(a, b), lambda p, c, a, b: torch.where(c, a, b),
       [V((3, 4), (3, 4), (3, 4)), V((3, 1), (1, 4), (4,)), V((), (2, 3), ()), V((0, 2), (2,), (1, 2))],
       ALL_NUM, kinds="bxx"),
    Op("where_scalar", lambda p, c, a: c.where(a, 0.5), lambda p, c, a: torch.where(c, a, 0.5),
       [V((3, 4), (3, 4)), V((2, 1), (1, 5))], FLOATS, kinds="bx"),
    # elementwise math
    _unary("exp", lambda x: x.exp(), torch.exp if torch else None),
    _unary("exp2", lambda x: x.exp2(), torch.exp2 if torch else None),
    _unary("log", lambda x: x.log(), torch.log if torch else None, gen=_pos_gen(0.1, 4.0)),
    _unary("log2", lambda x: x.log2(), torch.log2 if torch else None, gen=_pos_gen(0.1, 4.0)),
    _unary("sqrt", lambda x: x.sqrt(), torch.sqrt if torch else None, gen=_pos_gen(0.1, 4.0)),
    _unary("rsqrt", lambda x: x.rsqrt(), torch.rsqrt if torch else None, gen=_pos_gen(0.2, 4.0)),
    _unary("reciprocal", lambda x: x.reciprocal(), torch.reciprocal if torch else None, gen=_pos_gen(0.3, 3.0)),
    _unary("sin", lambda x: x.sin(), torch.sin if torch else None, domain=(-6.0, 6.0)),
    _unary("cos", lambda x: x.cos(), torch.cos if torch else None, domain=(-6.0, 6.0)),
    _unary("tan", lambda x: x.tan(), torch.tan if torch else None, domain=(-1.2, 1.2), tol_scale=2.0),
    _unary("abs", lambda x: x.abs(), torch.abs if torch else None, dts=FLOATS + ("int8", "int32", "int64")),
    _unary("sign", lambda x: x.sign(), torch.sign if torch else None, dts=FLOATS + ("int32",)),
    _unary("square", lambda x: x.square(), torch.square if torch else None, dts=ALL_NUM),
    # eighths: many inputs sit exactly on a bound, where torch's clamp passes the whole gradient
    _unary("clip", lambda x: x.clip(-0.5, 0.75), lambda x: x.clamp(-0.5, 0.75), gen=_eighths),
    _unary("clip_min", lambda x: x.clip(-0.5), lambda x: x.clamp(min=-0.5), gen=_eighths),
    _unary("clip_max", lambda x: x.clip(None, 0.75), lambda x: x.clamp(max=0.75), gen=_eighths),
    _unary("clip_ints", lambda x: x.clip(-1, 1), lambda x: x.clamp(-1, 1), dts=INTS, grad=False),
    _binary("clip_tensor_bounds", lambda a, b: a.clip(b - 0.25, b + 0.5), lambda a, b: a.clamp(b - 0.25, b + 0.5),
            gen=_eighths),
    _unary("trunc", lambda x: x.trunc(), torch.trunc if torch else None, gen=_away_from_ints),
    _unary("floor", lambda x: x.floor(), torch.floor if torch else None, gen=_away_from_ints),
    _unary("ceil", lambda x: x.ceil(), torch.ceil if torch else None, gen=_away_from_ints),
    _unary("round", lambda x: x.round(), torch.round if torch else None, gen=_away_from_ints),
    _unary("isnan", lambda x: (x.log()).isnan(), lambda x: x.log().isnan(), grad=False),
    _unary("isinf", lambda x: (1 / x.trunc()).isinf(), lambda x: (1 / x.trunc()).isinf(), grad=False),
    _unary("cast_int32", lambda x: x.cast(dtypes.int32), lambda x: x.to(torch.int32), grad=False,
           gen=_away_from_ints),
    _unary("cast_float32", lambda x: x.float(), lambda x: x.float(), dts=FLOATS + INTS, out="float32"),
    _unary("cast_long", lambda x: x.long(), lambda x: x.long(), grad=False, gen=_away_from_ints),
    _unary("cast_short", lambda x: x.short(), lambda x: x.short(), dts=("float32", "int32", "int8"), grad=False,
           gen=_away_from_ints),
    # torch has no numpy bfloat16: its result is compared widened (exactly) to float32
    _unary("cast_bfloat16", lambda x: x.bfloat16(), lambda x: x.bfloat16().float(), dts=("float32", "float16"),
           out="bfloat16"),
    _unary("mod", lambda x: x.mod(0.75), lambda x: torch.remainder(x, 0.75), dts=F32_ONLY, grad=False,
           gen=_eighths),
    _unary("cast_bool", lambda x: x.bool(), lambda x: x.bool(), dts=("float32",) + INTS, grad=False,
           gen=lambda rng, s, dt, p: rng.integers(-1, 2, s).astype(np.float64)),
    # activations
    _unary("relu", lambda x: x.relu(), torch.relu if torch else None, dts=FLOATS + ("int32",)),
    _unary("relu6", lambda x: x.relu6(), F.relu6 if torch else None, domain=(-3.0, 9.0)),
    _unary("leaky_relu", lambda x: x.leaky_relu(0.1), lambda x: F.leaky_relu(x, 0.1)),
    _unary("leaky_relu_default", lambda x: x.leaky_relu(), F.leaky_relu if torch else None),
    _unary("sigmoid", lambda x: x.sigmoid(), torch.sigmoid if torch else None, domain=(-6.0, 6.0)),
    _unary("tanh", lambda x: x.tanh(), torch.tanh if torch else None, domain=(-4.0, 4.0)),
    _unary("silu", lambda x: x.silu(), F.silu if torch else None, domain=(-5.0, 5.0)),
    _unary("gelu", lambda x: x.gelu(), (lambda x: F.gelu(x, approximate="tanh")) if torch else None,
           domain=(-5.0, 5.0)),
    _unary("gelu_none", lambda x: x.gelu(approximate="none"), F.gelu if torch else None, domain=(-5.0, 5.0)),
    _unary("contiguous_backward", lambda x: (x * 2).contiguous_backward(), lambda x: x * 2),
    _unary("quick_gelu", lambda x: x.quick_gelu(), lambda x: x * torch.sigmoid(1.702 * x)),
    _unary("elu", lambda x: x.elu(), F.elu if torch else None),
    _unary("elu_alpha", lambda x: x.elu(0.5), lambda x: F.elu(x, 0.5), domain=(-4.0, 2.0)),
    _unary("softplus", lambda x: x.softplus(), F.softplus if torch else None),
    # beyond the threshold softplus is x itself (the exp would overflow float32 from about 88)
    _unary("softplus_wide", lambda x: x.softplus(), F.softplus if torch else None, domain=(-120.0, 120.0)),
    _unary("softplus_beta", lambda x: x.softplus(2.0, 5.0), lambda x: F.softplus(x, 2.0, 5.0),
           domain=(-6.0, 6.0)),
    _unary("mish", lambda x: x.mish(), F.mish if torch else None),
    # at the bounds too (bfloat16 inputs land on them): the daemon's HARDTANH passes no gradient
    # there, as torch's hardtanh (torch.clamp passes all of it)
    _unary("hardtanh", lambda x: x.hardtanh(), F.hardtanh if torch else None),
    _unary("hardtanh_bounds", lambda x: x.hardtanh(-0.5, 0.75), lambda x: F.hardtanh(x, -0.5, 0.75), gen=_eighths),
    # torch's own hardsigmoid backward multiplies by a float32 1/6: the formula is the reference.
    # Not at the kinks: the gradient at x = -3 and 3 is a convention (torch's hardsigmoid passes
    # none at either, the clamp formula all at both, tinygrad's relu(a) - relu(a - 1), ours, all
    # at 3 only), and bfloat16 inputs from (-4, 4) land on -3.0 exactly.
    _unary("hardsigmoid", lambda x: x.hardsigmoid(), lambda x: (x / 6 + 0.5).clamp(0, 1), domain=(-4.0, 4.0),
           gen=_away_from(-3.0, 3.0, lo=-4.0, hi=4.0)),
    _unary("hardsigmoid_params", lambda x: x.hardsigmoid(0.25, 0.375), lambda x: (0.25 * x + 0.375).clamp(0, 1),
           gen=_away_from(-1.5, 2.5, lo=-3.0, hi=4.0)),
    _unary("hardswish", lambda x: x.hardswish(), F.hardswish if torch else None, domain=(-4.0, 4.0)),
    _unary("logsigmoid", lambda x: x.logsigmoid(), F.logsigmoid if torch else None, domain=(-5.0, 5.0)),
    # the daemon's elementwise math (core/frontend/math.h); edge values are in test_edge_values
    _unary("erf", lambda x: x.erf(), torch.erf if torch else None, domain=(-4.0, 4.0)),
    _unary("atan", lambda x: x.atan(), torch.atan if torch else None, domain=(-6.0, 6.0)),
    _unary("asin", lambda x: x.asin(), torch.asin if torch else None, domain=(-0.95, 0.95)),
    _unary("acos", lambda x: x.acos(), torch.acos if torch else None, domain=(-0.95, 0.95)),
    _unary("sinh", lambda x: x.sinh(), torch.sinh if torch else None, domain=(-5.0, 5.0)),
    _unary("cosh", lambda x: x.cosh(), torch.cosh if torch else None, domain=(-5.0, 5.0)),
    _unary("asinh", lambda x: x.asinh(), torch.asinh if torch else None, domain=(-6.0, 6.0)),
    _unary("acosh", lambda x: x.acosh(), torch.acosh if torch else None, gen=_pos_gen(1.05, 6.0)),
    _unary("atanh", lambda x: x.atanh(), torch.atanh if torch else None, domain=(-0.95, 0.95)),
    _unary("log10", lambda x: x.log10(), torch.log10 if torch else None, gen=_pos_gen(0.1, 4.0)),
    _unary("log1p", lambda x: x.log1p(), torch.log1p if torch else None, gen=_pos_gen(-0.9, 4.0)),
    _unary("expm1", lambda x: x.expm1(), torch.expm1 if torch else None, domain=(-3.0, 3.0)),
    _unary("softsign", lambda x: x.softsign(), F.softsign if torch else None),
    # F.celu's own float64 gradient is off by up to 6e-8 (relative) for this alpha: the formula is the reference
    _unary("celu", lambda x: x.celu(0.7), lambda x: torch.where(x > 0, x, 0.7 * torch.expm1(x / 0.7)),
           domain=(-3.0, 3.0)),
    _unary("selu", lambda x: x.selu(), F.selu if torch else None, domain=(-3.0, 3.0)),
    _binary("logaddexp", lambda a, b: a.logaddexp(b), torch.logaddexp if torch else None, domain=(-4.0, 4.0)),
    _binary("copysign", lambda a, b: a.copysign(b), torch.copysign if torch else None),
    Op("lerp", lambda p, a, b, w: a.lerp(b, w), lambda p, a, b, w: torch.lerp(a, b, w),
       [V((3, 4), (3, 4), (3, 4)), V((3, 1), (1, 4), (4,)), V((2, 3), (2, 3), ()), V((0, 2), (2,), (1, 2))],
       domain=(-1.5, 1.5)),
    Op("lerp_scalar", lambda p, a, b: a.lerp(b, p["w"]), lambda p, a, b: torch.lerp(a, b, p["w"]),
       [V((3, 4), (3, 4), w=0.25), V((2, 1), (1, 5), w=0.75), V((4,), (4,), w=1.0)]),
    _unary("isfinite", lambda x: (1 / x.trunc()).log().isfinite(), lambda x: (1 / x.trunc()).log().isfinite(),
           grad=False),
    _unary("isfinite_int", lambda x: x.isfinite(), torch.isfinite if torch else None, dts=INTS + ("bool",), grad=False),
    Op("isclose", lambda p, a, b: a.isclose(b, rtol=0.25, atol=0.1), lambda p, a, b: torch.isclose(a, b, 0.25, 0.1),
       BINARY_SHAPES, FLOATS + ("int32", "int64"), grad=False, gen=_eighths),
    Op("isclose_default", lambda p, a, b: a.isclose(b), lambda p, a, b: torch.isclose(a, b), BINARY_SHAPES[:3],
       FLOATS, grad=False, gen=_eighths),
    # reductions
    Op("sum", lambda p, x: x.sum(_axis(p), keepdim=p.get("keepdim", False)), _tsum, REDUCE_SHAPES + REDUCE_EMPTY,
       FLOATS + ("int32", "int64")),
    Op("max", lambda p, x: x.max(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: torch.amax(x, dim=_dims(p, x), keepdim=p.get("keepdim", False)), REDUCE_SHAPES, ALL_NUM),
    Op("min", lambda p, x: x.min(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: torch.amin(x, dim=_dims(p, x), keepdim=p.get("keepdim", False)), REDUCE_SHAPES, ALL_NUM),
    Op("prod", lambda p, x: x.prod(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: _tprod(p, x), REDUCE_SHAPES + REDUCE_EMPTY, FLOATS + ("int32", "int64", "int8"), gen=_with_zeros),
    # sum and prod into another dtype (torch's dtype=): integer results that would wrap in the input's
    Op("sum_dtype", lambda p, x: x.sum(_axis(p), dtype=p["dt"]),
       lambda p, x: x.sum(dim=_dims(p, x), dtype=_torch_dtype(p["dt"])),
       [V((3, 4), axis=1, dt="int64"), V((2, 3, 4), axis=(0, 2), dt="int32"), V((5,), axis=0, dt="float64")],
       ("int8", "uint8", "int16", "int32"), grad=False, int_gen=lambda rng, s, dt, p: rng.integers(60, 120, s)),
    Op("sum_dtype_float", lambda p, x: x.sum(_axis(p), dtype="float64"),
       lambda p, x: x.sum(dim=_dims(p, x), dtype=torch.float64), [V((3, 4), axis=1), V((2, 3, 4), axis=None)],
       ("float16", "bfloat16", "float32"), out="float64"),
    Op("prod_dtype", lambda p, x: x.prod(_axis(p), dtype=p["dt"]),
       lambda p, x: _tprod(p, x.to(_torch_dtype(p["dt"]))), [V((3, 4), axis=1, dt="int64"), V((5,), axis=0, dt="int32")],
       ("int8", "uint8", "int16"), grad=False, int_gen=lambda rng, s, dt, p: rng.integers(1, 5, s)),
    Op("mean", lambda p, x: x.mean(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: x.mean(dim=_dims(p, x), keepdim=p.get("keepdim", False)), REDUCE_SHAPES),
    Op("var", lambda p, x: x.var(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: x.var(dim=_dims(p, x), keepdim=p.get("keepdim", False)), REDUCE_SHAPES[:4], tol_scale=2.0),
    Op("std", lambda p, x: x.std(_axis(p), correction=0),
       lambda p, x: x.std(dim=_dims(p, x), correction=0), REDUCE_SHAPES[:4], tol_scale=2.0),
    # numpy's axis=(): each element is its own sample, 0 (nan with the default correction of 1)
    Op("var_no_axes", lambda p, x: x.var((), correction=p["c"]), lambda p, x: (x - x) / max(0, 1 - p["c"]),
       [V((3, 4), c=0), V((2, 3), c=1), V((), c=0)]),
    Op("std_no_axes", lambda p, x: x.std((), correction=p["c"]), lambda p, x: ((x - x) / max(0, 1 - p["c"])).sqrt(),
       [V((3, 4), c=0), V((5,), c=1)], grad=False),
    Op("std_mean", lambda p, x: list(x.std_mean(_axis(p), keepdim=p.get("keepdim", False))),
       lambda p, x: list(torch.std_mean(x, dim=_dims(p, x), keepdim=p.get("keepdim", False))), REDUCE_SHAPES[:4],
       tol_scale=2.0),
    Op("var_mean", lambda p, x: list(x.var_mean(_axis(p), keepdim=p.get("keepdim", False), correction=0)),
       lambda p, x: list(torch.var_mean(x, dim=_dims(p, x), keepdim=p.get("keepdim", False), unbiased=False)),
       REDUCE_SHAPES[:4], tol_scale=2.0),
    Op("any", lambda p, x: x.any(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: _tbool_reduce(p, x, torch.any), REDUCE_SHAPES + REDUCE_EMPTY, BOOL_REDUCE_DTYPES,
       grad=False, gen=_with_zeros),
    Op("all", lambda p, x: x.all(_axis(p), keepdim=p.get("keepdim", False)),
       lambda p, x: _tbool_reduce(p, x, torch.all), REDUCE_SHAPES + REDUCE_EMPTY, BOOL_REDUCE_DTYPES,
       grad=False, gen=lambda rng, s, dt, p: np.where(rng.random(s) < 0.05, 0.0, rng.uniform(-2.0, 2.0, s))),
    Op("softmax", lambda p, x: x.softmax(p["axis"]), lambda p, x: torch.softmax(x, p["axis"]),
       [V((3, 5), axis=-1), V((2, 3, 4), axis=1), V((1, 6), axis=0), V((0, 4), axis=1)], domain=(-4.0, 4.0)),
    Op("log_softmax", lambda p, x: x.log_softmax(p["axis"]), lambda p, x: torch.log_softmax(x, p["axis"]),
       [V((3, 5), axis=-1), V((2, 3, 4), axis=1), V((1, 6), axis=0)], domain=(-4.0, 4.0)),
    # softmin and normalize are schema ops added with no client code (issue 33): generated methods.
    Op("softmin", lambda p, x: x.softmin(p["axis"]), lambda p, x: F.softmin(x, p["axis"]),
       [V((3, 5), axis=-1), V((2, 3, 4), axis=1), V((1, 6), axis=0), V((), axis=-1)], domain=(-4.0, 4.0)),
    Op("normalize", lambda p, x: x.normalize(p["p"], p["dim"]), lambda p, x: F.normalize(x, p["p"], p["dim"]),
       [V((3, 5), p=2.0, dim=1), V((2, 3, 4), p=1.0, dim=0), V((4, 3), p=3.0, dim=-1)], domain=(0.5, 2.0), tol_scale=2.0),
    # einsum is the daemon's EINSUM (issue 33): products, a trace, "..." and an implicit output.
    Op("einsum", lambda p, *xs: Tensor.einsum(p["eq"], *xs), lambda p, *xs: torch.einsum(p["eq"], *xs),
       [V((3, 4), (4, 5), eq="ij,jk->ik"), V((2, 3, 4), (2, 4, 5), eq="bij,bjk->bik"), V((4, 4), eq="ii->"),
        V((2, 1, 3), (4, 3), eq="...j,kj->...k"), V((3, 4), (3, 4), eq="ij,ij")], tol_scale=2.0),
    Op("logsumexp", lambda p, x: x.logsumexp(p["axis"], keepdim=p.get("keepdim", False)),
       lambda p, x: torch.logsumexp(x, _dims(p, x), keepdim=p.get("keepdim", False)),
       [V((3, 5), axis=1), V((2, 3, 4), axis=(0, 2)), V((4, 2), axis=0, keepdim=True)], domain=(-4.0, 4.0)),
    Op("cumsum", lambda p, x: x.cumsum(p["axis"]), lambda p, x: torch.cumsum(x, p["axis"]),
       [V((3, 5), axis=1), V((4, 3), axis=0), V((6,), axis=0), V((2, 0), axis=1)], FLOATS + ("int32",)),
    Op("argmax", lambda p, x: x.argmax(p["axis"], keepdim=p.get("keepdim", False)),
       lambda p, x: torch.argmax(x, p["axis"], keepdim=p.get("keepdim", False)),
       [V((3, 5), axis=1), V((4, 3), axis=0, keepdim=True), V((2, 3, 4), axis=2)], FLOATS + ("int32",),
       grad=False),
    Op("argmin", lambda p, x: x.argmin(p["axis"]), lambda p, x: torch.argmin(x, p["axis"]),
       [V((3, 5), axis=1), V((4, 3), axis=0)], FLOATS + ("int32",), grad=False),
    # sorting and running extremes (issue 17); torch's stable sort, since ties keep their order here
    Op("sort", lambda p, x: x.sort(p["dim"], descending=p.get("desc", False)).values,
       lambda p, x: torch.sort(x, dim=p["dim"], descending=p.get("desc", False), stable=True).values,
       SORT_SHAPES, ALL_NUM),
    Op("argsort", lambda p, x: x.argsort(p["dim"], descending=p.get("desc", False)),
       lambda p, x: torch.sort(x, dim=p["dim"], descending=p.get("desc", False), stable=True).indices,
       SORT_SHAPES, ALL_NUM, grad=False),
    # rows past kSortNetworkFrom (2048) sort through the bitonic network: values, positions, gradient
    Op("sort_long", lambda p, x: x.sort(p["dim"], descending=p.get("desc", False)).values,
       lambda p, x: torch.sort(x, dim=p["dim"], descending=p.get("desc", False), stable=True).values,
       [V((2, 2500), dim=1), V((2100,), dim=0, desc=True)], ("float32", "int32", "uint8", "float64", "int64"),
       layouts=("contiguous",)),
    Op("argsort_long", lambda p, x: x.argsort(p["dim"], descending=p.get("desc", False)),
       lambda p, x: torch.sort(x, dim=p["dim"], descending=p.get("desc", False), stable=True).indices,
       [V((2, 2500), dim=1), V((2100,), dim=0, desc=True)], ("float32", "int32", "uint8", "float64", "int64"), grad=False,
       layouts=("contiguous",)),
    Op("topk", lambda p, x: x.topk(p["k"], p["dim"], largest=p.get("largest", True)).values,
       lambda p, x: _topk_th(p, x).values, TOPK_SHAPES, ALL_NUM, gen=_distinct),
    # torch orders tied elements of topk any way: distinct values, and no layout that repeats one
    Op("topk_indices", lambda p, x: x.topk(p["k"], p["dim"], largest=p.get("largest", True)).indices,
       lambda p, x: _topk_th(p, x).indices, TOPK_SHAPES, FLOATS, grad=False, gen=_distinct,
       layouts=("contiguous", "permuted", "shrunk", "flipped", "strided")),
    Op("cummax", lambda p, x: x.cummax(p["axis"]).values, lambda p, x: torch.cummax(x, p["axis"]).values,
       CUM_SHAPES, ALL_NUM),
    Op("cummax_indices", lambda p, x: x.cummax(p["axis"]).indices, lambda p, x: torch.cummax(x, p["axis"]).indices,
       CUM_SHAPES, ALL_NUM, grad=False),
    Op("cummin", lambda p, x: x.cummin(p["axis"]).values, lambda p, x: torch.cummin(x, p["axis"]).values,
       CUM_SHAPES, ALL_NUM),
    Op("cummin_indices", lambda p, x: x.cummin(p["axis"]).indices, lambda p, x: torch.cummin(x, p["axis"]).indices,
       CUM_SHAPES, ALL_NUM, grad=False),
    Op("cumprod", lambda p, x: x.cumprod(p["axis"]), lambda p, x: torch.cumprod(x, p["axis"]),
       CUM_SHAPES, FLOATS + ("int32", "int64")),
    Op("logcumsumexp", lambda p, x: x.logcumsumexp(p["axis"]), lambda p, x: torch.logcumsumexp(x, p["axis"]),
       CUM_SHAPES, FLOATS, domain=(-4.0, 4.0)),
    # movement
    Op("reshape", lambda p, x: x.reshape(p["to"]), lambda p, x: x.reshape(p["to"]),
       [V((3, 4), to=(2, 6)), V((2, 3, 4), to=(4, -1)), V((6,), to=(1, 6, 1)), V((0, 4), to=(2, 0))], ALL_NUM),
    Op("permute", lambda p, x: x.permute(p["o"]), lambda p, x: x.permute(p["o"]),
       [V((2, 3, 4), o=(2, 0, 1)), V((3, 4), o=(1, 0)), V((1, 0, 2), o=(2, 1, 0))], ALL_NUM),
    Op("transpose", lambda p, x: x.transpose(0, -1), lambda p, x: x.transpose(0, -1), [V((2, 3, 4)), V((5, 1))]),
    Op("expand", lambda p, x: x.expand(p["to"]), lambda p, x: x.expand(p["to"]),
       [V((3, 1), to=(3, 4)), V((1,), to=(2, 5)), V((2, 1, 1), to=(2, 3, 4))], ALL_NUM),
    Op("pad", lambda p, x: x.pad(p["pad"], value=p.get("value", 0)), lambda p, x: F.pad(x, p["pad"], value=p.get("value", 0)),
       [V((3, 4), pad=(1, 2)), V((2, 3, 4), pad=(0, 1, 2, 0)), V((3, 4), pad=(1, 1, 1, 1), value=1.5),
        V((3, 4), pad=(-1, 1))]),
    # linear algebra built from the daemon's ops: Householder QR with LAPACK's signs (Q and R equal
    # torch's), and one-sided Jacobi SVD, whose singular vectors are unique up to sign only. Not
    # over expanded layouts: repeated rows make the matrix singular, where neither is differentiable.
    Op("qr", lambda p, x: list(x.qr()), lambda p, x: list(torch.linalg.qr(x)), [V((4, 3)), V((3, 3)), V((2, 4, 3))],
       ("float32", "float64"), tol_scale=4.0, layouts=LINALG_LAYOUTS),
    Op("qr_wide", lambda p, x: list(x.qr()), lambda p, x: list(torch.linalg.qr(x)), [V((3, 5)), V((2, 2, 4))],
       ("float32", "float64"), grad=False, tol_scale=4.0, layouts=LINALG_LAYOUTS),
    Op("svd_values", lambda p, x: x.svd(full_matrices=False)[1], lambda p, x: torch.linalg.svdvals(x),
       [V((4, 3)), V((3, 3)), V((2, 3, 4))], ("float32", "float64"), tol_scale=4.0, layouts=LINALG_LAYOUTS),
    Op("svd_reconstructs", lambda p, x: _svd_product(x.svd(full_matrices=False)), lambda p, x: x * 1,
       [V((4, 3)), V((2, 3, 4))], ("float32", "float64"), tol_scale=4.0, layouts=LINALG_LAYOUTS),
    # torch's reflect/replicate/circular pads (torch pads the last 1-3 axes of a 2-4-d input in
    # these modes; 3-d inputs here, the last axis or the last two)
    Op("pad_reflect", lambda p, x: x.pad(p["pad"], mode="reflect"), lambda p, x: F.pad(x, p["pad"], mode="reflect"),
       [V((2, 3, 5), pad=(2, 1)), V((1, 4, 4), pad=(1, 2, 3, 0)), V((2, 2, 3), pad=(0, 2))]),
    Op("pad_replicate", lambda p, x: x.pad(p["pad"], mode="replicate"), lambda p, x: F.pad(x, p["pad"], mode="replicate"),
       [V((2, 3, 5), pad=(2, 1)), V((1, 4, 4), pad=(1, 2, 3, 0)), V((2, 1, 3), pad=(0, 0, 2, 2))]),
    Op("pad_circular", lambda p, x: x.pad(p["pad"], mode="circular"), lambda p, x: F.pad(x, p["pad"], mode="circular"),
       [V((2, 3, 5), pad=(2, 1)), V((1, 2, 4, 4), pad=(1, 2, 3, 0)), V((2, 2, 3), pad=(3, 3))]),
    Op("slice", lambda p, x: x[p["idx"]], lambda p, x: x[p["idx"]],
       [V((5, 6), idx=(slice(1, 4), slice(None, None, 2))), V((4, 5), idx=(2,)), V((3, 4, 5), idx=(Ellipsis, 1)),
        V((3, 4), idx=(None, slice(1, 2), -1))], ALL_NUM),
    # torch has no negative slice steps: x[::-2] is its x.flip(0)[::2]
    Op("slice_negative_step", lambda p, x: x[::-2, 1:], lambda p, x: x.flip(0)[::2, 1:], [V((6, 3)), V((5, 2))], ALL_NUM),
    Op("flip", lambda p, x: x.flip(p["axes"]), lambda p, x: x.flip(p["axes"]),
       [V((3, 4), axes=(0,)), V((2, 3, 4), axes=(0, 2))], ALL_NUM),
    Op("squeeze_unsqueeze", lambda p, x: x.squeeze(1).unsqueeze(0), lambda p, x: x.squeeze(1).unsqueeze(0),
       [V((3, 1, 4)), V((2, 1))]),
    Op("flatten", lambda p, x: x.flatten(1), lambda p, x: x.flatten(1), [V((2, 3, 4)), V((2, 0, 3))]),
    Op("repeat", lambda p, x: x.repeat(p["r"]), lambda p, x: x.repeat(p["r"]),
       [V((2, 3), r=(2, 1)), V((3,), r=(2, 2)), V((2, 2), r=(1, 3))], FLOATS + ("int32",)),
    Op("cat", lambda p, a, b: a.cat(b, dim=p["dim"]), lambda p, a, b: torch.cat([a, b], p["dim"]),
       [V((2, 3), (4, 3), dim=0), V((2, 3), (2, 1), dim=1), V((0, 3), (2, 3), dim=0)], FLOATS + ("int32",)),
    Op("stack", lambda p, a, b: Tensor.stack(a, b, dim=p["dim"]), lambda p, a, b: torch.stack([a, b], p["dim"]),
       [V((2, 3), (2, 3), dim=0), V((4,), (4,), dim=1)]),
    Op("split", lambda p, x: x.split(p["s"], p["dim"]), lambda p, x: list(x.split(p["s"], p["dim"])),
       [V((5, 3), s=2, dim=0), V((2, 6), s=[1, 2, 3], dim=1)]),
    Op("chunk", lambda p, x: x.chunk(3, 1), lambda p, x: list(x.chunk(3, 1)), [V((2, 7)), V((2, 6))]),
    Op("tril", lambda p, x: x.tril(p["k"]), lambda p, x: x.tril(p["k"]),
       [V((4, 5), k=0), V((2, 3, 3), k=1), V((4, 3), k=-1)], FLOATS + ("int32", "bool")),
    Op("triu", lambda p, x: x.triu(p["k"]), lambda p, x: x.triu(p["k"]),
       [V((4, 5), k=0), V((2, 3, 3), k=-1), V((4, 3), k=2)], FLOATS + ("int32",)),
    Op("roll", lambda p, x: x.roll(p["s"], p.get("d")), lambda p, x: torch.roll(x, p["s"], p.get("d")),
       [V((3, 4), s=1, d=0), V((3, 4), s=(2, -1), d=(0, 1)), V((5,), s=7, d=0), V((2, 3), s=-4),
        V((2, 0), s=3, d=1)], FLOATS + ("int32",)),
    Op("diagonal", lambda p, x: x.diagonal(**p), lambda p, x: torch.diagonal(x, **p),
       [V((3, 4)), V((4, 3), offset=1), V((3, 4), offset=-2), V((2, 3, 4), offset=1, dim1=2, dim2=0),
        V((3, 3), offset=5)], FLOATS + ("int32",)),
    Op("diag", lambda p, x: x.diag(p.get("k", 0)), lambda p, x: torch.diag(x, p.get("k", 0)),
       [V((4,)), V((3,), k=2), V((3,), k=-1), V((3, 4), k=1), V((4, 3), k=-1)], FLOATS + ("int32",)),
    Op("meshgrid", lambda p, a, b: list(a.meshgrid(b, indexing=p["i"])),
       lambda p, a, b: list(torch.meshgrid(a, b, indexing=p["i"])),
       [V((3,), (4,), i="ij"), V((2,), (5,), i="xy"), V((1,), (3,), i="ij")], FLOATS + ("int32",)),
    Op("repeat_interleave", lambda p, x: x.repeat_interleave(p["r"], p.get("d")),
       lambda p, x: x.repeat_interleave(p["r"], p.get("d")),
       [V((2, 3), r=2, d=1), V((2, 3), r=3, d=0), V((4,), r=2), V((2, 3), r=2), V((2, 0), r=2, d=0)],
       FLOATS + ("int32",)),
    Op("masked_fill", lambda p, x, m: x.masked_fill(m, 3), lambda p, x, m: x.masked_fill(m, 3),
       [V((3, 4), (3, 4)), V((2, 3), (3,)), V((2, 3, 4), (3, 1)), V((), ())], FLOATS + ("int32",), kinds="xb"),
    # linear algebra
    Op("matmul", lambda p, a, b: a @ b, lambda p, a, b: a @ b,
       [V((3, 4), (4, 5)), V((4,), (4, 3)), V((3, 4), (4,)), V((2, 3, 4), (4, 2)), V((2, 1, 3, 4), (3, 4, 2)),
        V((3, 0), (0, 2)), V((1, 5), (5, 1))], FLOATS + ("int32",), tol_scale=2.0),
    Op("linear", lambda p, x, w, b: x.linear(w, b), lambda p, x, w, b: x @ w + b,
       [V((3, 4), (4, 5), (5,)), V((2, 3, 4), (4, 2), (2,))], tol_scale=2.0),
    Op("linear_no_bias", lambda p, x, w: x.linear(w), lambda p, x, w: x @ w,
       [V((3, 4), (4, 5)), V((2, 3, 4), (4, 2)), V((4,), (4, 3))], tol_scale=2.0),
    # a 1-D weight scales x elementwise (tinygrad's rule), the bias broadcasting over the result
    Op("linear_vector_weight", lambda p, x, w, b: x.linear(w, b), lambda p, x, w, b: x * w + b,
       [V((3, 4), (4,), (4,)), V((2, 3, 4), (4,), (3, 1))]),
    # normalization and losses
    Op("layernorm", lambda p, x: x.layernorm(p["axis"], eps=1e-5),
       lambda p, x: F.layer_norm(x, x.shape[-p["n"]:], eps=1e-5),
       [V((3, 8), axis=-1, n=1), V((2, 3, 4), axis=(1, 2), n=2), V((4, 1, 6), axis=-1, n=1)], tol_scale=4.0),
    # LAYERNORM's and RMS_NORM's own weight and bias (the normalized axes' shape), as nn.LayerNorm sends them
    Op("layernorm_affine", lambda p, x, w, b: x.layernorm(p["axis"], eps=1e-5, weight=w, bias=b),
       lambda p, x, w, b: F.layer_norm(x, x.shape[-p["n"]:], w, b, eps=1e-5),
       [V((3, 8), (8,), (8,), axis=-1, n=1), V((2, 3, 4), (3, 4), (3, 4), axis=(1, 2), n=2)], tol_scale=4.0),
    Op("rms_norm_affine", lambda p, x, w: x.rms_norm(p["axis"], eps=1e-6, weight=w),
       lambda p, x, w: _rms_norm(x, p["n"]) * w, [V((3, 8), (8,), axis=-1, n=1), V((2, 3, 4), (3, 4), axis=(-2, -1), n=2)],
       tol_scale=4.0),
    # tinygrad's batchnorm is one BATCHNORM_INVSTD: statistics along one axis or two, an invstd that
    # broadcasts to x instead
    Op("batchnorm", lambda p, x, w, b, m, s: x.batchnorm(w, b, m, s, p.get("axis", 1)), _batchnorm_th,
       [V((2, 3, 4, 4), (3,), (3,), (3,), (3,)), V((2, 3, 4), (3, 4), (3, 4), (3, 4), (4,), axis=(1, 2)),
        V((4, 5), (5,), (5,), (5,), (4, 1), axis=-1)], tol_scale=2.0),
    # The losses are core composites (core/frontend/losses.cpp): each reduction, class axes other
    # than the last, label smoothing, ignored targets and positive weights against torch.
    Op("cross_entropy_idx", lambda p, x, y: x.cross_entropy(y, label_smoothing=p.get("ls", 0.0),
                                                            reduction=p.get("red", "mean")), _cross_entropy_th,
       [V((4, 5), (4,), n=5), V((3, 6), (3,), n=6, ls=0.1), V((2, 5, 3), (2, 3), n=5, red="none"),
        V((4, 5), (4,), n=5, red="sum", ls=0.2)], kinds="xi", tol_scale=2.0),
    Op("cross_entropy_probs", lambda p, x, y: x.cross_entropy(y.softmax(1), reduction=p.get("red", "mean")),
       lambda p, x, y: F.cross_entropy(x, y.softmax(1), reduction=p.get("red", "mean")),
       [V((4, 5), (4, 5)), V((2, 4, 3), (2, 4, 3), red="none")], kinds="xc", tol_scale=2.0),
    Op("sparse_categorical_crossentropy",
       lambda p, x, y: x.sparse_categorical_crossentropy(y, ignore_index=p.get("ign", -1), label_smoothing=p.get("ls", 0.0),
                                                         reduction=p.get("red", "mean")),
       _sparse_cce_th,
       [V((4, 5), (4,), n=5), V((2, 3, 7), (2, 3), n=7), V((6, 5), (6,), n=5, ign=2, ls=0.1),
        V((2, 3, 4), (2, 3), n=4, red="none"), V((4, 5), (4,), n=5, red="sum")],
       kinds="xi", tol_scale=2.0, layouts=("contiguous", "permuted", "shrunk", "flipped")),
    Op("binary_crossentropy", lambda p, x, y: x.binary_crossentropy(y, reduction=p.get("red", "mean")),
       lambda p, x, y: F.binary_cross_entropy(x, y, reduction=p.get("red", "mean")),
       [V((4, 5), (4, 5)), V((6,), (6,)), V((3, 4), (3, 4), red="none")], kinds="xc", gen=_pos_gen(0.05, 0.95),
       tol_scale=2.0),
    Op("binary_crossentropy_logits", lambda p, x, y: x.binary_crossentropy_logits(y, reduction=p.get("red", "mean")),
       lambda p, x, y: F.binary_cross_entropy_with_logits(x, y, reduction=p.get("red", "mean")),
       [V((4, 5), (4, 5)), V((3, 4), (3, 4), red="sum")], kinds="xc",
       gen=lambda rng, s, dt, p: rng.uniform(0.05, 0.95, s) if p.get("_arg") == 1 else rng.uniform(-3, 3, s),
       tol_scale=2.0),
    Op("binary_crossentropy_logits_pos_weight",
       lambda p, x, y, w: x.binary_crossentropy_logits(y, pos_weight=w, reduction=p.get("red", "mean")),
       lambda p, x, y, w: F.binary_cross_entropy_with_logits(x, y, pos_weight=w, reduction=p.get("red", "mean")),
       [V((4, 5), (4, 5), (5,)), V((3, 4), (3, 4), (3, 4), red="none")], kinds="xcc",
       gen=lambda rng, s, dt, p: (rng.uniform(0.05, 0.95, s) if p.get("_arg") == 1 else
                                  rng.uniform(0.5, 2.0, s) if p.get("_arg") == 2 else rng.uniform(-3, 3, s)),
       tol_scale=2.0),
    # convolution and pooling
    Op("conv2d", lambda p, x, w: x.conv2d(w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                          groups=p.get("g", 1)),
       lambda p, x, w: F.conv2d(x, w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                groups=p.get("g", 1)),
       [V((2, 3, 6, 6), (4, 3, 3, 3)), V((1, 4, 7, 5), (4, 2, 3, 2), s=2, pad=1, g=2),
        V((1, 2, 7, 7), (3, 2, 2, 2), d=2, pad=(1, 0)), V((1, 1, 5, 5), (2, 1, 1, 1))], tol_scale=3.0,
       quick_layouts=QUICK_WINDOWED),
    Op("conv2d_bias", lambda p, x, w, b: x.conv2d(w, b, padding=1), lambda p, x, w, b: F.conv2d(x, w, b, padding=1),
       [V((1, 2, 5, 5), (3, 2, 3, 3), (3,))], tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("max_pool2d", lambda p, x: x.max_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0), dilation=p.get("d", 1)),
       lambda p, x: _via_double(x, lambda t: F.max_pool2d(t, p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                                       dilation=p.get("d", 1))),
       [V((2, 3, 6, 6), k=2), V((1, 2, 7, 7), k=3, s=2, pad=1), V((1, 1, 8, 8), k=2, s=1, d=2)],
       FLOATS + ("int32",), layouts=("contiguous", "permuted", "shrunk", "flipped", "strided"), gen=_distinct,
       quick_layouts=QUICK_WINDOWED),
    Op("avg_pool2d", lambda p, x: x.avg_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0)),
       lambda p, x: F.avg_pool2d(x, p["k"], stride=p.get("s"), padding=p.get("pad", 0)),
       [V((2, 3, 6, 6), k=2), V((1, 2, 7, 7), k=3, s=2, pad=1)], quick_layouts=QUICK_WINDOWED),
    # torch's pooling options (issue 17): a last partial window (ceil_mode), padding not counted
    Op("max_pool2d_ceil", lambda p, x: x.max_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0), ceil_mode=True),
       lambda p, x: F.max_pool2d(x, p["k"], stride=p.get("s"), padding=p.get("pad", 0), ceil_mode=True),
       [V((1, 2, 7, 7), k=2), V((1, 2, 8, 7), k=3, s=2, pad=1), V((1, 1, 5, 6), k=3, s=2)], gen=_distinct,
       quick_layouts=QUICK_WINDOWED),
    Op("avg_pool2d_options", lambda p, x: x.avg_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                                       ceil_mode=p.get("ceil", False), count_include_pad=p.get("cip", True)),
       lambda p, x: F.avg_pool2d(x, p["k"], stride=p.get("s"), padding=p.get("pad", 0), ceil_mode=p.get("ceil", False),
                                 count_include_pad=p.get("cip", True)),
       [V((1, 2, 7, 7), k=2, ceil=True), V((1, 2, 7, 7), k=3, s=2, pad=1, cip=False),
        V((1, 2, 8, 7), k=3, s=2, pad=1, ceil=True), V((1, 1, 5, 6), k=3, s=2, pad=1, ceil=True, cip=False)],
       quick_layouts=QUICK_WINDOWED),
    Op("conv_transpose2d", lambda p, x, w: x.conv_transpose2d(w, **p), lambda p, x, w: F.conv_transpose2d(x, w, **p),
       [V((2, 4, 4, 4), (4, 3, 3, 3)), V((1, 4, 3, 5), (4, 2, 3, 2), stride=2, padding=1, output_padding=1, groups=2),
        V((1, 2, 4, 4), (2, 3, 2, 2), stride=(2, 1), dilation=2), V((1, 2, 5, 5), (2, 2, 3, 3), padding=2),
        V((1, 1, 1, 1), (1, 2, 1, 1))], tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("conv_transpose2d_bias", lambda p, x, w, b: x.conv_transpose2d(w, b, stride=2),
       lambda p, x, w, b: F.conv_transpose2d(x, w, b, stride=2), [V((1, 2, 3, 3), (2, 3, 2, 2), (3,))], tol_scale=3.0,
       quick_layouts=QUICK_WINDOWED),
    # 1-D and 3-D convolutions and pools (issue 17): the same wire ops, the weight's rank or the
    # kernel's length giving the spatial count, as tinygrad's conv2d/max_pool2d/avg_pool2d
    Op("conv1d", lambda p, x, w: x.conv2d(w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                          groups=p.get("g", 1)),
       lambda p, x, w: F.conv1d(x, w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                groups=p.get("g", 1)),
       [V((2, 3, 9), (4, 3, 3)), V((1, 4, 10), (4, 2, 3), s=2, pad=1, g=2), V((1, 2, 11), (3, 2, 2), d=3, pad=2)],
       tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("conv3d", lambda p, x, w: x.conv2d(w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                          groups=p.get("g", 1)),
       lambda p, x, w: F.conv3d(x, w, stride=p.get("s", 1), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                groups=p.get("g", 1)),
       [V((1, 2, 4, 5, 4), (3, 2, 2, 3, 2)), V((1, 4, 5, 6, 5), (4, 2, 3, 2, 3), s=2, pad=1, g=2),
        V((1, 1, 5, 6, 4), (2, 1, 2, 2, 2), d=(1, 2, 1), pad=(1, 0, 1), s=(1, 2, 1))],
       tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("conv_transpose1d", lambda p, x, w: x.conv_transpose2d(w, **p), lambda p, x, w: F.conv_transpose1d(x, w, **p),
       [V((2, 4, 5), (4, 3, 3)), V((1, 4, 6), (4, 2, 3), stride=2, padding=1, output_padding=1, groups=2),
        V((1, 2, 4), (2, 3, 2), stride=3, dilation=2)], tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("conv_transpose3d", lambda p, x, w: x.conv_transpose2d(w, **p), lambda p, x, w: F.conv_transpose3d(x, w, **p),
       [V((1, 2, 3, 3, 2), (2, 3, 2, 2, 2)), V((1, 4, 2, 3, 3), (4, 1, 3, 2, 3), stride=2, padding=1, output_padding=1,
                                                groups=2),
        V((1, 2, 3, 2, 3), (2, 2, 2, 2, 2), stride=(2, 1, 2), dilation=(1, 2, 1), padding=(0, 1, 1))],
       tol_scale=3.0, quick_layouts=QUICK_WINDOWED),
    Op("max_pool1d", lambda p, x: x.max_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                               ceil_mode=p.get("ceil", False)),
       lambda p, x: _via_double(x, lambda t: F.max_pool1d(t, p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                                       dilation=p.get("d", 1), ceil_mode=p.get("ceil", False))),
       [V((2, 3, 8), k=(2,)), V((1, 2, 11), k=(3,), s=2, pad=1, ceil=True), V((2, 9), k=(2,), s=1, d=3)],
       FLOATS + ("int32",), gen=_distinct, quick_layouts=QUICK_WINDOWED),
    Op("max_pool3d", lambda p, x: x.max_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0), dilation=p.get("d", 1),
                                               ceil_mode=p.get("ceil", False)),
       lambda p, x: _via_double(x, lambda t: F.max_pool3d(t, p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                                       dilation=p.get("d", 1), ceil_mode=p.get("ceil", False))),
       [V((1, 2, 4, 4, 6), k=(2, 2, 2)), V((1, 1, 5, 6, 5), k=(3, 3, 2), s=2, pad=1, ceil=True),
        V((1, 5, 5, 6), k=(2, 2, 3), s=(1, 2, 1), d=(2, 1, 1))],
       FLOATS + ("int32",), gen=_distinct, quick_layouts=QUICK_WINDOWED),
    Op("avg_pool1d", lambda p, x: x.avg_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                               ceil_mode=p.get("ceil", False), count_include_pad=p.get("cip", True)),
       lambda p, x: F.avg_pool1d(x, p["k"], stride=p.get("s"), padding=p.get("pad", 0), ceil_mode=p.get("ceil", False),
                                 count_include_pad=p.get("cip", True)),
       [V((2, 3, 8), k=(2,)), V((1, 2, 9), k=(3,), s=2, pad=1, cip=False), V((1, 2, 10), k=(3,), s=2, pad=1, ceil=True),
        V((2, 3, 7), k=(3,), s=2, pad=1, ceil=True, cip=False)], quick_layouts=QUICK_WINDOWED),
    Op("avg_pool3d", lambda p, x: x.avg_pool2d(p["k"], stride=p.get("s"), padding=p.get("pad", 0),
                                               ceil_mode=p.get("ceil", False), count_include_pad=p.get("cip", True)),
       lambda p, x: F.avg_pool3d(x, p["k"], stride=p.get("s"), padding=p.get("pad", 0), ceil_mode=p.get("ceil", False),
                                 count_include_pad=p.get("cip", True)),
       [V((1, 2, 4, 4, 6), k=(2, 2, 2)), V((1, 1, 5, 6, 5), k=(3, 3, 2), s=2, pad=1, cip=False),
        V((1, 2, 5, 4, 5), k=(3, 2, 3), s=2, pad=1, ceil=True),
        V((1, 1, 5, 6, 5), k=(3, 3, 3), s=2, pad=1, ceil=True, cip=False)], quick_layouts=QUICK_WINDOWED),
    # return_indices for any window: overlapping, padded, dilated, ceil_mode, in 1-D, 2-D and 3-D
    # (values with their gradient, and torch's flat indices); distinct values, as torch's tie is
    # the first in window order and a layout that repeats one element would make ties
    Op("max_pool_values", lambda p, x: x.max_pool2d(p["k"], **p["kw"], return_indices=True).values,
       lambda p, x: _max_pool_th(p, x)[0], MAX_POOL_INDEX_SHAPES, FLOATS, gen=_distinct,
       layouts=("contiguous", "permuted", "shrunk", "flipped", "strided"), quick_layouts=QUICK_WINDOWED),
    Op("max_pool_indices", lambda p, x: x.max_pool2d(p["k"], **p["kw"], return_indices=True).indices,
       lambda p, x: _max_pool_th(p, x)[1], MAX_POOL_INDEX_SHAPES, FLOATS, grad=False, gen=_distinct,
       layouts=("contiguous", "permuted", "shrunk", "flipped", "strided"), quick_layouts=QUICK_WINDOWED),
    # normalization layers and attention as core composites
    Op("rms_norm", lambda p, x: x.rms_norm(p["axis"], eps=1e-6), lambda p, x: _rms_norm(x, p["n"]),
       [V((3, 8), axis=-1, n=1), V((2, 3, 4), axis=(-2, -1), n=2), V((4, 1), axis=-1, n=1)], tol_scale=4.0),
    Op("group_norm", lambda p, x, w, b: x.group_norm(p["g"], w, b), lambda p, x, w, b: F.group_norm(x, p["g"], w, b),
       [V((2, 6, 3, 3), (6,), (6,), g=3), V((3, 4, 5), (4,), (4,), g=4), V((1, 4, 2, 2), (4,), (4,), g=1)],
       tol_scale=4.0),
    Op("batch_norm_train", lambda p, x, w, b: x.batch_norm(weight=w, bias=b, training=True),
       lambda p, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
       [V((4, 3, 2, 2), (3,), (3,)), V((5, 2), (2,), (2,)), V((2, 3, 4), (3,), (3,))], tol_scale=4.0,
       layouts=("contiguous", "permuted", "shrunk", "flipped", "strided")),  # expanded: zero batch variance
    Op("batch_norm_eval", lambda p, x, m, v, w, b: x.batch_norm(m, v, w, b),
       lambda p, x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
       [V((4, 3, 2, 2), (3,), (3,), (3,), (3,)), V((5, 2), (2,), (2,), (2,), (2,))], kinds="xccxx",
       gen=lambda rng, s, dt, p: rng.uniform(0.5, 2.0, s) if p["_arg"] == 2 else rng.uniform(-2, 2, s), tol_scale=4.0),
    Op("sdpa", lambda p, q, k, v: q.scaled_dot_product_attention(k, v, is_causal=p.get("causal", False)),
       lambda p, q, k, v: _sdpa(q, k, v, None, p.get("causal", False)),
       [V((2, 5, 4), (2, 6, 4), (2, 6, 3)), V((2, 3, 4, 4), (2, 3, 4, 4), (2, 3, 4, 4), causal=True),
        V((1, 6, 4), (1, 5, 4), (1, 5, 2), causal=True), V((3, 1, 2), (3, 4, 2), (1, 4, 5))], tol_scale=4.0),
    Op("sdpa_bool_mask", lambda p, q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m | _first_key(m)),
       lambda p, q, k, v, m: _sdpa(q, k, v, m | _first_key(m), False),
       [V((2, 4, 3), (2, 5, 3), (2, 5, 2), (4, 5)), V((1, 3, 2), (1, 3, 2), (1, 3, 2), (1, 3, 3))], kinds="xxxb",
       tol_scale=4.0),
    Op("sdpa_float_mask", lambda p, q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m),
       lambda p, q, k, v, m: _sdpa(q, k, v, m, False), [V((2, 4, 3), (2, 5, 3), (2, 5, 2), (4, 5))], tol_scale=4.0),
    # indexing
    Op("gather", lambda p, x, i: x.gather(p["dim"], i), lambda p, x, i: torch.gather(x, p["dim"], i.long()),
       [V((3, 5), (3, 4), dim=1, n=5), V((4, 3), (2, 3), dim=0, n=4), V((2, 3, 4), (2, 3, 6), dim=2, n=4)],
       FLOATS + ("int32",), kinds="xi"),
    Op("index_tensor", lambda p, x, i: x[p["at"](i)], lambda p, x, i: x[p["at"](i.long())],
       [V((5, 3), (4,), n=5, at=lambda i: i), V((2, 6, 3), (2, 2), n=6, at=lambda i: (slice(None), i)),
        V((3, 4), (3,), n=4, at=lambda i: (Ellipsis, i))], FLOATS + ("int32",), kinds="xi"),
    Op("index_tensors", lambda p, x, i, j: x[p["at"](i, j)], lambda p, x, i, j: x[p["at"](i.long(), j.long())],
       [V((5, 6, 3), (4,), (4,), n=5, at=lambda i, j: (i, j)),
        V((2, 6, 5), (3, 1), (2,), n=5, at=lambda i, j: (slice(None), i, j)),
        V((5, 3, 6), (2,), (2,), n=5, at=lambda i, j: (i, slice(None), j)),
        V((5, 4, 6), (3,), (3,), n=4, at=lambda i, j: (i, 1, j))], FLOATS + ("int32",), kinds="xii"),
    Op("one_hot", lambda p, i: i.one_hot(p["n"]), lambda p, i: F.one_hot(i.long(), p["n"]),
       [V((5,), n=4), V((2, 3), n=6), V((0,), n=3)], ("int32", "int64"), grad=False, kinds="i"),
    # scatter and selection by index (issue 17: the daemon's SCATTER_REDUCE, NLL_LOSS, INTERPOLATE,
    # UNFOLD, NONZERO)
    # torch's scatter backward fails for a src larger than the index: the reference cuts it first
    Op("scatter", lambda p, x, s: x.scatter(p["dim"], _pg_or_th_index(p, x), s),
       lambda p, x, s: x.scatter(p["dim"], _pg_or_th_index(p, x), s[tuple(slice(0, d) for d in p["idx"].shape)]),
       SCATTER_SHAPES, ALL_NUM + ("bool",)),
    # several updates on one position: the later in index order wins, as torch on the CPU (torch's
    # gradient reaches the losers too, so forward only)
    Op("scatter_repeated", lambda p, x, s: x.scatter(p["dim"], _pg_or_th_index(p, x), s),
       lambda p, x, s: x.scatter(p["dim"], _pg_or_th_index(p, x), s),
       [V((3, 5), (3, 4), dim=1, idx=np.random.default_rng(6).integers(0, 5, (3, 4))),
        V((4, 3), (6, 3), dim=0, idx=np.random.default_rng(7).integers(0, 4, (6, 3)))], ALL_NUM, grad=False),
    Op("scatter_scalar", lambda p, x: x.scatter(p["dim"], _pg_or_th_index(p, x), 3),
       lambda p, x: x.scatter(p["dim"], _pg_or_th_index(p, x), 3), [V(v.shapes[0], **v.params) for v in SCATTER_SHAPES],
       ALL_NUM),
    _scatter_reduce_op("sum", True, ALL_NUM, True),
    _scatter_reduce_op("sum", False, ALL_NUM, True),
    _scatter_reduce_op("mean", True, ALL_NUM, True),
    _scatter_reduce_op("mean", False, FLOATS + ("int32",), True),
    _scatter_reduce_op("prod", True, ALL_NUM, False),
    _scatter_reduce_op("prod", False, FLOATS + ("int32",), False),
    _scatter_reduce_op("amax", True, ALL_NUM, False),
    _scatter_reduce_op("amax", False, FLOATS + ("int32",), False),
    _scatter_reduce_op("amin", True, ALL_NUM, False),
    _scatter_reduce_op("amin", False, FLOATS + ("int32",), False),
    Op("nll_loss", lambda p, x, y: x.nll_loss(y, ignore_index=p.get("ignore"), reduction=p.get("red", "mean")), _nll_th,
       NLL_SHAPES, kinds="xi", gen=_nll_gen, tol_scale=2.0),
    Op("nll_loss_weight", lambda p, x, y, w: x.nll_loss(y, w, ignore_index=p.get("ignore"), reduction=p.get("red", "mean")),
       _nll_th, NLL_WEIGHT_SHAPES, kinds="xic", gen=_nll_gen, tol_scale=2.0),
    Op("interpolate_linear", lambda p, x: x.interpolate(p["size"], mode="linear", align_corners=p["ac"]), _interp_th,
       _interp_shapes("linear"), tol_scale=2.0),
    Op("interpolate_nearest", lambda p, x: x.interpolate(p["size"], mode="nearest"), _interp_th,
       _interp_shapes("nearest"), ALL_NUM),
    Op("interpolate_nearest_exact", lambda p, x: x.interpolate(p["size"], mode="nearest-exact"), _interp_th,
       _interp_shapes("nearest-exact"), ALL_NUM),
    Op("unfold", lambda p, x: x.unfold(p["dim"], p["size"], p["step"]), lambda p, x: x.unfold(p["dim"], p["size"], p["step"]),
       [V((7,), dim=0, size=3, step=2), V((2, 9, 3), dim=1, size=4, step=1), V((4, 5), dim=-1, size=5, step=3),
        V((3, 4), dim=0, size=0, step=1), V((), dim=0, size=1, step=1), V((6, 4), dim=0, size=2, step=4)],
       ALL_NUM + ("bool",)),
    Op("nonzero", lambda p, x: x.nonzero(), lambda p, x: x.nonzero(),
       [V((3, 4)), V((2, 3, 2)), V((7,)), V(()), V((0, 3))], ALL_NUM + ("bool",), grad=False, gen=_zeros_gen),
    # contiguous(): torch 1.13's masked_select backward scatters into a zeros_like of a permuted
    # input in memory order, so its gradient comes out transposed (checked against torch.gather).
    Op("masked_select", lambda p, x, m: x.masked_select(m), lambda p, x, m: x.contiguous().masked_select(m),
       [V((3, 4), (3, 4)), V((2, 3, 2), (3, 1)), V((7,), (7,)), V((4, 2), (2,))], ALL_NUM, kinds="xb"),
]


# --- building inputs ----------------------------------------------------------------------------

def _kinds(op: Op, v: Variant) -> str:
  return op.kinds or "x" * len(v.shapes)


def _layouts(op: Op) -> Sequence[str]:
  every = op.layouts or ALL_LAYOUTS
  return every if FULL or op.quick_layouts is None else [l for l in every if l in op.quick_layouts]


def _base_shape(shape, layout):
  """The leaf's shape for a layout, or None when the layout does not apply to this shape."""
  n = len(shape)
  if layout == "contiguous":
    return shape
  if n == 0:
    return None
  if layout == "permuted":
    return tuple(reversed(shape)) if n >= 2 and len(set(shape)) > 1 else None
  if layout == "shrunk":
    return tuple(s + 2 for s in shape)
  if layout == "flipped":
    return shape
  if layout == "expanded":
    ax = next((i for i, s in enumerate(shape) if s > 1), None)
    return None if ax is None else shape[:ax] + (1,) + shape[ax + 1:]
  if layout == "strided":
    return (2 * shape[0] + 1,) + shape[1:] if shape[0] > 0 else None
  raise AssertionError(layout)


def _view(t, shape, layout, is_torch):
  """The same movement ops in both libraries: the layout's view of leaf t, shaped `shape`."""
  n = len(shape)
  if layout == "contiguous":
    return t
  if layout == "permuted":
    return t.permute(*reversed(range(n))) if is_torch else t.permute(tuple(reversed(range(n))))
  if layout == "shrunk":
    return t[tuple(slice(1, 1 + s) for s in shape)]
  if layout == "flipped":
    return t.flip(tuple(range(n)))
  if layout == "expanded":
    return t.expand(*shape) if is_torch else t.expand(shape)
  if layout == "strided":
    return t[1::2]
  raise AssertionError(layout)


def _applies(op: Op, v: Variant, layout: str) -> bool:
  kinds = _kinds(op, v)
  xs = [s for s, k in zip(v.shapes, kinds) if k == "x"]
  if layout == "contiguous":
    return True
  return any(_base_shape(s, layout) is not None for s in xs)


def _torch_dtype(dt):
  return getattr(torch, dt)


def _round_to(arr: np.ndarray, dt: str) -> np.ndarray:
  """float64 values exactly representable in dt (so both libraries see the same inputs)."""
  return torch.tensor(arr, dtype=torch.float64).to(_torch_dtype(dt)).to(torch.float64).numpy()


def _data(rng, op: Op, v: Variant, i: int, kind: str, shape, dt: str) -> np.ndarray:
  if kind == "i":
    return rng.integers(0, v.params["n"], shape).astype(np.int64)
  if kind == "b" or dt == "bool":
    return rng.random(shape) < 0.5
  if dt in INTS and op.int_gen is not None:
    return np.asarray(op.int_gen(rng, shape, dt, dict(v.params, _arg=i))).astype(np.int64)
  if dt in INTS:
    lo = 0 if dt == "uint8" else -5
    return rng.integers(lo, 6, shape).astype(np.int64)
  if op.gen is not None:
    arr = op.gen(rng, shape, dt, dict(v.params, _arg=i))
  else:
    arr = rng.uniform(op.domain[0], op.domain[1], shape)
  return _round_to(np.asarray(arr, dtype=np.float64), dt)


def _pg_leaf(arr: np.ndarray, kind: str, dt: str, grad: bool) -> Tensor:
  if kind == "i":
    return Tensor(arr.astype(np.int32), dtype=dtypes.int32)
  if kind == "b" or dt == "bool":
    return Tensor(arr.astype(np.bool_), dtype=dtypes.bool)
  t = Tensor(arr.astype(np.float32) if dt in FLOATS and dt != "float64" else arr, dtype=getattr(dtypes, dt))
  if grad:
    t.requires_grad = True
  return t


def _th_leaf(arr: np.ndarray, kind: str, dt: str, grad: bool):
  if kind == "i":
    return torch.tensor(arr, dtype=torch.int64)
  if kind == "b" or dt == "bool":
    return torch.from_numpy(np.array(arr, dtype=np.bool_))  # np.array keeps 0-d; ascontiguousarray makes it 1-d
  # Floats compute in float64 (the reference); integers in their own dtype, as polygrad does.
  t = torch.tensor(arr, dtype=torch.float64 if dt in FLOATS else _torch_dtype(dt))
  if grad:
    t.requires_grad_(True)
  return t


def _as_list(out):
  return list(out) if isinstance(out, (list, tuple)) else [out]


# --- the cases ----------------------------------------------------------------------------------

# POLYGRAD_PARITY=full checks every (layout, shape variant) in every dtype. The default checks
# them all in the op's primary dtype (float32 where defined) and, in every other dtype, the first
# shape variants contiguously plus one non-contiguous layout (rotating through the layouts), so
# that the file runs in minutes while compiling every kernel afresh.
FULL = os.environ.get("POLYGRAD_PARITY", "") == "full"


def _primary(op: Op) -> str:
  return "float32" if "float32" in op.dtypes else op.dtypes[0]


def _variants(op: Op, dt: str):
  """(layout, variant index, variant) for the combinations this dtype's test checks."""
  every = [(layout, vi, v) for layout in _layouts(op) for vi, v in enumerate(op.variants) if _applies(op, v, layout)]
  if FULL or dt == _primary(op):
    return every
  contiguous = [c for c in every if c[0] == "contiguous"][:3]
  others = [layout for layout in _layouts(op) if layout != "contiguous" and any(c[0] == layout for c in every)]
  if not others:
    return contiguous
  pick = others[list(op.dtypes).index(dt) % len(others)]
  return contiguous + [next(c for c in every if c[0] == pick)]


def _cases():
  return [pytest.param(op, dt, id=f"{op.name}-{dt}") for op in OPS for dt in op.dtypes]


CASE_PARAMS = _cases()
CASES = sum(len(_variants(p.values[0], p.values[1])) for p in CASE_PARAMS)


def _check(got: np.ndarray, ref: np.ndarray, dt: str, tol: Dict, scale: float, what: str):
  assert got.shape == ref.shape, f"{what}: shape {got.shape} != torch's {ref.shape}"
  if dt in FLOATS and (ref.dtype.kind == "f" or got.dtype.kind == "f"):
    rtol, atol = tol[dt]
    rtol, atol = rtol * scale, atol * scale
    mag = float(np.nanmax(np.abs(ref))) if ref.size and np.isfinite(ref).any() else 1.0
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                               atol=atol * max(1.0, mag), err_msg=what)
  else:
    np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64), err_msg=what)


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("op,dt", CASE_PARAMS)
def test_parity(rng, op: Op, dt: str):
  pending = []  # (what, polygrad tensor, reference array, tolerance table)
  differentiable = op.grad and dt in FLOATS
  for layout, vi, v in _variants(op, dt):
    kinds = _kinds(op, v)
    pg_args, th_args, pg_leaves, th_leaves = [], [], [], []
    for i, (shape, kind) in enumerate(zip(v.shapes, kinds)):
      lay = layout if kind == "x" and _base_shape(shape, layout) is not None else "contiguous"
      base = _base_shape(shape, lay)
      arr = _data(rng, op, v, i, kind, base, dt)
      wants_grad = differentiable and kind == "x"
      pl, tl = _pg_leaf(arr, kind, dt, wants_grad), _th_leaf(arr, kind, dt, wants_grad)
      pg_args.append(_view(pl, shape, lay, False))
      th_args.append(_view(tl, shape, lay, True))
      if wants_grad:
        pg_leaves.append(pl)
        th_leaves.append(tl)
    pg_outs = _as_list(op.pg(v.params, *pg_args))
    th_outs = _as_list(op.th(v.params, *th_args))
    assert len(pg_outs) == len(th_outs), f"{op.name}: {len(pg_outs)} outputs, torch gives {len(th_outs)}"
    what = f"{op.name} {dt} {layout} variant {vi} {v.shapes} {v.params}"
    for k, (po, to) in enumerate(zip(pg_outs, th_outs)):
      assert po.shape == tuple(to.shape), f"{what} output {k}: shape {po.shape} != torch's {tuple(to.shape)}"
      if dt in FLOATS and to.dtype.is_floating_point:
        want = op.out or dt
        assert po.dtype == getattr(dtypes, want), f"{what} output {k}: dtype {po.dtype}, expected {want}"
      if to.dtype == torch.bool:
        assert po.dtype == dtypes.bool, f"{what} output {k}: dtype {po.dtype}, torch's is bool"
      pending.append((f"{what} output {k}", po, to.detach().numpy(), TOL))
    if pg_leaves:
      ws = [rng.uniform(-1, 1, tuple(to.shape)) for to in th_outs]
      th_loss = sum((to.to(torch.float64) * torch.tensor(w)).sum() for to, w in zip(th_outs, ws))
      th_grads = torch.autograd.grad(th_loss, th_leaves, allow_unused=True)
      pg_loss = None
      loss_dt = np.float64 if dt == "float64" else np.float32
      for po, w in zip(pg_outs, ws):
        term = (po.cast(dtypes.from_np(loss_dt)) * Tensor(w.astype(loss_dt))).sum()
        pg_loss = term if pg_loss is None else pg_loss + term
      pg_grads = pg_loss.gradient(*pg_leaves)
      for j, (pgr, tgr, tl) in enumerate(zip(pg_grads, th_grads, th_leaves)):
        ref = np.zeros(tuple(tl.shape)) if tgr is None else tgr.detach().numpy()  # (torch's cummax grad keeps a graph)
        pending.append((f"{what} grad of leaf {j}", pgr, ref, GRAD_TOL))
  if not pending:
    pytest.skip("no variant applies")
  for what, got, ref, tol in _fetch(pending, pack=op.quick_layouts is None):
    _check(got, ref, dt, tol, op.tol_scale, what)


def _fetch(pending, pack: bool):
  """Every result as numpy from one realize. Packed: fetched as one flat tensor per dtype,
  concatenated on the device, so few kernels are compiled. Windowed ops are not packed: one
  kernel holding all their windows takes the daemon far longer to schedule than several."""
  if not pack:
    live = [p for _, p, _, _ in pending if p.numel() > 0]
    if live:
      live[0].realize(*live[1:])
    return [(what, p.numpy() if p.numel() else np.zeros(p.shape), ref, tol) for what, p, ref, tol in pending]
  groups: Dict = {}
  for item in pending:
    if item[1].numel() > 0:
      groups.setdefault(item[1].dtype.name, []).append(item)
  out = [(what, np.zeros(p.shape), ref, tol) for what, p, ref, tol in pending if p.numel() == 0]
  packs = {name: Tensor.cat(*[p.reshape(-1) for _, p, _, _ in items]) if len(items) > 1 else items[0][1].reshape(-1)
           for name, items in groups.items()}
  if packs:
    first, *rest = packs.values()
    first.realize(*rest)
  for name, items in groups.items():
    flat, off = packs[name].numpy(), 0
    for what, p, ref, tol in items:
      out.append((what, flat[off:off + p.numel()].reshape(p.shape), ref, tol))
      off += p.numel()
  return out


# --- edge values: nan, ±inf, ±0 and the ends of each domain ---------------------------------------
# Explicit inputs per op, compared with torch computing in float64 on the same (dtype-rounded)
# inputs, rounded to the dtype: the same nans and infinities, finite values within the dtype's
# tolerance, and the sign of every zero. Where an entry has gradient inputs, d(sum(out * w))
# with respect to each float input is compared with torch's autograd at those points.

_INF, _NAN = math.inf, math.nan
_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, -1e-30, 1e-8, 30.0, -30.0, 1e30, -1e30, _INF, -_INF,
             _NAN]
_DOMAIN_EDGES = [1.0, -1.0, 1.0000001, -1.0000001, 0.9999999, -0.9999999, 1.5, -1.5, 0.0, -0.0, _INF, -_INF, _NAN]


@dataclass
class Edge:
  name: str
  pg: Callable
  th: Callable
  inputs: List[List[float]]  # one list per argument, all of one length
  grad_inputs: Optional[List[List[float]]] = None


EDGES = [
    Edge("erf", lambda x: x.erf(), lambda x: torch.erf(x),
         [_SPECIALS + [0.84, 0.85, 1.24, 1.26, 2.85, 2.86, 5.9, 6.1, -4.0]], [[0.0, 0.3, -1.0, 2.0, 5.0]]),
    Edge("atan", lambda x: x.atan(), lambda x: torch.atan(x), [_SPECIALS + [0.66, 0.67, 2.41, 2.42]],
         [[0.0, 0.66, -3.0]]),
    Edge("asin", lambda x: x.asin(), lambda x: torch.asin(x), [_DOMAIN_EDGES], [[0.0, 0.5, -0.9]]),
    Edge("acos", lambda x: x.acos(), lambda x: torch.acos(x), [_DOMAIN_EDGES], [[0.0, 0.5, -0.9]]),
    # not 710: torch's float64 sinh and cosh overflow there, below the largest double
    Edge("sinh", lambda x: x.sinh(), lambda x: torch.sinh(x), [_SPECIALS + [19.9, 20.1, 88.0, 89.0, 720.0, -720.0]],
         [[0.0, 1e-4, -2.0, 25.0]]),
    Edge("cosh", lambda x: x.cosh(), lambda x: torch.cosh(x), [_SPECIALS + [19.9, 20.1, 88.0, 89.0, -720.0]],
         [[0.0, 1e-4, -2.0, 25.0]]),
    Edge("asinh", lambda x: x.asinh(), lambda x: torch.asinh(x), [_SPECIALS + [3e8, -3e8]], [[0.0, 1e-4, -3.0]]),
    Edge("acosh", lambda x: x.acosh(), lambda x: torch.acosh(x), [_DOMAIN_EDGES + [-3.0, 1e30, 3e8]], [[1.5, 20.0]]),
    Edge("atanh", lambda x: x.atanh(), lambda x: torch.atanh(x), [_DOMAIN_EDGES + [1e-30]], [[0.0, 0.5, -0.9]]),
    Edge("log10", lambda x: x.log10(), lambda x: torch.log10(x), [_SPECIALS]),
    Edge("log1p", lambda x: x.log1p(), lambda x: torch.log1p(x), [_SPECIALS + [-0.9999, -1.5]],
         [[0.0, 1e-5, -0.5, 1e6]]),
    Edge("expm1", lambda x: x.expm1(), lambda x: torch.expm1(x), [_SPECIALS + [-60.0, -61.0, 88.5, 709.5, 710.0]],
         [[0.0, 1e-5, -70.0, 5.0]]),
    Edge("softsign", lambda x: x.softsign(), lambda x: F.softsign(x), [_SPECIALS]),
    # tiny negative inputs are left out: torch's celu/selu compute exp(x) - 1 there, which is 0
    Edge("celu", lambda x: x.celu(0.5), lambda x: F.celu(x, 0.5),
         [[0.0, -0.0, 1.0, -1.0, -30.0, 1e30, _INF, -_INF, _NAN]], [[0.5, -0.5, -40.0, 100.0]]),
    Edge("selu", lambda x: x.selu(), lambda x: F.selu(x), [[0.0, -0.0, 1.0, -1.0, -30.0, 1e30, _INF, -_INF, _NAN]],
         [[0.5, -0.5, -40.0, 100.0]]),
    Edge("logaddexp", lambda a, b: a.logaddexp(b), lambda a, b: torch.logaddexp(a, b),
         [[-_INF, -_INF, _INF, _INF, -_INF, 0.0, _NAN, 1e30, -1e30, 0.0, 3.0],
          [-_INF, 0.0, _INF, -_INF, 5.0, -_INF, 0.0, 1e30, 1e30, 0.0, 3.0]],
         [[1.0, 2.0, 0.0, -3.0], [1.0, -_INF, 50.0, -3.5]]),
    Edge("copysign", lambda a, b: a.copysign(b), lambda a, b: torch.copysign(a, b),
         [[1.0, 1.0, -1.0, 0.0, -0.0, _INF, _NAN, 2.0, -0.0, 3.0],
          [-0.0, 0.0, 0.0, -1.0, 1.0, -0.0, -1.0, _NAN, -0.0, -_INF]],
         [[0.0, -0.0, 1.0, -2.0], [1.0, -1.0, -0.0, 3.0]]),
    Edge("lerp", lambda a, b, w: a.lerp(b, w), lambda a, b, w: torch.lerp(a, b, w),
         [[1.0, 1.0, 0.0, _NAN, 1.0, -_INF, 3.0], [2.0, 2.0, _INF, 1.0, 2.0, 0.0, 3.0],
          [1.0, 0.0, 0.5, 0.5, _NAN, 0.25, 0.5]],
         [[1.0, 2.0], [3.0, -1.0], [0.25, 0.75]]),
    Edge("isfinite", lambda x: x.isfinite(), lambda x: torch.isfinite(x), [_SPECIALS]),
    Edge("isclose", lambda a, b: a.isclose(b), lambda a, b: torch.isclose(a, b),
         [[_INF, _INF, -_INF, _NAN, _NAN, 1.0, 1e30, 0.0, 1.0],
          [_INF, -_INF, -_INF, _NAN, 1.0, _INF, 1e30, -0.0, 1.00001]]),
    Edge("isclose_equal_nan", lambda a, b: a.isclose(b, equal_nan=True),
         lambda a, b: torch.isclose(a, b, equal_nan=True),
         [[_NAN, _NAN, 1.0, _INF], [_NAN, 1.0, _NAN, _INF]]),
]


def _edge_ref(e: Edge, cols, dt: str):
  """torch's float64 result on the dtype-rounded inputs, rounded to the dtype."""
  args = [torch.tensor(c, dtype=torch.float64) for c in cols]
  out = e.th(*args)
  return out if out.dtype == torch.bool else out.to(_torch_dtype(dt)).to(torch.float64)


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("e,dt", [pytest.param(e, dt, id=f"{e.name}-{dt}") for e in EDGES for dt in FLOATS])
def test_edge_values(e: Edge, dt: str):
  cols = [_round_to(np.array(c, dtype=np.float64), dt) for c in e.inputs]
  got = e.pg(*[Tensor(c.astype(np.float32) if dt != "float64" else c, dtype=getattr(dtypes, dt)) for c in cols])
  ref = _edge_ref(e, cols, dt).numpy()
  out = got.numpy().astype(np.float64)
  what = f"{e.name} {dt} at {[list(c) for c in cols]}"
  assert out.shape == ref.shape, what
  if ref.dtype == np.bool_:
    np.testing.assert_array_equal(out.astype(np.bool_), ref, err_msg=what)
    return
  np.testing.assert_array_equal(np.isnan(out), np.isnan(ref), err_msg=f"{what}: nan")
  np.testing.assert_array_equal(np.isinf(out) * np.sign(out), np.isinf(ref) * np.sign(ref), err_msg=f"{what}: inf")
  fin = np.isfinite(ref)
  np.testing.assert_allclose(out[fin], ref[fin], rtol=TOL[dt][0], atol=0, err_msg=what)
  zero = fin & (ref == 0)
  np.testing.assert_array_equal(np.signbit(out[zero]), np.signbit(ref[zero]), err_msg=f"{what}: sign of zero")
  if e.grad_inputs is None or dt in ("float16", "bfloat16"):
    return
  gcols = [np.array(c, dtype=np.float64) for c in e.grad_inputs]
  w = np.linspace(0.5, 1.5, len(gcols[0]))
  leaves = [Tensor(c.astype(np.float32) if dt == "float32" else c, dtype=getattr(dtypes, dt), requires_grad=True)
            for c in gcols]
  grads = (e.pg(*leaves).cast(dtypes.float64) * Tensor(w)).sum().gradient(*leaves)
  tl = [torch.tensor(c, requires_grad=True) for c in gcols]
  tg = torch.autograd.grad((e.th(*tl) * torch.tensor(w)).sum(), tl)
  for k, (pg_g, th_g) in enumerate(zip(grads, tg)):
    np.testing.assert_allclose(pg_g.numpy().astype(np.float64), th_g.numpy(), rtol=GRAD_TOL[dt][0],
                               atol=GRAD_TOL[dt][1], err_msg=f"{e.name} {dt} gradient of input {k} at {gcols}")


# Second derivatives (a gradient of a gradient) at points that include 0, where branches that
# return x itself for tiny inputs would lose the curvature.
SECOND = [("erf", -3, 3), ("atan", -3, 3), ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("sinh", -3, 3), ("cosh", -3, 3),
          ("asinh", -3, 3), ("acosh", 1.1, 4), ("atanh", -0.9, 0.9), ("log10", 0.1, 4), ("log1p", -0.9, 0.9),
          ("expm1", -3, 3), ("softsign", -3, 3), ("selu", -3, 3)]


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name,lo,hi", [pytest.param(*s, id=s[0]) for s in SECOND])
def test_second_derivative(name, lo, hi):
  x = np.union1d(np.linspace(lo, hi, 12), [0.0] if lo < 0 < hi else [])
  t = Tensor(x, requires_grad=True)
  (g1,) = getattr(t, name)().sum().gradient(t)
  (g2,) = g1.sum().gradient(t)
  th = getattr(F, name) if name in ("softsign", "selu") else getattr(torch, name)
  tt = torch.tensor(x, requires_grad=True)
  (a,) = torch.autograd.grad(th(tt).sum(), tt, create_graph=True)
  (b,) = torch.autograd.grad(a.sum(), tt)
  np.testing.assert_allclose(g2.numpy(), b.numpy(), rtol=1e-8, atol=1e-10, err_msg=f"{name}'' at {x}")


# float32 results of the library functions (computed in float64, rounded once) against float64
# numpy, in ulps of the float32 result: torch's own float32 functions are within 0.5 to 1.5.
ULP_FUNCS = [("asinh", np.arcsinh, -10, 10), ("acosh", np.arccosh, 1, 20), ("atanh", np.arctanh, -0.999, 0.999),
             ("log1p", np.log1p, -0.99, 10), ("expm1", np.expm1, -5, 5), ("atan", np.arctan, -10, 10),
             ("asin", np.arcsin, -1, 1), ("acos", np.arccos, -1, 1), ("sinh", np.sinh, -10, 10),
             ("cosh", np.cosh, -10, 10), ("log10", np.log10, 1e-3, 1e3)]


@pytest.mark.parametrize("name,f,lo,hi", [pytest.param(*u, id=u[0]) for u in ULP_FUNCS])
def test_float32_library_functions_round_once(name, f, lo, hi):
  rng = np.random.default_rng(17)
  x = np.concatenate([rng.uniform(lo, hi, 4000), rng.uniform(lo, hi, 1000) * 1e-3]).astype(np.float32)
  x = x[(x >= lo) & (x <= hi)]  # the small values only where the domain reaches 0
  ref = f(x.astype(np.float64))
  got = getattr(Tensor(x), name)().numpy().astype(np.float64)
  ulps = np.abs(got - ref) / np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
  assert ulps.max() <= 0.501, f"{name}: {ulps.max():.2f} ulp at x = {x[ulps.argmax()]!r}"


# Creation functions against torch's: exact endpoints, int64 past int32, float steps.
CREATION = {
    "linspace_endpoints": (lambda: Tensor.linspace(-1.3, 2.7, 7), lambda: torch.linspace(-1.3, 2.7, 7)),
    "linspace_descending": (lambda: Tensor.linspace(5.0, -3.0, 9), lambda: torch.linspace(5.0, -3.0, 9)),
    "linspace_one_step": (lambda: Tensor.linspace(0.1, 0.7, 2), lambda: torch.linspace(0.1, 0.7, 2)),
    "linspace_single": (lambda: Tensor.linspace(3.5, 9.0, 1), lambda: torch.linspace(3.5, 9.0, 1)),
    "arange_past_int32": (lambda: Tensor.arange(2**31 - 2, 2**31 + 3), lambda: torch.arange(2**31 - 2, 2**31 + 3)),
    "arange_negative_past_int32": (lambda: Tensor.arange(-2**31 - 1, -2**31 + 2), lambda: torch.arange(-2**31 - 1, -2**31 + 2)),
    "arange_float_step": (lambda: Tensor.arange(0.0, 1.0, 0.1), lambda: torch.arange(0.0, 1.0, 0.1)),
    "arange_negative_step": (lambda: Tensor.arange(10, 0, -3), lambda: torch.arange(10, 0, -3)),
}


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name", CREATION)
def test_creation_matches_torch(name):
  pg, th = CREATION[name]
  got, ref = pg().numpy(), th().numpy()
  # tinygrad's default int is int32 (torch's int64); past int32 both are int64
  if "int32" in name:
    assert got.dtype == ref.dtype == np.int64, f"{name}: dtype {got.dtype}, torch's {ref.dtype}"
  assert got.dtype.kind == ref.dtype.kind
  # Inner linspace points are the correctly rounded values; torch's float32 steps may be a few
  # ulp of the range away from them.
  np.testing.assert_array_equal(got, ref) if got.dtype.kind in "iu" else \
      np.testing.assert_allclose(got, ref, rtol=0, atol=4e-7 * float(np.abs(ref).max()))
  if name.startswith("linspace"):  # the endpoints exactly
    assert got[0] == ref[0] and got[-1] == ref[-1]


def test_allclose_is_a_python_bool():
  a = Tensor([1.0, _INF, _NAN])
  assert a.allclose(Tensor([1.0 + 1e-7, _INF, _NAN]), equal_nan=True) is True
  assert a.allclose(Tensor([1.0, _INF, _NAN])) is False  # nan is not close to nan by default
  assert Tensor([1, 2]).allclose(Tensor([1, 3])) is False


def test_dtype_conveniences():
  assert Tensor([1.5]).is_floating_point() is True and Tensor([1]).is_floating_point() is False
  assert Tensor([1.7, -2.7]).long().dtype == dtypes.int64 and Tensor([1.7]).short().dtype == dtypes.int16
  assert Tensor([1.0]).bfloat16().dtype == dtypes.bfloat16


# --- bitcast: bit patterns, not values -----------------------------------------------------------
# torch's x.view(dtype) is the reference for Tensor.bitcast over every same-itemsize pair of
# polygrad's dtypes, on every layout. The inputs are random bit patterns with the special encodings
# of the float of that size mixed in (signed zeros, infinities, subnormals, quiet and signaling
# NaNs with payloads) and results are compared as bits, so a quieted NaN or a lost sign fails.
# torch has no uint16/32/64: for those it reads the same bits as the signed type of that size.
# Results are fetched unpacked: packing concatenates with additions, which would turn -0 into +0.

BITS_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "float16", "bfloat16", "int32", "uint32", "float32",
               "int64", "uint64", "float64")
_SIZE = {dt: getattr(dtypes, dt).itemsize for dt in BITS_DTYPES}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_SPECIAL_BITS = {
    # float16 and bfloat16 zeros, infinities, subnormals, NaNs (quiet, signaling, with payloads)
    2: [0x0000, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x7E00, 0xFE01, 0x7C01, 0x7D55, 0x7F80, 0xFF80, 0x7FC0,
        0x7F81, 0xFFA5, 0x0040, 0x807F],
    4: [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF, 0x7FC00000, 0xFFC00001,
        0x7F800001, 0xFFA5A5A5, 0x7F7FFFFF, 0x00800000],
    8: [0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 1, 0x800FFFFFFFFFFFFF, 0x7FF8000000000000,
        0xFFF8000000000123, 0x7FF0000000000001, 0xFFF5A5A5A5A5A5A5],
}
BITCAST_PAIRS = [(a, b) for a in BITS_DTYPES for b in BITS_DTYPES if a != b and _SIZE[a] == _SIZE[b]]
BITCAST_SHAPES = [(3, 4), (), (0, 3), (2, 3, 5), (1, 7), (1,), (6,)]
# By default, pairs in BITCAST_PRIMARY are checked on every shape contiguously and on the first
# three in every layout; the others contiguously on the first three shapes plus one
# non-contiguous layout (rotating), as for the table's secondary dtypes. FULL: everything.
BITCAST_PRIMARY = {("float32", "int32"), ("int32", "float32"), ("float16", "int16"), ("uint16", "float16"),
                   ("bfloat16", "uint16"), ("int16", "bfloat16"), ("float16", "bfloat16"),
                   ("float64", "uint64"), ("int64", "float64"), ("uint8", "bool"), ("bool", "int8")}


def _bitcast_variants(pair):
  every = [(layout, shape) for layout in ALL_LAYOUTS for shape in BITCAST_SHAPES
           if _base_shape(shape, layout) is not None]
  if FULL:
    return every
  if pair in BITCAST_PRIMARY:
    return [c for c in every if c[0] == "contiguous" or c[1] in BITCAST_SHAPES[:3]]
  others = [layout for layout in ALL_LAYOUTS if layout != "contiguous"]
  pick = others[BITCAST_PAIRS.index(pair) % len(others)]
  return [c for c in every if c[0] == "contiguous"][:3] + [next(c for c in every if c[0] == pick)]


def _random_bits(rng, dt: str, shape) -> np.ndarray:
  """Random patterns of dt's size as unsigned integers (bool: 0 or 1), 40% of them special."""
  if dt == "bool":
    return np.asarray(rng.random(shape) < 0.5).astype(np.uint8)
  size = _SIZE[dt]
  u = _UINT[size]
  flat = rng.integers(0, np.iinfo(u).max, size=int(np.prod(shape)), dtype=u, endpoint=True)
  if size > 1:
    pick = rng.random(flat.size) < 0.4
    flat[pick] = rng.choice(np.array(_SPECIAL_BITS[size], dtype=u), size=int(pick.sum()))
  return flat.reshape(shape)


def _pg_bits_leaf(bits: np.ndarray, dt: str) -> Tensor:
  return Tensor.from_wire_array(bits.astype(np.bool_) if dt == "bool" else bits, getattr(dtypes, dt))


def _th_type(dt: str):
  return getattr(torch, dt, None) or getattr(torch, f"int{8 * _SIZE[dt]}")


def _th_bits_leaf(bits: np.ndarray, dt: str):
  if dt == "bool":
    return torch.from_numpy(bits.astype(np.bool_))
  return torch.from_numpy(np.array(bits, order="C").view(_SINT[_SIZE[dt]])).view(_th_type(dt))


def _th_bits(t, dt: str) -> np.ndarray:
  """A torch result's bits as unsigned integers; bool as nonzero bytes (see Tensor.bitcast)."""
  t = t.contiguous()
  if dt == "bool":
    return (t.view(torch.uint8).numpy() != 0).astype(np.uint8)
  return t.view(getattr(torch, f"int{8 * _SIZE[dt]}")).numpy().view(_UINT[_SIZE[dt]])


def _pg_bits(arr: np.ndarray, dt: str) -> np.ndarray:
  """A polygrad result's bits as unsigned integers (the client returns bfloat16 widened to float32)."""
  if arr.size == 0:  # fetched as placeholders (nothing to realize)
    return np.zeros(arr.shape, np.uint8 if dt == "bool" else _UINT[_SIZE[dt]])
  arr = np.array(arr, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
  if dt == "bool":
    return arr.astype(np.uint8)
  if dt == "bfloat16":
    return (arr.view(np.uint32) >> 16).astype(np.uint16)
  return arr.view(_UINT[_SIZE[dt]])


def _check_bits(got: np.ndarray, ref: np.ndarray, what: str, nan_dt: Optional[str] = None):
  """Bitwise equality; with nan_dt, a NaN of that float dtype matches any NaN (arithmetic results)."""
  assert got.shape == ref.shape, f"{what}: shape {got.shape} != torch's {ref.shape}"
  if nan_dt is not None:
    exp_mask, man_mask = {"float16": (0x7C00, 0x3FF), "bfloat16": (0x7F80, 0x7F),
                          "float32": (0x7F800000, 0x7FFFFF)}[nan_dt]
    nan = lambda b: ((b & exp_mask) == exp_mask) & ((b & man_mask) != 0)  # noqa: E731
    both = nan(got) & nan(ref)
    got, ref = np.where(both, 0, got), np.where(both, 0, ref)
  bad = np.flatnonzero(got.reshape(-1) != ref.reshape(-1))
  assert bad.size == 0, (f"{what}: {bad.size} of {got.size} differ, first at {bad[0]}: "
                         f"{int(got.reshape(-1)[bad[0]]):#x} != torch's {int(ref.reshape(-1)[bad[0]]):#x}")


def _realize_all(outs):
  live = [t for t in outs if t.numel() > 0]
  if live:
    live[0].realize(*live[1:])
  return [t.numpy() if t.numel() else np.zeros(t.shape) for t in outs]


BITCAST_CASES = sum(len(_bitcast_variants(p)) for p in BITCAST_PAIRS)


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("src,dst", [pytest.param(a, b, id=f"bitcast-{a}-{b}") for a, b in BITCAST_PAIRS])
def test_bitcast_parity(rng, src: str, dst: str):
  cases = []
  for layout, shape in _bitcast_variants((src, dst)):
    bits = _random_bits(rng, src, _base_shape(shape, layout))
    po = _view(_pg_bits_leaf(bits, src), shape, layout, False).bitcast(getattr(dtypes, dst))
    to = _view(_th_bits_leaf(bits, src), shape, layout, True).view(_th_type(dst))
    assert po.dtype == getattr(dtypes, dst) and po.shape == tuple(to.shape), f"{layout} {shape}: {po.dtype} {po.shape}"
    cases.append((f"{src}->{dst} {layout} {shape}", po, _th_bits(to, dst)))
  for (what, _, ref), got in zip(cases, _realize_all([po for _, po, _ in cases])):
    _check_bits(_pg_bits(got, dst), ref, what)


# Differing itemsizes: one pair per (from, to) size combination, floats first, on every layout (the
# reference reads the view's contiguous copy: torch needs a contiguous last axis, polygrad not).
BITCAST_RESIZE_PAIRS = [("uint8", "float16"), ("bool", "float32"), ("int8", "float64"), ("bfloat16", "uint8"),
                        ("float16", "float32"), ("int16", "float64"), ("float32", "uint8"), ("float32", "bfloat16"),
                        ("float32", "int64"), ("float64", "int8"), ("float64", "float16"), ("uint64", "float32"),
                        ("float32", "bool")]
BITCAST_RESIZE_SHAPES = [(3, 8), (16,), (0, 8), (2, 3, 8), (1, 16)]


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("src,dst", [pytest.param(a, b, id=f"bitcast-{a}-{b}") for a, b in BITCAST_RESIZE_PAIRS])
def test_bitcast_resize_parity(rng, src: str, dst: str):
  cases = []
  every = [(layout, shape) for layout in ALL_LAYOUTS for shape in BITCAST_RESIZE_SHAPES
           if _base_shape(shape, layout) is not None]
  for layout, shape in every if FULL else [c for c in every if c[1] in BITCAST_RESIZE_SHAPES[:3]]:
    bits = _random_bits(rng, src, _base_shape(shape, layout))
    po = _view(_pg_bits_leaf(bits, src), shape, layout, False).bitcast(getattr(dtypes, dst))
    # A fresh copy: torch's view checks the strides and offset even where contiguous() is a no-op.
    tv = _view(_th_bits_leaf(bits, src), shape, layout, True).clone(memory_format=torch.contiguous_format)
    to = tv.view(_th_type(dst))
    assert po.dtype == getattr(dtypes, dst) and po.shape == tuple(to.shape), f"{layout} {shape}: {po.dtype} {po.shape}"
    cases.append((f"{src}->{dst} {layout} {shape}", po, _th_bits(to, dst)))
  for (what, _, ref), got in zip(cases, _realize_all([po for _, po, _ in cases])):
    _check_bits(_pg_bits(got, dst), ref, what)


def _bits_abs(t, dt):
  """abs through the bits: clear the sign bit (the wire has no integer AND: the same by where)."""
  b = t.bitcast(getattr(dtypes, f"int{8 * dt.itemsize}"))
  return (b < 0).where(b - (-2 ** (8 * dt.itemsize - 1)), b).bitcast(dt)


# Bitcasts inside fused elementwise chains and round trips: (name, input dtype, polygrad, torch,
# result dtype, whether NaN results are arithmetic, so only NaN-ness must match).
BITCAST_CHAINS = [
    ("abs_via_bits", "float32", lambda x: _bits_abs(x, dtypes.float32),
     lambda x: (x.view(torch.int32) & 0x7FFFFFFF).view(torch.float32), "float32", False),
    ("abs_via_bits", "float16", lambda x: _bits_abs(x, dtypes.float16),
     lambda x: (x.view(torch.int16) & 0x7FFF).view(torch.float16), "float16", False),
    ("abs_via_bits", "bfloat16", lambda x: _bits_abs(x, dtypes.bfloat16),
     lambda x: (x.view(torch.int16) & 0x7FFF).view(torch.bfloat16), "bfloat16", False),
    ("neg_via_wrapping_add", "float32", lambda x: (x.bitcast(dtypes.uint32) + 2 ** 31).bitcast(dtypes.float32),
     lambda x: (x.view(torch.int32) ^ torch.tensor(-2 ** 31, dtype=torch.int32)).view(torch.float32), "float32", False),
    ("next_up_bits", "float32", lambda x: (x.bitcast(dtypes.int32) + 1).bitcast(dtypes.float32),
     lambda x: (x.view(torch.int32) + 1).view(torch.float32), "float32", False),
    ("round_trip", "float32", lambda x: x.bitcast(dtypes.int32).bitcast(dtypes.float32), lambda x: x, "float32", False),
    ("round_trip", "float64", lambda x: x.bitcast(dtypes.uint64).bitcast(dtypes.float64), lambda x: x, "float64", False),
    ("round_trip", "float16", lambda x: x.bitcast(dtypes.bfloat16).bitcast(dtypes.int16).bitcast(dtypes.float16),
     lambda x: x, "float16", False),
    ("round_trip", "bfloat16", lambda x: x.bitcast(dtypes.uint16).bitcast(dtypes.bfloat16), lambda x: x, "bfloat16",
     False),
    ("bits_then_math", "int16", lambda x: x.bitcast(dtypes.float16) * 2 + 1,
     lambda x: x.view(torch.float16) * 2 + 1, "float16", True),
    ("math_then_bits", "float32", lambda x: (x * 2).bitcast(dtypes.int32),
     lambda x: (x * 2).view(torch.int32), "int32", True),
]


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name,src,pg_f,th_f,dst,arith", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in BITCAST_CHAINS])
def test_bitcast_chain(rng, name, src, pg_f, th_f, dst, arith):
  cases = []
  for layout, shape in (("contiguous", (5, 7)), ("permuted", (5, 7)), ("flipped", (4, 3)), ("contiguous", ())):
    bits = _random_bits(rng, src, _base_shape(shape, layout))
    po = pg_f(_view(_pg_bits_leaf(bits, src), shape, layout, False))
    to = th_f(_view(_th_bits_leaf(bits, src), shape, layout, True))
    cases.append((f"{name} {src} {layout} {shape}", po, _th_bits(to, dst)))
  for (what, _, ref), got in zip(cases, _realize_all([po for _, po, _ in cases])):
    # An arithmetic NaN's payload is the hardware's choice; math_then_bits reads it as int32.
    _check_bits(_pg_bits(got, dst), ref, what, nan_dt=(src if dst.startswith("int") else dst) if arith else None)


if __name__ == "__main__":
  print(f"{len(OPS)} ops, {len(CASE_PARAMS)} tests, {CASES} cases; "
        f"bitcast: {len(BITCAST_PAIRS)} pairs, {BITCAST_CASES} cases, {len(BITCAST_CHAINS)} chains")
  sys.exit(0)


# --- edge values of the sorting family (issue 17): NaN, infinities and signed zeros ------------------

SPECIAL = np.array([np.nan, -np.inf, 3.0, -0.0, 0.0, np.inf, -2.5, np.nan, 3.0, 1.0], dtype=np.float32)
SPECIAL_EDGES = {
    "sort_nan_last": (lambda x: x.sort(0).values, lambda x: torch.sort(x, dim=0, stable=True).values),
    "sort_descending_nan_first": (lambda x: x.sort(0, descending=True).values,
                                  lambda x: torch.sort(x, dim=0, descending=True, stable=True).values),
    "argsort_nan_ties_stable": (lambda x: x.argsort(0), lambda x: torch.sort(x, dim=0, stable=True).indices),
    "argsort_descending": (lambda x: x.argsort(0, descending=True),
                           lambda x: torch.sort(x, dim=0, descending=True, stable=True).indices),
    "topk_with_nan": (lambda x: x.topk(4).values, lambda x: torch.topk(x, 4).values),
    "cummax_nan_sticks": (lambda x: x.cummax(0).values, lambda x: torch.cummax(x, 0).values),
    "cummax_indices": (lambda x: x.cummax(0).indices, lambda x: torch.cummax(x, 0).indices),
    "cummin_nan_sticks": (lambda x: x.cummin(0).values, lambda x: torch.cummin(x, 0).values),
    "cummin_indices": (lambda x: x.cummin(0).indices, lambda x: torch.cummin(x, 0).indices),
    "logcumsumexp_infinities": (lambda x: x[1:].logcumsumexp(0), lambda x: torch.logcumsumexp(x[1:], 0)),
    "logcumsumexp_all_neg_inf": (lambda x: (x[1:2] * Tensor.ones(3)).logcumsumexp(0),
                                 lambda x: torch.logcumsumexp(x[1:2] * torch.ones(3), 0)),
    "cumprod_inf_zero": (lambda x: x[1:6].cumprod(0), lambda x: torch.cumprod(x[1:6], 0)),
    # gather picks its element; the infinities and NaNs beside it stay out (they were multiplied in)
    "gather_beside_inf_and_nan": (lambda x: x.gather(0, Tensor([2, 9, 4, 6], dtype=dtypes.int32)),
                                  lambda x: torch.gather(x, 0, torch.tensor([2, 9, 4, 6]))),
}


# The same edges in rows past kSortNetworkFrom (2048), which sort through the bitonic network over
# packed (value key, position) keys, or (value, position) pairs for 64-bit dtypes: many ties (NaN,
# 0.0 beside -0.0, repeated values) keep their order.
def _assert_same_sorted(got: np.ndarray, ref: np.ndarray) -> None:
  np.testing.assert_array_equal(got, ref)  # NaN matches NaN
  if got.dtype.kind == "f":  # -0.0 stays -0.0 (a NaN's sign bit means nothing)
    numbers = ~np.isnan(ref)
    assert (np.signbit(got) == np.signbit(ref))[numbers].all(), f"signs of zeros differ: {got} vs {ref}"


LONG_SORTS = {name: SPECIAL_EDGES[name] for name in
              ("sort_nan_last", "sort_descending_nan_first", "argsort_nan_ties_stable", "argsort_descending")}


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
# float64 and int64 keep the (value, position) pair network
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "float64", "int64"])
@pytest.mark.parametrize("name", LONG_SORTS)
def test_long_rows_sort_edge_values_stably(name, dtype):
  rng = np.random.default_rng(7)
  if dtype.startswith("float"):
    x = np.concatenate([np.tile(SPECIAL, 250), rng.integers(-3, 4, 61).astype(np.float32)]).astype(dtype)
  else:
    info = np.iinfo(dtype)
    x = np.concatenate([[info.min, info.max, 0, info.max, info.min], rng.integers(0, 9, 2500)]).astype(dtype)
  pg, th = LONG_SORTS[name]
  got, ref = pg(Tensor(x)).numpy(), th(torch.tensor(x)).numpy()
  _assert_same_sorted(got, ref)


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name", SPECIAL_EDGES)
def test_sorting_edge_values(name):
  pg, th = SPECIAL_EDGES[name]
  got, ref = pg(Tensor(SPECIAL)).numpy(), th(torch.tensor(SPECIAL)).numpy()
  _assert_same_sorted(got, ref)


# --- edge semantics as PyTorch computes them (issue 17): forward values (NaN equal to NaN, signs of
# zeros) and, where differentiable, the gradient of sum(out) ------------------------------------------

NAN, INF = float("nan"), float("inf")
EDGE_CASES = {
    # NaN propagates through max/min, their positions, maximum/minimum and clip
    "max_nan": (lambda a: a.max(), lambda a: a.max(), [[1.0, NAN, -2.0, 3.0]], False),
    "max_axis_nan": (lambda a: a.reshape(2, 2).max(1), lambda a: a.reshape(2, 2).max(1).values,
                     [[1.0, NAN, -2.0, 3.0]], False),
    "min_nan": (lambda a: a.min(), lambda a: a.min(), [[1.0, NAN, -2.0, 3.0]], False),
    "argmax_nan": (lambda a: a.argmax(), lambda a: a.argmax(), [[1.0, NAN, -2.0, NAN]], False),
    "argmin_nan": (lambda a: a.argmin(), lambda a: a.argmin(), [[1.0, -2.0, NAN, 3.0]], False),
    "maximum_nan": (lambda a, b: a.maximum(b), torch.maximum if torch else None, [[1.0, NAN, 2.0], [NAN, 1.0, 3.0]], False),
    "minimum_nan": (lambda a, b: a.minimum(b), torch.minimum if torch else None, [[1.0, NAN, 2.0], [NAN, 1.0, 3.0]], False),
    "clip_nan": (lambda a: a.clip(-1, 1), lambda a: a.clamp(-1, 1), [[NAN, 2.0, -3.0, 0.5]], False),
    "clip_nan_bound": (lambda a, b: a.clip(b, 1), lambda a, b: a.clamp(b, torch.ones(3)), [[0.5, 2.0, -3.0], [NAN, 0.0, NAN]],
                       False),
    "clip_grad_at_bounds": (lambda a: a.clip(-1, 1), lambda a: a.clamp(-1, 1), [[-1.0, 1.0, 0.0, 2.0, -2.0]], True),
    "clip_grad_at_nan": (lambda a: a.clip(-1, 1), lambda a: a.clamp(-1, 1), [[NAN, 0.5]], True),
    # means over zero elements
    "mean_over_empty_axis": (lambda a: a.reshape(0, 3).mean(0), lambda a: a.reshape(0, 3).mean(0), [[]], False),
    "mean_of_empty": (lambda a: a.mean(), lambda a: a.mean(), [[]], False),
    "var_over_empty_axis": (lambda a: a.reshape(0, 3).var(0), lambda a: a.reshape(0, 3).var(0), [[]], False),
    "var_of_one_element": (lambda a: a.reshape(1, 3).var(0), lambda a: a.reshape(1, 3).var(0), [[1.0, 2.0, 3.0]], False),
    # gradients at the points where a max-based formula ties
    "relu_grad_at_0": (lambda a: a.relu(), torch.relu if torch else None, [[0.0, 1.0, -1.0]], True),
    "sigmoid_grad_at_0": (lambda a: a.sigmoid(), torch.sigmoid if torch else None, [[0.0, -0.0, 1.0]], True),
    "tanh_grad_at_0": (lambda a: a.tanh(), torch.tanh if torch else None, [[0.0, 0.5]], True),
    "minimum_tie_grad": (lambda a, b: a.minimum(b), torch.minimum if torch else None, [[1.0, 2.0], [1.0, 3.0]], True),
    "maximum_tie_grad": (lambda a, b: a.maximum(b), torch.maximum if torch else None, [[1.0, 2.0], [1.0, 3.0]], True),
    # extremes without overflow
    # 2 sigmoid(2x) - 1 cancelled to nothing near 0 (tanh(1e-5) was off by 66,000 ulp in float32)
    "tanh_near_zero": (lambda a: a.tanh(), torch.tanh if torch else None, [[1e-5, -3e-7, 1e-20, -0.0, 0.0, 2e-3]], True),
    "softplus_extremes": (lambda a: a.softplus(), F.softplus if torch else None,
                          [[-200.0, -90.0, 19.5, 20.0, 20.5, 90.0, 200.0, 3.0e38]], True),
    "softplus_beta_threshold": (lambda a: a.softplus(0.5, 3.0), lambda a: F.softplus(a, 0.5, 3.0),
                                [[5.0, 6.0, 7.0, 500.0]], True),
    "logsigmoid_extremes": (lambda a: a.logsigmoid(), F.logsigmoid if torch else None, [[-200.0, -90.0, 90.0]], True),
    "mish_extremes": (lambda a: a.mish(), F.mish if torch else None, [[-200.0, 90.0, 200.0]], True),
    # the activations that are core composites since issue 33, at their kinks (torch's gradients
    # there), zeros, infinities and NaN
    "relu6_at_bounds": (lambda a: a.relu6(), F.relu6 if torch else None, [[0.0, -0.0, 6.0, -1.0, 7.0, NAN, INF]], True),
    "hardtanh_at_bounds": (lambda a: a.hardtanh(-0.5, 0.75), lambda a: F.hardtanh(a, -0.5, 0.75),
                           [[-0.5, 0.75, 0.0, -2.0, 2.0, NAN]], True),
    "leaky_relu_at_zero": (lambda a: a.leaky_relu(0.1), lambda a: F.leaky_relu(a, 0.1), [[0.0, -0.0, -1.0, -INF, NAN]], True),
    "elu_at_zero": (lambda a: a.elu(0.5), lambda a: F.elu(a, 0.5), [[0.0, -0.0, -INF, 1.0, -1.0, NAN]], True),
    "hardsigmoid_at_kinks": (lambda a: a.hardsigmoid(), F.hardsigmoid if torch else None,
                             [[-3.0, 3.0, 0.0, -4.0, 4.0, NAN, -INF]], True),
    "hardswish_at_kinks": (lambda a: a.hardswish(), F.hardswish if torch else None,
                           [[-3.0, 3.0, -0.0, -4.0, 4.0, NAN, -INF, INF]], True),
    "logsigmoid_at_zero": (lambda a: a.logsigmoid(), F.logsigmoid if torch else None, [[0.0, -0.0, INF, -INF]], True),
    "mish_at_zero": (lambda a: a.mish(), F.mish if torch else None, [[0.0, -0.0, -INF, INF, 19.5, 20.5]], True),
    "quick_gelu_at_zero": (lambda a: a.quick_gelu(), lambda a: a * torch.sigmoid(1.702 * a), [[0.0, -0.0, 60.0, -60.0]], True),
    "rsqrt_at_zero": (lambda a: a.rsqrt(), torch.rsqrt if torch else None, [[0.0, -0.0, INF, 4.0, -1.0]], True),
    # float32's pi/2 and 3 pi/2: cos is its (small) distance to the true zero, tan large
    "cos_at_zeros": (lambda a: a.cos(), torch.cos if torch else None,
                     [[1.5707963705062866, -1.5707963705062866, 4.71238899230957, 0.0, -0.0, INF, NAN]], True),
    "tan_near_poles": (lambda a: a.tan(), torch.tan if torch else None,
                       [[1.5707963705062866, -1.5707963705062866, 0.0, -0.0, 1.5, 100.0]], True),
    "sigmoid_extremes": (lambda a: a.sigmoid(), torch.sigmoid if torch else None, [[-200.0, -90.0, 90.0, 200.0]], True),
    "gelu_exact_extremes": (lambda a: a.gelu(approximate="none"), lambda a: F.gelu(a),
                            [[-200.0, -6.0, 0.0, 1.5, 200.0]], True),
    # a row of -inf gives NaN (0/0), as torch; a row holding one -inf gives it probability 0
    "softmax_rows_with_neg_inf": (lambda a: a.reshape(2, 2).softmax(-1), lambda a: a.reshape(2, 2).softmax(-1),
                                  [[-INF, 0.0, -INF, -INF]], False),
    # a comparison inside a differentiated expression passes no gradient, and is no error
    "comparison_in_gradient": (lambda a: a * (a < 0), lambda a: a * (a < 0), [[-1.0, 2.0, 0.0]], True),
    # pow at 0 ** 0, negative bases with integral exponents, infinities, -inf with fractional
    # exponents, 1 and -1 to infinite or NaN powers: C's pow, as torch
    "pow_special_values": (lambda a, b: a ** b, lambda a, b: a ** b,
                           [[0.0, -2.0, -2.0, INF, -INF, -INF, -INF, 2.0, 1.0, -1.0, -1.0, 0.5, 0.0, -3.0],
                            [0.0, 3.0, 2.0, -1.0, 0.5, -0.5, 3.0, INF, NAN, INF, -INF, -INF, -2.0, 0.5]], False),
    "realize_zero_elements": (lambda a: a.reshape(0, 2) * 2, lambda a: a.reshape(0, 2) * 2, [[]], False),
    # fancy indexing gathers: an inf or NaN in a row not picked stays out of the result
    "index_rows_with_inf": (lambda a: a.reshape(3, 2)[Tensor([2, 0])], lambda a: a.reshape(3, 2)[torch.tensor([2, 0])],
                            [[INF, 1.0, -INF, NAN, 2.0, 3.0]], True),
    "index_tuple_of_positions": (lambda a: a.reshape(2, 3)[(1, 0), (2, 2)], lambda a: a.reshape(2, 3)[[1, 0], [2, 2]],
                                 [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], True),
    # reflect and replicate pads mirror the whole input's edges, then cut the negative amounts
    "pad_reflect_negative": (lambda a: a.reshape(1, 5).pad((3, -3), mode="reflect"),
                             lambda a: F.pad(a.reshape(1, 5), (3, -3), mode="reflect"), [[1.0, 2.0, 3.0, 4.0, 5.0]], True),
    "pad_replicate_negative": (lambda a: a.reshape(1, 5).pad((3, -5), mode="replicate"),
                               lambda a: F.pad(a.reshape(1, 5), (3, -5), mode="replicate"), [[1.0, 2.0, 3.0, 4.0, 5.0]],
                               True),
    # a convolution's negative padding crops the input (tinygrad)
    "conv2d_negative_padding": (lambda a, w: a.reshape(1, 1, 4, 4).conv2d(w.reshape(1, 1, 2, 2), padding=(-1, 0, -1, 1)),
                                lambda a, w: F.conv2d(F.pad(a.reshape(1, 1, 4, 4)[:, :, 1:, 1:], (0, 0, 0, 1)),
                                                      w.reshape(1, 1, 2, 2)),
                                [[float(v) for v in range(16)], [1.0, -2.0, 0.5, 3.0]], True),
    # nonzero and masked_select with a fixed size (tinygrad's size=): the rows past the count
    # filled, no round trip
    "nonzero_size_fill": (lambda a: a.nonzero(size=5, fill_value=-1),
                          lambda a: torch.cat([a.nonzero().int(), torch.full((3, 1), -1, dtype=torch.int32)]),
                          [[0.0, 2.0, 0.0, NAN]], False),
    "masked_select_size_fill": (lambda a: a.masked_select(a > 1, size=4, fill_value=-7.5),
                                lambda a: torch.cat([a.masked_select(a > 1), torch.full((2,), -7.5)]),
                                [[0.5, 2.0, 3.0, -1.0]], False),
}


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name", EDGE_CASES)
def test_edge_semantics(name):
  pg, th, args, grad = EDGE_CASES[name]
  pts = [Tensor(np.array(a, dtype=np.float32), requires_grad=grad) for a in args]
  tts = [torch.tensor(np.array(a, dtype=np.float32), requires_grad=grad) for a in args]
  got, ref = pg(*pts), th(*tts)
  g, r = got.numpy(), ref.detach().numpy()
  assert g.shape == r.shape, f"shape {g.shape} != torch's {r.shape}"
  np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=1e-6, atol=1e-7)
  if grad:
    got.sum().backward()
    ref.sum().backward()
    for p, t in zip(pts, tts):
      np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7, err_msg="gradient")


# Signs of zeros where torch keeps one (assert_allclose above takes -0.0 for 0.0): the core
# composites of issue 33 at zeros and at the kinks where a product gives a signed zero.
ZERO_SIGNS = {
    "relu6": (lambda a: a.relu6(), F.relu6 if torch else None),
    "hardtanh": (lambda a: a.hardtanh(-0.0, 1.0), lambda a: F.hardtanh(a, -0.0, 1.0)),
    "leaky_relu": (lambda a: a.leaky_relu(0.1), lambda a: F.leaky_relu(a, 0.1)),
    "elu": (lambda a: a.elu(0.5), lambda a: F.elu(a, 0.5)),
    "hardswish": (lambda a: a.hardswish(), F.hardswish if torch else None),
    "rsqrt": (lambda a: a.rsqrt(), torch.rsqrt if torch else None),
    "tan": (lambda a: a.tan(), torch.tan if torch else None),
    "mish": (lambda a: a.mish(), F.mish if torch else None),
}


@pytest.mark.skipif(torch is None, reason="PyTorch (Debian's python3-torch) is the reference")
@pytest.mark.parametrize("name", ZERO_SIGNS)
def test_zero_signs(name):
  pg, th = ZERO_SIGNS[name]
  x = np.array([0.0, -0.0, -3.0, 3.0, -1.0, 1.0], dtype=np.float32)
  got, ref = pg(Tensor(x)).numpy(), th(torch.tensor(x)).numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)
  zeros = (ref == 0) | np.isinf(ref)
  assert (np.signbit(got) == np.signbit(ref))[zeros].all(), f"signs of zeros or infinities differ: {got} vs {ref}"


@pytest.mark.parametrize("causal", [False, True])
def test_attention_dropout_drops_the_weights_as_dropout_does(rng, causal):
  # The daemon draws the weights' mask as DROPOUT's over their shape from the same key, so the
  # same seed gives the same mask; forward and gradients match torch with that mask applied.
  q, k, v = (rng.standard_normal(s).astype(np.float32) for s in [(2, 4, 3), (2, 5, 3), (2, 5, 6)])
  p = 0.4
  with Tensor.train():
    Tensor.manual_seed(11)
    mask = Tensor.ones(2, 4, 5).dropout(p).numpy()
    Tensor.manual_seed(11)
    tq, tk, tv = (Tensor(a, requires_grad=True) for a in (q, k, v))
    out = tq.scaled_dot_product_attention(tk, tv, is_causal=causal, dropout_p=p)
    out.sum().backward()
  assert 0 < (mask == 0).sum() < mask.size
  rq, rk, rv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
  s = rq @ rk.transpose(-2, -1) / math.sqrt(3)
  if causal:
    s = s.masked_fill(~torch.ones(4, 5, dtype=torch.bool).tril(), float("-inf"))
  ref = (s.softmax(-1) * torch.tensor(mask)) @ rv
  ref.sum().backward()
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
  for got, want in ((tq, rq), (tk, rk), (tv, rv)):
    np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-4, atol=1e-5)
  # Outside training, no dropout.
  plain = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal, dropout_p=p)
  np.testing.assert_allclose(plain.numpy(), Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal).numpy())
