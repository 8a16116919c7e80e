"""Shape rules, computed locally so that `t.shape` never asks the daemon and shape errors are
raised before any round trip: broadcasting, reshape/expand inference, axis normalisation, and the
output shapes of matmul, reductions, convolution and pooling windows. The one place for them."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import AxisError, ShapeError
from .variable import SymInt, dim, same_dims

Shape = Tuple[int, ...]


def prod(xs: Iterable[int]) -> int:
  out = 1
  for x in xs:
    out *= x
  return out


def as_shape(args) -> Shape:
  """Accept f(2, 3), f((2, 3)) and f([2, 3]); every entry must be an int."""
  if len(args) == 1 and isinstance(args[0], (tuple, list)):
    args = tuple(args[0])
  elif any(isinstance(a, (tuple, list)) for a in args):
    raise ShapeError(f"a shape is ints or one sequence of ints, got {args!r:.200}")
  out = []
  for a in args:
    if isinstance(a, bool) or not isinstance(a, int):
      try:
        a = a.__index__()
      except AttributeError:
        raise TypeError(f"shape entries must be ints, got {type(a).__name__}") from None
    out.append(int(a))
  return tuple(out)


def new_shape(args) -> Shape:
  """The shape of a new tensor from f(2, 3)-style arguments: ints >= 0."""
  return check_shape(as_shape(args))


def check_shape(shape: Shape) -> Shape:
  for s in shape:
    if s < 0:
      raise ShapeError(f"negative dimension in shape {shape}")
  return shape


def broadcast_shape(*shapes: Shape) -> Shape:
  """numpy broadcasting: align right, sizes must match or be 1."""
  if len(shapes) == 2 and same_dims(shapes[0], shapes[1]):
    return tuple(shapes[0])
  nd = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
  out = []
  for i in range(nd):
    # A symbolic dim (polygrad.variable) is never a broadcast 1, whatever its value, and wins
    # over an equal plain size.
    symbolic = [p[i] for p in padded if isinstance(p[i], SymInt)]
    sizes = {p[i] for p in padded if p[i] != 1 or isinstance(p[i], SymInt)}
    if len(sizes) > 1:
      raise ShapeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast "
                       f"together (axis {i - nd}: sizes {sorted(sizes)})")
    out.append(symbolic[0] if symbolic else sizes.pop() if sizes else 1)
  return tuple(out)


def normalize_axis(axis: int, ndim: int) -> int:
  if isinstance(axis, bool) or not isinstance(axis, int):
    raise TypeError(f"axis must be an int, got {type(axis).__name__}")
  lo = -max(ndim, 1)
  hi = max(ndim, 1) - 1
  if not lo <= axis <= hi:
    raise AxisError(f"axis {axis} is out of range for a tensor of {ndim} dimensions")
  return axis + ndim if axis < 0 else axis


def normalize_axes(axis: Union[None, int, Sequence[int]], ndim: int) -> Tuple[int, ...]:
  """None → every axis; an int or a sequence → sorted, unique, non-negative axes."""
  if axis is None:
    return tuple(range(ndim))
  if isinstance(axis, int) and not isinstance(axis, bool):
    axis = (axis,)
  axes = [normalize_axis(a, ndim) for a in axis]
  if len(set(axes)) != len(axes):
    raise ShapeError(f"repeated axis in {tuple(axis)}")
  if ndim == 0:
    return ()
  return tuple(sorted(axes))


def resolve_reshape(old: Shape, new: Sequence[Optional[int]]) -> Shape:
  """Resolve one -1 (and None = keep that axis) and check the element count."""
  new = list(new)
  for i, s in enumerate(new):
    if s is None:
      if i >= len(old):
        raise ShapeError(f"reshape: None at axis {i} has no matching axis in {old}")
      new[i] = old[i]
  if sum(1 for s in new if s == -1) > 1:
    raise ShapeError(f"reshape: at most one -1 allowed, got {tuple(new)}")
  if any(s < -1 for s in new):
    raise ShapeError(f"reshape: invalid size in {tuple(new)}")
  total = prod(old)
  if -1 in new:
    rest = prod(s for s in new if s != -1)
    if rest == 0 or total % rest != 0:
      raise ShapeError(f"reshape: cannot reshape {old} ({total} elements) into {tuple(new)}")
    new[new.index(-1)] = total // rest
  if prod(new) != total:
    raise ShapeError(f"reshape: cannot reshape {old} ({total} elements) into {tuple(new)}")
  return tuple(new)


def check_permutation(order: Sequence[int], ndim: int) -> Tuple[int, ...]:
  order = tuple(normalize_axis(a, ndim) for a in order) if ndim else tuple(order)
  if sorted(order) != list(range(ndim)):
    raise ShapeError(f"permute: {tuple(order)} is not a permutation of {ndim} axes")
  return order


def resolve_expand(old: Shape, new: Sequence[int]) -> Shape:
  """tinygrad/torch expand: -1 keeps a size, new leading axes may be added, size-1 axes grow."""
  if len(new) < len(old):
    raise ShapeError(f"expand: target {tuple(new)} has fewer axes than {old}")
  lead = len(new) - len(old)
  out = []
  for i, s in enumerate(new):
    o = old[i - lead] if i >= lead else None
    if s == -1 or s is None:
      if o is None:
        raise ShapeError(f"expand: -1 not allowed for a new leading axis in {tuple(new)}")
      s = o
    if s < 0:
      raise ShapeError(f"expand: invalid size {s} in {tuple(new)}")
    if o is not None and o != s and (o != 1 or isinstance(o, SymInt)):
      raise ShapeError(f"expand: cannot expand {old} to {tuple(new)} (axis {i}: {o} → {s})")
    out.append(s)
  return tuple(out)


def normalize_pairs(arg, shape: Shape, what: str, default) -> Tuple[Tuple[int, int], ...]:
  """One (a, b) pair (or None) per axis; None becomes `default(size)`."""
  arg = tuple(arg)
  if len(arg) != len(shape):
    raise ShapeError(f"{what}: need one pair per axis ({len(shape)}), got {len(arg)}")
  out = []
  for p, s in zip(arg, shape):
    if p is None:
      p = default(s)
    if len(p) != 2:
      raise ShapeError(f"{what}: each entry must be a (begin, end) pair, got {p}")
    out.append((dim(p[0]), dim(p[1])))
  return tuple(out)


def axis_of(axis, ndim: int, what: str) -> int:
  """normalize_axis for ops along one axis, which name themselves (`what`) in the error and take
  numpy ints; a 0-d tensor has no axis to name."""
  if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
    raise AxisError(f"{what}: axis must be an int, got {axis!r}")
  axis = int(axis)
  if not -ndim <= axis < ndim:
    raise AxisError(f"{what}: axis {axis} is out of range for {ndim} axes")
  return axis % ndim


def ints(v, what: str) -> Tuple[int, ...]:
  vals = (v,) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
  try:
    out = tuple(vals)
  except TypeError:
    raise ShapeError(f"{what} must be an int or a tuple of ints, got {v!r}") from None
  if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in out):
    raise ShapeError(f"{what} must be an int or a tuple of ints, got {v!r}")
  return tuple(int(x) for x in out)


def ntuple(v, n: int, what: str, low: int) -> Tuple[int, ...]:
  """n values from an int (repeated) or n values, each at least `low`."""
  out = ints(v, what)
  if len(out) == 1 and not isinstance(v, (tuple, list)):
    out = out * n
  if len(out) != n:
    raise ShapeError(f"{what} needs an int or {n} values (one per spatial axis), got {v!r}")
  if any(x < low for x in out):
    raise ShapeError(f"{what} values must be >= {low}, got {v!r}")
  return out


def padding_pairs(padding, n: int, allow_negative: bool = False) -> Tuple[int, ...]:
  """The wire's (before, after) per spatial axis in axis order ((top, bottom, left, right) in
  2-D) from an int, n values (one per axis), or tinygrad's 2n values, which list the pairs from
  the last axis back ((left, right, top, bottom) in 2-D). allow_negative: a convolution's, where
  a negative amount crops."""
  p = ints(padding, "padding")
  if len(p) == 1 and not isinstance(padding, (tuple, list)):
    p = p * n
  if len(p) == n:
    out = tuple(v for x in p for v in (x, x))
  elif len(p) == 2 * n:
    out = tuple(v for i in reversed(range(n)) for v in (p[2 * i], p[2 * i + 1]))
  else:
    raise ShapeError(f"padding needs an int, {n} values or {2 * n} ((before, after) from the last axis back), "
                     f"got {padding!r}")
  if not allow_negative and any(x < 0 for x in out):
    raise ShapeError(f"padding must be >= 0, got {padding!r}")
  return out


def window_out(spatial: Tuple[int, ...], k: Tuple[int, ...], stride: Tuple[int, ...], dil: Tuple[int, ...],
                pads: Tuple[int, ...], what: str, ceil_mode: bool = False) -> Tuple[int, ...]:
  """The output size of each spatial axis of a window op. ceil_mode (pools): a last partial window
  counts when it starts inside the input or its before-padding (torch; the daemon pads for it)."""
  out = []
  for i, size in enumerate(spatial):
    span = dil[i] * (k[i] - 1) + 1
    padded = size + pads[2 * i] + pads[2 * i + 1]
    if size + min(0, pads[2 * i]) + min(0, pads[2 * i + 1]) < 0:
      raise ShapeError(f"{what}: padding ({pads[2 * i]}, {pads[2 * i + 1]}) crops more than spatial axis {i} = {size}")
    if padded < span:
      raise ShapeError(f"{what}: a window of {span} (kernel {k[i]}, dilation {dil[i]}) does not fit spatial axis "
                       f"{i} = {size} padded to {padded}")
    windows = -(-(padded - span) // stride[i]) + 1 if ceil_mode else (padded - span) // stride[i] + 1
    if ceil_mode and (windows - 1) * stride[i] >= size + pads[2 * i]:
      windows -= 1
    out.append(windows)
  return tuple(out)


def spatial_count(sx: Tuple[int, ...], sw: Tuple[int, ...], what: str, layout: str) -> int:
  """The spatial axes of a convolution: weight.ndim - 2, 1 to 3, the input of the same rank."""
  if not 3 <= len(sw) <= 5 or len(sx) != len(sw):
    raise ShapeError(f"{what} takes input (N, C, *spatial) and weight {layout} of the same rank with 1 to 3 spatial "
                     f"axes, got {sx} and {sw}")
  return len(sw) - 2


def conv_shape(sx: Tuple[int, ...], sw: Tuple[int, ...], groups: int, stride, dil, pads) -> Tuple[int, ...]:
  o, cg = sw[:2]
  if cg * groups != sx[1] or o % groups:
    raise ShapeError(f"conv2d: weight {sw} with groups={groups} does not fit input {sx} "
                     f"(need C = groups * weight.shape[1] and O divisible by groups)")
  if any(k < 1 for k in sw[2:]):
    raise ShapeError(f"conv2d: empty kernel {sw}")
  return (sx[0], o) + window_out(sx[2:], sw[2:], stride, dil, pads, "conv2d")


def reduced_shape(shape: Tuple[int, ...], axes: Tuple[int, ...], keepdim: bool) -> Tuple[int, ...]:
  if keepdim:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))
  return tuple(s for i, s in enumerate(shape) if i not in axes)


def matmul_shape(sa: Tuple[int, ...], sb: Tuple[int, ...]) -> Tuple[int, ...]:
  """numpy matmul's result shape (the daemon's MATMUL rule), or the error numpy would give."""
  if not sa or not sb:
    raise ShapeError(f"both tensors need to be at least 1D, got {len(sa)}D and {len(sb)}D")
  a = (1,) + sa if len(sa) == 1 else sa
  b = sb + (1,) if len(sb) == 1 else sb
  if a[-1] != b[-2]:
    raise ShapeError(f"cannot matmul {sa} with {sb} ({a[-1]} != {b[-2]})")
  try:
    batch = broadcast_shape(a[:-2], b[:-2])
  except ValueError as e:
    raise ShapeError(f"cannot matmul {sa} with {sb}: batch {e}") from None
  return batch + ((a[-2],) if len(sa) > 1 else ()) + ((b[-1],) if len(sb) > 1 else ())


def linear_shape(sx: Tuple[int, ...], sw: Tuple[int, ...], sb: Optional[Tuple[int, ...]]) -> Tuple[int, ...]:
  """The daemon's SHAPE_LINEAR rule: x @ w's shape (x and w broadcast for a 1-D w), broadcast
  with the bias's when there is one."""
  y = broadcast_shape(sx, sw) if len(sw) == 1 else matmul_shape(sx, sw)
  return y if sb is None else broadcast_shape(y, sb)


def factor_shape(shape: Tuple[int, ...], factor: str) -> Tuple[int, ...]:
  """One factor of a factorization of the last two axes (the daemon's SHAPE_FACTOR rule):
  k = min(m, n); QR's q (m, k) and r (k, n), SVD's u (m, k), s (k) and vh (k, n)."""
  *lead, m, n = shape
  k = min(m, n)
  last = {"q": (m, k), "r": (k, n), "u": (m, k), "s": (k,), "vh": (k, n)}[factor]
  return tuple(lead) + last
