"""Neural-network layers (tinygrad's nn, torch-compatible parameter names and initialization),
optimizers, learning-rate schedulers and state dicts.

    from polygrad.nn import Linear, SGD, get_parameters

Layers are plain Python objects holding Tensors; `get_parameters(model)` finds them. Parameters
start as data drawn from the client's generator (Tensor.manual_seed); an optimizer step computes
their new values lazily and realizes them all in one request, then rebinds each parameter to its
new node (see Tensor.assign).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

from ..dtype import dtypes
from ..tensor import Tensor, untracked
from .optim import (LAMB, LARS, SGD, Adam, AdamW, CosineAnnealingLR, LinearLR, LinearWarmup, LRScheduler,
                    MultiStepLR, Muon, Optimizer, StepLR)
from ..step import CompiledTrainingStep, compile_step
from .state import (get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata,
                    safe_save, torch_load)

__all__ = ["Linear", "LayerNorm", "LayerNorm2d", "RMSNorm", "Embedding", "Dropout", "BatchNorm", "BatchNorm1d",
           "BatchNorm2d", "GroupNorm", "InstanceNorm", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
           "LSTMCell", "Optimizer", "SGD", "Adam", "AdamW", "LAMB", "LARS", "Muon", "LRScheduler", "StepLR",
           "MultiStepLR", "CosineAnnealingLR", "LinearLR", "LinearWarmup", "get_parameters", "get_state_dict", "load_state_dict", "safe_save",
           "safe_load", "safe_load_metadata", "torch_load", "compile_step", "CompiledTrainingStep"]


def _param(t: Tensor) -> Tensor:
  t.requires_grad = True
  return t


def _buffer(t: Tensor) -> Tensor:
  t.requires_grad = False
  return t


class Linear:
  """y = x @ weight.T + bias; weight (out, in) and bias drawn from U(-1/sqrt(in), 1/sqrt(in))
  as in tinygrad and torch."""

  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = _param(Tensor.uniform(out_features, in_features, low=-bound, high=bound))
    self.bias = _param(Tensor.uniform(out_features, low=-bound, high=bound)) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    return x.linear(self.weight.transpose(), self.bias)


def _shape_tuple(s: Union[int, Sequence[int]]) -> Tuple[int, ...]:
  return (s,) if isinstance(s, int) else tuple(s)


class LayerNorm:
  """Normalizes over the last len(normalized_shape) axes, then weight * x + bias (ones and
  zeros at start) when elementwise_affine."""

  def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
               elementwise_affine: bool = True):
    self.normalized_shape = _shape_tuple(normalized_shape)
    self.axis = tuple(-1 - i for i in range(len(self.normalized_shape)))
    self.eps, self.elementwise_affine = eps, elementwise_affine
    self.weight = _param(Tensor.ones(*self.normalized_shape)) if elementwise_affine else None
    self.bias = _param(Tensor.zeros(*self.normalized_shape)) if elementwise_affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      raise ValueError(f"LayerNorm{self.normalized_shape} got an input of shape {x.shape}")
    return x.layernorm(self.axis, self.eps, weight=self.weight, bias=self.bias)


class RMSNorm:
  """x / sqrt(mean(x^2 over the last axis) + eps) * weight (ones at start)."""

  def __init__(self, dim: int, eps: float = 1e-5, elementwise_affine: bool = True):
    self.eps = eps
    self.weight = _param(Tensor.ones(dim)) if elementwise_affine else None

  def _norm(self, x: Tensor) -> Tensor:
    return x.rms_norm(-1, self.eps)  # the daemon's RMS_NORM

  def __call__(self, x: Tensor) -> Tensor:
    return x.rms_norm(-1, self.eps, weight=self.weight)


class Embedding:
  """A lookup table: idx (integers) -> weight[idx], computed as one_hot(idx) @ weight, so the
  gradient with respect to the table is one more matmul. weight is Glorot-uniform (tinygrad)."""

  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = _param(Tensor.glorot_uniform(vocab_size, embed_size))

  def __call__(self, idx: Tensor) -> Tensor:
    if not isinstance(idx, Tensor):
      idx = Tensor(idx, dtype=dtypes.int32)
    return idx.one_hot(self.vocab_sz).cast(self.weight.dtype) @ self.weight


class Dropout:
  """Zeros elements with probability p while Tensor.training is set (a mask drawn on the device
  from Tensor.manual_seed's seed); identity otherwise."""

  def __init__(self, p: float = 0.5):
    self.p = p

  def __call__(self, x: Tensor) -> Tensor:
    return x.dropout(self.p)


class BatchNorm:
  """Batch normalization over axis 1 (torch's BatchNorm1d/2d/3d). While Tensor.training is set it
  normalizes with the batch statistics and updates running_mean/running_var (momentum, unbiased
  variance, as torch); otherwise it uses the running statistics. The running statistics are
  rebound lazily and realized by the next optimizer step (or any realize of them)."""

  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
               momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight = _param(Tensor.ones(sz)) if affine else None
    self.bias = _param(Tensor.zeros(sz)) if affine else None
    self.num_batches_tracked = _buffer(Tensor.zeros(1, dtype=dtypes.int64))
    if track_running_stats:
      self.running_mean = _buffer(Tensor.zeros(sz))
      self.running_var = _buffer(Tensor.ones(sz))

  def calc_stats(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    if self.track_running_stats and not Tensor.training:
      return self.running_mean, self.running_var
    axes = tuple(i for i in range(x.ndim) if i != 1)
    return x.mean(axes), x.var(axes, correction=0)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2:
      raise ValueError(f"BatchNorm needs an input with a channel axis (N, C, ...), got {x.shape}")
    training = Tensor.training or not self.track_running_stats
    if self.track_running_stats and Tensor.training:
      mean, var = self.calc_stats(x)
      n = x.numel() // x.shape[1]
      with untracked():  # statistics carry no gradient
        self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean)
        self.running_var.assign((1 - self.momentum) * self.running_var +
                                self.momentum * (n / max(1, n - 1)) * var)
        self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    # The daemon's BATCHNORM_TRAIN (batch statistics) or BATCHNORM_EVAL (the running ones).
    stats = (None, None) if training else (self.running_mean, self.running_var)
    return x.batch_norm(*stats, weight=self.weight, bias=self.bias, training=training, eps=self.eps)


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


class GroupNorm:
  """Normalizes each of num_groups channel groups (axis 1) over its channels and the spatial
  axes, then a per-channel affine (ones and zeros at start)."""

  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups:
      raise ValueError(f"num_channels {num_channels} is not divisible by num_groups {num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight = _param(Tensor.ones(num_channels)) if affine else None
    self.bias = _param(Tensor.zeros(num_channels)) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels:
      raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}) got an input of shape {x.shape}")
    return x.group_norm(self.num_groups, self.weight, self.bias, self.eps)  # the daemon's GROUP_NORM


