"""polygrad: a tinygrad-compatible lazy Tensor API whose graphs run on polygradd over gRPC.

    from polygrad import Tensor
    print((Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).numpy())

POLYGRAD_ADDRESS (``host:port`` or ``unix:/path``) names a running daemon; without it a private
daemon is started on a Unix socket and stopped at exit (POLYGRAD_DAEMON names the binary).
"""
from .dtype import DType, dtypes, least_upper_dtype
from .errors import (PolygradConnectionError, PolygradError, PolygradInvalidArgument,
                     PolygradNotFound, PolygradResourceExhausted, PolygradTimeout,
                     PolygradUnimplemented)
from .tensor import Tensor
from .device import Device, PolygradDeviceError
from .connection import close_connection, get_connection
from . import nn
from .jit import JitError, TinyJit
from .variable import Variable

__version__ = "0.1.0"


def synchronize() -> None:
  """Waits until the daemon has run everything this process sent; raises the first error."""
  Tensor.synchronize()


__all__ = ["Tensor", "DType", "dtypes", "least_upper_dtype", "PolygradError",
           "PolygradConnectionError", "PolygradInvalidArgument", "PolygradNotFound",
           "PolygradResourceExhausted", "PolygradTimeout", "PolygradUnimplemented",
           "get_connection", "close_connection", "nn", "__version__", "Device", "PolygradDeviceError", "TinyJit", "JitError", "Variable",
           "synchronize"]
