"""The kernel cache as a product (issue 5, acceptance 2): several daemons share one cache
directory safely, a restarted daemon serves from disk with zero compiles, truncated entries are
discarded and rebuilt, bundles export and import, and --prewarm holds readiness until done.

Every daemon here is a real polygradd process on its own Unix socket; kernels are real compiles.
"""
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest

from conftest import HeldCompiler, WAIT_LIMIT, daemon_binary, wait_until, wait_until_drained

from polygrad.v1 import admin_pb2, polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc
from polygrad import admin as admin_client

N_KERNELS = 200
WIDTH = 16


class CacheDaemon:
  """polygradd on tmp/<name>.sock with the given cache directory and /metrics on a free port."""

  def __init__(self, tmp: Path, name: str, cache_dir: Path, *extra: str, held: "HeldCompiler | None" = None):
    binary = daemon_binary()
    if not binary.exists():
      pytest.skip(f"no daemon binary at {binary}")
    # Sockets live in a short directory of their own: test names make tmp paths longer than a
    # Unix socket address may be.
    self.sockdir = Path(tempfile.mkdtemp(prefix="pgc-"))
    self.socket = self.sockdir / f"{name}.sock"
    self.log_path = tmp / f"{name}.log"
    self.address = f"unix:{self.socket}"
    self._log = open(self.log_path, "wb")
    if held is not None:  # compiles held from the moment the daemon listens: its probe runs first
      held.hold_after(self.socket)
      extra = (*extra, f"--compiler={held.path}")
    self.proc = subprocess.Popen(
        [str(binary), "--listen=", "--metrics-listen=127.0.0.1:0", f"--unix-socket={self.socket}",
         f"--cache-dir={cache_dir}", *extra], stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
    try:
      wait_until(self.socket.exists, "polygradd creating its socket", alive=self.proc)
    except AssertionError as e:
      raise AssertionError(f"{e}: {self.log_path.read_text()[-3000:]}") from None
    self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", -1)])
    grpc.channel_ready_future(self.channel).result(timeout=WAIT_LIMIT)
    self.stub = pb_grpc.PolygradStub(self.channel)

  def metrics_text(self) -> str:
    """The daemon's /metrics page. The socket answers before the daemon has started /metrics and
    logged its address (server.cpp), so a call right after start waits for that line."""
    m = wait_until(lambda: re.search(r'metrics="?(http://[^"\s]+)', self.log_path.read_text()),
                   "polygradd logging its metrics address", alive=self.proc)
    return urllib.request.urlopen(m.group(1), timeout=10).read().decode()

  def metric(self, name: str) -> float:
    return float(re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", self.metrics_text(), re.M).group(1))

  def wait_background_builds(self) -> None:
    """Waits until no optimized build runs behind a quick one (--quick-compile): from then on every
    kernel this daemon built is on disk. Admin CacheStats reports the count."""
    with admin_client.Admin(self.address) as adm:
      wait_until_drained(lambda: adm.cache_stats().background_builds, "the background builds", alive=self.proc)

  def health(self) -> int:
    """grpc.health.v1 Check for the whole server: 1 SERVING, 2 NOT_SERVING."""
    check = self.channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
    raw = check(b"", timeout=10)
    return raw[1] if len(raw) >= 2 else 0

  def stop(self) -> None:
    self.channel.close()
    if self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(timeout=15)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    self._log.close()
    shutil.rmtree(self.sockdir, ignore_errors=True)
    assert self.proc.returncode in (0, -15), self.log_path.read_text()[-3000:]


def kernel_nodes(i: int):
  """A one-kernel graph unique to i: x * c_i with the constant baked into the kernel source."""
  x = np.arange(WIDTH, dtype=np.float32)
  return [pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=x.tobytes(), shape=[WIDTH])),
          pb.Node(id=2, op=pb.CONST, dtype=pb.FLOAT32, constant=pb.Constant(float_value=i + 0.5, shape=[WIDTH])),
          pb.Node(id=3, op=pb.MUL, src=[1, 2])]


