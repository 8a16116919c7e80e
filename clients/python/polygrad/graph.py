"""The session-scoped node table: lazy nodes, what the daemon has seen, and what can be released.

Each Tensor stands for one Node. A node names its sources by reference, so a source lives as long
as any node built on it that the daemon has not been sent yet. When a node object dies, a
weak reference callback queues its id; queued ids travel as ``release_nodes`` in the next
Realize (or in a Release call once many pile up), so a long loop runs in flat memory on both
sides. A realized node drops its sources: the daemon has bound its id to the result buffer.

Autograd bookkeeping (see Tensor.backward): a node computed from tensors that require grad is
`rg`; when such a node is realized its sources move to `keep`, so a later GRADIENT can re-send
the history behind it (relazy) -- realizing a value must not cut its gradient, as in PyTorch.
A `stop` node (detach, Tensor.no_grad) is the opposite: before a tracked node that uses it is
sent, it is realized on its own, so the daemon sees a plain buffer there and no gradient flows
through it.
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import wire
from .connection import current_connection, get_connection, on_connect, on_session_end
from .dispatch import REALIZE
from .device import Device
from .dtype import DType, dtypes, np_dtype
from .errors import PolygradError, PolygradNotFound
from .ops import *  # noqa: F401,F403  (re-exported: the client and its tests name ops graph.ADD, graph.Composite)
from .ops import BUFFER, COPY, GRADIENT, OP_NAMES

# The data of a BUFFER node that a dispatched command's answer brings (a compiled step's output):
# a graph or read that needs the node waits for that answer first.
AWAITED = object()

# Queued releases beyond this go out in a Release call of their own before the next node is made.
RELEASE_BATCH = 4096
# Realized results up to this size stay cached on their node (results never change).
CACHE_BYTES = 64 << 10
# Inline BUFFER bytes per Realize request, so a request stays well under gRPC's message limit.
REQUEST_INLINE_BUDGET = 3 << 20

# What realize does instead of sending, inside Graph.tracing (compile_step's trace). A context
# variable, so a trace in one thread does not capture the realizes of another.
_tracer: contextvars.ContextVar[Optional[Callable]] = contextvars.ContextVar("polygrad_tracer", default=None)
# Who is told, inside a trace, of the tensors fn rebinds (Tensor.assign) and the optimizers it
# steps: TinyJit finds a step's state that way, since fn reaches it through closures, not arguments.
_watch: contextvars.ContextVar[Optional[Any]] = contextvars.ContextVar("polygrad_trace_watch", default=None)


@contextlib.contextmanager
def watching(watch: Any):
  """Within, trace_watch() is `watch` in this thread (realizes still run)."""
  token = _watch.set(watch)
  try:
    yield
  finally:
    _watch.reset(token)


def trace_watch() -> Optional[Any]:
  """The watcher of the trace running in this thread (None outside a trace): an object with
  `assigning(tensor)` (called before the tensor is rebound) and `stepping(optimizer)`."""
  return _watch.get()


class Node:
  """One lazy tensor op. `arg` is a Python value: shape/axes tuples, (begin, end) pairs, a
  constant, or for BUFFER a numpy array (until sent) or an upload handle (int)."""

  __slots__ = ("id", "op", "dtype", "shape", "src", "arg", "sent", "handle", "gen", "cache", "rg", "stop",
               "keep", "device", "__weakref__")

  def __init__(self, nid: int, op: int, dtype: DType, shape: Tuple[int, ...], src: Tuple["Node", ...],
               arg: Any, rg: bool = False, stop: bool = False):
    self.id = nid
    self.op = op
    self.dtype = dtype
    self.shape = shape
    self.src = src
    self.arg = arg
    self.sent = False  # the daemon knows this id
    self.handle = 0  # the realized buffer's handle (0: not realized)
    self.gen = 0  # the session generation the node was sent in
    self.cache = None  # a small realized result, kept so numpy()/item() again need no round trip
    self.rg = rg  # computed from tensors that require grad
    self.stop = stop  # no gradient flows through this node (detach, Tensor.no_grad)
    self.keep: Tuple["Node", ...] = ()  # the sources of a realized rg node, for relazy()
    # Where the daemon computes it (its placement rule): a COPY's target; a gradient where its
    # target lives (the daemon copies it back there); else its sources' device; None for nodes
    # without sources, which take their consumer's device.
    if op == COPY:
      self.device: Optional[str] = arg.device
    elif op == GRADIENT:
      self.device = src[1].device
    elif op == BUFFER:
      self.device = "CPU"  # uploads and inline data land in host memory
    else:
      self.device = None
      for s in src:
        if s.device is not None:
          self.device = s.device
          break

  def __repr__(self) -> str:
    return (f"Node({self.id}, {OP_NAMES.get(self.op, self.op)}, {self.dtype.name}, {self.shape}, "
            f"src={[s.id for s in self.src]})")


class WeakIdSet:
  """A set of live objects by identity (weakref.WeakSet compares with ==, which a Tensor
  overloads)."""

  def __init__(self) -> None:
    self._refs: Dict[int, "weakref.ref"] = {}

  def add(self, obj) -> None:
    key = id(obj)
    old = self._refs.get(key)
    if old is not None and old() is obj:
      return
    refs = self._refs

    def gone(ref, key=key, refs=refs):
      if refs.get(key) is ref:
        del refs[key]
    refs[key] = weakref.ref(obj, gone)

  def discard(self, obj) -> None:
    ref = self._refs.get(id(obj))
    if ref is not None and ref() is obj:
      del self._refs[id(obj)]

  def __contains__(self, obj) -> bool:
    ref = self._refs.get(id(obj))
    return ref is not None and ref() is obj

  def __iter__(self):
    return iter([o for o in (r() for r in list(self._refs.values())) if o is not None])

  def __len__(self) -> int:
    return sum(1 for _ in self)


def _node_died(graph_ref, nid: int, _ref=None) -> None:
  """The weak reference callback of node `nid`: never references the node itself. Only appends
  and pops (GC-safe)."""
  graph = graph_ref()
  if graph is None:
    return
  graph._watch.pop(nid, None)
  graph.live -= 1
  if nid in graph._sent:
    graph._sent.discard(nid)
    graph._dead.append(nid)
  handle = graph._uploads.pop(nid, None)  # an upload whose handle was not released yet
  if handle is not None:
    graph._dead_handles.append(handle)


class Graph:
  """The process-wide node table of the current session."""

  def __init__(self) -> None:
    self._next_id = 1
    self._lock = threading.RLock()
    self._sent: set = set()  # ids the daemon knows whose node objects are alive
    self._dead: collections.deque = collections.deque()  # sent ids whose nodes died
    self._dead_handles: collections.deque = collections.deque()  # upload handles to release
    # Upload handles of BUFFER nodes not sent yet. Once its node is sent the daemon's node entry
    # holds the buffer, so the handle itself is released right away.
    self._uploads: Dict[int, int] = {}
    self.uploads = 0  # Upload calls made
    self.live = 0  # node objects alive
    self.gen = 1  # session generation; bumped when the session closes
    self._last_response = None  # the last Realize's answer (its stats are read far less often)
    self._deferred: Optional[PolygradError] = None  # a dispatched command's failure, for the next read
    self.requests = 0  # Realize calls made
    self._self_ref = weakref.ref(self)
    # id -> the weak reference whose callback reports that node's death. A plain weakref with a
    # callback, not weakref.finalize: a finalizer costs several microseconds more per node, which
    # a tiny realize pays for every node it makes (and no release is wanted at interpreter exit).
    self._watch: Dict[int, "weakref.ref"] = {}
    # Tensors whose requires_grad was set to True: the targets backward() looks for.
    self.leaves = WeakIdSet()
    # Tensors made from data or random draws (requires_grad left unset): tinygrad's backward
    # fills their .grad too, which backward() does when the loss depends on no `leaves`.
    self.created = WeakIdSet()
    # Called with the connection by flush_releases: other daemon objects that died (compiled steps)
    # are released with the nodes.
    self.release_hooks: List[Callable] = []

  @property
  def last_stats(self):
    """RealizeStats of the last Realize (None before the first); waits for what was dispatched."""
    if self._has_outstanding():
      self.synchronize()
    r = self._last_response
    return None if r is None else r.stats

  # --- construction -----------------------------------------------------------------------------

  def node(self, op: int, dtype: DType, shape: Tuple[int, ...], src: Tuple[Node, ...] = (),
           arg: Any = None, rg: bool = False, stop: bool = False) -> Node:
    if len(self._dead) + len(self._dead_handles) >= RELEASE_BATCH:
      self.flush_releases(wait=False)
    with self._lock:
      nid = self._next_id
      self._next_id += 1
    n = Node(nid, op, dtype, shape, src, arg, rg, stop)
    self._watch[nid] = weakref.ref(n, functools.partial(_node_died, self._self_ref, nid))
    self.live += 1
    return n

  @staticmethod
  def _has_outstanding() -> bool:
    conn = current_connection()
    return conn is not None and conn.outstanding > 0

  def stats(self) -> Dict[str, int]:
    """Counters for tests and debugging: live node objects, ids known to the daemon, queues. Waits
    for what was dispatched first: until its answer is settled a realize holds its nodes, so the
    counts would depend on how far the daemon has got."""
    if self._has_outstanding():
      self.synchronize()
    return {"live_nodes": self.live, "sent_live": len(self._sent), "pending_release": len(self._dead),
            "pending_handles": len(self._dead_handles), "uploads": self.uploads,
            "next_id": self._next_id, "requests": self.requests}

  # --- releases ---------------------------------------------------------------------------------

  def _drain(self, q: collections.deque) -> List[int]:
    if not q:
      return []
    out = []
    while True:
      try:
        out.append(q.popleft())
      except IndexError:
        return out

  def flush_releases(self, wait: bool = True) -> None:
    """Send queued releases now in one Release call (no-op without a session); with `wait`, and
    on the session's stream, also wait until the daemon has done them and all sent before."""
    conn = current_connection()
    if conn is None:
      return
    for hook in self.release_hooks:
      hook(conn)
    with self._lock:
      if conn.stream() is not None:
        if wait:
          self.synchronize()  # settled answers let go of their nodes: those go in this batch too
        self._release_queued(conn)
        if wait:
          self.synchronize()
        return
      ids, handles = self._drain(self._dead), self._drain(self._dead_handles)
      if not ids and not handles:
        return
      try:
        conn.release(ids, handles)
      except PolygradNotFound:
        pass  # all or nothing on the daemon: a stale entry must not keep the batch queued forever
      except PolygradError:
        self._dead.extend(ids)
        self._dead_handles.extend(handles)
        raise

  def forget_session(self) -> None:
    """The session ended: nothing the daemon held is valid any more."""
    with self._lock:
      self.gen += 1
      self._deferred = None
      self._sent.clear()
      self._dead.clear()
      self._dead_handles.clear()
      self._uploads.clear()

  # --- autograd support -------------------------------------------------------------------------

  @staticmethod
  def inputs(n: Node) -> Tuple[Node, ...]:
    """The nodes n's value is computed from, for gradients: a realized rg node's kept history."""
    return n.keep if n.handle and n.keep else n.src

  def toposort(self, root: Node, stop_at=lambda n: False) -> List[Node]:
    """Nodes behind root (following inputs()), sources first; nodes where stop_at is true are
    listed but not entered."""
    order: List[Node] = []
    seen: set = set()
    stack: List[Tuple[Node, bool]] = [(root, False)]
    while stack:
      n, done = stack.pop()
      if done:
        order.append(n)
        continue
      if n.id in seen:
        continue
      seen.add(n.id)
      stack.append((n, True))
      if not stop_at(n):
        stack.extend((s, False) for s in self.inputs(n) if s.id not in seen)
    return order

  def relazy(self, root: Node, targets: set) -> Node:
    """root's value as lazy graph down to the gradient targets: every realized rg node on the
    way (which the daemon now knows only as a buffer) is replaced by a fresh node of its op over
    its kept sources, and so is everything above it. Unchanged parts keep their ids, and the
    daemon hash-conses the copies onto the graph it already has, so nothing is computed twice."""
    memo: Dict[int, Node] = {}
    for n in self.toposort(root, lambda n: n.id in targets or n.stop):
      if n.id in targets or n.stop:
        memo[n.id] = n
        continue
      ins = self.inputs(n)
      new = tuple(memo[s.id] for s in ins)
      if (n.handle and n.keep) or any(a is not b for a, b in zip(new, ins)):
        memo[n.id] = self.node(n.op, n.dtype, n.shape, new, n.arg, rg=True)
      else:
        memo[n.id] = n
    return memo[root.id]

  def _stops_to_realize(self, todo: List[Node]) -> List[Node]:
    """Stop nodes (detach, no_grad) used by a tracked node of this request whose value depends
    on something a gradient could reach: they are realized first, in a request of their own."""
    leaf_ids = {t._node.id for t in list(self.leaves)}
    memo: Dict[int, bool] = {}

    def depends(n: Node) -> bool:
      for m in self.toposort(n):
        if m.id not in memo:
          memo[m.id] = m.rg or m.id in leaf_ids or any(memo.get(s.id, False) for s in self.inputs(m))
      return memo[n.id]

    out: Dict[int, Node] = {}
    for n in todo:
      if n.stop:
        continue
      for s in n.src:
        if s.stop and not s.handle and s.id not in out and depends(s):
          out[s.id] = s
    return list(out.values())

  # --- realize ----------------------------------------------------------------------------------

  def _unsent(self, outputs: Sequence[Node]) -> List[Node]:
    """Nodes reachable from `outputs` that the daemon has not seen, sources first. The loss of a
    GRADIENT about to be sent is re-lazied first (relazy), since values behind it may have been
    realized after the GRADIENT node was made; the copies that makes have newer ids than the
    GRADIENT, so the order is topological, not by id."""
    order: List[Node] = []
    state: Dict[int, bool] = {}  # id -> finished
    stack: List[Tuple[Node, bool]] = [(n, False) for n in reversed(outputs)]
    while stack:
      n, done = stack.pop()
      if done:
        state[n.id] = True
        order.append(n)
        continue
      if n.sent:
        if n.gen != self.gen:
          raise PolygradError(f"tensor node {n.id} belongs to a closed polygrad session")
        continue
      if n.id in state:
        continue
      if n.op == BUFFER and n.arg is AWAITED:
        self.synchronize()
        if n.arg is AWAITED:
          raise PolygradError(f"node {n.id}: the command that computes it ended without an answer")
      state[n.id] = False
      if n.op == GRADIENT:
        loss, target = n.src
        n.src = (self.relazy(loss, {target.id}), target)
      stack.append((n, True))
      stack.extend((s, False) for s in reversed(n.src) if s.id not in state)
    return order

  @contextlib.contextmanager
  def tracing(self, realize: Callable[[Sequence[Node], bool], List[Optional[np.ndarray]]], watch: Any = None):
    """Within, this thread's realize(outputs, want_data) calls `realize` and sends nothing, and
    trace_watch() is `watch`."""
    token = _tracer.set(realize)
    try:
      with watching(watch):
        yield
    finally:
      _tracer.reset(token)

  def realize(self, outputs: Sequence[Node], want_data: bool) -> List[Optional[np.ndarray]]:
    """Send what the daemon lacks and realize `outputs`. With want_data, waits and returns their
    arrays; without, returns at once when the session has an Execute stream (dispatch.py): the
    outputs count as realized and a failure is raised by the next read or synchronize()."""
    tracer = _tracer.get()
    if tracer is not None:
      return tracer(outputs, want_data)
    conn = get_connection()
    with self._lock:
      if any(n.arg is AWAITED for n in outputs):
        self.synchronize()  # a step run's or jit replay's output: its value (and cache) comes with the answer
      if want_data and all(n.cache is not None for n in outputs):
        return [n.cache.copy() for n in outputs]
      self._settle_arrived(conn)
      uniq: List[Node] = list(outputs) if len(outputs) == 1 else list({n.id: n for n in outputs}.values())
      todo = self._unsent(uniq)
      stops = self._stops_to_realize(todo) if self._any_stop_src(todo) else []
      if stops:
        self.realize(stops, want_data=False)
        todo = self._unsent(uniq)
      if not todo and not want_data and all(n.handle for n in uniq) and not self._dead:
        return [None] * len(outputs)
      # Big buffers (and inline bytes past the per-request budget) go through Upload.
      budget = REQUEST_INLINE_BUDGET
      for n in todo:
        if n.op == BUFFER and isinstance(n.arg, np.ndarray):
          nbytes = n.arg.nbytes
          if nbytes > conn.max_inline_bytes or nbytes > budget:
            handle = conn.upload(n.dtype.wire, n.shape, memoryview(n.arg).cast("B"))
            n.arg = handle
            self._uploads[n.id] = handle
            self.uploads += 1
          else:
            budget -= nbytes
      # A read with nothing outstanding waits for this answer at once: a unary call, made and
      # answered on this thread, costs less than the stream's hand-offs between threads and can
      # overtake nothing.
      if conn.stream() is not None and not (want_data and not conn.outstanding):
        return self._dispatch(conn, outputs, uniq, todo, want_data)
      release = self._drain(self._dead)
      handles = self._drain(self._dead_handles)
      out_ids = [n.id for n in uniq]
      try:
        start = self.send_leading_batches(conn, todo)
        send = todo[start:] if start else todo
        try:
          resp = conn.realize(send, out_ids, want_data, release, default_device())
        except PolygradNotFound as e:
          if "release_nodes" not in e.details:
            raise
          # A release the daemon does not know would fail every later request: drop them.
          release = []
          resp = conn.realize(send, out_ids, want_data, (), default_device())
        self.requests += 1
      except BaseException:
        self._dead.extendleft(reversed(release))
        self._dead_handles.extend(handles)
        raise
      for n in send:
        self._mark_sent(n)
        self._drop_data(n)
      if self._uploads:
        handles.extend(h for h in (self._uploads.pop(n.id, None) for n in todo) if h is not None)
      if handles:
        try:
          conn.release((), handles)
        except PolygradNotFound:
          pass
      self._last_response = resp
      self._bind(uniq, resp)
      return self._arrays(conn, outputs, uniq, resp) if want_data else [None] * len(outputs)

  def _bind(self, uniq: Sequence[Node], resp) -> None:
    """A Realize's answer: each output's id now stands for its buffer, so the graph behind it
    goes (kept for a later gradient when it is tracked)."""
    results = resp.results
    if len(results) != len(uniq):
      raise PolygradError(f"Realize returned {len(results)} results for {len(uniq)} outputs")
    for n, r in zip(uniq, results):
      if r.node_id and r.node_id != n.id:
        raise PolygradError(f"Realize returned node {r.node_id} where node {n.id} was asked for")
      n.handle = int(r.handle) or (n.handle if n.handle > 0 else -1)
      if n.src:
        if n.rg:
          n.keep = n.src  # for a later gradient through this value (relazy)
        n.src = ()

  def _arrays(self, conn, outputs: Sequence[Node], uniq: Sequence[Node], resp) -> List[Optional[np.ndarray]]:
    arrays: Dict[int, Optional[np.ndarray]] = {}
    for n, r in zip(uniq, resp.results):
      if r.has_data:
        wdt, shape, data = r.dtype, tuple(r.shape), r.data
      else:
        wdt, shape, data = conn.download(int(r.handle))
      arr = decode(n, wdt, shape, data)
      if arr.nbytes <= CACHE_BYTES:
        n.cache = arr
        arr = arr.copy()
      arrays[n.id] = arr
    return [arrays.get(n.id) for n in outputs]

  # --- asynchronous dispatch (dispatch.py) ------------------------------------------------------

  def _dispatch(self, conn, outputs: Sequence[Node], uniq: List[Node], todo: List[Node],
                want_data: bool) -> List[Optional[np.ndarray]]:
    """realize() on the session's Execute stream. Until its answer is settled the outputs count as
    realized (handle -1) and the sent nodes as sent; both are undone if it fails. Queued node
    releases ride along as release_nodes, as on the unary path (the daemon accepts the ids of
    failed requests there)."""
    if self._dead_handles:
      conn.release_async((), self._drain(self._dead_handles), _release_settled)
    start = self.send_leading_batches(conn, todo)
    send = todo[start:] if start else todo
    release = self._drain(self._dead)
    body = wire.realize_bytes("", send, [n.id for n in uniq], want_data, release, default_device())
    flight = _InFlight(send, uniq, release)
    for n in send:
      self._mark_sent(n)
    for n in uniq:
      flight.saved.append((n, n.src, n.keep, n.handle))
      if n.src:
        if n.rg:
          n.keep = n.src
        n.src = ()
      n.handle = n.handle or -1
    conn.submit(REALIZE, body, "Realize", functools.partial(self._settled, flight), f"realizing {len(send)} nodes")
    self.requests += 1
    if not want_data:
      return [None] * len(outputs)
    self.synchronize()
    return self._arrays(conn, outputs, uniq, flight.response)

  def _settled(self, flight: "_InFlight", pending, err: Optional[PolygradError]) -> None:
    """A dispatched realize's answer, applied in order by Connection.settle."""
    if err is None:
      resp = pending.wait()
      try:
        self._bind(flight.outputs, resp)
      except PolygradError as e:
        err = e
      else:
        flight.response = resp
        self._last_response = resp
        for n in flight.send:
          self._drop_data(n)
          h = self._uploads.pop(n.id, None)
          if h is not None:
            self._dead_handles.append(h)  # the daemon's node holds the buffer now
        return
    # The daemon added none of the request's nodes: they are unsent again, the outputs unrealized,
    # and its releases still to do (unless one of them is what it refused).
    if not (isinstance(err, PolygradNotFound) and "release_nodes" in err.details):
      self._dead.extendleft(reversed(flight.release))
    for n in flight.send:
      n.sent = False
      self._sent.discard(n.id)
    for n, src, keep, handle in flight.saved:
      if handle == 0:  # an output realized (or dispatched) before keeps that state
        n.src, n.keep, n.handle = src, keep, handle
    raise err

  def _settle_arrived(self, conn) -> None:
    """Applies the answers already in; an error waits for the next read or synchronize()."""
    if conn.outstanding:
      err = conn.settle(wait=False)
      if err is not None and self._deferred is None:
        self._deferred = err

  def synchronize(self) -> None:
    """Waits for everything dispatched and raises the first error among it."""
    conn = current_connection()
    with self._lock:
      err = conn.settle(wait=True) if conn is not None else None
      first, self._deferred = self._deferred or err, None
    if first is not None:
      raise first

  def _release_queued(self, conn) -> None:
    ids, handles = self._drain(self._dead), self._drain(self._dead_handles)
    if ids or handles:
      conn.release_async(ids, handles, _release_settled)

  def send_leading_batches(self, conn, todo: List[Node]) -> int:
    """Sends the node batches beyond the daemon's per-request limit, realizing nothing, so the
    rest fits one request; returns where that rest starts in `todo`."""
    limit = conn.max_nodes_per_request or len(todo) or 1
    start = 0
    while len(todo) - start > limit:
      batch = todo[start:start + limit]
      if conn.stream() is not None:
        body = wire.realize_bytes("", batch, [], False, (), default_device())
        conn.submit(REALIZE, body, "Realize", functools.partial(self._settled, _InFlight(batch, [])))
      else:
        conn.realize(batch, [], False, (), default_device())
        for n in batch:
          self._drop_data(n)
      for n in batch:
        self._mark_sent(n)
      start += limit
    return start

  @staticmethod
  def _any_stop_src(todo: List[Node]) -> bool:
    return any(s.stop and not s.handle for n in todo for s in n.src)

  def _mark_sent(self, n: Node) -> None:
    n.sent = True
    n.gen = self.gen
    self._sent.add(n.id)

  @staticmethod
  def _drop_data(n: Node) -> None:
    if n.op == BUFFER and isinstance(n.arg, np.ndarray):
      n.arg = None  # the daemon holds the bytes now (kept until then: a failed request re-sends them)


