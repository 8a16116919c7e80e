"""Exceptions. Server errors keep the daemon's gRPC code and message."""
from __future__ import annotations

from typing import Optional

import grpc


class PolygradError(RuntimeError):
  """An error reported by polygradd. `code` is the grpc.StatusCode, `details` the server's text."""

  def __init__(self, message: str, code: Optional[grpc.StatusCode] = None, details: str = ""):
    super().__init__(message)
    self.code = code
    self.details = details or message


class ShapeError(ValueError, RuntimeError):
  """A shape or argument the op cannot take, raised by the client before anything is sent. Both
  a ValueError (what Python code catches) and a RuntimeError (what torch and tinygrad raise)."""


class DTypeError(TypeError, RuntimeError):
  """A dtype the op does not take (a shift of floats, a remainder of bools), raised by the client
  before anything is sent. Both a TypeError and a RuntimeError (what torch and tinygrad raise)."""


class UnknownDTypeError(DTypeError, AttributeError):
  """A dtype name that names no dtype: also an AttributeError, as tinygrad's `getattr(dtypes, name)`."""


class AxisError(ShapeError, IndexError):
  """An axis out of range: IndexError as in torch, and a ShapeError."""


class PolygradConnectionError(PolygradError, ConnectionError):
  """The daemon cannot be reached (or could not be started)."""


class PolygradInvalidArgument(PolygradError, ValueError):
  """The daemon rejected a request as malformed (INVALID_ARGUMENT)."""


class PolygradNotFound(PolygradError, LookupError):
  """A session, node or handle the daemon does not know (NOT_FOUND)."""


class PolygradResourceExhausted(PolygradError):
  """A limit or quota of the daemon was exceeded (RESOURCE_EXHAUSTED)."""


class PolygradTimeout(PolygradError, TimeoutError):
  """The deadline passed (DEADLINE_EXCEEDED)."""


class PolygradUnimplemented(PolygradError, NotImplementedError):
  """The daemon does not implement this (UNIMPLEMENTED)."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: PolygradInvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: PolygradInvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: PolygradInvalidArgument,
    grpc.StatusCode.NOT_FOUND: PolygradNotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: PolygradResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: PolygradTimeout,
    grpc.StatusCode.UNIMPLEMENTED: PolygradUnimplemented,
    grpc.StatusCode.UNAVAILABLE: PolygradConnectionError,
}


def from_rpc_error(err: grpc.RpcError, what: str, address: str = "") -> PolygradError:
  """Translate a grpc.RpcError from call `what` into the matching PolygradError subclass."""
  code = err.code() if hasattr(err, "code") else None
  details = (err.details() if hasattr(err, "details") else None) or str(err)
  return _error(code, details, what, address)


def from_status(code: int, message: str, what: str, address: str = "") -> PolygradError:
  """The PolygradError for a command that failed inside the Execute stream: its `Error` carries
  the numeric gRPC status code the command would have had as a unary call."""
  return _error(next((c for c in grpc.StatusCode if c.value[0] == code), None), message, what, address)


def _error(code: Optional[grpc.StatusCode], details: str, what: str, address: str) -> PolygradError:
  cls = _BY_CODE.get(code, PolygradError)
  name = code.name if code is not None else "UNKNOWN"
  if cls is PolygradConnectionError:
    msg = f"cannot reach polygradd at {address} ({what}: {name}: {details})"
  else:
    msg = f"{what} failed: {name}: {details}"
  return cls(msg, code=code, details=details)
