"""Tensors from values: full, zeros, ones, arange, linspace, eye, and from memory or a URL."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .. import graph as g
from ..device import Device
from ..dtype import DTypeLike, dtypes, np_dtype, to_dtype
from ..errors import ShapeError
from ..shape import as_shape, check_shape, prod
from .core import _py_scalar, Scalar, Tensor, tensor_methods


@tensor_methods
class Creation:
  """Tensor.full, Tensor.arange, Tensor.from_blob, ... (attached to Tensor)."""

  # --- construction -----------------------------------------------------------------------------

  @staticmethod
  def full(shape, fill_value: Scalar, dtype: Optional[DTypeLike] = None,
           requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    Device.require(kwargs.get("device"))
    shape = check_shape(as_shape((shape,) if isinstance(shape, int) else tuple(shape)))
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(_py_scalar(fill_value))
    t = Tensor._const(_py_scalar(fill_value), dt, shape)
    if requires_grad is not None:
      t.requires_grad = requires_grad
    return t

  @staticmethod
  def zeros(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(as_shape(shape), 0.0, dtype=dtype or dtypes.default_float, **kwargs)

  @staticmethod
  def ones(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(as_shape(shape), 1.0, dtype=dtype or dtypes.default_float, **kwargs)

  @staticmethod
  def empty(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.zeros(*shape, dtype=dtype, **kwargs)

  def full_like(self, fill_value: Scalar, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(self.shape, fill_value, dtype=dtype or self.dtype, **kwargs)

  def zeros_like(self, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return self.full_like(0, dtype, **kwargs)

  def ones_like(self, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return self.full_like(1, dtype, **kwargs)

  @staticmethod
  def arange(start, stop=None, step=1, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """start, start + step, ... up to (not including) stop: the daemon's ARANGE from start by
    step (computed in the result dtype, or in the default float for a float step into ints)."""
    Device.require(kwargs.get("device"))
    if stop is None:
      start, stop = 0, start
    for v in (start, stop, step):
      if isinstance(v, bool) or not isinstance(_py_scalar(v), (int, float)):
        raise ShapeError(f"arange takes int or float bounds, got {v!r}")
    start, stop, step = (_py_scalar(v) for v in (start, stop, step))
    if step == 0:
      raise ShapeError("arange: step must not be zero")
    if not all(math.isfinite(v) for v in (start, stop, step)):
      raise ShapeError(f"arange bounds must be finite, got {(start, stop, step)}")
    if dtype is None:
      dtype = dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) \
          else dtypes.default_int
      # Integer bounds past int32 need int64 (torch's default); the default int would wrap.
      if dtype == dtypes.default_int and not all(dtypes.min(dtype) <= v <= dtypes.max(dtype)
                                                 for v in (start, stop - step, step)):
        dtype = dtypes.int64
    dt = to_dtype(dtype)
    if dt == dtypes.bool:
      raise ShapeError("arange cannot make a bool tensor")
    n = max(0, math.ceil((stop - start) / step))
    if n and dtypes.is_int(dt) and not all(dtypes.min(dt) <= v <= dtypes.max(dt) for v in (start, start + (n - 1) * step)):
      raise OverflowError(f"arange({start}, {stop}, {step}) does not fit {dt.name}")
    if n == 0:
      return Tensor(np.zeros((0,), dtype=np.float64), dtype=dt)
    all_int = all(isinstance(v, int) for v in (start, stop, step))
    calc = dt if (dtypes.is_float(dt) or all_int) else dtypes.default_float
    progression = () if (start, step) == (0, 1) else (Tensor._const(start, calc), Tensor._const(step, calc))
    return Tensor._make(g.ARANGE, calc, check_shape((n,)), progression, (n,)).cast(dt)

  @staticmethod
  def linspace(start, stop, steps: int, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """numpy's linspace: `steps` values from start to stop, the last exactly stop (the daemon's
    LINSPACE, computed in float64 and cast to dtype)."""
    device = kwargs.get("device")
    Device.require(device)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
      raise ShapeError(f"linspace: steps must be an int >= 0, got {steps!r}")
    bounds = tuple(float(_py_scalar(v)) for v in (start, stop))
    if not all(math.isfinite(v) for v in bounds):
      raise ShapeError(f"linspace bounds must be finite, got {bounds}")
    if steps == 0:
      return Tensor(np.zeros((0,), dtype=np.float64), dtype=dt, device=device)
    shape = check_shape((int(steps),))
    t = Tensor._make(g.LINSPACE, dt, shape, (), g.Composite(shape=shape, start=bounds[0], stop=bounds[1]))
    return t if device is None else t.to(device)

  @staticmethod
  def eye(n: int, m: Optional[int] = None, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """The (n, m) identity (m defaults to n): the daemon's EYE."""
    device = kwargs.get("device")
    Device.require(device)
    shape = check_shape(as_shape((n, n if m is None else m)))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if 0 in shape:
      return Tensor(np.zeros(shape, dtype=np.float64), dtype=dt, device=device)
    t = Tensor._make(g.EYE, dt, shape, (), shape)
    return t if device is None else t.to(device)

  @staticmethod
  def from_blob(ptr: int, shape: Tuple[int, ...], dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """A tensor of the `prod(shape)` elements of `dtype` at address `ptr` in this process (e.g. a
    ctypes buffer or another library's array), copied when created: the memory need not outlive
    the call, and must hold that many bytes (nothing can check it)."""
    import ctypes
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    shape = as_shape(shape)
    if not isinstance(ptr, int) or ptr <= 0:
      raise ShapeError(f"from_blob needs a nonzero address, got {ptr!r}")
    wire = np_dtype(dt)
    raw = (ctypes.c_char * (prod(shape) * wire.itemsize)).from_address(ptr)
    arr = np.frombuffer(bytes(raw), dtype=wire).reshape(shape)
    return Tensor.from_wire_array(arr, dt) if dt == dtypes.bfloat16 else Tensor(arr, dtype=dt, **kwargs)

  @staticmethod
  def from_url(url: str, gunzip: bool = False, **kwargs) -> "Tensor":
    """The bytes at an http(s) URL as a uint8 tensor (gunzip: decompressed first), as tinygrad."""
    import gzip
    import urllib.parse
    import urllib.request
    if urllib.parse.urlparse(url).scheme not in ("http", "https"):
      raise ShapeError(f"from_url reads http:// and https:// URLs, got {url[:100]!r}")
    with urllib.request.urlopen(url, timeout=kwargs.pop("timeout", 60)) as r:
      data = r.read()
    if gunzip:
      data = gzip.decompress(data)
    return Tensor(np.frombuffer(data, dtype=np.uint8).copy(), dtype=dtypes.uint8, **kwargs)
