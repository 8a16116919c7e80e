"""The kernel cache's remote tier (issue 19): daemons with separate local directories share one
remote — a real nginx WebDAV server and a real redis-server, each started on loopback by the
test — so the second daemon runs a training step's kernels without compiling any; a remote that
stops mid-run costs counted errors bounded by the breaker and never a failed realize; tampered
entries and entries signed with another secret are rejected and recompiled; a read-only daemon
never writes.

Every count comes from the daemons' /metrics (polygradd_kernel_cache_lookups_total with
tier="remote", polygradd_kernel_cache_remote_uploads_total, ..._remote_errors_total) or from the
servers themselves (their stored entries, nginx's access log); nothing waits on wall-clock.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PY_CLIENT, free_port, start_nginx, wait_until
from test_kernel_cache import CacheDaemon, realize_all

SECRET = b"remote tier secret of the test fleet\n"
OTHER_SECRET = b"a different fleet's secret, 32 b\n"


class Redis:
  """redis-server on a loopback port, no persistence."""
  name = "redis"

  def __init__(self, tmp: Path):
    binary = shutil.which("redis-server")
    if binary is None:
      pytest.skip("redis-server is not installed (scripts/install-deps --test installs it)")
    self.port = free_port()
    self.dir = tmp / "redis"
    self.dir.mkdir()
    self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", str(self.dir)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: self._ping(), "redis-server answering PING", alive=self.proc)
    self.url = f"redis://127.0.0.1:{self.port}/0"

  def _ping(self) -> bool:
    try:
      return self.command("PING") == "PONG"
    except OSError:
      return False

  def command(self, *args: "str | bytes"):
    """One RESP command; returns a str, int, bytes or None."""
    out = f"*{len(args)}\r\n".encode()
    for a in args:
      a = a.encode() if isinstance(a, str) else a
      out += f"${len(a)}\r\n".encode() + a + b"\r\n"
    with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
      s.sendall(out)
      f = s.makefile("rb")
      line = f.readline().rstrip(b"\r\n")
      kind, rest = line[:1], line[1:]
      if kind == b"+":
        return rest.decode()
      if kind == b":":
        return int(rest)
      if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
      if kind == b"*":  # KEYS: an array of bulk strings
        items = []
        for _ in range(int(rest)):
          n = int(f.readline()[1:])
          items.append(f.read(n + 2)[:-2])
        return items
      raise AssertionError(f"redis answered {line!r}")

  def entries(self) -> dict:
    return {k: self.command("GET", k) for k in self.command("KEYS", "polygrad:ac:*")}

  def replace(self, key: bytes, value: bytes) -> None:
    self.command("SET", key, value)

  def writes(self) -> int:
    """Write commands the server has run (INFO commandstats: SET calls); like WebDav.writes, a value
    that changes with every write."""
    info = self.command("INFO", "commandstats").decode()
    m = re.search(r"^cmdstat_set:calls=(\d+)", info, re.M)
    return int(m.group(1)) if m else 0

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()


class WebDav:
  """nginx serving a directory with PUT enabled (its DAV module), on a loopback port."""
  name = "webdav"

  def __init__(self, tmp: Path):
    self.port = free_port()
    self.prefix = tmp / "nginx"
    self.root = self.prefix / "dav"
    self.root.mkdir(parents=True)
    self.proc = start_nginx(self.prefix, self.port, textwrap.dedent(f"""
        access_log {self.prefix / 'access.log'};
        server {{
          listen 127.0.0.1:{self.port};
          root {self.root};
          location / {{
            dav_methods PUT;
            create_full_put_path on;
            client_max_body_size 256m;
          }}
        }}
    """))
    self.url = f"http://127.0.0.1:{self.port}/cache"

  def entries(self) -> dict:
    return {p: p.read_bytes() for p in (self.root / "cache" / "ac").glob("*")} if (self.root / "cache").exists() else {}

  def replace(self, path: Path, value: bytes) -> None:
    path.write_bytes(value)

  def writes(self) -> tuple:
    # Seen in the stored files, not the access log: nginx logs a PUT after answering it, so a
    # daemon that has its answer can be gone before the line is written. A PUT stores a new file
    # (written aside, then renamed), so each one shows as a new inode or a new time.
    return tuple(sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in (self.root / "cache" / "ac").glob("*")))

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()


@pytest.fixture(params=[WebDav, Redis], ids=["webdav", "redis"])
def remote(request, tmp_path):
  server = request.param(tmp_path)
  yield server
  server.stop()


def secret_file(tmp: Path, name: str, secret: bytes) -> Path:
  p = tmp / name
  p.write_bytes(secret)
  return p


def remote_daemon(tmp: Path, name: str, remote, secret: bytes = SECRET, *extra: str) -> CacheDaemon:
  key = secret_file(tmp, f"{name}.key", secret)
  return CacheDaemon(tmp, name, tmp / f"{name}-cache", f"--cache-remote={remote.url}",
                     f"--cache-remote-key-file={key}", *extra)


def series(d: CacheDaemon, name: str, **labels) -> float:
  """The value of one series of `name` with exactly these labels (0 when it does not exist yet)."""
  for line in d.metrics_text().splitlines():
    got = re.match(rf"^{name}(?:{{([^}}]*)}})? (\S+)$", line)
    if got and dict(re.findall(r'(\w+)="([^"]*)"', got.group(1) or "")) == labels:
      return float(got.group(2))
  return 0.0


def remote_lookups(d: CacheDaemon, result: str) -> float:
  return series(d, "polygradd_kernel_cache_lookups_total", tier="remote", result=result)


def uploads(d: CacheDaemon, result: str) -> float:
  return series(d, "polygradd_kernel_cache_remote_uploads_total", result=result)


def remote_errors(d: CacheDaemon) -> float:
  return sum(series(d, "polygradd_kernel_cache_remote_errors_total", kind=k)
             for k in ("timeout", "connect", "status", "protocol", "full"))


def compiles(d: CacheDaemon) -> float:
  return series(d, "polygradd_kernel_cache_lookups_total", result="miss")


TRAINING_STEP = """
import sys
sys.path.insert(0, {client!r})
import numpy as np
from polygrad import Tensor, nn
Tensor.manual_seed(0)
rng = np.random.default_rng(0)
l1, l2 = nn.Linear(8, 16), nn.Linear(16, 4)
opt = nn.optim.SGD(nn.state.get_parameters([l1, l2]), lr=0.1)
x = Tensor(rng.standard_normal((32, 8)).astype(np.float32))
y = Tensor(rng.integers(0, 4, 32).astype(np.int32))
with Tensor.train():
  for _ in range(2):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    print(float(loss.numpy()))
