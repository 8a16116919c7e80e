"""Asynchronous dispatch: one Execute stream per session (docs/PROTOCOL.md, "Asynchronous dispatch").

A realize, a release or a step run is written to the session's stream and the caller goes on at
once; the daemon runs a stream's commands one at a time in the order they were sent, so a graph
sent next may read the nodes of one still running (their ids are the client's). Only a read of
data, or an explicit synchronize, waits. At most `max_in_flight` commands are outstanding: the
next submit blocks until an answer frees a slot (back-pressure, so a fast loop cannot queue
unbounded work on the daemon).

Answers are matched by request id on a reader thread, which only completes `Pending`s; what an
answer means for the graph is applied by the caller's thread (graph.Graph.settle), so the node
table is never touched from two threads.

A stream that breaks (the daemon went away, a proxy cut it) fails every outstanding command with
the stream's error and is not used again; the connection falls back to unary calls.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Dict, Optional

import grpc

from .errors import PolygradConnectionError, PolygradError, from_status
from .wire import execute_bytes
from .v1 import polygrad_pb2 as pb

__all__ = ["Pending", "ExecuteStream", "DEFAULT_MAX_IN_FLIGHT"]

# Enough to cover a round trip of a few milliseconds with the step times of small models, few
# enough that an error surfaces within a handful of steps of the command that caused it.
DEFAULT_MAX_IN_FLIGHT = 8

_EXECUTE = "/polygrad.v1.Polygrad/Execute"


REALIZE, RELEASE, RUN_STEP = 3, 4, 41  # ExecuteRequest's command fields
_ANSWER = {REALIZE: "realized", RELEASE: "released", RUN_STEP: "step_ran"}


class Pending:
  """An outstanding command: `wait()` returns the daemon's answer (the RealizeResponse, ...)
  or raises its error. `what` names the command in errors."""

  __slots__ = ("rid", "what", "field", "_done", "_answer", "_error", "context", "label")

  def __init__(self, rid: int, what: str, field: int, context=None):
    self.rid, self.what, self.field, self.context = rid, what, field, context
    self.label = ""
    self._done = threading.Event()
    self._answer = None
    self._error: Optional[PolygradError] = None

  def done(self) -> bool:
    return self._done.is_set()

  def wait(self):
    self._done.wait()
    if self._error is not None:
      raise self._error
    return self._answer

  @property
  def error(self) -> Optional[PolygradError]:
    return self._error if self._done.is_set() else None

  def _finish(self, answer=None, error: Optional[PolygradError] = None) -> None:
    self._answer, self._error = answer, error
    self._done.set()


class ExecuteStream:
  """The session's Execute stream, attached to a session made by CreateSession (so the stream
  ending never closes it). Raises PolygradError from the constructor when the daemon (or a
  proxy on the way) does not carry the stream."""

  def __init__(self, channel: grpc.Channel, session_id: str, address: str, max_in_flight: int,
               error: Callable[[grpc.RpcError, str], PolygradError]):
    self._address = address
    self._error = error
    self._outbox: "queue.SimpleQueue[Optional[bytes]]" = queue.SimpleQueue()
    self._pending: Dict[int, Pending] = {}
    self._lock = threading.Lock()
    self._slots = threading.Semaphore(max_in_flight)
    self._next = 1
    self.broken: Optional[PolygradError] = None
    call = channel.stream_stream(_EXECUTE, request_serializer=lambda b: b,
                                 response_deserializer=pb.ExecuteResponse.FromString)
    self._call = call(self._requests())
    opening = pb.ExecuteRequest(request_id=0, open=pb.OpenSession(attach_session_id=session_id))
    self._outbox.put(opening.SerializeToString())
    try:
      first = next(self._call)
    except grpc.RpcError as e:
      self._outbox.put(None)
      raise self._error(e, "Execute") from None
    except StopIteration:
      self._outbox.put(None)
      raise PolygradConnectionError(f"the Execute stream to {address} ended before it opened") from None
    if first.WhichOneof("result") != "opened":
      self._outbox.put(None)
      self._call.cancel()
      err = first.error
      raise from_status(err.code, err.message, "Execute.open")
    self._reader = threading.Thread(target=self._read, name="polygrad-execute", daemon=True)
    self._reader.start()

  def _requests(self):
    while True:
      item = self._outbox.get()
      if item is None:
        return
      yield item

  def submit(self, field: int, body: bytes, what: str, context=None) -> Pending:
    """Writes one command; returns at once unless `max_in_flight` are outstanding."""
    self._slots.acquire()
    with self._lock:
      rid = self._next
      self._next += 1
      p = Pending(rid, what, field, context)
      if self.broken is not None:
        self._slots.release()
        p._finish(error=self.broken)
        return p
      self._pending[rid] = p
      self._outbox.put(execute_bytes(rid, field, body))
    return p

  @property
  def outstanding(self) -> int:
    with self._lock:
      return len(self._pending)

  def _read(self) -> None:
    try:
      for resp in self._call:
        with self._lock:
          p = self._pending.pop(resp.request_id, None)
        if p is None:
          continue  # an answer to nothing outstanding: ignore rather than guess
        self._slots.release()
        kind = resp.WhichOneof("result")
        if kind == "error":
          p._finish(error=from_status(resp.error.code, resp.error.message, p.what))
        elif kind == _ANSWER[p.field]:
          p._finish(answer=getattr(resp, kind))
        else:
          p._finish(error=PolygradError(f"{p.what}: the daemon answered with {kind}"))
        p = None  # what a settled command held (its nodes) must not live on in this frame
      why: PolygradError = PolygradConnectionError(
          f"the Execute stream to {self._address} ended while commands were outstanding")
    except grpc.RpcError as e:
      why = self._error(e, "Execute")
    except Exception as e:  # the reader must never die silently with commands outstanding
      why = PolygradError(f"the Execute stream's reader failed: {type(e).__name__}: {e}")
    with self._lock:
      self.broken = why
      left, self._pending = list(self._pending.values()), {}
    for p in left:
      self._slots.release()
      p._finish(error=why)

  def close(self) -> None:
    """Ends the stream; outstanding commands still get their answers first."""
    self._outbox.put(None)
