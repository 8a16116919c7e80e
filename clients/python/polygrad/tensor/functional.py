"""nn functional: convolution and pooling, dropout, one_hot, losses, normalization, attention."""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np

from .. import graph as g
from ..dtype import dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype
from ..errors import ShapeError
from ..shape import (broadcast_shape, conv_shape, ints, normalize_axes, normalize_axis, ntuple, padding_pairs,
                     spatial_count, window_out)
from .core import Tensor, tensor_methods, ValuesIndices
from .generated import broadcast_sources


def _of_shape(t, shape: Tuple[int, ...], what: str) -> "Tensor":
  """t (a tensor, or data for one) as a tensor, which must have `shape`; `what` names it."""
  t = t if isinstance(t, Tensor) else Tensor(t)
  if t.shape != shape:
    raise ShapeError(f"{what} must have shape {shape}, got {t.shape}")
  return t


def _window_kernel(kernel_size, name: str) -> Tuple[int, ...]:
  """A pooling's kernel: an int is 2-D (tinygrad), else 1 to 3 values >= 1."""
  k = ntuple(kernel_size, 2, "kernel_size", 1) if isinstance(kernel_size, (int, np.integer)) \
      else ints(kernel_size, "kernel_size")
  if not 1 <= len(k) <= 3 or any(v < 1 for v in k):
    raise ShapeError(f"{name}: kernel_size needs an int or 1 to 3 values >= 1, got {kernel_size!r}")
  return k


