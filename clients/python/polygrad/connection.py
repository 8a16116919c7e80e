"""The session with polygradd and its calls: an address from POLYGRAD_ADDRESS, or a private
embedded daemon (daemon.py).

With POLYGRAD_ADDRESS set (``host:port`` or ``unix:/path``) the client connects there. Unset, it
starts its own daemon on a Unix socket in a temporary directory (the embedded default) and stops
it at exit.

One process holds one Connection with one session; everything is closed at exit.

Several daemons (docs/PROTOCOL.md, "Several daemons"): a comma-separated list (``h1:50051,h2:50051``,
``ipv4:10.0.0.1:50051,10.0.0.2:50051``) or a name with several addresses (a Kubernetes headless
Service) is resolved to endpoints (endpoints.py) when a Connection is made, and its session goes to the next one
in turn; every call of that session then uses that endpoint's channel. A session lives in one
daemon's memory, so a call that cannot reach it says the session is lost (UNAVAILABLE) rather than
trying another daemon that would answer NOT_FOUND.

Security (see docs/OPERATIONS.md): POLYGRAD_TOKEN (or ``token=``) is sent as
``authorization: Bearer <token>`` on every call; TLS is channel.py's.

Messages are built by wire.py. This module knows nothing of graphs: code that keeps state of the
session (the node table) registers on_session_end to hear when the session is gone.

Asynchronous dispatch (dispatch.py): realizes, releases and step runs go on the session's Execute
stream (POLYGRAD_ASYNC=0 keeps every call unary and blocking; POLYGRAD_MAX_IN_FLIGHT bounds the
commands outstanding, default 8). `submit` returns at once; `settle` applies the answers in the
order the commands were sent, through the callback each was submitted with. A unary call that
names nodes, handles or steps first waits for everything outstanding (`synchronize`), so it can
never overtake a command it depends on.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import itertools
import mmap
import os
import random
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple

import grpc

from . import wire
from .channel import make_channel
from .daemon import EmbeddedDaemon
from .dispatch import DEFAULT_MAX_IN_FLIGHT, RELEASE, RUN_STEP, ExecuteStream, Pending
from .endpoints import Endpoint, probe_address, resolve_target
from .errors import PolygradConnectionError, PolygradError, from_rpc_error
from .progress import Waiting, progress_enabled

CHUNK_BYTES = 1 << 20
# Where no progress line can be drawn, a realize waits in this instead of a Waiting (which would
# find that out again, for every tiny realize).
_NOT_WAITING = contextlib.nullcontext()
DEFAULT_MAX_INLINE_BYTES = 1 << 20
KEEPALIVE_SECONDS = 60.0
# At least this many bytes go through shared memory on a Unix socket (POLYGRAD_SHM=0: never),
# and through content-addressed blobs elsewhere (POLYGRAD_BLOB_MIN_BYTES; 0: never), so weights
# cross the network once per daemon.
SHM_MIN_BYTES = 4 << 20
# A shared-memory staging region up to this size stays mapped between transfers, so its pages
# are allocated once (POLYGRAD_SHM_KEEP_BYTES); larger ones are freed after each transfer.
SHM_KEEP_BYTES = 256 << 20
BLOB_MIN_BYTES = 16 << 20


def _timeout_env(name: str, default: float) -> float:
  try:
    return float(os.environ.get(name, default))
  except ValueError:
    return default


# Spreads this process's sessions over the endpoints of a target: the next session goes to the
# next endpoint. It starts at a random place so that many one-session processes (a job's
# workers) spread too instead of all starting on the first daemon.
_next_endpoint = itertools.count(random.randrange(1 << 16))
# Endpoints that failed to connect or lost a session recently (address -> monotonic time): a new
# session tries them last for this long, so a dead daemon costs a new session no connect grace.
_SUSPECT_SECONDS = 30.0
_suspect: dict = {}


def _endpoint_order(endpoints: List[Endpoint]) -> List[Endpoint]:
  if len(endpoints) == 1:
    return endpoints
  start = next(_next_endpoint) % len(endpoints)
  turn = endpoints[start:] + endpoints[:start]
  now = time.monotonic()
  return sorted(turn, key=lambda e: now - _suspect.get(e.address, -1e18) < _SUSPECT_SECONDS)


class _ShmUnavailable(Exception):
  """The daemon does not offer shared memory to this client: use the streams."""



class Connection:
  """A channel, a stub, the daemon's limits (GetInfo) and this process's session."""

  def __init__(self, address: Optional[str] = None, connect_timeout: Optional[float] = None,
               token: Optional[str] = None):
    self.daemon: Optional[EmbeddedDaemon] = None
    timeout = connect_timeout if connect_timeout is not None else _timeout_env(
        "POLYGRAD_CONNECT_TIMEOUT", 30.0)
    deadline = time.monotonic() + timeout
    if address is None:
      address = os.environ.get("POLYGRAD_ADDRESS") or None
    if address is None:
      self.daemon = EmbeddedDaemon()
      address = self.daemon.address
    # `target` is what the user named; `address` the one daemon this session lives on.
    self.target = address
    self.session_id = ""
    self.address = address
    self.channel: Optional[grpc.Channel] = None
    token = token or os.environ.get("POLYGRAD_TOKEN") or None
    try:
      if self.daemon is not None:
        self.daemon.wait_for_socket(deadline)
      self._connect(resolve_target(address), token, deadline)
      self.stub = wire.polygrad_stub(self.channel)
      self._realize = wire.realize_call(self.channel)
      self.info = self._call("GetInfo", self.stub.GetInfo, wire.get_info())
      self.max_inline_bytes = int(self.info.max_inline_bytes) or DEFAULT_MAX_INLINE_BYTES
      self.max_nodes_per_request = int(self.info.max_nodes_per_request) or 0
      self.chunk_bytes = int(self.info.chunk_bytes) or CHUNK_BYTES
      self.session_id = self._call("CreateSession", self.stub.CreateSession,
                                   wire.create_session()).session_id
      self.pid = os.getpid()
      self.use_shm = self.address.startswith("unix:") and os.environ.get("POLYGRAD_SHM", "1") != "0"
      self.blob_min_bytes = int(_timeout_env("POLYGRAD_BLOB_MIN_BYTES", BLOB_MIN_BYTES))
      self.shm_keep_bytes = int(_timeout_env("POLYGRAD_SHM_KEEP_BYTES", SHM_KEEP_BYTES))
      self._staging = None  # (region id, bytes, mmap): the reused shared-memory region
      self._staging_lock = threading.Lock()
      self._stop = threading.Event()
      self.async_dispatch = os.environ.get("POLYGRAD_ASYNC", "1") != "0"
      self.max_in_flight = max(1, int(_timeout_env("POLYGRAD_MAX_IN_FLIGHT", DEFAULT_MAX_IN_FLIGHT)))
      self._stream: Optional[ExecuteStream] = None
      self._stream_refused = False  # the daemon or a proxy does not carry Execute: unary only
      self._outstanding: "collections.deque[Pending]" = collections.deque()
      self._settle_lock = threading.RLock()
      # Applies outstanding answers (set by graph.py, which owns what they mean); the default
      # only checks them.
      self.sync_hook: Optional[Callable[[], None]] = None
      self._keepalive = None
      interval = _timeout_env("POLYGRAD_KEEPALIVE", KEEPALIVE_SECONDS)
      if interval > 0:
        self._keepalive = threading.Thread(target=self._keep_alive, args=(interval,),
                                           name="polygrad-keepalive", daemon=True)
        self._keepalive.start()
    except BaseException:
      if self.channel is not None:
        self.channel.close()
      if self.daemon is not None:
        self.daemon.stop()
      raise

  def _connect(self, endpoints: List[Endpoint], token: Optional[str], deadline: float) -> None:
    """Opens the channel of the endpoint this session will live on: the next one in turn that
    answers. A session never moves afterwards, so trying another endpoint is only safe here."""
    order = _endpoint_order(endpoints)
    failures = []
    for i, ep in enumerate(order):
      self.address = ep.address
      self.channel = make_channel(ep.address, token, ep.server_name)
      # Each endpoint left gets its share of the time left, so one that hangs cannot use it all.
      share = time.monotonic() + max(0.0, deadline - time.monotonic()) / (len(order) - i)
      try:
        self._wait_ready(share)
        _suspect.pop(ep.address, None)
        return
      except PolygradConnectionError as e:
        self.channel.close()
        self.channel = None
        if len(order) == 1:
          raise
        _suspect[ep.address] = time.monotonic()
        failures.append(str(e))
    raise PolygradConnectionError(f"cannot reach polygradd at any of {len(order)} endpoints of "
                                  f"{self.target} ({'; '.join(failures)})")

  def _keep_alive(self, interval: float) -> None:
    """The daemon expires idle sessions; a live process keeps its lease with an empty Release."""
    req = wire.release(self.session_id)
    while not self._stop.wait(interval):
      try:
        self.stub.Release(req, timeout=10)
      except grpc.RpcError:
        pass

  def _wait_ready(self, deadline: float) -> None:
    fut = grpc.channel_ready_future(self.channel)
    # A named daemon that refuses connections (or has no socket, or no host) fails after a short
    # grace instead of the whole connect timeout; the grace lets a daemon that is starting bind.
    first_failure: Optional[float] = None
    while True:
      try:
        fut.result(timeout=min(0.25, max(0.0, deadline - time.monotonic())))
        return
      except grpc.FutureTimeoutError:
        pass
      if self.daemon is not None and self.daemon.proc.poll() is not None:
        fut.cancel()
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} ({self.daemon.binary} exited with status "
            f"{self.daemon.proc.returncode}; log: {self.daemon.log_tail() or '<empty>'})")
      reason = probe_address(self.address) if self.daemon is None else None
      now = time.monotonic()
      first_failure = (first_failure or now) if reason else None
      if reason and now - first_failure >= _timeout_env("POLYGRAD_CONNECT_GRACE", 2.0):
        fut.cancel()
        raise PolygradConnectionError(f"cannot reach polygradd at {self.address} ({reason})")
      if now >= deadline:
        fut.cancel()
        extra = f"; log: {self.daemon.log_tail()}" if self.daemon is not None else ""
        why = reason or ("a connection opens but no gRPC answer came: TLS, or not a polygradd?"
                         if self.daemon is None else "")
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} (not ready within the connect timeout"
            f"{'; ' + why if why else ''}{extra})")

  def _call(self, what: str, fn, request, **kw):
    try:
      return fn(request, **kw)
    except grpc.RpcError as e:
      raise self._error(e, what) from None

  def _error(self, e: grpc.RpcError, what: str) -> PolygradError:
    """The exception for a failed call of this session. Its state exists only in the memory of
    the daemon at self.address, so a daemon that cannot be reached, or that answers that it does
    not know the session (it restarted, or a balancer sent the call elsewhere), means the session
    is lost: UNAVAILABLE, saying so, never a NOT_FOUND that reads like a bad handle."""
    err = from_rpc_error(e, what, self.address)
    if not self.session_id:
      return err
    if err.code == grpc.StatusCode.UNAVAILABLE:
      _suspect[self.address] = time.monotonic()
      return PolygradConnectionError(f"{err}: the session on {self.address} is lost", code=err.code,
                                     details=err.details)
    # The daemon's words for an unknown session (server/session.cpp), as opposed to an unknown
    # handle, node or step of a live one.
    if err.code == grpc.StatusCode.NOT_FOUND and f'session "{self.session_id}" not found' in err.details:
      return PolygradConnectionError(
          f"the session on {self.address} is lost: the daemon there no longer knows it ({what}: "
          f"NOT_FOUND: {err.details})", code=grpc.StatusCode.UNAVAILABLE, details=err.details)
    return err

  @property
  def device(self) -> str:
    for d in self.info.devices:
      if d.available:
        return d.name
    return "CPU"

  # --- asynchronous dispatch (dispatch.py) ------------------------------------------------------

  def stream(self) -> Optional[ExecuteStream]:
    """The session's Execute stream, opened on first use (again after one broke); None when
    dispatch is synchronous or the stream is not carried (then every call is unary)."""
    if not self.async_dispatch or self._stream_refused or not self.session_id:
      return None
    if self._stream is not None and self._stream.broken is None:
      return self._stream
    try:
      self._stream = ExecuteStream(self.channel, self.session_id, self.address, self.max_in_flight, self._error)
    except PolygradConnectionError:
      raise
    except PolygradError:
      self._stream_refused = True  # e.g. UNIMPLEMENTED from a proxy that passes unary calls only
      self._stream = None
    return self._stream

  def submit(self, field: int, body: bytes, what: str, on_settle=None, label: str = "") -> Optional[Pending]:
    """Sends one command on the stream without waiting (None: no stream, call unary instead).
    `on_settle(pending, error)` is called by settle, in order, once its answer is in; `label` is
    what a progress line says while a read waits for it ("realizing 120 nodes")."""
    s = self.stream()
    if s is None:
      return None
    p = s.submit(field, body, what, on_settle)
    p.label = label
    with self._settle_lock:
      self._outstanding.append(p)
    return p

  @property
  def outstanding(self) -> int:
    return len(self._outstanding)

  def settle(self, wait: bool) -> Optional[PolygradError]:
    """Applies the answers that are in (with `wait`, waits for all), oldest first, through each
    command's on_settle; returns the first error of a command without one (or that its on_settle
    raised), for the caller to raise."""
    first: Optional[PolygradError] = None
    with self._settle_lock:
      while self._outstanding:
        p = self._outstanding[0]
        if not wait and not p.done():
          break
        self._outstanding.popleft()
        try:
          if not p.done() and p.label and progress_enabled():
            with Waiting(p.label):
              p.wait()
          else:
            p.wait()
          err = None
        except PolygradError as e:
          err = e
        on_settle, p.context = p.context, None  # applied once; what it holds may go now
        try:
          if on_settle is not None:
            on_settle(p, err)
          elif err is not None:
            raise err
        except PolygradError as e:
          first = first or e
    return first

  def synchronize(self) -> None:
    """Waits for every outstanding command and raises the first error among them."""
    if self.sync_hook is not None:
      self.sync_hook()
      return
    err = self.settle(wait=True)
    if err is not None:
      raise err

  def _quiet(self) -> None:
    """Before a unary call that names session state: nothing outstanding may come after it."""
    if self._outstanding:
      self.synchronize()

  # --- RPCs -------------------------------------------------------------------------------------

  def realize(self, nodes: List, outputs: Sequence[int], want_data: bool,
              release_nodes: Sequence[int] = (), default_device: str = ""):
    """Realize: `nodes` are graph.Nodes or polygrad.v1.Node messages; `default_device` places
    results of constants and random ops alone ("" is the CPU)."""
    self._quiet()
    req = wire.realize_bytes(self.session_id, nodes, outputs, want_data, release_nodes, default_device)
    with Waiting(f"realizing {len(nodes)} nodes") if progress_enabled() else _NOT_WAITING:
      return self._call("Realize", self._realize, req)

  def release(self, node_ids: Sequence[int] = (), handles: Sequence[int] = ()) -> None:
    if node_ids or handles:
      self._quiet()
    self._call("Release", self.stub.Release, wire.release(self.session_id, node_ids, handles))

  def release_async(self, node_ids: Sequence[int], handles: Sequence[int], on_settle) -> bool:
    """Queues a Release on the stream behind what was sent before (False: no stream)."""
    req = wire.release("", node_ids, handles).SerializeToString()
    return self.submit(RELEASE, req, "Release", on_settle) is not None

  def upload(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """Send `data` in chunks (header in the first); returns the new handle. Large tensors go
    through shared memory on a Unix socket, or as a content-addressed blob elsewhere."""
    total = len(data)
    if self.use_shm and total >= SHM_MIN_BYTES:
      handle = self._shm_fallback(lambda: self.upload_shm(wire_dtype, shape, data))
      if handle is not None:
        return handle
    elif not self.use_shm and self.blob_min_bytes and total >= self.blob_min_bytes:
      return self.upload_once(wire_dtype, shape, data)
    return self.upload_stream(wire_dtype, shape, data)

  def upload_stream(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """Upload by the chunked stream only."""
    total = len(data)
    resp = self._call("Upload", self.stub.Upload,
                      wire.upload_chunks(self.session_id, wire_dtype, shape, data, self.chunk_bytes))
    if resp.bytes and resp.bytes != total:
      raise PolygradError(f"Upload: daemon stored {resp.bytes} bytes, sent {total}")
    return int(resp.handle)

  def download(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Fetch a buffer by handle: (wire dtype, shape, bytes); through shared memory on a Unix
    socket (any size: the daemon knows it, the client does not yet)."""
    self._quiet()
    if self.use_shm:
      r = self._shm_fallback(lambda: self.download_shm(handle))
      if r is not None:
        return r
    return self.download_stream(handle)

  def download_stream(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Download by the chunked stream only."""
    req = wire.download(self.session_id, handle)
    buf = bytearray()
    dtype, shape = 0, None
    try:
      for msg in self.stub.Download(req):
        if shape is None:
          dtype, shape = msg.dtype, tuple(msg.shape)
        if msg.offset != len(buf):
          raise PolygradError(f"Download: chunk at offset {msg.offset}, expected {len(buf)}")
        buf += msg.data
        if msg.last:
          break
    except grpc.RpcError as e:
      raise self._error(e, "Download") from None
    return dtype, shape or (), bytes(buf)

  # --- Shared memory (Unix socket) and content-addressed blobs ---------------------------------

  def _shm_fallback(self, fn):
    """fn(), or None after turning shared memory off when the daemon cannot offer it here
    (another host's socket, an older daemon, or /proc/<pid>/fd not openable by this user)."""
    try:
      return fn()
    except (OSError, _ShmUnavailable):
      self.use_shm = False
      return None

  def _map(self, region) -> mmap.mmap:
    try:
      fd = os.open(region.path, os.O_RDWR)
    except OSError as e:
      self._call("FreeSharedMemory", self.stub.FreeSharedMemory,
                 wire.free_shm(self.session_id, region.region))
      raise _ShmUnavailable(str(e)) from e
    try:
      # Populating at map time takes the page faults in one go rather than one per 4 KiB.
      return mmap.mmap(fd, max(1, region.bytes), flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    finally:
      os.close(fd)

  def _shm_call(self, what: str, fn, request):
    try:
      return fn(request)
    except grpc.RpcError as e:
      if e.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION):
        raise _ShmUnavailable(e.details()) from None
      raise self._error(e, what) from None

  def _adopt_staging(self, region, size: int) -> mmap.mmap:
    """Makes `region` the staging region (freeing the previous one) and returns its mapping."""
    self._drop_staging()
    mm = self._map(region)
    self._staging = (int(region.region), size, mm)
    return mm

  def _drop_staging(self) -> None:
    staging, self._staging = self._staging, None
    if staging is None:
      return
    staging[2].close()
    try:
      self._call("FreeSharedMemory", self.stub.FreeSharedMemory,
                 wire.free_shm(self.session_id, staging[0]))
    except PolygradError:
      pass  # the region goes with the session anyway

  def _trim_staging(self) -> None:
    if self._staging is not None and self._staging[1] > self.shm_keep_bytes:
      self._drop_staging()

  def upload_shm(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """Upload through the staging region of the daemon: one copy in, one copy into the buffer."""
    total = len(data)
    with self._staging_lock:
      if self._staging is None or self._staging[1] < total:
        region = self._shm_call("CreateSharedMemory", self.stub.CreateSharedMemory,
                                wire.create_shm(self.session_id, max(1, total)))
        self._adopt_staging(region, max(1, total))
      region_id, _, mm = self._staging
      mm[:total] = data
      r = self._call("CommitSharedMemory", self.stub.CommitSharedMemory,
                     wire.commit_shm(self.session_id, region_id, wire_dtype, shape))
      self._trim_staging()
    return int(r.handle)

  def download_shm(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Download through the staging region (the daemon answers with a new one when it is too small)."""
    with self._staging_lock:
      staging_id = self._staging[0] if self._staging is not None else 0
      region = self._shm_call("ReadSharedMemory", self.stub.ReadSharedMemory,
                              wire.read_shm(self.session_id, handle, staging_id))
      if region.region == staging_id:
        mm = self._staging[2]
      else:
        mm = self._adopt_staging(region, max(1, region.bytes))
      data = mm[:region.bytes]
      self._trim_staging()
    return region.dtype, tuple(region.shape), data

  def has_blobs(self, hashes: Sequence[str]) -> List[bool]:
    r = self._call("HasBlobs", self.stub.HasBlobs, wire.has_blobs(hashes))
    return list(r.present)

  def upload_blob(self, data: memoryview, sha256: Optional[str] = None) -> str:
    """Stores `data` on the daemon under its sha256 (sent whole even if present); returns the hash."""
    sha256 = sha256 or hashlib.sha256(data).hexdigest()
    self._call("UploadBlob", self.stub.UploadBlob, wire.blob_chunks(data, sha256, self.chunk_bytes))
    return sha256

  def upload_once(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """A buffer of `data` whose bytes cross the wire only when the daemon has not seen them
    (by sha256) since it started; returns the handle."""
    sha256 = hashlib.sha256(data).hexdigest()
    for attempt in range(2):
      if attempt or not self.has_blobs([sha256])[0]:
        self.upload_blob(data, sha256)
      try:
        r = self.stub.BufferFromBlob(wire.buffer_from_blob(self.session_id, sha256, wire_dtype, shape))
        return int(r.handle)
      except grpc.RpcError as e:
        # Evicted between HasBlobs and BufferFromBlob (the daemon's blob memory is capped): once more.
        if e.code() != grpc.StatusCode.NOT_FOUND or attempt:
          raise self._error(e, "BufferFromBlob") from None
    raise AssertionError("unreachable")

  # --- compiled steps (polygrad.step) ---------------------------------------------------------

  def compile_step(self, nodes: List, inputs: Sequence[int], outputs: Sequence[int],
                   assigns: Sequence[Tuple[int, int]], materialize: Sequence[int] = (), random=None):
    """CompileStep: `assigns` are (target node id, value node id) pairs; `random` the traced
    random streams (seed, first counter, count) that runs may redraw."""
    self._quiet()
    req = wire.compile_step(self.session_id, nodes, inputs, outputs, assigns, materialize, random)
    return self._call("CompileStep", self.stub.CompileStep, req)

  def run_step_async(self, step_id: int, inputs: Sequence, want_data: bool, on_settle,
                     random=None, variables=()) -> Optional[Pending]:
    """Queues a RunStep on the stream (None: no stream, use run_step)."""
    return self.submit(RUN_STEP, wire.run_step("", step_id, inputs, want_data, random, variables).SerializeToString(),
                       "RunStep", on_settle)

  def run_step(self, step_id: int, inputs: Sequence, want_data: bool = True, random=None, variables=()):
    """RunStep: `inputs` are (node id, bytes) or (node id, handle int) pairs; `random` this run's
    (seed, first counter) for the step's traced random nodes; `variables` (name, value) pairs for
    its symbolic dims. On the stream when there is one (no extra round trip behind outstanding
    work), waiting for its answer."""
    answer = []
    p = self.run_step_async(step_id, inputs, want_data, lambda p, err: answer.append((p, err)), random, variables)
    if p is not None:
      self.synchronize()
      _, err = answer[0]
      if err is not None:
        raise err
      return p.wait()
    req = wire.run_step(self.session_id, step_id, inputs, want_data, random, variables)
    return self._call("RunStep", self.stub.RunStep, req)

  def release_step(self, step_id: int) -> None:
    self._quiet()
    self._call("ReleaseStep", self.stub.ReleaseStep, wire.release_step(self.session_id, step_id))

  def close(self) -> None:
    self._stop.set()
    if os.getpid() != self.pid:
      return  # a forked child shares nothing usable with the parent's session or daemon
    if self._staging is not None:
      self._staging[2].close()  # the daemon frees the region with the session
      self._staging = None
    if self._stream is not None:
      self._stream.close()
      self._stream = None
    try:
      if self.session_id:
        self._call("CloseSession", self.stub.CloseSession,
                   wire.close_session(self.session_id), timeout=5)
    except PolygradError:
      pass
    finally:
      self.session_id = ""
      self.channel.close()
      if self.daemon is not None:
        self.daemon.stop()
        self.daemon = None


_lock = threading.Lock()
_conn: Optional[Connection] = None
_atexit_registered = False
_session_end_hooks: List[Callable[[], None]] = []
_connect_hooks: List[Callable[["Connection"], None]] = []


def on_connect(hook: Callable[["Connection"], None]) -> None:
  """Call `hook(connection)` for every new connection of this process (graph.py sets its
  sync_hook there)."""
  _connect_hooks.append(hook)


def on_session_end(hook: Callable[[], None]) -> None:
  """Call `hook` whenever this process's session is dropped (close_connection, or a fork that
  leaves the parent's session behind): what it held on the daemon is gone."""
  _session_end_hooks.append(hook)


def _session_ended() -> None:
  for hook in _session_end_hooks:
    hook()


def get_connection() -> Connection:
  """This process's connection, created (and the embedded daemon started) on first use."""
  global _conn, _atexit_registered
  if _conn is not None and _conn.pid == os.getpid():
    return _conn
  with _lock:
    if _conn is not None and _conn.pid != os.getpid():
      # Forked: the parent's channel, session and daemon are not ours.
      _conn = None
      _session_ended()
    if _conn is None:
      _conn = Connection()
      for hook in _connect_hooks:
        hook(_conn)
      if not _atexit_registered:
        atexit.register(close_connection)
        _atexit_registered = True
    return _conn


def current_connection() -> Optional[Connection]:
  return _conn


def close_connection() -> None:
  """Close the session and stop the embedded daemon, if any. Tensors sent before are invalid."""
  global _conn
  with _lock:
    conn, _conn = _conn, None
  if conn is not None:
    _session_ended()
    conn.close()
