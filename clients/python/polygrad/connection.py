"""The connection to polygradd: an address from POLYGRAD_ADDRESS, or a private embedded daemon.

With POLYGRAD_ADDRESS set (``host:port`` or ``unix:/path``) the client connects there. Unset, it
starts its own daemon on a Unix socket in a temporary directory (the embedded default) and stops
it at exit. The binary is POLYGRAD_DAEMON, else ``build/polygradd`` of the source tree this
package lives in, else ``polygradd`` on PATH.

One process holds one Connection with one session; everything is closed at exit.

Several daemons (docs/PROTOCOL.md, "Several daemons"): a comma-separated list (``h1:50051,h2:50051``,
``ipv4:10.0.0.1:50051,10.0.0.2:50051``) or a name with several addresses (a Kubernetes headless
Service) is resolved to endpoints when a Connection is made, and its session goes to the next one
in turn; every call of that session then uses that endpoint's channel. A session lives in one
daemon's memory, so a call that cannot reach it says the session is lost (UNAVAILABLE) rather than
trying another daemon that would answer NOT_FOUND.

Security (see docs/OPERATIONS.md): POLYGRAD_TOKEN (or ``token=``) is sent as
``authorization: Bearer <token>`` on every call. POLYGRAD_TLS_CA (a PEM file) makes a TCP address
use TLS; POLYGRAD_TLS_CERT and POLYGRAD_TLS_KEY add a client certificate (mTLS), and
POLYGRAD_TLS_SERVER_NAME overrides the name checked against the server's certificate.
"""
from __future__ import annotations

import atexit
import hashlib
import ipaddress
import itertools
import mmap
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import grpc

from .errors import PolygradConnectionError, PolygradError, from_rpc_error

CHUNK_BYTES = 1 << 20
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
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def _pb():
  """The generated protobuf modules (built by cmake into polygrad/v1, git-ignored)."""
  try:
    from .v1 import polygrad_pb2, polygrad_pb2_grpc
  except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "polygrad's generated gRPC stubs (polygrad/v1/polygrad_pb2.py) are missing: run the cmake "
        "build, or protoc --python_out/--grpc_python_out on proto/polygrad/v1/polygrad.proto") from e
  return polygrad_pb2, polygrad_pb2_grpc


def default_cache_dir() -> str:
  """The daemon's default kernel-cache directory: $XDG_CACHE_HOME/polygrad or ~/.cache/polygrad."""
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "polygrad")


def find_daemon_binary() -> str:
  """POLYGRAD_DAEMON, else <repo>/build/polygradd next to this package's source tree, else PATH."""
  env = os.environ.get("POLYGRAD_DAEMON")
  if env:
    return env
  repo_build = Path(__file__).resolve().parent.parent.parent.parent / "build" / "polygradd"
  if repo_build.is_file() and os.access(repo_build, os.X_OK):
    return str(repo_build)
  found = shutil.which("polygradd")
  if found:
    return found
  raise PolygradConnectionError(
      "cannot reach polygradd at <embedded> (no daemon binary: set POLYGRAD_ADDRESS to a running "
      f"daemon, or POLYGRAD_DAEMON to a polygradd binary; looked for {repo_build} and PATH)")


def _timeout_env(name: str, default: float) -> float:
  try:
    return float(os.environ.get(name, default))
  except ValueError:
    return default


def probe_address(address: str, timeout: float = 1.0) -> Optional[str]:
  """Why nothing can listen at `address` (no socket file, connection refused, unknown host), or
  None when a plain connect succeeds or the address form is not one this probe knows. Only the
  transport is tried: it names the cause that gRPC's own retrying hides."""
  import socket
  if address.startswith("unix:"):
    path = address[len("unix:"):]
    path = path[2:] if path.startswith("//") else path
    if not os.path.exists(path):
      return f"no socket file at {path}"
    try:
      with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
    except OSError as e:
      return f"cannot connect to {path}: {e.strerror or e}"
    return None
  target = address.split("///", 1)[1] if "///" in address else address
  host, sep, port = target.rpartition(":")
  if not sep or not port.isdigit():
    return None
  host = host.strip("[]") or "localhost"
  try:
    with socket.create_connection((host, int(port)), timeout=timeout):
      return None
  except socket.timeout:
    return None  # slow, not refused: the connect timeout decides
  except socket.gaierror as e:
    return f"cannot resolve host {host}: {e.strerror or e}"
  except OSError as e:
    return f"cannot connect to {host}:{port}: {e.strerror or e}"