@tensor_methods
class Functional:
  """Tensor.conv2d, Tensor.cross_entropy, Tensor.layernorm, ... (attached to Tensor)."""

  # --- convolution and pooling over 1, 2 or 3 spatial axes (the daemon's CONV2D,
  # CONV_TRANSPOSE2D, MAX_POOL2D, AVG_POOL2D, named for 2-D but taking any of the three) ---------

  def conv2d(self, weight: "Tensor", bias: Optional["Tensor"] = None, groups: int = 1, stride=1, dilation=1,
             padding=0) -> "Tensor":
    """Cross-correlation of x (N, C, *spatial) with weight (O, C/groups, *kernel) over 1, 2 or 3
    spatial axes, their count being weight.ndim - 2 (tinygrad's conv2d; torch's conv1d/2d/3d).
    stride/dilation: an int or one value per axis; padding: an int, one value per axis, or
    tinygrad's (before, after) pairs from the last axis back, e.g. (left, right, top, bottom).
    bias (O,) is added per output channel, in the op. float16/bfloat16 accumulate in float32 and
    are cast back."""
    if not isinstance(weight, Tensor):
      weight = Tensor(weight)
    n = spatial_count(self.shape, weight.shape, "conv2d", "(O, C/groups, *kernel)")
    st, dil = ntuple(stride, n, "stride", 1), ntuple(dilation, n, "dilation", 1)
    pads = padding_pairs(padding, n, allow_negative=True)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
      raise ShapeError(f"conv2d: groups must be an int >= 1, got {groups!r}")
    shape = conv_shape(self.shape, weight.shape, groups, st, dil, pads)
    bias = None if bias is None else _of_shape(bias, (weight.shape[0],), "conv2d: bias")
    out, srcs = self._conv_sources(weight, bias)
    arg = g.Composite(stride=st, padding=pads, dilation=dil, groups=groups)
    return Tensor._make(g.CONV2D, srcs[0].dtype, shape, srcs, arg).cast(out)

  def _conv_sources(self, weight: "Tensor", bias: Optional["Tensor"]):
    """(the result dtype, the sources in its float accumulator): x, weight and the bias if any."""
    ts = [t for t in (self, weight, bias) if t is not None]
    out = least_upper_float(least_upper_dtype(*[t.dtype for t in ts]))
    acc = sum_acc_dtype(out)
    return out, tuple(t.cast(acc) for t in ts)

  def conv_transpose2d(self, weight: "Tensor", bias: Optional["Tensor"] = None, groups: int = 1, stride=1,
                       dilation=1, padding=0, output_padding=0) -> "Tensor":
    """The transposed convolution of x (N, Cin, *spatial) with weight (Cin, Cout/groups, *kernel)
    over 1, 2 or 3 spatial axes (torch's conv_transpose1d/2d/3d): out = (in-1)*stride -
    2*padding + dilation*(k-1) + output_padding + 1 per axis. stride, dilation, padding,
    output_padding: an int or one value per axis. bias (Cout,) is added per output channel, in
    the op."""
    if not isinstance(weight, Tensor):
      weight = Tensor(weight)
    n = spatial_count(self.shape, weight.shape, "conv_transpose2d", "(Cin, Cout/groups, *kernel)")
    st, dil = ntuple(stride, n, "stride", 1), ntuple(dilation, n, "dilation", 1)
    pad, opad = ntuple(padding, n, "padding", 0), ntuple(output_padding, n, "output_padding", 0)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
      raise ShapeError(f"conv_transpose2d: groups must be an int >= 1, got {groups!r}")
    cin = self.shape[1]
    if weight.shape[0] != cin or cin % groups:
      raise ShapeError(f"conv_transpose2d: weight {weight.shape} does not fit {cin} input channels in {groups} groups")
    for o, s, d in zip(opad, st, dil):
      if o >= s and o >= d:
        raise ShapeError(f"conv_transpose2d: output_padding {opad} must be smaller than stride or dilation")
    out_sp = tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1
                   for i, s, p, d, k, o in zip(self.shape[2:], st, pad, dil, weight.shape[2:], opad))
    if any(v <= 0 for v in out_sp):
      raise ShapeError(f"conv_transpose2d: padding {pad} leaves no output for input {self.shape}")
    cout = weight.shape[1] * groups
    bias = None if bias is None else _of_shape(bias, (cout,), "conv_transpose2d: bias")
    out, srcs = self._conv_sources(weight, bias)
    arg = g.Composite(stride=st, padding=pad, dilation=dil, groups=groups, output_padding=opad)
    return Tensor._make(g.CONV_TRANSPOSE2D, srcs[0].dtype, (self.shape[0], cout) + out_sp, srcs, arg).cast(out)

  def _pool(self, name: str, kernel_size, stride, dilation, padding, ceil_mode: bool):
    """(the result's shape, the Composite) of a pooling over the last len(kernel_size) axes (an int
    kernel: 2, as tinygrad); ceil_mode keeps a last partial window (torch), the daemon padding it."""
    k = _window_kernel(kernel_size, name)
    n = len(k)
    if self.ndim < n:
      raise ShapeError(f"{name} pools over the last {n} axes, got shape {self.shape}")
    st = k if stride is None else ntuple(stride, n, "stride", 1)
    dil = ntuple(dilation, n, "dilation", 1)
    pads = padding_pairs(padding, n)
    shape = self.shape[:-n] + window_out(self.shape[-n:], k, st, dil, pads, name, bool(ceil_mode))
    return shape, g.Composite(kernel=k, stride=st, padding=pads, dilation=dil, ceil_mode=bool(ceil_mode))

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 return_indices: bool = False):
    """Max over windows of the last len(kernel_size) axes, 1 to 3 (an int kernel: 2), as
    tinygrad's max_pool2d and torch's max_pool1d/2d/3d; stride defaults to the kernel; padding
    never wins. padding: an int, one value per axis, or tinygrad's (before, after) pairs from the
    last axis back. ceil_mode keeps a last partial window (torch). return_indices: (values,
    indices), the indices (int32) being torch's: each maximum's flat position in the input's
    spatial volume, the first on ties, a NaN over numbers."""
    shape, arg = self._pool("max_pool2d", kernel_size, stride, dilation, padding, ceil_mode)
    values = Tensor._make(g.MAX_POOL2D, self.dtype, shape, (self,), arg)
    if not return_indices:
      return values
    indices = Tensor._make(g.MAX_POOL2D, dtypes.int32, shape, (self,), dataclasses.replace(arg, indices=True))
    return ValuesIndices(values, indices)

  def max_unpool2d(self, indices: "Tensor", kernel_size=(2, 2), stride=None, padding=0,
                   output_size: Optional[Sequence[int]] = None) -> "Tensor":
    """torch's max_unpool1d/2d/3d over the last len(kernel_size) axes (an int kernel: 2): zeros
    of the pooled input's spatial shape (output_size's last axes, or what the pooling's geometry
    gives), each value written at its flat position from max_pool2d(return_indices=True) (the
    daemon's MAX_UNPOOL2D)."""
    k = _window_kernel(kernel_size, "max_unpool2d")
    n = len(k)
    st = k if stride is None else ntuple(stride, n, "stride", 1)
    pad = ntuple(padding, n, "padding", 0)
    if self.ndim < n or indices.shape != self.shape:
      raise ShapeError(f"max_unpool2d: indices {indices.shape} must have the values' shape {self.shape}, of at least "
                       f"{n} axes (1 to 3)")
    spatial = tuple((o - 1) * s - 2 * p + kk for o, s, p, kk in zip(self.shape[-n:], st, pad, k)) \
        if output_size is None else ints(tuple(output_size)[-n:], "output_size")
    return Tensor._make(g.MAX_UNPOOL2D, self.dtype, self.shape[:-n] + spatial, (self, indices),
                        g.Composite(shape=spatial))

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> "Tensor":
    """Mean over windows of the last len(kernel_size) axes, 1 to 3 (an int kernel: 2), as
    tinygrad's avg_pool2d and torch's avg_pool1d/2d/3d. count_include_pad (torch's default)
    divides by the window's elements inside the padded input; without it, inside the input
    only. ceil_mode keeps a last partial window, whose part beyond the padding never counts."""
    shape, arg = self._pool("avg_pool2d", kernel_size, stride, dilation, padding, ceil_mode)
    x, out = self._acc_float()
    if not count_include_pad:
      arg = dataclasses.replace(arg, counted_padding=(0,) * len(arg.padding))
    return Tensor._make(g.AVG_POOL2D, x.dtype, shape, (x,), arg).cast(out)

  # --- nn helpers -------------------------------------------------------------------------------

  def dropout(self, p: float = 0.5) -> "Tensor":
    """Zero each element with probability p and scale the rest by 1/(1-p), only while
    Tensor.training is set. The mask is drawn on the device (the daemon's DROPOUT)."""
    if not 0 <= p <= 1:
      raise ShapeError(f"dropout probability must be in [0, 1], got {p}")
    if not Tensor.training or p == 0:
      return self
    x = self._float()
    seed, counter = Tensor._random_key()
    return Tensor._make(g.DROPOUT, x.dtype, x.shape, (x,), g.Composite(seed=seed, counter=counter, p=float(p)))

  def one_hot(self, num_classes: int) -> "Tensor":
    """One-hot encoding along a new last axis, in the indices' dtype (the daemon's ONE_HOT).
    Indices outside [0, num_classes) give a row of zeros. Float class indices (the seed polygrad
    API: labels loaded as floats) are cast to int32, a fraction truncated toward zero."""
    if dtypes.is_float(self.dtype):
      return self.cast(dtypes.int32).one_hot(num_classes)
    if not dtypes.is_int(self.dtype):
      raise TypeError(f"one_hot needs an integer (or integral float) tensor, got {self.dtype.name}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
      raise ShapeError(f"one_hot needs num_classes >= 1 (an int), got {num_classes!r}")
    return Tensor._make(g.ONE_HOT, self.dtype, self.shape + (num_classes,), (self,), g.Composite(n=num_classes))

  def _loss(self, op: int, srcs: Sequence["Tensor"], per_element: tuple, reduction: str, **fields) -> "Tensor":
    """SHAPE_LOSS: one loss op of the predictions' float dtype, the per-element losses' shape when
    reduction is 'none', else 0-d (its formula is the daemon's: core/frontend/losses.h)."""
    if reduction not in ("mean", "sum", "none"):
      raise ShapeError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    shape = per_element if reduction == "none" else ()
    return Tensor._make(op, least_upper_float(srcs[0].dtype), shape, tuple(srcs), g.Composite(mode=reduction, **fields))

  def cross_entropy(self, Y: "Tensor", reduction: str = "mean", label_smoothing: float = 0.0,
                    axis: Optional[int] = None) -> "Tensor":
    """Cross entropy of logits `self` with class indices (one axis less) or class probabilities
    (self's shape) `Y`; the class axis is 1 (torch), or -1 for a 1-D input, unless `axis` is
    given. label_smoothing s in [0, 1] makes the targets (1 - s) Y + s / classes."""
    if not 0.0 <= label_smoothing <= 1.0:
      raise ShapeError("label_smoothing must be in [0, 1]")
    ax = normalize_axis(axis if axis is not None else (1 if self.ndim >= 2 else -1), self.ndim)
    if not isinstance(Y, Tensor):
      Y = Tensor(Y)
    per = self.shape[:ax] + self.shape[ax + 1:]
    if Y.shape not in (per, self.shape):
      raise ShapeError(f"cross_entropy: targets of shape {Y.shape} fit neither class indices {per} nor class "
                       f"probabilities {self.shape}")
    return self._loss(g.CROSS_ENTROPY, (self, Y), per, reduction, axes=(ax,), label_smoothing=float(label_smoothing))

  def nll_loss(self, Y: "Tensor", weight: Optional["Tensor"] = None, ignore_index: Optional[int] = None,
               reduction: str = "mean") -> "Tensor":
    """torch's nll_loss (the daemon's NLL_LOSS): log-probabilities `self` (N, C, ...) or (C,),
    class indices Y (N, ...) or (); -weight[y] * self[y] per element, targets equal to
    ignore_index counting for nothing; the mean divides by the summed weights of the counted
    targets."""
    if self.ndim == 0 or not dtypes.is_float(self.dtype):
      raise ShapeError(f"nll_loss: log-probabilities must be a float tensor with a class axis, got {self.dtype.name} "
                       f"of shape {self.shape}")
    if not isinstance(Y, Tensor):
      Y = Tensor(Y)
    ax = 1 if self.ndim >= 2 else 0
    want = self.shape[:ax] + self.shape[ax + 1:]
    if Y.shape != want or Y.dtype == dtypes.bool:
      raise ShapeError(f"nll_loss: targets of shape {Y.shape} do not fit log-probabilities {self.shape} "
                       f"(want class indices of shape {want})")
    src = (self, Y)
    if weight is not None:
      weight = weight if isinstance(weight, Tensor) else Tensor(weight)
      if weight.shape != (self.shape[ax],):
        raise ShapeError(f"nll_loss: weight {weight.shape} must have one entry per class ({self.shape[ax]})")
      src = (self, Y, weight)
    # -100 is torch's default: never a class, like None (a target outside [0, C) counts for nothing).
    return self._loss(g.NLL_LOSS, src, Y.shape, reduction, ignore_index=-100 if ignore_index is None else int(ignore_index))

  def sparse_categorical_crossentropy(self, Y: "Tensor", ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> "Tensor":
    """tinygrad's: logits over the last axis, class indices Y (one axis less); targets equal to
    ignore_index (when it is not -1) count for nothing, and the mean is over the others."""
    if not 0.0 <= label_smoothing <= 1.0:
      raise ShapeError("label_smoothing must be in [0, 1]")
    if not isinstance(Y, Tensor):
      Y = Tensor(Y)
    if self.ndim == 0 or Y.shape != self.shape[:-1]:
      raise ShapeError(f"sparse_categorical_crossentropy: targets of shape {Y.shape} do not fit logits {self.shape}")
    return self._loss(g.SPARSE_CATEGORICAL_CROSSENTROPY, (self, Y), Y.shape, reduction, ignore_index=int(ignore_index),
                      label_smoothing=float(label_smoothing))

  def binary_crossentropy(self, Y: "Tensor", reduction: str = "mean") -> "Tensor":
    """-Y log(self) - (1 - Y) log(1 - self) for probabilities `self` (tinygrad's: not clamped)."""
    srcs = [t._float() for t in broadcast_sources(self, (Y,))]
    return self._loss(g.BINARY_CROSSENTROPY, srcs, srcs[0].shape, reduction)

  def binary_crossentropy_logits(self, Y: "Tensor", reduction: str = "mean", pos_weight=None) -> "Tensor":
    """-(pos_weight Y logsigmoid(self) + (1 - Y) logsigmoid(-self)) for logits `self`, stable for
    logits of any size."""
    srcs = [t._float() for t in broadcast_sources(self, (Y,) if pos_weight is None else (Y, pos_weight))]
    return self._loss(g.BINARY_CROSSENTROPY_LOGITS, srcs, srcs[0].shape, reduction)

  def batchnorm(self, weight: Optional["Tensor"], bias: Optional["Tensor"], mean: "Tensor", invstd: "Tensor",
                axis=1) -> "Tensor":
    """(x - mean) * invstd * weight + bias, the statistics shaped along `axis` (tinygrad): mean,
    weight and bias reshaped to those axes' sizes, invstd too when it has as many axes, else
    broadcast to x. One BATCHNORM_INVSTD in the dtype all of them promote to (a float)."""
    axes = tuple(sorted(normalize_axes(axis, self.ndim)))
    stat = tuple(self.shape[i] for i in axes)
    ts = [t if isinstance(t, Tensor) or t is None else Tensor(t) for t in (mean, invstd, weight, bias)]
    out = least_upper_float(least_upper_dtype(self.dtype, *[t.dtype for t in ts if t is not None]))
    mean, invstd, weight, bias = [None if t is None else t.cast(out) for t in ts]
    if invstd.ndim != len(axes) and broadcast_shape(invstd.shape, self.shape) != self.shape:
      raise ShapeError(f"batchnorm: invstd of shape {invstd.shape} does not broadcast to {self.shape}")
    srcs = [self.cast(out), mean.reshape(stat), invstd.reshape(stat) if invstd.ndim == len(axes) else invstd]
    if weight is not None or bias is not None:
      srcs.append(Tensor.ones(*stat, dtype=out) if weight is None else weight.reshape(stat))
    if bias is not None:
      srcs.append(bias.reshape(stat))
    return Tensor._make(g.BATCHNORM_INVSTD, out, self.shape, tuple(srcs), g.Composite(axes=axes))

  # --- normalization and attention (the daemon's RMS_NORM, GROUP_NORM, BATCHNORM_*, SDPA) -------

  def rms_norm(self, axis=-1, eps: float = 1e-6, weight: Optional["Tensor"] = None) -> "Tensor":
    """x / sqrt(mean(x^2) + eps) over the last axes (`axis`: -1, or a tuple of the last axes),
    times `weight` (those axes' shape) when given. float16/bfloat16 compute in float32 and are
    cast back."""
    axes = normalize_axes(axis, self.ndim)
    if not axes or axes != tuple(range(self.ndim - len(axes), self.ndim)):
      raise ShapeError(f"rms_norm normalizes over the last axes, got axis={axis!r} for shape {self.shape}")
    return self._trailing_norm(g.RMS_NORM, g.Composite(normalized_axes=len(axes), eps=float(eps)), weight, None)

  def _trailing_norm(self, op: int, arg: g.Composite, weight, bias) -> "Tensor":
    """LAYERNORM or RMS_NORM over the last arg.normalized_axes axes with the optional weight and
    bias of those axes' shape: computed in the float accumulator of x's, weight's and bias's
    common dtype, and returned in that dtype (as x * weight + bias would promote)."""
    dts = [t.dtype for t in (weight, bias) if isinstance(t, Tensor)]
    out = least_upper_float(least_upper_dtype(self.dtype, *dts))
    x = self.cast(sum_acc_dtype(out))
    affine = x._affine(weight, bias, self.shape[len(self.shape) - arg.normalized_axes:])
    return Tensor._make(op, x.dtype, x.shape, (x, *affine), arg).cast(out)

  def group_norm(self, num_groups: int, weight: Optional["Tensor"] = None, bias: Optional["Tensor"] = None,
                 eps: float = 1e-5) -> "Tensor":
    """torch's group_norm: x (N, C, ...) normalized per (sample, group of C/num_groups channels),
    then weight and bias (C,) per channel when given (the daemon's GROUP_NORM does both)."""
    if self.ndim < 2:
      raise ShapeError(f"group_norm needs (N, C, ...), got shape {self.shape}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1 or self.shape[1] % num_groups:
      raise ShapeError(f"group_norm: {self.shape[1]} channels do not split into {num_groups!r} groups")
    x, out = self._acc_float()
    arg = g.Composite(groups=num_groups, eps=float(eps))
    return Tensor._make(g.GROUP_NORM, x.dtype, x.shape, (x, *x._affine(weight, bias)), arg).cast(out)

  def _affine(self, weight, bias, shape: Optional[Tuple[int, ...]] = None) -> tuple:
    """The weight and bias sources of a normalization of x, of `shape` (default: per channel of
    x (N, C, ...)) in x's dtype: none, (weight,) or (weight, bias), a bias alone with a weight of
    ones (the daemon applies them)."""
    if weight is None and bias is None:
      return ()
    shape = (self.shape[1],) if shape is None else shape
    ts = [Tensor.ones(*shape) if weight is None else weight, bias]
    return tuple(_of_shape(t, shape, name).cast(self.dtype) for name, t in zip(("weight", "bias"), ts) if t is not None)

  def batch_norm(self, running_mean: Optional["Tensor"] = None, running_var: Optional["Tensor"] = None,
                 weight: Optional["Tensor"] = None, bias: Optional["Tensor"] = None, training: bool = False,
                 eps: float = 1e-5) -> "Tensor":
    """torch's batch_norm over axis 1 of x (N, C, ...): with the batch statistics (mean and
    biased variance) when `training` or no running statistics are given, else with
    running_mean/running_var (C,); then weight and bias (C,) per channel when given. The running
    statistics are inputs only (nn.BatchNorm updates them)."""
    if self.ndim < 2:
      raise ShapeError(f"batch_norm needs (N, C, ...), got shape {self.shape}")
    x, out = self._acc_float()
    affine = x._affine(weight, bias)
    if training or running_mean is None or running_var is None:
      y = Tensor._make(g.BATCHNORM_TRAIN, x.dtype, x.shape, (x, *affine), g.Composite(eps=float(eps)))
    else:
      for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t.shape != (self.shape[1],):
          raise ShapeError(f"batch_norm: {name} must have shape ({self.shape[1]},), got {t.shape}")
      stats = (running_mean.cast(x.dtype), running_var.cast(x.dtype))
      y = Tensor._make(g.BATCHNORM_EVAL, x.dtype, x.shape, (x, *stats, *affine), g.Composite(eps=float(eps)))
    return y.cast(out)

  def scaled_dot_product_attention(self, key: "Tensor", value: "Tensor", attn_mask: Optional["Tensor"] = None,
                                   dropout_p: float = 0.0, is_causal: bool = False) -> "Tensor":
    """softmax(q @ k^T / sqrt(d) + mask) @ v with q = self (..., L, d), k (..., S, d), v (..., S,
    dv), batch axes broadcasting (the daemon's SCALED_DOT_PRODUCT_ATTENTION). attn_mask
    broadcasts to (..., L, S): bool keeps where true, float is added. is_causal masks keys after
    the query position. dropout_p applies to the attention weights while Tensor.training."""
    q, k, v = self, key, value
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
      raise ShapeError(f"scaled_dot_product_attention needs q, k, v of rank >= 2, got {q.shape}, {k.shape}, {v.shape}")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
      raise ShapeError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit")
    batch = broadcast_shape(broadcast_shape(q.shape[:-2], k.shape[:-2]), v.shape[:-2])
    scores = batch + (q.shape[-2], k.shape[-2])
    if attn_mask is not None:
      if not isinstance(attn_mask, Tensor):
        attn_mask = Tensor(attn_mask)
      if broadcast_shape(attn_mask.shape, scores) != scores:
        raise ShapeError(f"attention mask {attn_mask.shape} does not broadcast to the scores {scores}")
    if not 0 <= dropout_p <= 1:
      raise ShapeError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    arg = g.Composite(causal=bool(is_causal))
    if dropout_p and Tensor.training:  # drawn on the device, as dropout's
      seed, counter = Tensor._random_key()
      arg = g.Composite(causal=bool(is_causal), p=float(dropout_p), seed=seed, counter=counter)
    dt = least_upper_float(least_upper_dtype(q.dtype, k.dtype, v.dtype))
    acc = sum_acc_dtype(dt)
    src = [q.cast(acc), k.cast(acc), v.cast(acc)]
    op = g.SCALED_DOT_PRODUCT_ATTENTION
    if attn_mask is not None:
      src.append(attn_mask if attn_mask.dtype == dtypes.bool else attn_mask.cast(acc))
      op = g.SCALED_DOT_PRODUCT_ATTENTION_MASKED
    out_shape = batch + (q.shape[-2], v.shape[-1])
    return Tensor._make(op, acc, out_shape, tuple(src), arg).cast(dt)
