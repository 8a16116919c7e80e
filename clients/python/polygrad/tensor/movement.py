"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them (cat,
split, roll, repeat, diagonal, ...)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from .. import graph as g
from ..dtype import dtypes, least_upper_dtype
from ..errors import ShapeError
from ..shape import (as_shape, axis_of, broadcast_shape, check_permutation, normalize_axes,
                     normalize_axis, normalize_pairs, prod, resolve_expand, resolve_reshape)
from ..variable import SymInt, _int, daemon_size, dim, same_dims
from .core import _py_scalar, Scalar, Tensor, tensor_methods


def _symbolic_pair(b, e, size):
  """A shrink's (begin, end) on an axis of `size` as the daemon takes it: a SymInt end from 0 within
  the axis at its largest (a symbolic dim), a SymInt begin with end = begin + k inside the axis for
  every value of its Variable (a begin held per run), else plain numbers."""
  if isinstance(b, SymInt):
    if (isinstance(e, SymInt) and e.variable is b.variable and e.mul == b.mul and e.add >= b.add
        and b.variable.min_val * b.mul + b.add >= 0 and e.max <= daemon_size(size)):
      return b, _int(b) + (e.add - b.add)
    return int(b), int(e)
  if b == 0 and (not isinstance(e, SymInt) or e.max <= daemon_size(size)):
    return b, e
  return b, int(e)


