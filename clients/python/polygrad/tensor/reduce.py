"""Reductions and scans along axes: sum, max, mean, var, softmax, logsumexp, cumsum, sort, topk,
argmax, ..."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from .. import graph as g
from ..dtype import DType, DTypeLike, dtypes, least_upper_float, sum_acc_dtype, to_dtype
from ..errors import ShapeError
from ..shape import axis_of, normalize_axes, normalize_axis, reduced_shape
from .core import Tensor, tensor_methods, ValuesIndices


@tensor_methods
class Reduce:
  """Tensor.sum, Tensor.softmax, Tensor.sort, Tensor.argmax, ... (attached to Tensor)."""

  # --- reductions -------------------------------------------------------------------------------

  def _reduce(self, op: int, axis, keepdim: bool) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self
    kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
    r = Tensor._make(op, self.dtype, kept, (self,), axes)
    return r if keepdim else r.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

  def sum(self, axis=None, keepdim: bool = False, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(g.REDUCE_SUM, axis, keepdim)
    if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16):
      ret = ret.cast(self.dtype)
    return ret

  def prod(self, axis=None, keepdim: bool = False, dtype: Optional[DTypeLike] = None) -> "Tensor":
    """Product over `axis` (None: all axes), in sum's accumulation dtype (bool and small ints
    multiply in int32, float16/bfloat16 in float32 and are cast back). The gradient is exact
    where elements are zero."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(g.REDUCE_PROD, axis, keepdim)
    if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16):
      ret = ret.cast(self.dtype)
    return ret

  def max(self, axis=None, keepdim: bool = False) -> "Tensor":
    return self._reduce(g.REDUCE_MAX, axis, keepdim)

  def min(self, axis=None, keepdim: bool = False) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self
    return Tensor._make(g.REDUCE_MIN, self.dtype, reduced_shape(self.shape, axes, keepdim), (self,),
                        g.Composite(axes=axes, keepdim=keepdim))

  def _bool_reduce(self, op: int, axis, keepdim: bool) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self.bool()
    return Tensor._make(op, dtypes.bool, reduced_shape(self.shape, axes, keepdim), (self,),
                        g.Composite(axes=axes, keepdim=keepdim))

  def any(self, axis=None, keepdim: bool = False) -> "Tensor":
    """Whether any element along `axis` (None: all; an int or a tuple) is nonzero (bool)."""
    return self._bool_reduce(g.REDUCE_ANY, axis, keepdim)

  def all(self, axis=None, keepdim: bool = False) -> "Tensor":
    """Whether every element along `axis` (None: all) is nonzero (bool); true over no elements."""
    return self._bool_reduce(g.REDUCE_ALL, axis, keepdim)

  # Composites with a reduction inside run in float32 for float16/bfloat16 inputs (tinygrad
  # accumulates half sums in float32 too) and are cast back to the input's dtype.

  def _acc_float(self) -> Tuple["Tensor", DType]:
    """(this tensor as the float dtype a reducing composite runs in, the dtype to return)."""
    out = least_upper_float(self.dtype)
    return self.cast(sum_acc_dtype(out)), out

  def _composite(self, op: int, shape: Tuple[int, ...], arg: g.Composite) -> "Tensor":
    x, out = self._acc_float()
    return Tensor._make(op, x.dtype, shape, (x,), arg).cast(out)

  def mean(self, axis=None, keepdim: bool = False) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self._float()
    shape = reduced_shape(self.shape, axes, keepdim)
    return self._composite(g.MEAN, shape, g.Composite(axes=axes, keepdim=keepdim))

  def _spread(self, op: int, axis, keepdim: bool, correction) -> "Tensor":
    """VAR and STD; over no axes (numpy's axis=()) each element is its own sample."""
    axes = normalize_axes(axis, self.ndim)
    shape = reduced_shape(self.shape, axes, keepdim)
    return self._composite(op, shape, g.Composite(axes=axes, keepdim=keepdim, correction=float(correction),
                                                  no_axes=not axes))

  def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> "Tensor":
    return self._spread(g.VAR, axis, keepdim, correction)

  def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> "Tensor":
    return self._spread(g.STD, axis, keepdim, correction)

  def std_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tuple["Tensor", "Tensor"]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  def var_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tuple["Tensor", "Tensor"]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

  def _softmax_like(self, op: int, axis: int, dtype: Optional[DTypeLike]) -> "Tensor":
    x = self.cast(dtype) if dtype is not None else self._float()
    if x.ndim == 0:
      x = x.reshape(1)
      return x._softmax_like(op, 0, None).reshape(())
    ax = normalize_axis(axis, x.ndim)
    return x._composite(op, x.shape, g.Composite(axes=(ax,)))

  def softmax(self, axis: int = -1, dtype: Optional[DTypeLike] = None) -> "Tensor":
    return self._softmax_like(g.SOFTMAX, axis, dtype)

  def log_softmax(self, axis: int = -1, dtype: Optional[DTypeLike] = None) -> "Tensor":
    return self._softmax_like(g.LOG_SOFTMAX, axis, dtype)

  def logsumexp(self, axis=None, keepdim: bool = False) -> "Tensor":
    """log(sum(exp(x))) over `axis` (None: all axes), computed stably by the daemon."""
    x = self._float()
    axes = normalize_axes(axis, x.ndim)
    if not axes:
      return x
    out_shape = reduced_shape(x.shape, axes, keepdim)
    if len(axes) > 1:  # the wire takes one axis: move the reduced axes last and merge them
      rest = [i for i in range(x.ndim) if i not in axes]
      x = x.permute(rest + list(axes))
      x = x.reshape(x.shape[:len(rest)] + (-1,))
      axes = (x.ndim - 1,)
    shape = reduced_shape(x.shape, axes, False)
    return x._composite(g.LOGSUMEXP, shape, g.Composite(axes=axes)).reshape(out_shape)

  def layernorm(self, axis=-1, eps: float = 1e-5, *, weight: Optional["Tensor"] = None,
                bias: Optional["Tensor"] = None) -> "Tensor":
    """(x - mean) / sqrt(var + eps) over `axis` (an int or a tuple), then * weight + bias when
    given (shaped as the normalized axes in their order; the daemon's LAYERNORM does both)."""
    x = self._float()
    axes = normalize_axes(axis, x.ndim)
    if not axes:
      raise ShapeError("layernorm needs at least one axis")
    n = len(axes)
    if axes == tuple(range(x.ndim - n, x.ndim)):
      return x._trailing_norm(g.LAYERNORM, g.Composite(normalized_axes=n, eps=float(eps)), weight, bias)
    rest = [i for i in range(x.ndim) if i not in axes]
    order = rest + list(axes)
    inverse = [order.index(i) for i in range(x.ndim)]
    normed = x.permute(order).layernorm(tuple(range(len(rest), x.ndim)), eps, weight=weight, bias=bias)
    return normed.permute(inverse)

  # --- scans (the daemon's CUMSUM) ---------------------------------------------------------------

  def cumsum(self, axis: int = 0) -> "Tensor":
    """Running sum along `axis` (bool counts as int32; float16/bfloat16 sum in float32)."""
    if self.ndim == 0:
      axis_of(axis, 1, "cumsum")
      return self.reshape(1).cumsum(0).reshape(())
    ax = axis_of(axis, self.ndim, "cumsum")
    if self.dtype == dtypes.bool:
      return self.cast(dtypes.default_int).cumsum(ax)
    acc = sum_acc_dtype(self.dtype) if dtypes.is_float(self.dtype) else self.dtype
    x = self.cast(acc)
    return Tensor._make(g.CUMSUM, acc, self.shape, (x,), g.Composite(axes=(ax,))).cast(self.dtype)

  # --- sorting and running extremes (the daemon's SORT, TOPK, CUMMAX, CUMMIN, CUMPROD,
  # LOGCUMSUMEXP: O(n²) comparisons per row; NaN sorts last, ties keep their order) -------------

  def _along(self, op: int, axis: int, name: str, arg: g.Composite, dtype=None, shape=None) -> "Tensor":
    ax = axis_of(axis, self.ndim, name)
    arg = dataclasses.replace(arg, axes=(ax,))
    return Tensor._make(op, dtype or self.dtype, self.shape if shape is None else shape, (self,), arg)

  def _values_indices(self, op: int, axis: int, name: str, shape=None, **kw) -> "ValuesIndices":
    if self.ndim == 0:
      axis_of(axis, 1, name)
      v, i = self.reshape(1)._values_indices(op, 0, name, None if shape is None else (1,), **kw)
      return ValuesIndices(v.reshape(()), i.reshape(()))
    values = self._along(op, axis, name, g.Composite(**kw), shape=shape)
    indices = self._along(op, axis, name, g.Composite(indices=True, **kw), dtypes.int32, shape)
    return ValuesIndices(values, indices)

  def sort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> "ValuesIndices":
    """(values, indices) sorted along `dim`; stable always (ties keep their order), NaN last
    (first when descending), as torch.sort(stable=True). Differentiable through the values."""
    return self._values_indices(g.SORT, dim, "sort", descending=descending)

  def argsort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> "Tensor":
    return self.sort(dim, descending).indices

  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True, sorted: bool = True
           ) -> "ValuesIndices":
    """(values, indices) of the k largest (smallest) along `dim`, in order (always sorted)."""
    ax = axis_of(dim, max(self.ndim, 1), "topk")
    n = self.shape[ax] if self.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
      raise ShapeError(f"topk: k must be an int from 0 to {n} (the size of dim {dim}), got {k!r}")
    shape = tuple(k if i == ax else d for i, d in enumerate(self.shape)) if self.ndim else (k,)
    if self.ndim == 0:
      return self.reshape(1).topk(k, 0, largest)
    return self._values_indices(g.TOPK, ax, "topk", shape=shape, n=k, descending=largest)

  def cummax(self, axis: int = 0) -> "ValuesIndices":
    """(running maximum, where it last occurred) along `axis`; NaN, once seen, stays (torch)."""
    return self._values_indices(g.CUMMAX, axis, "cummax")

  def cummin(self, axis: int = 0) -> "ValuesIndices":
    return self._values_indices(g.CUMMIN, axis, "cummin")

  def cumprod(self, axis: int = 0, dtype: Optional[DTypeLike] = None) -> "Tensor":
    """Running product along `axis` (bool as the default int; float16/bfloat16 multiply in
    float32). Differentiable."""
    if self.ndim == 0:
      axis_of(axis, 1, "cumprod")
      return self.reshape(1).cumprod(0, dtype).reshape(())
    x = self.cast(dtypes.default_int) if self.dtype == dtypes.bool else self
    if dtype is not None:
      x = x.cast(to_dtype(dtype))
    acc = sum_acc_dtype(x.dtype) if dtypes.is_float(x.dtype) else x.dtype
    return x.cast(acc)._along(g.CUMPROD, axis, "cumprod", g.Composite()).cast(x.dtype)

  def logcumsumexp(self, axis: int = 0) -> "Tensor":
    """log(cumsum(exp(x))) along `axis` without overflow; float results (ints become the default
    float). Differentiable."""
    if self.ndim == 0:
      axis_of(axis, 1, "logcumsumexp")
      return self.reshape(1).logcumsumexp(0).reshape(())
    x = self._float()
    acc = sum_acc_dtype(x.dtype)
    return x.cast(acc)._along(g.LOGCUMSUMEXP, axis, "logcumsumexp", g.Composite()).cast(x.dtype)

  # --- arg extremes (the daemon's ARGMAX, ARGMIN) ---------------------------------------------

  def _arg_extreme(self, op: int, axis, keepdim: bool) -> "Tensor":
    if axis is None:  # over the flattened tensor (keepdim does not apply, as in tinygrad)
      return self.reshape(-1)._arg_extreme(op, 0, False)
    if self.ndim == 0:
      axis_of(axis, 1, g.OP_NAMES[op].lower())
      return Tensor._make(op, dtypes.int32, (), (self.reshape(1),), g.Composite(axes=(0,), keepdim=False))
    ax = axis_of(axis, self.ndim, g.OP_NAMES[op].lower())
    if self.shape[ax] == 0:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} of an empty axis {ax} (shape {self.shape})")
    shape = reduced_shape(self.shape, (ax,), keepdim)
    return Tensor._make(op, dtypes.int32, shape, (self,), g.Composite(axes=(ax,), keepdim=bool(keepdim)))

  def argmax(self, axis: Optional[int] = None, keepdim: bool = False) -> "Tensor":
    """int32 index of the largest value along `axis` (None: of the flattened tensor); the first
    one wins on ties, as in numpy."""
    return self._arg_extreme(g.ARGMAX, axis, keepdim)

  def argmin(self, axis: Optional[int] = None, keepdim: bool = False) -> "Tensor":
    """int32 index of the smallest value along `axis` (None: of the flattened tensor); the first
    one wins on ties."""
    return self._arg_extreme(g.ARGMIN, axis, keepdim)
