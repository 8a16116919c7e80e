"""Random tensors: the seeded generator the daemon draws from (RAND, RANDN, RANDINT, MULTINOMIAL) and
the initializers built on it."""
from __future__ import annotations

import math
import time
from typing import Optional, Tuple

import numpy as np

from .. import graph as g
from ..device import Device
from ..dtype import DType, DTypeLike, dtypes, to_dtype
from ..errors import ShapeError
from ..shape import new_shape, prod
from .core import Tensor, tensor_methods


@tensor_methods
class Random:
  """Tensor.manual_seed, Tensor.rand, Tensor.kaiming_uniform, ... (attached to Tensor)."""

  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Seeds rand/randn/randint/dropout (computed on the device from (seed, call counter): the
    same seed gives the same numbers in every client language) and the client's generator that
    the initializers (uniform, kaiming_*, glorot_uniform) draw from."""
    Tensor._seed = int(seed) % (1 << 64)
    Tensor._counter = 0
    Tensor._rng = np.random.default_rng(seed)

  @staticmethod
  def _random_key() -> Tuple[int, int]:
    """(seed, counter) for the next device random op: each call gets a stream of its own."""
    if Tensor._seed is None:
      Tensor._seed = int(time.time()) % (1 << 64)  # tinygrad's default: unseeded runs differ
    counter = Tensor._counter
    Tensor._counter = (counter + 1) % (1 << 32)
    return Tensor._seed, counter

  @staticmethod
  def _random(op: int, shape, dtype: DType, **fields) -> "Tensor":
    seed, counter = Tensor._random_key()
    shape = new_shape(shape)
    t = Tensor(g.GRAPH.node(op, dtype, shape, (), g.Composite(shape=shape, seed=seed, counter=counter, **fields)))
    g.GRAPH.created.add(t)
    return t

  @staticmethod
  def _generator() -> np.random.Generator:
    if Tensor._rng is None:
      Tensor._rng = np.random.default_rng(Tensor._seed)
    return Tensor._rng

  # rand/randn/randint/dropout are computed on the device (the daemon's RAND, RANDN, RANDINT,
  # DROPOUT) from Tensor.manual_seed's seed and a per-call counter; nothing travels as data.

  @staticmethod
  def _random_float(op: int, name: str, shape, dtype, requires_grad, kwargs, **fields) -> "Tensor":
    Device.require(kwargs.get("device"))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt):
      raise TypeError(f"{name} makes float tensors, got {dt.name}")
    t = Tensor._random(op, shape, dt, **fields)
    if requires_grad is not None:
      t.requires_grad = requires_grad
    return t

  @staticmethod
  def rand(*shape, dtype: Optional[DTypeLike] = None, requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Uniform in [0, 1), computed on the device."""
    return Tensor._random_float(g.RAND, "rand", shape, dtype, requires_grad, kwargs)

  @staticmethod
  def randn(*shape, dtype: Optional[DTypeLike] = None, requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Standard normal, computed on the device."""
    return Tensor._random_float(g.RANDN, "randn", shape, dtype, requires_grad, kwargs)

  @staticmethod
  def normal(*shape, mean: float = 0.0, std: float = 1.0, dtype: Optional[DTypeLike] = None,
             requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Normal with `mean` and `std`, computed on the device (the daemon's NORMAL: randn * std + mean)."""
    return Tensor._random_float(g.NORMAL, "normal", shape, dtype, requires_grad, kwargs, mean=float(mean), std=float(std))

  @staticmethod
  def randint(*shape, low: int = 0, high: int = 10, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """Integers uniform in [low, high), computed on the device."""
    Device.require(kwargs.get("device"))
    dt = to_dtype(dtype) if dtype is not None else dtypes.int32
    if not dtypes.is_int(dt):
      raise TypeError(f"randint makes integer tensors, got {dt.name}")
    low, high = int(low), int(high)
    if high <= low:
      raise ShapeError(f"randint needs low < high, got [{low}, {high})")
    if high - low > 1 << 32 or not dtypes.min(dt) <= low <= high - 1 <= dtypes.max(dt):
      raise ShapeError(f"randint range [{low}, {high}) does not fit {dt.name} (or spans more than 2^32)")
    return Tensor._random(g.RANDINT, shape, dt, low=low, high=high)

  @staticmethod
  def uniform(*shape, low: float = 0.0, high: float = 1.0, dtype: Optional[DTypeLike] = None,
              requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    Device.require(kwargs.get("device"))
    vals = Tensor._generator().uniform(low, high, new_shape(shape))
    return Tensor(vals.astype(np.float32), dtype=dtype or dtypes.default_float, requires_grad=requires_grad)

  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> "Tensor":
    """uniform(-1, 1) scaled by 1/sqrt(numel) (tinygrad)."""
    shape = new_shape(shape)
    return Tensor.uniform(*shape, low=-prod(shape) ** -0.5, high=prod(shape) ** -0.5, **kwargs)

  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> "Tensor":
    """Glorot/Xavier uniform: bound sqrt(6 / (shape[0] + prod(shape[1:]))) (tinygrad)."""
    shape = new_shape(shape)
    bound = math.sqrt(6 / (shape[0] + prod(shape[1:])))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> "Tensor":
    shape = new_shape(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kwargs) -> "Tensor":
    shape = new_shape(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor(Tensor._generator().standard_normal(shape).astype(np.float32) * np.float32(std), **kwargs)

  @staticmethod
  def randperm(n: int, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """A random permutation of 0..n-1: the positions that sort n uniform draws (the daemon's
    RAND and SORT, so every client draws the same permutation from one seed)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
      raise ShapeError(f"randperm needs a count n >= 0, got {n!r}")
    perm = Tensor.rand(n, **kwargs).argsort()
    return perm if dtype is None else perm.cast(to_dtype(dtype))

  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> "Tensor":
    """Class indices (int32) drawn from the weights along the last axis of a 1-D or 2-D tensor,
    on the daemon (its MULTINOMIAL, seeded like rand): with replacement by inverting the running
    distribution at uniform draws; without, the largest of log(weight) plus Gumbel noise, so
    num_samples is at most the number of classes."""
    if self.ndim not in (1, 2):
      raise ShapeError(f"multinomial takes a 1-D or 2-D tensor of weights, got shape {self.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
      raise ShapeError(f"multinomial: num_samples must be an int >= 1, got {num_samples!r}")
    n = self.shape[-1]
    if n == 0:
      raise ShapeError("multinomial: no classes to draw from")
    if not replacement and num_samples > n:
      raise ShapeError(f"multinomial: {num_samples} samples without replacement from {n} classes")
    seed, counter = Tensor._random_key()
    shape = self.shape[:-1] + (num_samples,)
    return Tensor._make(g.MULTINOMIAL, dtypes.int32, shape, (self,),
                        g.Composite(n=num_samples, replacement=bool(replacement), seed=seed, counter=counter))

  def rand_like(self, **kwargs) -> "Tensor":
    return Tensor.rand(*self.shape, dtype=kwargs.pop("dtype", self.dtype), **kwargs)

  def randn_like(self, **kwargs) -> "Tensor":
    return Tensor.randn(*self.shape, dtype=kwargs.pop("dtype", self.dtype), **kwargs)