"""


def run_training_step(d: CacheDaemon) -> list:
  env = dict(os.environ, POLYGRAD_ADDRESS=d.address)
  r = subprocess.run([sys.executable, "-c", TRAINING_STEP.format(client=str(PY_CLIENT))], env=env,
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  return [float(v) for v in r.stdout.split()]


def test_second_daemon_runs_a_training_step_with_zero_compiles(tmp_path, remote):
  a = remote_daemon(tmp_path, "a", remote)
  try:
    losses_a = run_training_step(a)
    compiled = compiles(a)
    assert compiled > 0
    # Uploads run in the background: wait until every compiled kernel has been offered.
    wait_until(lambda: uploads(a, "stored") + uploads(a, "present") >= compiled, "a's uploads")
    assert uploads(a, "error") == 0 and remote_errors(a) == 0, a.log_path.read_text()[-2000:]
    assert len(remote.entries()) == uploads(a, "stored")
  finally:
    a.stop()
  b = remote_daemon(tmp_path, "b", remote)
  try:
    losses_b = run_training_step(b)
    assert losses_b == losses_a
    assert compiles(b) == 0, "the second daemon compiled kernels the remote holds"
    assert remote_lookups(b, "hit") > 0
    assert remote_lookups(b, "hit") == series(b, "polygradd_cache_entries"), \
      "every remote hit is copied into the local tier"
    assert remote_lookups(b, "rejected") == 0
  finally:
    b.stop()


def test_a_remote_stopped_mid_run_costs_counted_errors_bounded_by_the_breaker(tmp_path, remote):
  # A breaker far longer than the test: after the first failure nothing more reaches the remote,
  # so the errors stay at one or two (a lookup, and an upload already past the breaker) however
  # many kernels follow.
  d = remote_daemon(tmp_path, "d", remote, SECRET, "--cache-remote-breaker=1h")
  try:
    realize_all(d, range(0, 8), threads=2)
    wait_until(lambda: uploads(d, "stored") >= 8, "the first kernels uploaded")
    remote.stop()
    kernels, compiled, _ = realize_all(d, range(8, 40), threads=2)
    assert (kernels, compiled) == (32, 32), "a realize failed or skipped work while the remote was down"
    assert 1 <= remote_errors(d) <= 2
    assert remote_lookups(d, "error") + uploads(d, "error") == remote_errors(d)
    assert remote_lookups(d, "skipped") >= 32 - 2
  finally:
    d.stop()


def test_tampered_and_foreign_entries_are_rejected_and_recompiled(tmp_path, remote):
  n = 6
  a = remote_daemon(tmp_path, "a", remote)
  try:
    realize_all(a, range(n), threads=2)
    wait_until(lambda: uploads(a, "stored") >= n, "a's uploads")
  finally:
    a.stop()
  stored = remote.entries()
  assert len(stored) == n
  victim = sorted(stored)[0]
  damaged = bytearray(stored[victim])
  damaged[-1] ^= 0x01  # one bit of the compiled code
  remote.replace(victim, bytes(damaged))

  # Signed with another fleet's secret: nothing it reads checks, everything is compiled.
  b = remote_daemon(tmp_path, "b", remote, OTHER_SECRET)
  try:
    realize_all(b, range(n), threads=2)
    assert remote_lookups(b, "rejected") == n
    assert compiles(b) == n and remote_lookups(b, "hit") == 0
  finally:
    b.stop()

  # The same secret: the tampered entry alone is rejected and rebuilt.
  c = remote_daemon(tmp_path, "c", remote, SECRET, "--cache-remote-read-only")
  writes = remote.writes()
  try:
    realize_all(c, range(n + 4), threads=2)  # and 4 kernels the remote never had
    assert remote_lookups(c, "rejected") == 1
    assert remote_lookups(c, "hit") == n - 1
    assert compiles(c) == 1 + 4
  finally:
    c.stop()
  # Read-only: it compiled 5 kernels and wrote none of them.
  assert remote.writes() == writes
  assert len(remote.entries()) == n


def test_flags_that_cannot_work_are_refused_at_start(tmp_path):
  from conftest import daemon_binary
  key = secret_file(tmp_path, "k", SECRET)
  short = secret_file(tmp_path, "short", b"tiny")
  for args, says in [
      (["--cache-remote=redis://127.0.0.1:1/0"], "--cache-remote-key-file"),
      ([f"--cache-remote=ftp://h/x", f"--cache-remote-key-file={key}"], "unsupported scheme"),
      ([f"--cache-remote=redis://h:99999/0", f"--cache-remote-key-file={key}"], "port"),
      ([f"--cache-remote=redis://h/db", f"--cache-remote-key-file={key}"], "database number"),
      ([f"--cache-remote=redis://h/0", f"--cache-remote-key-file={short}"], "fewer than"),
      (["--cache-remote-read-only"], "need --cache-remote"),
  ]:
    r = subprocess.run([str(daemon_binary()), "--listen=", "--metrics-listen=",
                        f"--unix-socket={tmp_path / 's.sock'}", f"--cache-dir={tmp_path / 'c'}", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and says in r.stderr, (args, r.stderr[-1000:])


class HostileServer:
  """A TCP server on loopback answering every connection with `reply` (bytes; None: read and
  never answer) — a broken or hostile remote."""

  def __init__(self, reply):
    import threading
    self.reply = reply
    self.sock = socket.socket()
    self.sock.bind(("127.0.0.1", 0))
    self.sock.listen(16)
    self.port = self.sock.getsockname()[1]
    self.conns = []
    self.thread = threading.Thread(target=self._serve, daemon=True)
    self.thread.start()

  def _serve(self):
    while True:
      try:
        conn, _ = self.sock.accept()
      except OSError:
        return
      self.conns.append(conn)
      try:
        conn.recv(65536)
        if self.reply is not None:
          conn.sendall(self.reply)
          conn.shutdown(socket.SHUT_WR)
      except OSError:
        pass

  def stop(self):
    self.sock.close()
    for c in self.conns:
      c.close()


@pytest.mark.parametrize("scheme,reply,kind", [
    ("redis", b"$99999999999\r\n", "protocol"),          # a bulk string over the entry cap
    ("redis", b"*1\r\n$1\r\nx\r\n", "protocol"),          # a reply type GET never gets
    ("redis", b"-ERR unknown command\r\n", "status"),
    ("redis", None, "timeout"),                          # accepts, never answers
    ("http", b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", "status"),
    ("http", b"garbage that is not HTTP\r\n\r\n", "protocol"),
    ("http", None, "timeout"),
])
def test_a_broken_remote_is_counted_by_kind_and_never_fails_a_realize(tmp_path, scheme, reply, kind):
  server = HostileServer(reply)
  key = secret_file(tmp_path, "k", SECRET)
  url = f"redis://127.0.0.1:{server.port}/0" if scheme == "redis" else f"http://127.0.0.1:{server.port}/c"
  d = CacheDaemon(tmp_path, "d", tmp_path / "cache", f"--cache-remote={url}", f"--cache-remote-key-file={key}",
                  "--cache-remote-timeout=300ms", "--cache-remote-breaker=1h")
  try:
    kernels, compiled, _ = realize_all(d, range(4), threads=1)
    assert (kernels, compiled) == (4, 4)
    assert series(d, "polygradd_kernel_cache_remote_errors_total", kind=kind) == 1, d.log_path.read_text()[-2000:]
    assert remote_errors(d) == 1 and remote_lookups(d, "skipped") == 3
  finally:
    d.stop()
    server.stop()


def test_the_prewarm_job_fills_the_remote_so_the_next_daemon_compiles_nothing(tmp_path, remote):
  """deploy/'s prewarm job against a real remote: its uploads are drained before it exits, so a
  second run (a new pod) finds every kernel there."""
  from test_fleet import PREWARM, _run_prewarm
  key = secret_file(tmp_path, "k", SECRET)
  flags = (f"--cache-remote={remote.url}", f"--cache-remote-key-file={key}")
  counts = []
  for run in ("first", "second"):
    work = tmp_path / run
    work.mkdir()
    r = _run_prewarm(work, PREWARM / "manifest.txtpb", *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"prewarm finished\"? graphs=(\d+) kernels=(\d+) compiled=(\d+)", r.stdout)
    assert m, r.stdout
    counts.append((int(m.group(2)), int(m.group(3))))
    if run == "first":
      assert len(remote.entries()) == counts[0][1] > 0, "the job exited before its uploads reached the remote"
  (kernels, compiled), (kernels2, compiled2) = counts
  assert kernels2 == kernels and compiled == kernels and compiled2 == 0
