"""Shape rules, computed locally so that `t.shape` never asks the daemon and shape errors are
raised before any round trip."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple, Union

from .errors import AxisError, ShapeError

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
  out = []
  for a in args:
    if isinstance(a, bool) or not isinstance(a, int):
      try:
        a = a.__index__()
      except AttributeError:
        raise TypeError(f"shape entries must be ints, got {type(a).__name__}") from None
    out.append(int(a))
  return tuple(out)


def check_shape(shape: Shape) -> Shape:
  for s in shape:
    if s < 0:
      raise ShapeError(f"negative dimension in shape {shape}")
  return shape


def broadcast_shape(*shapes: Shape) -> Shape:
  """numpy broadcasting: align right, sizes must match or be 1."""
  nd = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
  out = []
  for i in range(nd):
    sizes = {p[i] for p in padded} - {1}
    if len(sizes) > 1:
      raise ShapeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast "
                       f"together (axis {i - nd}: sizes {sorted(sizes)})")
    out.append(sizes.pop() if sizes else 1)
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
    if o is not None and o != s and o != 1:
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
    out.append((int(p[0]), int(p[1])))
  return tuple(out)
