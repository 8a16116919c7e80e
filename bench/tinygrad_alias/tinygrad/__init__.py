# tinygrad's test suite run against polygrad: this package re-exports polygrad's public API.
from polygrad import Tensor, TinyJit, Variable, dtypes
from polygrad import Device as _Device
import polygrad.nn as nn
nn.optim.Optimizer.require_training = True  # tinygrad's contract: step() only in training mode

class _DeviceAlias:
  """polygrad's Device plus what the test module reads at import (Device[name].renderer)."""
  def __getattr__(self, k): return getattr(_Device, k)
  def __getitem__(self, name):
    from polygrad import dtypes as _dt
    class _R:
      @staticmethod
      def supported_dtypes(): return [_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64]
    class _D: renderer = _R()
    return _D()
Device = _DeviceAlias()