class Endpoint(NamedTuple):
  """One daemon of a target: `address` is what the channel dials; `server_name` is the name TLS
  checks when `address` is an IP taken from a DNS answer (the certificate names the host)."""
  address: str
  server_name: Optional[str] = None


def _split_host_port(item: str) -> Tuple[str, str]:
  if item.startswith("["):
    host, _, rest = item[1:].partition("]")
    return host, rest[1:] if rest.startswith(":") else ""
  host, sep, port = item.rpartition(":")
  return (host, port) if sep and port.isdigit() else (item, "")


def resolve_target(target: str) -> List[Endpoint]:
  """The daemons behind `target`, in a stable order. A Unix socket, a gRPC target of another
  resolver (``xds:``...) and a name with one address are one endpoint (dialled as written);
  ``ipv4:``/``ipv6:`` lists and comma-separated lists give one endpoint per item, and a host name
  (also as ``dns:///name:port``) with several addresses of its preferred family (a headless
  Service) one per address. Names are resolved by the system resolver, also where a ``dns:``
  target names a DNS server."""
  import socket
  target = original = target.strip()
  if target.startswith(("unix:", "unix-abstract:", "vsock:")):
    return [Endpoint(target)]
  scheme = ""
  m = re.match(r"^(ipv4|ipv6|dns):(?!\d+(,|$))", target)
  if m:
    scheme, target = m.group(1), target[m.end():]
    if scheme == "dns":
      target = target.split("/", 3)[-1] if target.startswith("//") else target
  elif re.match(r"^[a-z][a-z0-9+.-]*:(?!\d+(,|$))", target) and not target.startswith("["):
    return [Endpoint(target)]  # some other resolver's syntax: gRPC's to interpret
  items = [i.strip() for i in target.split(",") if i.strip()]
  out: List[Endpoint] = []
  for item in items:
    host, port = _split_host_port(item)
    if scheme in ("ipv4", "ipv6") or not port:
      out.append(Endpoint(item))
      continue
    try:
      ipaddress.ip_address(host)
      out.append(Endpoint(item))
      continue
    except ValueError:
      pass
    try:
      infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
      infos = []  # let the channel fail with its own message, as a single name does today
    # Only the family the system prefers: "localhost" is ::1 and 127.0.0.1, one daemon, not two.
    family = infos[0][0] if infos else None
    addrs = sorted({i[4][0] for i in infos if i[0] == family})
    if len(addrs) < 2:
      out.append(Endpoint(item))
      continue
    for a in addrs:
      out.append(Endpoint(f"[{a}]:{port}" if ":" in a else f"{a}:{port}", host))
  seen = set()
  out = [e for e in out if not (e.address in seen or seen.add(e.address))]
  # One daemon: dial the target as written, so messages name what the user wrote.
  return [Endpoint(original)] if len(out) == 1 and out[0].server_name is None else out


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


def _set_parent_death_signal() -> None:  # runs in the child between fork and exec
  try:
    import ctypes
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: the daemon dies with its parent
  except Exception:
    pass


class _ShmUnavailable(Exception):
  """The daemon does not offer shared memory to this client: use the streams."""


class EmbeddedDaemon:
  """A private polygradd on a Unix socket in a temporary directory."""

  def __init__(self, binary: Optional[str] = None, cache_dir: Optional[str] = None,
               extra_args: Sequence[str] = ()):
    self.binary = binary or find_daemon_binary()
    self.cache_dir = cache_dir or default_cache_dir()
    self.tmpdir = tempfile.mkdtemp(prefix="polygrad-")
    self.socket = os.path.join(self.tmpdir, "polygradd.sock")
    self.address = "unix:" + self.socket
    self.log_path = os.path.join(self.tmpdir, "polygradd.log")
    args = [self.binary, "--listen=", "--metrics-listen=", f"--unix-socket={self.socket}",
            f"--cache-dir={self.cache_dir}", *extra_args]
    # The parent-death signal is tied to the forking thread, so only use it from the main thread.
    preexec = (_set_parent_death_signal
               if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
               else None)
    self._log = open(self.log_path, "wb")
    try:
      self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log,
                                   stderr=subprocess.STDOUT, preexec_fn=preexec)
    except OSError as e:
      self._log.close()
      shutil.rmtree(self.tmpdir, ignore_errors=True)
      raise PolygradConnectionError(f"cannot reach polygradd at {self.address} "
                                    f"(cannot start {self.binary}: {e})") from e

  def log_tail(self, n: int = 2000) -> str:
    try:
      with open(self.log_path, "rb") as f:
        data = f.read()
      return data[-n:].decode("utf-8", "replace").strip()
    except OSError:
      return ""

  def wait_for_socket(self, deadline: float) -> None:
    """Wait until the socket file exists; fail early if the daemon exits."""
    while not os.path.exists(self.socket):
      rc = self.proc.poll()
      if rc is not None:
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} ({self.binary} exited with status {rc} "
            f"before listening; log: {self.log_tail() or '<empty>'})")
      if time.monotonic() > deadline:
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} (socket did not appear; log: "
            f"{self.log_tail() or '<empty>'})")
      time.sleep(0.02)

  def stop(self, timeout: float = 10.0) -> None:
    if self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(timeout=timeout)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    self._log.close()
    shutil.rmtree(self.tmpdir, ignore_errors=True)


