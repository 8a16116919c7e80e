"""End-to-end fixtures: a real polygradd on a private Unix socket, one per test session.

The daemon is <repo>/build/polygradd (POLYGRAD_TEST_DAEMON overrides it with another build of
polygradd, e.g. the sanitizer build; POLYGRAD_DAEMON_ARGS adds flags, e.g. --devices=cpu,cuda:0).
Tests that need it use the
`daemon` fixture (modules mark themselves with it); without a binary they are skipped with the
reason, while the pure-local tests (test_local.py) still run.
"""
import os
import shutil
import socket
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
PY_CLIENT = REPO / "clients" / "python"
sys.path.insert(0, str(PY_CLIENT))


def _ensure_stubs() -> None:
  """The cmake build generates the Python stubs; generate them the same way if it has not run."""
  protos = ("polygrad", "admin")  # admin: polygrad.admin and the cache tests use its stubs
  if all((PY_CLIENT / "polygrad" / "v1" / f"{p}_pb2_grpc.py").exists() for p in protos):
    return
  plugin = shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
  subprocess.run(["protoc", f"--proto_path={REPO / 'proto'}", f"--python_out={PY_CLIENT}",
                  f"--pyi_out={PY_CLIENT}", f"--grpc_python_out={PY_CLIENT}",
                  f"--plugin=protoc-gen-grpc_python={plugin}",
                  *(str(REPO / "proto" / "polygrad" / "v1" / f"{p}.proto") for p in protos)], check=True)


_ensure_stubs()


# The bound on waiting for something that takes milliseconds on an idle machine: a daemon creating
# its socket or writing a log line, a closed session's files going away. It is more than 100x what
# the slowest of these takes on a 2-core machine with both cores saturated, so only a real fault
# reaches it, and a condition that already holds costs nothing.
WAIT_LIMIT = 120.0


def wait_until(condition, what: str, timeout: float = WAIT_LIMIT, alive=None):
  """Polls `condition()` until it returns something true, and returns that. Fails naming `what`
  after `timeout` seconds, or at once when `alive` (a Popen) has exited. The polling interval
  only sets how soon the wait notices; no result depends on it."""
  deadline = time.monotonic() + timeout
  while True:
    value = condition()
    if value:
      return value
    if alive is not None and alive.poll() is not None:
      raise AssertionError(f"{what}: the process exited with {alive.returncode} first")
    if time.monotonic() > deadline:
      raise AssertionError(f"{what}: not within {timeout:.0f} s")
    time.sleep(0.02)  # the polling interval: the 120 s bound above (WAIT_LIMIT) is the only limit


def wait_until_drained(count, what: str, alive=None) -> None:
  """Waits for `count()` (work still queued, e.g. background builds) to reach 0. A long queue on a
  slow or loaded machine takes as long as it takes: each fall of the count restarts wait_until's
  bound, so the wait fails only when no item finishes for WAIT_LIMIT seconds (a real fault), or
  when `alive` has exited."""
  n = count()
  while n:
    def fell(before=n):
      m = count()
      return (m,) if m < before else None  # a 1-tuple: true even when the count has fallen to 0
    (n,) = wait_until(fell, f"{what}: stuck at {n}", alive=alive)


class HeldCompiler:
  """tests/tools/held-compiler in a gate directory of its own: pass `path` as polygradd's
  --compiler, then `hold()` to make every later compile wait, `wait_held()` to know that one is
  waiting (so the realize that needs it is in flight), and `release()` to let them all run. The
  gate starts open, so the daemon's compiler probe at start-up runs through. With `after` (a
  path, e.g. the daemon's socket), the gate holds only compiles that start once that path
  exists, so a test can hold from before the daemon starts and still let its probe run."""

  def __init__(self, workdir: Path, after: Optional[Path] = None):
    self.gate = workdir / "compiler-gate"
    self.gate.mkdir()
    self.path = self.gate / "cc"
    self.path.symlink_to(REPO / "tests" / "tools" / "held-compiler")
    if after is not None:
      self.hold_after(after)
    self.release()

  def hold_after(self, path: Path) -> None:
    (self.gate / "after").symlink_to(path)

  def hold(self) -> None:
    (self.gate / "open").unlink(missing_ok=True)

  def release(self) -> None:
    (self.gate / "open").touch()

  def held(self) -> list:
    return sorted(self.gate.glob("held.*"))

  def wait_held(self, alive=None) -> None:
    wait_until(self.held, "a compile waiting at the held compiler's gate", alive=alive)


