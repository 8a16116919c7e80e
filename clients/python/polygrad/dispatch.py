"""Asynchronous dispatch: one Execute stream per session (docs/PROTOCOL.md, "Asynchronous dispatch").

A realize, a release or a step run is written to the session's stream and the caller goes on at
once; the daemon runs a stream's commands one at a time in the order they were sent, so a graph
sent next may read the nodes of one still running (their ids are the client's). Only a read of
data, or an explicit synchronize, waits. At most `max_in_flight` commands are outstanding: the
next submit blocks until an answer frees a slot (back-pressure, so a fast loop cannot queue
unbounded work on the daemon).

Answers are read by the thread that needs one (a wait, or a submit that found every slot taken),
on that thread: a reader thread would put two more thread wake-ups into every round trip (the
channel's poller hands the answer to it, it hands it to the waiter), which on a small machine cost
more than the work of a short realize. One thread reads at a time; it completes the `Pending`s of
every answer it reads, and a waiter whose answer another thread read is woken by it. What an
answer means for the graph is applied by the caller's thread (graph.Graph.settle), so the node
table is never touched from two threads. Answers nobody has waited for yet stay in the channel
(at most `max_in_flight` of them): the daemon runs the commands all the same.

A stream that breaks (the daemon went away, a proxy cut it) fails every outstanding command with
the stream's error, seen by the next wait, and is not used again; the connection falls back to
unary calls.
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

  __slots__ = ("rid", "what", "field", "_stream", "_done", "_answer", "_error", "context", "label")

  def __init__(self, rid: int, what: str, field: int, stream: Optional["ExecuteStream"], context=None):
    self.rid, self.what, self.field, self.context = rid, what, field, context
    self._stream = stream
    self.label = ""
    self._done = False
    self._answer = None
    self._error: Optional[PolygradError] = None

  def done(self) -> bool:
    """Whether its answer has been read (answers are read by waits: see the module's docstring)."""
    return self._done

  def wait(self):
    if not self._done:
      self._stream.read_until(self)
    if self._error is not None:
      raise self._error
    return self._answer

  @property
  def error(self) -> Optional[PolygradError]:
    return self._error if self._done else None

  def _finish(self, answer=None, error: Optional[PolygradError] = None) -> None:
    self._answer, self._error = answer, error
    self._done = True
    self._stream = None  # a settled command keeps nothing of the stream alive


class ExecuteStream:
  """The session's Execute stream, attached to a session made by CreateSession (so the stream
  ending never closes it). Raises PolygradError from the constructor when the daemon (or a
  proxy on the way) does not carry the stream."""

  def __init__(self, channel: grpc.Channel, session_id: str, address: str, max_in_flight: int,
               error: Callable[[grpc.RpcError, str], PolygradError]):
    self._address = address
    self._error = error
    self._outbox: "queue.SimpleQueue[Optional[bytes]]" = queue.SimpleQueue()
    self._pending: Dict[int, Pending] = {}  # in the order sent (dicts keep insertion order)
    self._lock = threading.Condition()  # guards _pending, _next, broken, _reading
    self._reading = False  # a thread is reading an answer (outside the lock)
    self._max_in_flight = max_in_flight
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

  def _requests(self):
    while True:
      item = self._outbox.get()
      if item is None:
        return
      yield item

  def submit(self, field: int, body: bytes, what: str, context=None) -> Pending:
    """Writes one command; returns at once unless `max_in_flight` are outstanding, when it first
    reads the oldest one's answer."""
    while True:
      with self._lock:
        if self.broken is not None:
          p = Pending(0, what, field, None, context)
          p._finish(error=self.broken)
          return p
        if len(self._pending) < self._max_in_flight:
          rid = self._next
          self._next += 1
          p = Pending(rid, what, field, self, context)
          self._pending[rid] = p
          self._outbox.put(execute_bytes(rid, field, body))
          return p
        oldest = next(iter(self._pending.values()))
      self.read_until(oldest)

  @property
  def outstanding(self) -> int:
    with self._lock:
      return len(self._pending)

  def read_until(self, p: Pending) -> None:
    """Reads answers on this thread until `p` has its own; waits instead while another thread
    reads (it completes `p` if that answer comes its way)."""
    with self._lock:
      while not p._done:
        if self._reading:
          self._lock.wait()
          continue
        self._reading = True
        self._lock.release()
        try:
          self._read_one()
        finally:
          self._lock.acquire()
          self._reading = False
          self._lock.notify_all()

  def _read_one(self) -> None:
    """Reads one answer (outside the lock) and completes its command; a stream that ended or
    failed completes every outstanding command with why."""
    try:
      resp = next(self._call)
    except StopIteration:
      return self._break(PolygradConnectionError(
          f"the Execute stream to {self._address} ended while commands were outstanding"))
    except grpc.RpcError as e:
      return self._break(self._error(e, "Execute"))
    except Exception as e:  # whatever it was, no waiter may be left waiting for an answer
      return self._break(PolygradError(f"the Execute stream failed: {type(e).__name__}: {e}"))
    with self._lock:
      p = self._pending.pop(resp.request_id, None)
    if p is None:
      return  # an answer to nothing outstanding: ignore rather than guess
    kind = resp.WhichOneof("result")
    if kind == "error":
      p._finish(error=from_status(resp.error.code, resp.error.message, p.what))
    elif kind == _ANSWER[p.field]:
      p._finish(answer=getattr(resp, kind))
    else:
      p._finish(error=PolygradError(f"{p.what}: the daemon answered with {kind}"))

  def _break(self, why: PolygradError) -> None:
    with self._lock:
      self.broken = why
      left, self._pending = list(self._pending.values()), {}
    for p in left:
      p._finish(error=why)

  def close(self) -> None:
    """Ends the stream; outstanding commands still get their answers first."""
    self._outbox.put(None)