@tensor_methods
class Movement:
  """Tensor.reshape, Tensor.pad, Tensor.cat, ... (attached to Tensor)."""

  # --- movement ---------------------------------------------------------------------------------

  def reshape(self, shape, *args) -> "Tensor":
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    new = resolve_reshape(self.shape, [None if s is None else dim(s) for s in new])
    if same_dims(new, self.shape):
      return self
    return self._moved(g.RESHAPE, new, new)

  view = reshape

  def permute(self, order, *args) -> "Tensor":
    order = (order,) + args if args or not isinstance(order, (tuple, list)) else tuple(order)
    order = check_permutation(order, self.ndim)
    if order == tuple(range(self.ndim)):
      return self
    return self._moved(g.PERMUTE, tuple(self.shape[i] for i in order), order)

  def transpose(self, dim0: int = -2, dim1: int = -1) -> "Tensor":
    order = list(range(self.ndim))
    a, b = normalize_axis(dim0, self.ndim), normalize_axis(dim1, self.ndim)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> "Tensor":
    return self.transpose() if self.ndim >= 2 else self

  def expand(self, shape, *args) -> "Tensor":
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    new = resolve_expand(self.shape, [None if s is None else dim(s) for s in new])
    return self._broadcast_to(new)

  def _broadcast_to(self, shape: Tuple[int, ...]) -> "Tensor":
    if same_dims(self.shape, shape):
      return self
    x = self
    if x.ndim < len(shape):
      x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    resolve_expand(x.shape, shape)  # raises for incompatible shapes
    if same_dims(x.shape, shape):
      return x
    return x._moved(g.EXPAND, tuple(shape), tuple(shape))

  def _pad_from_edges(self, pairs, mode: str) -> "Tensor":
    x = self
    for axis, (b, a) in enumerate(pairs):
      if b == 0 and a == 0:
        continue
      n = x.shape[axis]
      limit = n - 1 if mode == "reflect" else n
      if mode != "replicate" and (b > limit or a > limit):
        raise ShapeError(f"pad: {mode} padding of ({b}, {a}) on axis {axis} of size {n} needs amounts "
                         f"{'below' if mode == 'reflect' else 'at most'} the size")
      if n == 0:
        raise ShapeError(f"pad: {mode} padding of an empty axis {axis}")

      def part(lo: int, hi: int) -> "Tensor":
        return x.shrink(tuple((lo, hi) if i == axis else (0, d) for i, d in enumerate(x.shape)))

      def edge(lo: int, count: int) -> "Tensor":
        one = part(lo, lo + 1)
        return one.expand(*[count if i == axis else d for i, d in enumerate(one.shape)])

      if mode == "reflect":
        left, right = part(1, b + 1).flip(axis), part(n - 1 - a, n - 1).flip(axis)
      elif mode == "replicate":
        left, right = edge(0, b), edge(n - 1, a)
      else:
        left, right = part(n - b, n), part(0, a)
      x = Tensor.cat(*[t for t, k in ((left, b), (x, 1), (right, a)) if k], dim=axis)
    return x

  def pad(self, padding, mode: str = "constant", value: Scalar = 0) -> "Tensor":
    """padding: one (before, after) pair or None per axis, or a flat torch-style sequence
    (last axis first). Negative amounts cut. mode: 'constant' (value), or torch's 'reflect'
    (mirrored without the edge; an amount must be smaller than the axis), 'replicate' (the edge
    repeated) and 'circular' (wrapped around; at most the axis), built from slices of x. As in
    torch, reflect and replicate mirror the whole input's edges before the cuts, circular wraps
    what is left after them."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise NotImplementedError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                                f"got {str(mode)[:100]!r}")
    padding = tuple(padding)
    if padding and all(isinstance(p, int) for p in padding):
      if len(padding) % 2 or len(padding) > 2 * self.ndim:
        raise ShapeError(f"pad: flat padding needs an even count ≤ 2*ndim, got {len(padding)}")
      flat = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
      padding = ((0, 0),) * (self.ndim - len(flat)) + tuple(flat)
    # Pad amounts are numbers: a Variable's value is taken (a symbolic dim is made by shrink).
    pairs = tuple((int(b), int(a)) for b, a in normalize_pairs(padding, self.shape, "pad", lambda s: (0, 0)))
    grown = tuple((max(0, b), max(0, a)) for b, a in pairs)
    x = self
    if mode in ("reflect", "replicate"):
      # torch mirrors and repeats the whole input's edges: grow first, cut afterwards.
      return x._pad_from_edges(grown, mode)._cut(pairs, padding)
    x = x._cut(pairs, padding)
    if mode == "circular":
      return x._pad_from_edges(grown, mode)
    if all(b == 0 and a == 0 for b, a in grown):
      return x
    pairs = grown
    shape = tuple(s + b + a for s, (b, a) in zip(x.shape, pairs))
    out = x._moved(g.PAD, shape, pairs)
    if value != 0:
      mask = Tensor._make(g.PAD, dtypes.bool, shape, (Tensor._const(True, dtypes.bool, x.shape),), pairs)
      out = mask.where(out, value)
    return out

  def _cut(self, pairs, padding) -> "Tensor":
    """pad's negative amounts: (before, after) pairs that remove elements where they are < 0."""
    if all(b >= 0 and a >= 0 for b, a in pairs):
      return self
    shr = []
    for (b, a), s in zip(pairs, self.shape):
      lo, hi = max(0, -b), s - max(0, -a)
      if lo > hi:
        raise ShapeError(f"pad: {padding} removes more than the whole axis of size {s}")
      shr.append((lo, hi))
    return self.shrink(shr)

  def shrink(self, arg) -> "Tensor":
    pairs = normalize_pairs(arg, self.shape, "shrink", lambda s: (0, s))
    for (b, e), s in zip(pairs, self.shape):
      if not 0 <= b <= e <= s:
        raise ShapeError(f"shrink: ({b}, {e}) is out of range for an axis of size {s}")
    # A symbolic end from begin 0 (and within the axis at the Variable's largest value) makes a
    # symbolic dim; a symbolic begin with a fixed count (x[p:p+1]) reads from a begin the daemon
    # holds per run; other Variable-valued bounds take their value.
    pairs = tuple(_symbolic_pair(b, e, s) for (b, e), s in zip(pairs, self.shape))
    if all(b == 0 and e == s and not isinstance(e, SymInt) for (b, e), s in zip(pairs, self.shape)):
      return self
    return self._moved(g.SHRINK, tuple(e - _int(b) if isinstance(b, SymInt) else e if b == 0 else e - b
                                       for b, e in pairs), pairs)

  def flip(self, axis, *args) -> "Tensor":
    axis = (axis,) + args if args or not isinstance(axis, (tuple, list)) else tuple(axis)
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self
    return self._moved(g.FLIP, self.shape, axes)

  def squeeze(self, dim: Optional[int] = None) -> "Tensor":
    if dim is None:
      return self.reshape(tuple(s for s in self.shape if s != 1 or isinstance(s, SymInt)))
    d = normalize_axis(dim, self.ndim)
    if self.ndim == 0 or self.shape[d] != 1 or isinstance(self.shape[d], SymInt):
      return self
    return self.reshape(self.shape[:d] + self.shape[d + 1:])

  def unsqueeze(self, dim: int) -> "Tensor":
    d = normalize_axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
    if self.ndim == 0:
      return self.reshape(1)
    s, e = normalize_axis(start_dim, self.ndim), normalize_axis(end_dim, self.ndim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unflatten(self, dim: int, sizes) -> "Tensor":
    d = normalize_axis(dim, self.ndim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

  def repeat(self, repeats, *args) -> "Tensor":
    reps = as_shape((repeats,) + args if args or not isinstance(repeats, (tuple, list)) else tuple(repeats))
    if len(reps) < self.ndim:
      raise ShapeError(f"repeat: need at least {self.ndim} repeat counts, got {len(reps)}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(d for s in base for d in (1, s)))
    x = x.expand(tuple(d for r, s in zip(reps, base) for d in (r, s)))
    return x.reshape(tuple(r * s for r, s in zip(reps, base)))

  def interpolate(self, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> "Tensor":
    """Resizes the last len(size) axes (tinygrad's interpolate; torch's F.interpolate on the
    spatial axes): mode 'linear' (separable: torch's linear, bilinear, trilinear; integers become
    float32), 'nearest' or 'nearest-exact'. The daemon's INTERPOLATE: sampling positions from
    the shapes, values gathered and blended there. Differentiable."""
    size = tuple(size)
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise ShapeError(f"interpolate: mode must be 'linear', 'nearest' or 'nearest-exact', got {mode!r}")
    if not size or len(size) > self.ndim or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in size):
      raise ShapeError(f"interpolate: size {size} must be 1 to {self.ndim} positive ints for a tensor of shape {self.shape}")
    lead = self.ndim - len(size)
    if 0 in self.shape[lead:]:
      raise ShapeError(f"interpolate: cannot resize the empty axes of shape {self.shape}")
    dt = self.dtype if mode != "linear" or dtypes.is_float(self.dtype) else dtypes.float32
    return Tensor._make(g.INTERPOLATE, dt, self.shape[:lead] + size, (self,),
                        g.Composite(shape=size, mode=mode, align_corners=bool(align_corners)))

  def unfold(self, dim: int, size: int, step: int) -> "Tensor":
    """torch's unfold: the windows of `size` elements every `step` along `dim`, that axis becoming
    the window count and a new last axis the window (the daemon's UNFOLD, a view). A 0-d tensor
    gives the (size,) window of its element, as torch."""
    ax = axis_of(dim, max(self.ndim, 1), "unfold")
    n = self.shape[ax] if self.ndim else 1
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= n:
      raise ShapeError(f"unfold: size {size!r} must be an int from 0 to {n} (the size of dim {dim})")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
      raise ShapeError(f"unfold: step must be an int >= 1, got {step!r}")
    count = (n - size) // step + 1
    shape = self.shape[:ax] + (count,) + self.shape[ax + 1:] + (size,) if self.ndim else (size,)
    return Tensor._make(g.UNFOLD, self.dtype, shape, (self,), g.Composite(axes=(ax,), n=size, step=step))

  def nonzero(self, size: Optional[int] = None, fill_value: Scalar = 0) -> "Tensor":
    """The (count, ndim) int32 positions of the nonzero elements, in row-major order. The count is
    data: it is realized first (one round trip), then the daemon's NONZERO computes the positions.
    With `size` (tinygrad), exactly that many rows and no round trip: the first `size` positions,
    then rows of int(fill_value)."""
    if size is None:
      count = int((self != 0).cast(dtypes.int32).sum().item())
      return Tensor._make(g.NONZERO, dtypes.int32, (count, self.ndim), (self,), g.Composite(n=count))
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
      raise ShapeError(f"nonzero: size must be an int >= 0, got {size!r}")
    fill = int(_py_scalar(fill_value))
    if not dtypes.min(dtypes.int32) <= fill <= dtypes.max(dtypes.int32):
      raise ShapeError(f"nonzero: fill_value {fill} does not fit int32")
    return Tensor._make(g.NONZERO, dtypes.int32, (size, self.ndim), (self,), g.Composite(n=size, fill=fill))

  def masked_select(self, mask: "Tensor", size: Optional[int] = None, fill_value: Scalar = 0) -> "Tensor":
    """The elements where `mask` (broadcast to this shape) is true, flattened in row-major order
    (the daemon's MASKED_SELECT); the count is realized first, as in nonzero. With `size`,
    exactly that many elements and no round trip, fill_value (in this dtype) after the selected
    ones."""
    x, m = self._broadcasted(mask if isinstance(mask, Tensor) else Tensor(mask), match_dtype=False)
    m = m.cast(dtypes.bool)
    if size is None:
      size = int((m != 0).cast(dtypes.int32).sum().item())
    elif isinstance(size, bool) or not isinstance(size, int) or size < 0:
      raise ShapeError(f"masked_select: size must be an int >= 0, got {size!r}")
    fill = Tensor._const(_py_scalar(fill_value), self.dtype, ())
    return Tensor._make(g.MASKED_SELECT, self.dtype, (size,), (m, x, fill), g.Composite(n=size))

  def cat(self, *others: "Tensor", dim: int = 0) -> "Tensor":
    tensors = [self, *others]
    d = normalize_axis(dim, self.ndim)
    for t in tensors:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ShapeError(f"cat: shapes {[t.shape for t in tensors]} differ outside axis {d}")
    dt = least_upper_dtype(*[t.dtype for t in tensors])
    return Tensor._joined(tuple(t.cast(dt) for t in tensors), d)

  @staticmethod
  def _joined(tensors, d: int) -> "Tensor":
    """One CAT of tensors (checked, one dtype) along axis d; more than the op takes are joined in
    groups first (bit for bit the same elements)."""
    limit = g.MAX_ARITY[g.CAT]
    if len(tensors) > limit:
      return Tensor._joined(tuple(Tensor._joined(tensors[i:i + limit], d) for i in range(0, len(tensors), limit)), d)
    first = tensors[0].shape
    shape = first[:d] + (sum(t.shape[d] for t in tensors),) + first[d + 1:]
    return Tensor._make(g.CAT, tensors[0].dtype, shape, tensors, g.Composite(axes=(d,)))

  def split(self, sizes, dim: int = 0) -> List["Tensor"]:
    """Pieces of `sizes` along dim (an int: pieces of that size, the last one smaller)."""
    d = normalize_axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0:
        raise ShapeError("split size must be positive")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n:
      raise ShapeError(f"split sizes {list(sizes)} do not add up to {n}")
    out, off = [], 0
    for sz in sizes:
      pairs = [(0, s) for s in self.shape]
      pairs[d] = (off, off + sz)
      out.append(self.shrink(pairs))
      off += sz
    return out

  def chunk(self, chunks: int, dim: int = 0) -> List["Tensor"]:
    n = self.shape[normalize_axis(dim, self.ndim)]
    return self.split(max(1, -(-n // chunks)), dim)

  def roll(self, shifts, dims=None) -> "Tensor":
    """torch.roll: shifted along each of dims, wrapping around; dims=None rolls the flattened tensor."""
    if dims is None:
      return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
      raise ShapeError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    x = self
    for s, d in zip(shifts, dims):
      d = normalize_axis(d, x.ndim)
      n = x.shape[d]
      k = int(s) % n if n else 0
      if k:
        head, tail = x.split([n - k, k], d)
        x = tail.cat(head, dim=d)
    return x

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> "Tensor":
    """torch.diagonal: the elements (i, i + offset) of the planes of dim1 and dim2, as a new last axis."""
    d1, d2 = normalize_axis(dim1, self.ndim), normalize_axis(dim2, self.ndim)
    if d1 == d2:
      raise ShapeError(f"diagonal: dim1 and dim2 are both axis {d1}")
    x = self.permute(tuple(i for i in range(self.ndim) if i not in (d1, d2)) + (d1, d2))
    batch, (r, c) = x.shape[:-2], x.shape[-2:]
    lo_r, lo_c = min(r, max(0, -offset)), min(c, max(0, offset))
    n = max(0, min(r - lo_r, c - lo_c))
    keep = [(0, s) for s in batch]
    x = x.shrink(keep + [(lo_r, lo_r + n), (lo_c, lo_c + n)])
    # The n x n block read with a row stride of n + 1 walks its diagonal.
    x = x.reshape(batch + (n * n,)).pad([(0, 0)] * len(batch) + [(0, n)]).reshape(batch + (n, n + 1))
    return x.shrink(keep + [(0, n), (0, 1)]).reshape(batch + (n,))

  def diag(self, diagonal: int = 0) -> "Tensor":
    """torch.diag: a 1-D tensor's values on a diagonal of a square matrix, or a matrix's diagonal."""
    if self.ndim == 2:
      return self.diagonal(diagonal)
    if self.ndim != 1:
      raise ValueError(f"diag takes a 1-D or 2-D tensor, got {self.ndim}-D")
    n, k = self.shape[0], abs(diagonal)
    # diagonal()'s walk backwards: each value followed by n zeros, read as n x n.
    x = self.reshape(n, 1).pad([(0, 0), (0, n)]).reshape(n * (n + 1)).shrink([(0, n * n)]).reshape(n, n)
    return x.pad([(0, k), (k, 0)] if diagonal >= 0 else [(k, 0), (0, k)])

  def meshgrid(self, *args: "Tensor", indexing: str = "ij") -> Tuple["Tensor", ...]:
    """Grids of self and args (1-D each), one per input, shaped by all their lengths (indexing
    "xy" swaps the first two axes of that shape, as torch and numpy)."""
    if indexing not in ("ij", "xy"):
      raise ShapeError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [t.reshape(-1) for t in (self, *args)]
    if indexing == "xy" and len(ts) > 1:
      grids = ts[1].meshgrid(ts[0], *ts[2:], indexing="ij")
      return (grids[1], grids[0], *grids[2:])
    shape = tuple(t.shape[0] for t in ts)
    return tuple(t.reshape(tuple(n if j == i else 1 for j, n in enumerate(shape))).expand(shape)
                 for i, t in enumerate(ts))

  def repeat_interleave(self, repeats: int, dim: Optional[int] = None) -> "Tensor":
    """Each element `repeats` times in a row along dim (None: of the flattened tensor). The count is
    an int, as in tinygrad: per-element tensor counts would make the shape depend on the data."""
    if isinstance(repeats, bool) or not isinstance(_py_scalar(repeats), int) or repeats < 0:
      raise TypeError(f"repeat_interleave takes a count >= 0 (an int), got {repeats!r}")
    x, d = (self.flatten(), 0) if dim is None else (self, normalize_axis(dim, self.ndim))
    x = x.unsqueeze(d + 1)
    return x.expand(x.shape[:d + 1] + (int(repeats),) + x.shape[d + 2:]).flatten(d, d + 1)

  def masked_fill(self, mask, value) -> "Tensor":
    """self with `value` where the bool mask (broadcasting to self's shape) is true."""
    mask = mask if isinstance(mask, Tensor) else Tensor(mask)
    if broadcast_shape(mask.shape, self.shape) != self.shape:
      raise ValueError(f"masked_fill: a mask of shape {mask.shape} does not broadcast to {self.shape}")
    return mask.where(value, self)

  @staticmethod
  def stack(tensor: "Tensor", *others: "Tensor", dim: int = 0) -> "Tensor":
    if isinstance(tensor, (list, tuple)):
      if others:
        raise ShapeError("stack takes tensors or one sequence of tensors, not both")
      tensor, others = tensor[0], tuple(tensor[1:])
    d = normalize_axis(dim, tensor.ndim + 1)
    return Tensor.cat(*[t.unsqueeze(d) for t in (tensor, *others)], dim=d)