def free_port() -> int:
  """A loopback TCP port nothing listens on now (for servers that take a port, not port 0)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_nginx(prefix: Path, port: int, http: str) -> subprocess.Popen:
  """nginx in the foreground under `prefix` with `http` as its http{} block (which listens on
  `port`), once it accepts connections. nginx is a test dependency (scripts/install-deps --test
  installs nginx-light): missing, the test fails rather than skips."""
  binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
  if binary is None:
    pytest.fail("nginx is not installed (scripts/install-deps --test installs nginx-light)")
  prefix.mkdir(parents=True, exist_ok=True)
  # As root, nginx's workers would run as nobody and could not write under pytest's 0700 tmp.
  user = "user root;" if os.geteuid() == 0 else ""
  conf = prefix / "nginx.conf"
  conf.write_text(f"""
{user}
daemon off;
master_process off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 64; }}
http {{
  client_body_temp_path {prefix}/body;
{http}
}}
""")
  proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(conf)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)

  def accepting() -> bool:
    with socket.socket() as c:
      return c.connect_ex(("127.0.0.1", port)) == 0

  wait_until(accepting, "nginx accepting connections", alive=proc)
  return proc


def quit_nginx(proc: subprocess.Popen) -> None:
  """Graceful shutdown (SIGQUIT): nginx writes a request's access-log line after the request's last
  byte has gone to the client, so a client holding its answer can read the log before the line is
  there; once nginx has quit, every request it served is in the log."""
  if proc.poll() is None:
    proc.send_signal(signal.SIGQUIT)
    try:
      proc.wait(timeout=WAIT_LIMIT)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
      raise AssertionError(f"nginx did not quit within {WAIT_LIMIT} s of SIGQUIT")


def daemon_binary() -> Path:
  override = os.environ.get("POLYGRAD_TEST_DAEMON")
  return Path(override).resolve() if override else REPO / "build" / "polygradd"


class Daemon:
  def __init__(self, binary: Path, workdir: Path, metrics_listen: str = "", *extra_args: str):
    self.binary = binary
    self.socket = workdir / "d.sock"
    self.cache_dir = workdir / "cache"
    self.log_path = workdir / "polygradd.log"
    self.address = f"unix:{self.socket}"
    self._log = open(self.log_path, "wb")
    self.proc = subprocess.Popen(
        [str(binary), "--listen=", f"--metrics-listen={metrics_listen}", f"--unix-socket={self.socket}",
         f"--cache-dir={self.cache_dir}", *os.environ.get("POLYGRAD_DAEMON_ARGS", "").split(), *extra_args],
        stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

  def metrics_url(self):
    """The /metrics URL the daemon logs at start (it picks the port for `127.0.0.1:0`), or None."""
    import re
    line = wait_until(lambda: re.search(r"^\S+ info listening .*$", self.log_path.read_text(errors="replace"), re.M),
                      "polygradd's listening line", alive=self.proc)
    m = re.search(r'metrics="?(http://[^"\s]+)', line.group(0))
    return m.group(1) if m else None

  def log_tail(self) -> str:
    return self.log_path.read_text(errors="replace")[-4000:]

  def wait_ready(self) -> None:
    import grpc
    try:
      wait_until(self.socket.exists, f"{self.binary} creating {self.socket}", alive=self.proc)
    except AssertionError as e:
      raise RuntimeError(f"{e}:\n{self.log_tail()}") from None
    with grpc.insecure_channel(self.address) as ch:
      grpc.channel_ready_future(ch).result(timeout=WAIT_LIMIT)

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(timeout=15)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    self._log.close()


def run_watching_buffers(tmp_path, body: str, *daemon_args: str) -> str:
  """Runs `body` (Python source) in a fresh process against a daemon of its own that serves
  /metrics (started with `daemon_args`), and returns its stdout. The body can call buffers(): the
  daemon's live-buffer gauge after the process released what it dropped, and metric(name): the sum
  of that metric's samples. Skips when the daemon reports no /metrics URL."""
  import textwrap
  d = Daemon(daemon_binary(), tmp_path, "127.0.0.1:0", *daemon_args)
  try:
    d.wait_ready()
    url = d.metrics_url()
    if url is None:
      pytest.skip("this daemon does not report a /metrics URL in its log")
    preamble = textwrap.dedent(f"""
        import gc, re, sys, urllib.request
        sys.path.insert(0, {str(PY_CLIENT)!r})
        from polygrad import graph
        def buffers():
          gc.collect()
          graph.GRAPH.flush_releases()
          text = urllib.request.urlopen({url!r}, timeout=10).read().decode()
          return float(re.search(r"^polygradd_buffers(?:{{[^}}]*}})? (\\S+)$", text, re.M).group(1))
        def metric(name):
          text = urllib.request.urlopen({url!r}, timeout=10).read().decode()
          return sum(float(v) for v in re.findall(r"^" + name + r"(?:{{[^}}]*}})? (\\S+)$", text, re.M))
    """)
    env = dict(os.environ, POLYGRAD_ADDRESS=d.address)
    r = subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(body)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout
  finally:
    d.stop()


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
  binary = daemon_binary()
  if not binary.exists():
    pytest.skip(f"no daemon binary at {binary}: build it with "
                f"`cmake -S . -B build -G Ninja && ninja -C build`")
  workdir = Path(tmp_path_factory.mktemp("pgd", numbered=True))
  d = Daemon(binary, workdir)
  try:
    d.wait_ready()
  except BaseException:
    d.stop()
    raise
  old = os.environ.get("POLYGRAD_ADDRESS")
  os.environ["POLYGRAD_ADDRESS"] = d.address
  yield d
  import polygrad
  polygrad.close_connection()
  if old is None:
    os.environ.pop("POLYGRAD_ADDRESS", None)
  else:
    os.environ["POLYGRAD_ADDRESS"] = old
  was_running = d.proc.poll() is None
  d.stop()
  rc = d.proc.returncode
  # SIGTERM is a graceful drain: the daemon should exit 0 (or by the signal it was sent).
  if was_running:
    assert rc in (0, -15), f"polygradd exited with {rc} after SIGTERM:\n{d.log_tail()}"


