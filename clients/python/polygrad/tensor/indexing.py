"""Indexing: t[...] (ints, slices, None, ..., index tensors), tril/triu, gather and the scatter family."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .. import graph as g
from ..dtype import dtypes
from ..errors import DTypeError, ShapeError
from ..shape import axis_of, broadcast_shape, prod
from ..variable import SymInt
from .core import _py_scalar, Tensor, tensor_methods


@tensor_methods
class Indexing:
  """Tensor.__getitem__, Tensor.gather, Tensor.scatter_reduce, ... (attached to Tensor)."""

  # --- t[...] -------------------------------------------------------------------------------------

  def __getitem__(self, idx) -> "Tensor":
    # A tuple inside the index is a sequence of positions, as a list (numpy, torch).
    idx = tuple(list(i) if isinstance(i, tuple) else i for i in (idx if isinstance(idx, tuple) else (idx,)))
    idx = self._expand_ellipsis(idx)
    if any(isinstance(i, (Tensor, list, np.ndarray)) for i in idx):
      return self._index_with_tensor(idx)
    x, axis, final = self, 0, []
    for i in idx:
      if i is None:
        final.append(1)
      elif isinstance(i, slice):
        x, n = x._slice_axis(axis, i)
        final.append(n)
        axis += 1
      else:
        x = x._select(axis, i)
    return x.reshape(tuple(final))

  def __setitem__(self, idx, v) -> None:
    """t[idx] = v, as in torch and tinygrad: v (a tensor or a number, cast to t's dtype and
    broadcast to what idx selects) is written where t[idx] reads, lazily; t keeps its identity.
    Ints, slices (any step), None and an ellipsis write through the view t[idx] (assign); index
    tensors and lists write each selected element (a scatter of v over the positions t[idx]
    reads; where an index repeats, the last write wins); a bool tensor of t's shape writes where
    it is true (a where). Inside a TinyJit or compile_step the write is a step's assign of t."""
    key = idx if isinstance(idx, tuple) else (idx,)
    if len(key) == 1 and isinstance(key[0], Tensor) and key[0].dtype == dtypes.bool:
      mask = key[0]
      if mask.shape != self.shape:
        raise IndexError(f"a bool mask index must have the tensor's shape {self.shape}, got {mask.shape}")
      self.assign(mask.where(self._like(v, self.shape), self))
      return
    key = self._expand_ellipsis(tuple(list(i) if isinstance(i, tuple) else i for i in key))
    if any(isinstance(i, (Tensor, list, np.ndarray)) for i in key):
      if self.dtype == dtypes.bool:  # the index rows of a bool tensor are gathered as int32
        t = self.cast(dtypes.int32)
        t._index_with_tensor(key, self._like(v, self[idx].shape))
        self.assign(t.cast(dtypes.bool))
      else:
        self._index_with_tensor(key, v)
      return
    view = self[idx]
    view.assign(self._like(v, view.shape))

  def _like(self, v, shape: Tuple[int, ...]) -> "Tensor":
    """v as a tensor of self's dtype broadcast to `shape` (what a setitem writes)."""
    v = v if isinstance(v, Tensor) else Tensor(v, dtype=self.dtype)
    if v.dtype != self.dtype:
      v = v.cast(self.dtype)
    return v._broadcast_to(shape)

  def _expand_ellipsis(self, idx: tuple) -> tuple:
    """`idx` with its ellipsis (or an implied trailing one) replaced by full slices."""
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
      raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim:
      raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")
    if n_ell == 0:
      idx = idx + (Ellipsis,)
    pos = idx.index(Ellipsis)
    return idx[:pos] + (slice(None),) * (self.ndim - n_real) + idx[pos + 1:]

  def _index_with_tensor(self, idx: tuple, value=None) -> "Tensor":
    """Advanced indexing as torch does it: integer index tensors (or lists/arrays), mixed with
    ints, slices, None and an ellipsis. Ints drop their axis first (numpy would instead broadcast
    them with the tensors, which moves the result axes when an int separates them from a slice).
    The index tensors broadcast to one shape B; B replaces the indexed axes where they are
    adjacent, and comes first when a slice separates them. Negative indices count from the end; an index
    still out of range selects zeros (no error can come back from a lazy graph). Built as
    the daemon's GATHER of rows of x with its indexed axes flattened, so it is differentiable and an
    inf or NaN elsewhere in x stays out of the result. With a `value`, the setitem instead: the
    same rows written by a scatter (SCATTER_REDUCE) of value, laid out as the getitem's result;
    returns self."""
    # Basic entries first (slices, None); the advanced ones keep their axis in the result `x`.
    x = self if dtypes.is_float(self.dtype) or dtypes.is_int(self.dtype) else self.cast(dtypes.int32)
    assert value is None or x is self, "a setitem writes through views of self"
    axis, adv = 0, []
    for i in idx:
      if i is None:
        x = x.unsqueeze(axis)
      elif isinstance(i, slice):
        x, _ = x._slice_axis(axis, i)
      elif isinstance(i, (Tensor, list, np.ndarray)):
        adv.append((axis, self._index_tensor(i, x.shape[axis])))
      else:  # an int drops its axis first, as in torch (numpy would broadcast it with the tensors)
        x = x._select(axis, i)
        continue
      axis += 1
    axes = [a for a, _ in adv]
    sizes = [x.shape[a] for a in axes]
    rest = [d for d in range(x.ndim) if d not in axes]
    b_shape = broadcast_shape(*[t.shape for _, t in adv])
    # One flat index over the indexed axes (row-major); -1 where any index is out of range.
    flat, valid, stride = None, None, 1
    for (_, t), n in reversed(list(zip(adv, sizes))):
      term = t * stride if stride != 1 else t
      flat = term if flat is None else flat + term
      ok = (t >= 0) & (t < n)
      valid = ok if valid is None else valid & ok
      stride *= n
    out_rest = tuple(x.shape[d] for d in rest)
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    nb = len(b_shape)
    # Where B goes in the result: where the indexed axes were when they are adjacent, else first.
    p = axes[0] if adjacent else 0
    order = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, nb + len(out_rest)))
    if stride == 0:  # an indexed axis is empty: every index is out of range
      return self if value is not None else Tensor.zeros(out_rest[:p] + b_shape + out_rest[p:], dtype=self.dtype)
    flat = valid.where(flat, -1)._broadcast_to(b_shape)
    rows = x.permute(axes + rest).reshape(stride, -1)
    index = flat.reshape(prod(b_shape), 1).expand(prod(b_shape), rows.shape[1])
    if value is not None:
      # The rows a getitem would gather, written back by a scatter through the view `rows` of self.
      v = x._like(value, tuple((b_shape + out_rest)[i] for i in order)).permute(tuple(order.index(i) for i in range(len(order))))
      rows.assign(rows.scatter(0, index, v.reshape(prod(b_shape), -1)))
      return self
    return rows.gather(0, index).reshape(b_shape + out_rest).permute(order).cast(self.dtype)

  def _select(self, axis: int, i) -> "Tensor":
    """x[..., i, ...] for an int i on `axis`: that axis removed."""
    size = self.shape[axis]
    i = _py_scalar(i)
    if isinstance(i, bool) or not isinstance(i, int):
      raise TypeError(f"unsupported index type {type(i).__name__}")
    if not -size <= i < size:
      raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
    i = i + size if i < 0 else i
    pairs = [(0, s) for s in self.shape]
    pairs[axis] = (i, i + 1)
    return self.shrink(pairs).reshape(self.shape[:axis] + self.shape[axis + 1:])

  @staticmethod
  def _index_tensor(i, size: int) -> "Tensor":
    """One index tensor (or list/array) as int32 with negative entries wrapped."""
    index = i if isinstance(i, Tensor) else Tensor(np.asarray(i))
    if index.dtype == dtypes.bool:
      raise IndexError("boolean mask indexing gives a data-dependent shape, which a lazy graph cannot have; "
                       "use mask.where(x, 0) or realize the mask and index with np.nonzero")
    if not dtypes.is_int(index.dtype):
      raise IndexError(f"tensor indices must be integers, got {index.dtype.name}")
    index = index.cast(dtypes.int32)
    return (index < 0).where(index + size, index)

  def _slice_axis(self, axis: int, sl: slice) -> Tuple["Tensor", int]:
    size = self.shape[axis]
    if isinstance(sl.stop, SymInt) and (sl.start in (None, 0) or isinstance(sl.start, SymInt)) and sl.step in (None, 1):
      # x[:start_pos + 1], x[start_pos:start_pos + 1]: shrink chooses a symbolic dim, a begin read
      # per run or the values.
      pairs = [(0, s) for s in self.shape]
      pairs[axis] = (0 if sl.start is None else sl.start, sl.stop)
      x = self.shrink(pairs)
      return x, x.shape[axis]
    start, stop, step = sl.indices(size)
    x = self
    if step < 0:
      x = x.flip(axis)
      start, stop, step = size - 1 - start, size - 1 - stop, -step
    n = max(0, -(-(stop - start) // step))
    pairs = [(0, s) for s in x.shape]
    if n == 0:
      pairs[axis] = (0, 0)
      return x.shrink(pairs), 0
    if step == 1:
      pairs[axis] = (start, start + n)
      return x.shrink(pairs), n
    end = min(size, start + n * step)
    pairs[axis] = (start, end)
    x = x.shrink(pairs)
    pads = [(0, 0)] * x.ndim
    pads[axis] = (0, n * step - (end - start))
    x = x.pad(pads)
    x = x.reshape(x.shape[:axis] + (n, step) + x.shape[axis + 1:])
    pairs = [(0, s) for s in x.shape]
    pairs[axis + 1] = (0, 1)
    x = x.shrink(pairs)
    return x.reshape(x.shape[:axis] + (n,) + x.shape[axis + 2:]), n

  # --- index ops (the daemon's TRIL, TRIU, GATHER, SCATTER_REDUCE) ------------------------------

  def _triangle(self, op: int, diagonal: int) -> "Tensor":
    if self.ndim < 2:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} needs at least 2 axes, got shape {self.shape}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
      raise ShapeError(f"diagonal must be an int, got {diagonal!r}")
    return Tensor._make(op, self.dtype, self.shape, (self,), g.Composite(diagonal=diagonal))

  def tril(self, diagonal: int = 0) -> "Tensor":
    """Zero the elements above the `diagonal`-th diagonal of the last two axes."""
    return self._triangle(g.TRIL, diagonal)

  def triu(self, diagonal: int = 0) -> "Tensor":
    """Zero the elements below the `diagonal`-th diagonal of the last two axes."""
    return self._triangle(g.TRIU, diagonal)

  def _scatter(self, dim: int, index: "Tensor", src, mode: str, include_self: bool, name: str) -> "Tensor":
    """The daemon's SCATTER_REDUCE after the shape checks (src a tensor or a scalar)."""
    if self.ndim == 0:
      raise ShapeError(f"{name} needs a tensor of at least 1 axis")
    ax = axis_of(dim, self.ndim, name)
    if not isinstance(index, Tensor):
      index = Tensor(index)
    if not dtypes.is_int(index.dtype) or index.ndim != self.ndim:
      raise ShapeError(f"{name}: index must be an integer tensor of rank {self.ndim}, got {index.dtype.name} "
                       f"of shape {index.shape}")
    if any(i > s for a, (i, s) in enumerate(zip(index.shape, self.shape)) if a != ax):
      raise ShapeError(f"{name}: index {index.shape} exceeds {self.shape} on an axis other than {ax}")
    if isinstance(src, Tensor) and src.dtype != self.dtype:
      raise DTypeError(f"{name}: src is {src.dtype.name}, the tensor {self.dtype.name} (torch requires one dtype)")
    src = src if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype)
    if src.ndim != self.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
      raise ShapeError(f"{name}: src {src.shape} must be at least index's shape {index.shape}")
    return Tensor._make(g.SCATTER_REDUCE, self.dtype, self.shape, (self, index, src),
                        g.Composite(axes=(ax,), mode=mode, include_self=include_self))

  def scatter(self, dim: int, index: "Tensor", src, reduce: Optional[str] = None) -> "Tensor":
    """torch's scatter: a copy of self with src's elements written at `index` along `dim` (src a
    tensor or a scalar); reduce 'add' or 'multiply' combines them with self instead. Where two
    updates land on one position without a reduce, the later in index order wins (torch on the
    CPU). index may be smaller than self off `dim` (that corner is updated)."""
    if reduce is not None:
      if isinstance(src, Tensor):
        raise TypeError("scatter with reduce= takes a scalar src (tinygrad); use scatter_reduce for a tensor")
      return self.scatter_reduce(dim, index, src, {"add": "sum", "multiply": "prod"}.get(reduce, reduce))
    return self._scatter(dim, index, src, "none", False, "scatter")

  def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str, include_self: bool = True
                     ) -> "Tensor":
    """torch's scatter_reduce: src's elements combined into self at `index` along `dim` with
    reduce 'sum', 'prod', 'mean', 'amax' or 'amin'; without include_self the positions written
    start from the updates alone. Differentiable for sum and mean."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ShapeError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    return self._scatter(dim, index, src, reduce, bool(include_self), "scatter_reduce")

  def gather(self, dim: int, index: "Tensor") -> "Tensor":
    """out[..., i, ...] = self[..., index[..., i, ...], ...] along `dim` (torch.gather): index has
    self's rank and, on the other axes, sizes up to self's. Indices must lie in
    [0, self.shape[dim]); others select nothing (zero)."""
    if not isinstance(index, Tensor):
      index = Tensor(index)
    if not dtypes.is_int(index.dtype):
      raise ShapeError(f"gather needs an integer index, got {index.dtype.name}")
    if self.ndim == 0:
      raise ShapeError("gather needs a tensor of at least 1 axis")
    ax = axis_of(dim, self.ndim, "gather")
    if index.ndim != self.ndim:
      raise ShapeError(f"gather: index has {index.ndim} axes, the input {self.ndim}")
    for i, (a, b) in enumerate(zip(index.shape, self.shape)):
      if i != ax and a > b:
        raise ShapeError(f"gather: index size {a} on axis {i} exceeds the input's {b} "
                         f"(index {index.shape}, input {self.shape})")
    x = self
    if any(i != ax and a != b for i, (a, b) in enumerate(zip(index.shape, self.shape))):
      x = self.shrink(tuple((0, self.shape[i]) if i == ax else (0, s) for i, s in enumerate(index.shape)))
    if self.shape[ax] == 0 and index.shape[ax] > 0:
      raise ShapeError(f"gather from an empty axis {ax}")
    return Tensor._make(g.GATHER, self.dtype, index.shape, (x, index), g.Composite(axes=(ax,)))