class _TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                        grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
  """Adds the bearer token to every call (call credentials need TLS; the Unix socket has none)."""

  def __init__(self, token: str):
    self._md = ("authorization", f"Bearer {token}")

  def _details(self, d):
    return d._replace(metadata=list(d.metadata or ()) + [self._md])

  def intercept_unary_unary(self, continuation, d, request):
    return continuation(self._details(d), request)

  def intercept_unary_stream(self, continuation, d, request):
    return continuation(self._details(d), request)

  def intercept_stream_unary(self, continuation, d, request_iterator):
    return continuation(self._details(d), request_iterator)

  def intercept_stream_stream(self, continuation, d, request_iterator):
    return continuation(self._details(d), request_iterator)


def _read_env_file(name: str) -> Optional[bytes]:
  path = os.environ.get(name)
  if not path:
    return None
  try:
    with open(path, "rb") as f:
      return f.read()
  except OSError as e:
    raise PolygradConnectionError(f"cannot read {name}={path}: {e}") from e


def make_channel(address: str, token: Optional[str] = None, server_name: Optional[str] = None) -> grpc.Channel:
  """A channel to `address`: TLS when POLYGRAD_TLS_CA is set (TCP only), the token on every call.
  `server_name` is the name to check in the certificate when `address` is an IP the client
  resolved itself (POLYGRAD_TLS_SERVER_NAME still wins)."""
  options = list(_CHANNEL_OPTIONS)
  ca = None if address.startswith("unix:") else _read_env_file("POLYGRAD_TLS_CA")
  if ca is not None:
    creds = grpc.ssl_channel_credentials(root_certificates=ca,
                                         private_key=_read_env_file("POLYGRAD_TLS_KEY"),
                                         certificate_chain=_read_env_file("POLYGRAD_TLS_CERT"))
    name = os.environ.get("POLYGRAD_TLS_SERVER_NAME") or server_name
    if name:
      options.append(("grpc.ssl_target_name_override", name))
    channel = grpc.secure_channel(address, creds, options=options)
  else:
    channel = grpc.insecure_channel(address, options=options)
  return grpc.intercept_channel(channel, _TokenInterceptor(token)) if token else channel