@pytest.fixture
def live_daemon(daemon):
  """The session daemon, checked alive before and after each test: a crash fails the test that
  caused it, with the daemon's log, and the tests after it fail fast instead of timing out."""
  if daemon.proc.poll() is not None:
    pytest.fail(f"polygradd is not running (exit status {daemon.proc.returncode}); log tail:\n"
                f"{daemon.log_tail()}", pytrace=False)
  yield daemon
  if daemon.proc.poll() is not None:
    pytest.fail(f"polygradd died during this test (exit status {daemon.proc.returncode}); log tail:\n"
                f"{daemon.log_tail()}", pytrace=False)


@pytest.fixture
def raw(daemon):
  """A raw gRPC stub and a fresh session of its own (not the client's), closed after the test."""
  import grpc
  from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc
  ch = grpc.insecure_channel(daemon.address)
  stub = pb_grpc.PolygradStub(ch)
  sid = stub.CreateSession(pb.CreateSessionRequest(), timeout=10).session_id
  yield stub, sid
  try:
    stub.CloseSession(pb.CloseSessionRequest(session_id=sid), timeout=10)
  finally:
    ch.close()


@pytest.fixture
def rng(request):
  """A generator seeded from the test's name, so each case has its own reproducible data."""
  seed = zlib.crc32(request.node.nodeid.encode())
  return np.random.default_rng(seed)


def assert_close(got, expected, rtol=1e-5, atol=1e-6):
  got = np.asarray(got)
  expected = np.asarray(expected)
  assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}"
  np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