class InstanceNorm:
  """Normalizes each (sample, channel) of x (N, C, ...) over its spatial positions, then
  weight * x + bias per channel (ones and zeros at start) when affine: torch's InstanceNorm1d/2d/3d
  with affine=True, track_running_stats=False."""

  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight = _param(Tensor.ones(num_features)) if affine else None
    self.bias = _param(Tensor.zeros(num_features)) if affine else None

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 3 or x.shape[1] != self.num_features:
      raise ValueError(f"InstanceNorm({self.num_features}) takes (N, {self.num_features}, ...), got {x.shape}")
    # One group per channel: the daemon's GROUP_NORM, with its per-channel affine.
    return x.group_norm(self.num_features, self.weight, self.bias, self.eps)


class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of (N, C, H, W) at every position (tinygrad's LayerNorm2d, as in
  ConvNeXt): the channel axis moved last, normalized, moved back."""

  def __init__(self, channels: int, eps: float = 1e-5, elementwise_affine: bool = True):
    super().__init__(channels, eps, elementwise_affine)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 4:
      raise ValueError(f"LayerNorm2d takes (N, C, H, W), got {x.shape}")
    return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class LSTMCell:
  """One LSTM step (torch's LSTMCell): gates = x @ W_ih^T + b_ih + h @ W_hh^T + b_hh split into
  input, forget, cell and output; c' = f*c + i*g, h' = o*tanh(c'). Weights and biases drawn from
  U(-1/sqrt(hidden), 1/sqrt(hidden)). Called with hc=None, the state starts at zeros."""

  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    bound = 1 / math.sqrt(hidden_size)
    self.hidden_size = hidden_size
    self.weight_ih = _param(Tensor.uniform(4 * hidden_size, input_size, low=-bound, high=bound))
    self.weight_hh = _param(Tensor.uniform(4 * hidden_size, hidden_size, low=-bound, high=bound))
    self.bias_ih = _param(Tensor.uniform(4 * hidden_size, low=-bound, high=bound)) if bias else None
    self.bias_hh = _param(Tensor.uniform(4 * hidden_size, low=-bound, high=bound)) if bias else None

  def __call__(self, x: Tensor, hc: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
    if hc is None:
      zeros = Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
      hc = (zeros, zeros)
    h, c = hc
    gates = x.linear(self.weight_ih.transpose(), self.bias_ih) + h.linear(self.weight_hh.transpose(), self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _conv_kernel(in_channels: int, out_channels: int, kernel_size, groups: int) -> Tuple[int, ...]:
  """The kernel of a (transposed) convolution layer, after checking its channels divide into
  `groups`: an int is a 2-D (k, k), a tuple of 1 to 3 values gives the spatial count (tinygrad)."""
  if groups < 1 or in_channels % groups or out_channels % groups:
    raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must be divisible by "
                     f"groups {groups}")
  kernel = _shape_tuple(kernel_size) * (2 if isinstance(kernel_size, int) else 1)
  if not 1 <= len(kernel) <= 3:
    raise ValueError(f"kernel_size needs an int or 1 to 3 values, got {kernel_size!r}")
  return kernel


class Conv2d:
  """Convolution over (N, C, *spatial) with weight (out, in/groups, *kernel) and bias (out,), both
  drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * prod(kernel) (torch's
  kaiming-uniform default). As tinygrad's, kernel_size's length gives the spatial axes, 1 to 3
  (an int: 2-D). padding: an int, one value per axis, 'valid' or 'same' (stride 1)."""

  def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, Sequence[int]], stride=1,
               padding: Union[int, str, Sequence[int]] = 0, dilation=1, groups: int = 1, bias: bool = True):
    self.kernel_size = _conv_kernel(in_channels, out_channels, kernel_size, groups)
    n = len(self.kernel_size)
    self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
    self.stride, self.dilation = stride, dilation
    if isinstance(padding, str):
      dil = _shape_tuple(dilation) * (n if isinstance(dilation, int) else 1)
      if padding == "valid":
        padding = 0
      elif padding == "same":
        if any(s != 1 for s in _shape_tuple(stride)):
          raise ValueError("padding='same' needs stride 1")
        total = [d * (k - 1) for d, k in zip(dil, self.kernel_size)]
        # tinygrad's (before, after) pairs from the last axis back; the extra element goes after, as in torch
        padding = tuple(v for t in reversed(total) for v in (t // 2, t - t // 2))
      else:
        raise ValueError(f"padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
    self.padding = padding
    fan_in = in_channels // groups * math.prod(self.kernel_size)
    bound = 1 / math.sqrt(fan_in)
    self.weight = _param(Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-bound,
                                        high=bound))
    self.bias = _param(Tensor.uniform(out_channels, low=-bound, high=bound)) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                    padding=self.padding)


class ConvTranspose2d:
  """Transposed convolution (torch's ConvTranspose1d/2d/3d) with weight (in, out/groups, *kernel)
  and bias (out,) drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = out/groups *
  prod(kernel) (torch's default); kernel_size's length gives the spatial axes, 1 to 3 (an int:
  2-D); computed by the daemon's CONV_TRANSPOSE2D."""

  def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, Sequence[int]], stride=1,
               padding=0, output_padding=0, dilation=1, groups: int = 1, bias: bool = True):
    self.kernel_size = _conv_kernel(in_channels, out_channels, kernel_size, groups)
    self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
    self.stride, self.padding, self.output_padding, self.dilation = stride, padding, output_padding, dilation
    fan_in = out_channels // groups * math.prod(self.kernel_size)
    bound = 1 / math.sqrt(fan_in)
    self.weight = _param(Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size, low=-bound,
                                        high=bound))
    self.bias = _param(Tensor.uniform(out_channels, low=-bound, high=bound)) if bias else None

  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                              dilation=self.dilation, padding=self.padding, output_padding=self.output_padding)