class _InFlight:
  """A realize on the stream: the nodes it sends, its outputs and their state before it."""

  __slots__ = ("send", "outputs", "release", "saved", "response")

  def __init__(self, send: List[Node], outputs: List[Node], release: Sequence[int] = ()):
    self.send, self.outputs, self.release = send, outputs, release
    self.saved: List[Tuple[Node, Tuple[Node, ...], Tuple[Node, ...], int]] = []
    self.response = None


def _release_settled(pending, err: Optional[PolygradError]) -> None:
    # All or nothing on the daemon: an id it does not know (its node died while a failed request
    # was being undone) must not fail the batch for good.
    if err is not None and not isinstance(err, PolygradNotFound):
      raise err


def decode(n: Node, wire_dtype: int, shape: Tuple[int, ...], data: bytes) -> np.ndarray:
  """A TensorResult's bytes as a numpy array, checked against the node's local dtype and shape."""
  dt = dtypes.from_wire(wire_dtype) if wire_dtype else n.dtype
  if dt != n.dtype:
    raise PolygradError(f"daemon returned dtype {dt.name} for node {n.id}, expected {n.dtype.name}")
  if tuple(shape) != tuple(n.shape):
    raise PolygradError(f"daemon returned shape {tuple(shape)} for node {n.id}, expected {n.shape}")
  npdt = np_dtype(dt)
  count = 1
  for s in shape:
    count *= s
  if len(data) != count * npdt.itemsize:
    raise PolygradError(f"daemon returned {len(data)} bytes for node {n.id} "
                        f"({dt.name}{list(shape)} needs {count * npdt.itemsize})")
  arr = np.frombuffer(data, dtype=npdt).reshape(shape)
  if dt == dtypes.bfloat16:
    # 1-D while widening: numpy cannot change the itemsize of a 0-d array's view.
    return (arr.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(shape)
  return arr.astype(npdt.newbyteorder("="), copy=True)


def default_device() -> str:
  """Where the daemon computes results of constants and random ops alone: Device.DEFAULT
  (tinygrad's rule), "" for the CPU."""
  return "" if Device.DEFAULT in ("CPU", "CPU:0") else Device.DEFAULT


GRAPH = Graph()
on_session_end(GRAPH.forget_session)
on_connect(lambda conn: setattr(conn, "sync_hook", GRAPH.synchronize))