class Connection:
  """A channel, a stub, the daemon's limits (GetInfo) and this process's session."""

  def __init__(self, address: Optional[str] = None, connect_timeout: Optional[float] = None,
               token: Optional[str] = None):
    pb, pb_grpc = _pb()
    self._pb = pb
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
      self.stub = pb_grpc.PolygradStub(self.channel)
      self.info = self._call("GetInfo", self.stub.GetInfo, pb.GetInfoRequest())
      self.max_inline_bytes = int(self.info.max_inline_bytes) or DEFAULT_MAX_INLINE_BYTES
      self.max_nodes_per_request = int(self.info.max_nodes_per_request) or 0
      self.chunk_bytes = int(self.info.chunk_bytes) or CHUNK_BYTES
      self.session_id = self._call("CreateSession", self.stub.CreateSession,
                                   pb.CreateSessionRequest()).session_id
      self.pid = os.getpid()
      self.use_shm = self.address.startswith("unix:") and os.environ.get("POLYGRAD_SHM", "1") != "0"
      self.blob_min_bytes = int(_timeout_env("POLYGRAD_BLOB_MIN_BYTES", BLOB_MIN_BYTES))
      self.shm_keep_bytes = int(_timeout_env("POLYGRAD_SHM_KEEP_BYTES", SHM_KEEP_BYTES))
      self._staging = None  # (region id, bytes, mmap): the reused shared-memory region
      self._staging_lock = threading.Lock()
      self._stop = threading.Event()
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
    req = self._pb.ReleaseRequest(session_id=self.session_id)
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

  # --- RPCs -------------------------------------------------------------------------------------

  def realize(self, nodes: List, outputs: Sequence[int], want_data: bool,
              release_nodes: Sequence[int] = ()):
    pb = self._pb
    from .device import Device
    # Results of constants and random ops alone are computed on Device.DEFAULT (tinygrad's rule).
    default = "" if Device.DEFAULT in ("CPU", "CPU:0") else Device.DEFAULT
    req = pb.RealizeRequest(session_id=self.session_id, nodes=nodes, outputs=list(outputs),
                            want_data=want_data, release_nodes=list(release_nodes), default_device=default)
    from .progress import Waiting
    with Waiting(f"realizing {len(nodes)} nodes"):
      return self._call("Realize", self.stub.Realize, req)

  def release(self, node_ids: Sequence[int] = (), handles: Sequence[int] = ()) -> None:
    pb = self._pb
    req = pb.ReleaseRequest(session_id=self.session_id, node_ids=list(node_ids),
                            handles=list(handles))
    self._call("Release", self.stub.Release, req)

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
    pb = self._pb
    chunk = self.chunk_bytes
    total = len(data)

    def chunks() -> Iterator:
      header = pb.UploadHeader(session_id=self.session_id, dtype=wire_dtype, shape=list(shape))
      if total == 0:
        yield pb.UploadChunk(header=header, data=b"", last=True)
        return
      for off in range(0, total, chunk):
        end = min(total, off + chunk)
        msg = pb.UploadChunk(data=bytes(data[off:end]), last=end == total)
        if off == 0:
          msg.header.CopyFrom(header)
        yield msg

    resp = self._call("Upload", self.stub.Upload, chunks())
    if resp.bytes and resp.bytes != total:
      raise PolygradError(f"Upload: daemon stored {resp.bytes} bytes, sent {total}")
    return int(resp.handle)

  def download(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Fetch a buffer by handle: (wire dtype, shape, bytes); through shared memory on a Unix
    socket (any size: the daemon knows it, the client does not yet)."""
    if self.use_shm:
      r = self._shm_fallback(lambda: self.download_shm(handle))
      if r is not None:
        return r
    return self.download_stream(handle)

  def download_stream(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Download by the chunked stream only."""
    pb = self._pb
    req = pb.DownloadRequest(session_id=self.session_id, handle=handle, chunk_bytes=0)
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
                 self._pb.FreeSharedMemoryRequest(session_id=self.session_id, region=region.region))
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
                 self._pb.FreeSharedMemoryRequest(session_id=self.session_id, region=staging[0]))
    except PolygradError:
      pass  # the region goes with the session anyway

  def _trim_staging(self) -> None:
    if self._staging is not None and self._staging[1] > self.shm_keep_bytes:
      self._drop_staging()

  def upload_shm(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """Upload through the staging region of the daemon: one copy in, one copy into the buffer."""
    pb = self._pb
    total = len(data)
    with self._staging_lock:
      if self._staging is None or self._staging[1] < total:
        region = self._shm_call("CreateSharedMemory", self.stub.CreateSharedMemory,
                                pb.CreateSharedMemoryRequest(session_id=self.session_id, bytes=max(1, total)))
        self._adopt_staging(region, max(1, total))
      region_id, _, mm = self._staging
      mm[:total] = data
      r = self._call("CommitSharedMemory", self.stub.CommitSharedMemory,
                     pb.CommitSharedMemoryRequest(session_id=self.session_id, region=region_id, dtype=wire_dtype,
                                                  shape=list(shape)))
      self._trim_staging()
    return int(r.handle)

  def download_shm(self, handle: int) -> Tuple[int, Tuple[int, ...], bytes]:
    """Download through the staging region (the daemon answers with a new one when it is too small)."""
    pb = self._pb
    with self._staging_lock:
      staging_id = self._staging[0] if self._staging is not None else 0
      region = self._shm_call("ReadSharedMemory", self.stub.ReadSharedMemory,
                              pb.ReadSharedMemoryRequest(session_id=self.session_id, handle=handle, region=staging_id))
      if region.region == staging_id:
        mm = self._staging[2]
      else:
        mm = self._adopt_staging(region, max(1, region.bytes))
      data = mm[:region.bytes]
      self._trim_staging()
    return region.dtype, tuple(region.shape), data

  def has_blobs(self, hashes: Sequence[str]) -> List[bool]:
    r = self._call("HasBlobs", self.stub.HasBlobs, self._pb.HasBlobsRequest(sha256=list(hashes)))
    return list(r.present)

  def upload_blob(self, data: memoryview, sha256: Optional[str] = None) -> str:
    """Stores `data` on the daemon under its sha256 (sent whole even if present); returns the hash."""
    pb = self._pb
    sha256 = sha256 or hashlib.sha256(data).hexdigest()
    total = len(data)

    def chunks() -> Iterator:
      first = True
      for off in range(0, max(total, 1), self.chunk_bytes):
        msg = pb.BlobChunk(data=bytes(data[off:off + self.chunk_bytes]))
        if first:
          msg.sha256, msg.size, first = sha256, total, False
        yield msg

    self._call("UploadBlob", self.stub.UploadBlob, chunks())
    return sha256

  def upload_once(self, wire_dtype: int, shape: Sequence[int], data: memoryview) -> int:
    """A buffer of `data` whose bytes cross the wire only when the daemon has not seen them
    (by sha256) since it started; returns the handle."""
    sha256 = hashlib.sha256(data).hexdigest()
    for attempt in range(2):
      if attempt or not self.has_blobs([sha256])[0]:
        self.upload_blob(data, sha256)
      try:
        r = self.stub.BufferFromBlob(self._pb.BufferFromBlobRequest(
            session_id=self.session_id, sha256=sha256, dtype=wire_dtype, shape=list(shape)))
        return int(r.handle)
      except grpc.RpcError as e:
        # Evicted between HasBlobs and BufferFromBlob (the daemon's blob memory is capped): once more.
        if e.code() != grpc.StatusCode.NOT_FOUND or attempt:
          raise self._error(e, "BufferFromBlob") from None
    raise AssertionError("unreachable")

  # --- compiled steps (polygrad.step) ---------------------------------------------------------

  def compile_step(self, nodes: List, inputs: Sequence[int], outputs: Sequence[int],
                   assigns: Sequence[Tuple[int, int]], materialize: Sequence[int] = ()):
    """CompileStep: `assigns` are (target node id, value node id) pairs."""
    pb = self._pb
    req = pb.CompileStepRequest(session_id=self.session_id, nodes=nodes, inputs=list(inputs),
                                outputs=list(outputs),
                                assigns=[pb.StepAssign(target_node=t, value=v) for t, v in assigns],
                                materialize=list(materialize))
    return self._call("CompileStep", self.stub.CompileStep, req)

  def run_step(self, step_id: int, inputs: Sequence, want_data: bool = True):
    """RunStep: `inputs` are (node id, bytes) or (node id, handle int) pairs."""
    pb = self._pb
    msgs = [pb.StepInput(node_id=n, handle=v) if isinstance(v, int) else pb.StepInput(node_id=n, data=v)
            for n, v in inputs]
    req = pb.RunStepRequest(session_id=self.session_id, step_id=step_id, inputs=msgs, want_data=want_data)
    return self._call("RunStep", self.stub.RunStep, req)

  def release_step(self, step_id: int) -> None:
    pb = self._pb
    self._call("ReleaseStep", self.stub.ReleaseStep, pb.ReleaseStepRequest(session_id=self.session_id,
                                                                            step_id=step_id))

  def close(self) -> None:
    self._stop.set()
    if os.getpid() != self.pid:
      return  # a forked child shares nothing usable with the parent's session or daemon
    if self._staging is not None:
      self._staging[2].close()  # the daemon frees the region with the session
      self._staging = None
    try:
      if self.session_id:
        self._call("CloseSession", self.stub.CloseSession,
                   self._pb.CloseSessionRequest(session_id=self.session_id), timeout=5)
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


def get_connection() -> Connection:
  """This process's connection, created (and the embedded daemon started) on first use."""
  global _conn, _atexit_registered
  if _conn is not None and _conn.pid == os.getpid():
    return _conn
  with _lock:
    if _conn is not None and _conn.pid != os.getpid():
      # Forked: the parent's channel, session and daemon are not ours.
      _conn = None
      from . import graph
      graph.GRAPH.forget_session()
    if _conn is None:
      _conn = Connection()
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
    from . import graph
    graph.GRAPH.forget_session()
    conn.close()