def _single(v, name: str) -> int:
  if isinstance(v, (tuple, list)):
    if len(v) != 1:
      raise ValueError(f"a 1-D convolution's {name} is an int or 1 value, got {v!r}")
    v = v[0]
  return v


class Conv1d(Conv2d):
  """1-D convolution over (N, C, L) (torch's Conv1d): weight (out, in/groups, K), the daemon's
  convolution over one spatial axis. padding: an int, 'valid' or 'same' (stride 1)."""

  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
               groups: int = 1, bias: bool = True):
    k, st, dil = (_single(v, n) for v, n in ((kernel_size, "kernel_size"), (stride, "stride"), (dilation, "dilation")))
    pad = padding if isinstance(padding, str) else _single(padding, "padding")
    super().__init__(in_channels, out_channels, (k,), st, pad, dil, groups, bias)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 3:
      raise ValueError(f"Conv1d takes (N, C, L), got {x.shape}")
    return super().__call__(x)


class ConvTranspose1d(ConvTranspose2d):
  """Transposed 1-D convolution over (N, Cin, L) (torch's ConvTranspose1d): weight
  (in, out/groups, K), the daemon's transposed convolution over one spatial axis."""

  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
               dilation=1, groups: int = 1, bias: bool = True):
    super().__init__(in_channels, out_channels, (_single(kernel_size, "kernel_size"),), _single(stride, "stride"),
                     _single(padding, "padding"), _single(output_padding, "output_padding"),
                     _single(dilation, "dilation"), groups, bias)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 3:
      raise ValueError(f"ConvTranspose1d takes (N, Cin, L), got {x.shape}")
    return super().__call__(x)