def realize_all(d: CacheDaemon, indices, threads: int = 4):
  """Realizes kernel i for every i (from `threads` clients at once); checks every result and
  returns the summed RealizeStats as (kernels, compiled, cache_hits). Returns once every kernel
  it built is on disk: a kernel's first realize may run its quick build while the optimized one,
  the build the disk holds, lands in the background."""
  totals = [0, 0, 0]
  errors = []
  lock = threading.Lock()
  work = list(indices)

  def client(part):
    try:
      sid = d.stub.CreateSession(pb.CreateSessionRequest()).session_id
      for i in part:
        r = d.stub.Realize(pb.RealizeRequest(session_id=sid, nodes=kernel_nodes(i), outputs=[3], want_data=True,
                                             release_nodes=[1, 2, 3]), timeout=120)
        got = np.frombuffer(r.results[0].data, np.float32)
        np.testing.assert_array_equal(got, np.arange(WIDTH, dtype=np.float32) * np.float32(i + 0.5))
        with lock:
          totals[0] += r.stats.kernels
          totals[1] += r.stats.compiled
          totals[2] += r.stats.cache_hits
      d.stub.CloseSession(pb.CloseSessionRequest(session_id=sid))
    except Exception as e:  # reported by the test thread
      errors.append(e)

  ts = [threading.Thread(target=client, args=(work[k::threads],)) for k in range(threads)]
  for t in ts:
    t.start()
  for t in ts:
    t.join()
  assert not errors, errors[0]
  d.wait_background_builds()
  return tuple(totals)


def check_entries(cache_dir: Path):
  """Every entry file is well formed (header, length, payload sha256); no temporary is left.
  Returns the entry paths."""
  entries = sorted((cache_dir / "v1").glob("*/*.pgk"))
  leftovers = [p for p in (cache_dir / "v1").rglob("*") if p.is_file() and p.suffix != ".pgk"]
  assert not leftovers, f"temporary files left behind: {leftovers[:3]}"
  for p in entries:
    data = p.read_bytes()
    assert data[:8] == b"PGKCACHE", p
    version, = struct.unpack_from("<I", data, 8)
    assert version == 1
    assert data[16:48].hex() == p.stem, f"{p}: key in header differs from the file name"
    length, = struct.unpack_from("<Q", data, 48)
    assert length == len(data) - 88, f"{p}: truncated"
    assert hashlib.sha256(data[88:]).digest() == data[56:88], f"{p}: payload does not match its hash"
  return entries


def test_two_daemons_share_a_directory_and_a_third_serves_it_without_compiling(tmp_path):
  cache_dir = tmp_path / "shared-cache"
  a = CacheDaemon(tmp_path, "a", cache_dir)
  b = CacheDaemon(tmp_path, "b", cache_dir)
  try:
    results = {}
    ta = threading.Thread(target=lambda: results.setdefault("a", realize_all(a, range(N_KERNELS))))
    tb = threading.Thread(target=lambda: results.setdefault("b", realize_all(b, reversed(range(N_KERNELS)))))
    ta.start(); tb.start(); ta.join(); tb.join()
    assert results["a"][0] == N_KERNELS and results["b"][0] == N_KERNELS
    # Each kernel was compiled at least once between the two (some by both: that race is allowed).
    assert results["a"][1] + results["b"][1] >= N_KERNELS
  finally:
    a.stop()
    b.stop()
  entries = check_entries(cache_dir)
  assert len(entries) == N_KERNELS

  # One entry truncated (a crash mid-copy, a full disk): detected, discarded and rebuilt.
  victim = entries[len(entries) // 2]
  os.truncate(victim, victim.stat().st_size // 3)

  c = CacheDaemon(tmp_path, "c", cache_dir)
  try:
    assert c.metric("polygradd_cache_entries") == N_KERNELS
    kernels, compiled, hits = realize_all(c, range(N_KERNELS))
    assert kernels == N_KERNELS
    assert compiled == 1, "only the truncated entry is recompiled"
    assert hits == N_KERNELS - 1
    assert c.metric('polygradd_kernel_cache_lookups_total{result="disk_hit"}') == N_KERNELS - 1
    assert c.metric("polygradd_cache_discarded_total") == 1
  finally:
    c.stop()
  assert len(check_entries(cache_dir)) == N_KERNELS  # rebuilt, well formed again


def test_export_then_import_warms_an_empty_cache(tmp_path):
  src = CacheDaemon(tmp_path, "src", tmp_path / "src-cache")
  try:
    assert realize_all(src, range(5), threads=1)[1] == 5
    with admin_client.Admin(src.address) as adm:
      stats = adm.cache_stats()
      assert stats.disk_entries == 5 and stats.directory == str(tmp_path / "src-cache")
      bundle = io.BytesIO()
      assert adm.export_cache(bundle) == 5
    assert "exported 5 entries" in admin_cli(src.address, "export", str(tmp_path / "b.pgb"))
    assert "disk_entries: 5" in admin_cli(src.address, "stats")
  finally:
    src.stop()
  dst = CacheDaemon(tmp_path, "dst", tmp_path / "dst-cache")
  try:
    with admin_client.Admin(dst.address) as adm:
      assert "received 5 entries, stored 5 new" in admin_cli(dst.address, "import", str(tmp_path / "b.pgb"))
      bundle.seek(0)
      assert adm.import_cache(bundle).stored == 0  # present already: kept as it is
      assert adm.cache_stats().disk_entries == 5
      # A tampered entry is refused, naming its key, and nothing is written for it.
      bundle.seek(0)
      entry = next(admin_client.read_bundle(bundle))
      bad = admin_pb2.CacheEntry(key="f" * 64, payload=entry.payload + b"x", payload_sha256=entry.payload_sha256)
      with pytest.raises(grpc.RpcError) as e:
        adm.stub.ImportCache(iter([bad]))
      assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "f" * 64 in e.value.details()
      with pytest.raises(grpc.RpcError) as e:
        adm.stub.ImportCache(iter([admin_pb2.CacheEntry(key="../../x", payload=b"1",
                                                        payload_sha256=hashlib.sha256(b"1").digest())]))
      assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
      assert adm.cache_stats().disk_entries == 5
    assert realize_all(dst, range(5), threads=1) == (5, 0, 5)
  finally:
    dst.stop()
  check_entries(tmp_path / "dst-cache")


def admin_cli(address: str, *args: str) -> str:
  """python -m polygrad.admin, as an operator runs it; returns its stdout."""
  env = dict(os.environ, PYTHONPATH=str(Path(admin_client.__file__).resolve().parents[1]))
  r = subprocess.run([sys.executable, "-m", "polygrad.admin", "--address", address, *args], capture_output=True,
                     text=True, timeout=120, env=env)
  assert r.returncode == 0, r.stderr
  return r.stdout


def prewarm_manifest(indices):
  m = admin_pb2.PrewarmManifest()
  for i in indices:
    g = m.graphs.add(name=f"k{i}", outputs=[3])
    nodes = kernel_nodes(i)
    nodes[0].buffer.ClearField("data")  # shape only: the daemon feeds zeros
    g.nodes.extend(nodes)
  return m


def test_prewarm_flag_holds_readiness_until_every_kernel_is_cached(tmp_path):
  from google.protobuf import text_format
  manifest = tmp_path / "manifest.txtpb"
  manifest.write_text(text_format.MessageToString(prewarm_manifest(range(1000, 1012))))
  # The prewarm's compiles are held until the test has seen the daemon not ready: readiness is
  # checked while the prewarm is certainly running, however fast the machine compiles.
  cc = HeldCompiler(tmp_path)
  cc.hold()
  d = CacheDaemon(tmp_path, "pw", tmp_path / "pw-cache", f"--prewarm={manifest}", held=cc)
  try:
    assert d.health() == 2, "SERVING while the prewarm's first compile is held"
    cc.wait_held(alive=d.proc)
    assert d.health() == 2, "SERVING while a prewarm compile is held"
    cc.release()
    wait_until(lambda: d.health() == 1, "SERVING after the prewarm", alive=d.proc)
    assert "prewarm finished" in d.log_path.read_text()
    assert d.metric('polygradd_kernel_builds_total{tier="quick"}') == 0, "prewarm builds final kernels only"
    assert realize_all(d, range(1000, 1012), threads=1) == (12, 0, 12)
    # The RPC form reports what it did: everything is cached now.
    with admin_client.Admin(d.address) as adm:
      r = adm.prewarm(prewarm_manifest(range(1000, 1003)), timeout=120)
      assert (r.graphs, r.kernels, r.compiled, r.cache_hits) == (3, 3, 0, 3)
      bad = prewarm_manifest([1])
      bad.graphs[0].nodes[2].src[:] = [1, 99]
      with pytest.raises(grpc.RpcError) as e:
        adm.prewarm(bad, timeout=60)
      assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "prewarm graph 0 (k1)" in e.value.details()
  finally:
    cc.release()
    d.stop()


def test_a_bad_prewarm_manifest_stops_the_daemon_at_start(tmp_path):
  manifest = tmp_path / "bad.txtpb"
  manifest.write_text("graphs { this is not a manifest")
  r = subprocess.run([str(daemon_binary()), "--listen=127.0.0.1:0", "--metrics-listen=", "--unix-socket=",
                      f"--cache-dir={tmp_path / 'c'}", f"--prewarm={manifest}"], capture_output=True, text=True,
                     timeout=60)
  assert r.returncode == 2 and "bad.txtpb" in r.stderr and "PrewarmManifest" in r.stderr


def test_kill_9_during_a_compile_then_a_restart_serves_right_answers(tmp_path):
  """kill -9 while a compile is in flight, with a temporary file such a kill leaves when it lands
  between an entry's write and its rename: the next daemon on the directory removes the
  temporary, serves right answers and leaves only well-formed entries."""
  cache_dir = tmp_path / "cache"
  held = HeldCompiler(tmp_path)
  # --quick-compile=off: the realize waits for the held compile (a quick build would answer it).
  a = CacheDaemon(tmp_path, "a", cache_dir, "--quick-compile=off", held=held)
  held.hold()
  outcome = {}

  def client():
    try:
      sid = a.stub.CreateSession(pb.CreateSessionRequest()).session_id
      a.stub.Realize(pb.RealizeRequest(session_id=sid, nodes=kernel_nodes(7), outputs=[3], want_data=True),
                     timeout=600)
      outcome["result"] = "answered"
    except grpc.RpcError as e:
      outcome["result"] = e.code()

  t = threading.Thread(target=client)
  t.start()
  held.wait_held(alive=a.proc)
  a.proc.kill()
  a.proc.wait()
  t.join()
  held.release()  # the orphaned compiler finishes into the dead daemon's temp dir
  a.channel.close()
  a._log.close()
  shutil.rmtree(a.sockdir, ignore_errors=True)
  assert outcome["result"] == grpc.StatusCode.UNAVAILABLE
  # What a kill between write and rename leaves (the writer's pid is in the name, and it is gone).
  key = "ab" + "0" * 62
  (cache_dir / "v1" / "ab").mkdir(parents=True, exist_ok=True)
  (cache_dir / "v1" / "ab" / f".{key}.{a.proc.pid}.12345.tmp").write_bytes(b"PGKCACHE half an entry")

  b = CacheDaemon(tmp_path, "b", cache_dir)
  try:
    kernels, compiled, hits = realize_all(b, range(10))  # checks every value
    assert kernels == 10
  finally:
    b.stop()
  assert len(check_entries(cache_dir)) == 10  # and no temporary is left


def test_signed_entries_load_only_with_the_key_that_signed_them(tmp_path):
  """--cache-key-file: a daemon signs its entries and loads only entries its key signed. An
  entry written without the key (or forged: a valid hash over any payload) and one signed with
  another key are discarded and recompiled, so write access to the directory alone no longer
  puts code into the daemon."""
  cache_dir = tmp_path / "cache"
  key_a, key_b = tmp_path / "a.key", tmp_path / "b.key"
  key_a.write_text("first deployment secret 0123456789\n")
  key_b.write_text("second deployment secret 987654321\n")
  n = 4

  def run(name, *extra):
    d = CacheDaemon(tmp_path, name, cache_dir, *extra)
    try:
      _, compiled, hits = realize_all(d, range(n), threads=2)
      return compiled, hits, d.metric("polygradd_cache_discarded_total")
    finally:
      d.stop()

  assert run("plain")[0] == n  # hashed entries, as every daemon without a key writes them
  assert run("signed", f"--cache-key-file={key_a}") == (n, 0, n)  # none signed by key a: rebuilt
  assert run("signed-again", f"--cache-key-file={key_a}") == (0, n, 0)
  assert run("other-key", f"--cache-key-file={key_b}") == (n, 0, n)
  assert run("no-key") == (n, 0, n)  # signed entries cannot be checked without a key


def test_a_short_cache_key_stops_the_daemon_at_start(tmp_path):
  key = tmp_path / "short.key"
  key.write_text("tiny\n")
  log = tmp_path / "short.log"
  with open(log, "wb") as out:
    proc = subprocess.run([str(daemon_binary()), "--listen=", "--metrics-listen=", "--unix-socket=" + str(tmp_path / "s.sock"),
                           f"--cache-dir={tmp_path / 'cache'}", f"--cache-key-file={key}"],
                          stdout=out, stderr=subprocess.STDOUT, timeout=WAIT_LIMIT)
  text = log.read_text()
  assert proc.returncode != 0, text
  assert "--cache-key-file" in text and "fewer than the 16" in text and "tiny" not in text, text
