"""A fleet of daemons. Sessions behind several daemons (docs/PROTOCOL.md, "Several daemons"): the
Python client given a list target, or a name with several addresses, pins each session to one
daemon and spreads sessions over them; a daemon that goes away loses only its own sessions, with
UNAVAILABLE saying so. Three real daemons on loopback TCP ports they pick themselves (for the
name: one port on 127.0.0.1-3). And the prewarm job's script (deploy/k8s/prewarm/prewarm.sh)."""
import os
import re
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest

from conftest import Daemon, daemon_binary, wait_until

from polygrad import connection as pc
from polygrad.connection import Connection, Endpoint, resolve_target
from polygrad.errors import PolygradConnectionError
from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

needs_daemon = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")


class TcpDaemon(Daemon):
  """A conftest Daemon that also listens on loopback TCP (a port of its choosing unless `listen`
  names one) and serves /metrics."""

  def __init__(self, workdir, listen: str = "127.0.0.1:0", *flags: str):
    workdir.mkdir()
    super().__init__(daemon_binary(), workdir, "127.0.0.1:0", f"--listen={listen}", *flags)
    try:
      self.wait_ready()
      line = wait_until(lambda: re.search(r"listening grpc=(\S+)", self.log_path.read_text(errors="replace")),
                        "polygradd's listening line", alive=self.proc)
      self.tcp = line.group(1)
      self.metrics = self.metrics_url()
    except BaseException:
      self.stop()
      raise

  def metric(self, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(self.metrics, timeout=30).read().decode()
    m = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0

  def knows_session(self, session_id: str) -> bool:
    """Asks this daemon directly (on its Unix socket) whether the session lives here."""
    with grpc.insecure_channel(self.address) as ch:
      try:
        pb_grpc.PolygradStub(ch).Release(pb.ReleaseRequest(session_id=session_id), timeout=30)
        return True
      except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e
        return False


@pytest.fixture
def fleet(tmp_path):
  daemons = []
  try:
    for i in range(3):
      daemons.append(TcpDaemon(tmp_path / f"d{i}"))
    yield daemons
  finally:
    for d in daemons:
      d.stop()


def _realize_twice(conn: Connection, seed: int) -> None:
  """Two realizes, the second reading the first's node: state only the session's daemon has."""
  x = np.arange(seed, seed + 3, dtype=np.float32)
  r = conn.realize([pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=x.tobytes(), shape=[3])),
                    pb.Node(id=2, op=pb.NEG, src=[1])], [2], True)
  assert np.frombuffer(r.results[0].data, np.float32).tolist() == (-x).tolist()
  r = conn.realize([pb.Node(id=3, op=pb.ADD, src=[2, 2])], [3], True)
  assert np.frombuffer(r.results[0].data, np.float32).tolist() == (-2 * x).tolist()


@needs_daemon
def test_sessions_spread_over_daemons_and_stay_on_one(fleet):
  target = "ipv4:" + ",".join(d.tcp for d in fleet)
  conns = [Connection(address=target, connect_timeout=60) for _ in range(30)]
  try:
    for i, c in enumerate(conns):
      _realize_twice(c, i)
    by_daemon = {d.tcp: [c for c in conns if c.address == d.tcp] for d in fleet}
    assert sum(len(v) for v in by_daemon.values()) == 30, [c.address for c in conns]
    # Round robin: each daemon gets a third, whatever the process-wide starting point was.
    assert sorted(len(v) for v in by_daemon.values()) == [10, 10, 10]
    for d in fleet:
      mine = by_daemon[d.tcp]
      # Each session exists on its own daemon only, so none of its calls went elsewhere...
      for c in mine:
        assert d.knows_session(c.session_id)
        assert not any(o.knows_session(c.session_id) for o in fleet if o is not d)
      # ...and the daemon served exactly its sessions' calls: two realizes each, no stray ones.
      assert d.metric("polygradd_sessions_created_total") == len(mine)
      assert d.metric("polygradd_requests_total", '{code="OK",method="Realize"}') == 2 * len(mine)
  finally:
    for c in conns:
      c.close()


@needs_daemon
def test_a_daemon_that_goes_away_loses_only_its_sessions(fleet):
  target = ",".join(d.tcp for d in fleet)  # the plain comma list: same rule as ipv4:
  conns = [Connection(address=target, connect_timeout=60) for _ in range(6)]
  try:
    for i, c in enumerate(conns):
      _realize_twice(c, i)
    dead, live = fleet[0], fleet[1:]
    dead.proc.kill()
    dead.proc.wait()
    for i, c in enumerate(conns):
      if c.address == dead.tcp:
        with pytest.raises(PolygradConnectionError) as e:
          c.realize([pb.Node(id=4, op=pb.NEG, src=[3])], [4], True)
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert f"the session on {dead.tcp} is lost" in str(e.value), str(e.value)
      else:
        r = c.realize([pb.Node(id=4, op=pb.NEG, src=[3])], [4], True)
        assert np.frombuffer(r.results[0].data, np.float32).tolist() == (2 * np.arange(i, i + 3)).tolist()
    assert sum(c.address == dead.tcp for c in conns) == 2
    # New sessions go to the daemons that answer: the lost one is tried last for a while.
    fresh = [Connection(address=target, connect_timeout=60) for _ in range(4)]
    try:
      assert {c.address for c in fresh} == {d.tcp for d in live}
      for i, c in enumerate(fresh):
        _realize_twice(c, i)
    finally:
      for c in fresh:
        c.close()
  finally:
    for c in conns:
      c.close()


@needs_daemon
def test_a_daemon_that_forgot_the_session_is_a_lost_session_not_not_found(fleet):
  d = fleet[0]
  conn = Connection(address=d.tcp, connect_timeout=60)
  try:
    _realize_twice(conn, 0)
    # What a restarted daemon at the same address (or idle expiry) leaves: no such session there.
    with grpc.insecure_channel(d.address) as ch:
      pb_grpc.PolygradStub(ch).CloseSession(pb.CloseSessionRequest(session_id=conn.session_id), timeout=30)
    with pytest.raises(PolygradConnectionError) as e:
      conn.realize([pb.Node(id=4, op=pb.NEG, src=[3])], [4], True)
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert str(e.value).startswith(f"the session on {d.tcp} is lost: the daemon there no longer knows it")
  finally:
    conn.close()


FLEET_NAME = "polygradd.fleet.test"


def _one_name_fleet(tmp_path, monkeypatch, *flags):
  """Three daemons on 127.0.0.1-3 at one port, and FLEET_NAME resolving to the three addresses
  (a headless Service's DNS answer) for this process's resolver."""
  daemons = [TcpDaemon(tmp_path / "d0", "127.0.0.1:0", *flags)]
  port = daemons[0].tcp.rsplit(":", 1)[1]
  try:
    for i in (2, 3):
      daemons.append(TcpDaemon(tmp_path / f"d{i}", f"127.0.0.{i}:{port}", *flags))
  except BaseException:
    for d in daemons:
      d.stop()
    raise
  real = socket.getaddrinfo

  def getaddrinfo(host, *a, **kw):
    if host != FLEET_NAME:
      return real(host, *a, **kw)
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (f"127.0.0.{i}", int(port))) for i in (3, 1, 2)]
  monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
  return daemons, f"{FLEET_NAME}:{port}"


def _spread_and_pinned(daemons, target, n=9):
  conns = []
  try:
    for i in range(n):
      conns.append(Connection(address=target, connect_timeout=60))
      _realize_twice(conns[-1], i)
    assert sorted(c.address for c in conns) == sorted(d.tcp for d in daemons for _ in range(n // 3))
    for d in daemons:
      assert all(d.knows_session(c.session_id) == (c.address == d.tcp) for c in conns)
  finally:
    for c in conns:
      c.close()


@needs_daemon
def test_a_name_with_several_addresses_spreads_sessions(tmp_path, monkeypatch):
  daemons, target = _one_name_fleet(tmp_path, monkeypatch)
  try:
    _spread_and_pinned(daemons, target)
  finally:
    for d in daemons:
      d.stop()


@needs_daemon
def test_tls_checks_the_resolved_name_not_the_address(tmp_path, monkeypatch):
  if shutil.which("openssl") is None:
    pytest.skip("openssl CLI not installed")
  pki = tmp_path / "pki"
  pki.mkdir()
  # A certificate for the name only: a channel that checked the IP it dials would fail.
  (pki / "san.ext").write_text(f"subjectAltName=DNS:{FLEET_NAME}\n")
  ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  for args in (["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=ca"],
               ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server"],
               ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", "1", "-extfile", "san.ext"]):
    subprocess.run(["openssl", *args], cwd=pki, check=True, capture_output=True)
  monkeypatch.setenv("POLYGRAD_TLS_CA", str(pki / "ca.pem"))
  monkeypatch.delenv("POLYGRAD_TLS_SERVER_NAME", raising=False)
  daemons, target = _one_name_fleet(tmp_path, monkeypatch, f"--tls-cert={pki / 'server.pem'}",
                                    f"--tls-key={pki / 'server.key'}")
  try:
    _spread_and_pinned(daemons, target)
  finally:
    for d in daemons:
      d.stop()


# --- warming a fleet: deploy/k8s/prewarm/prewarm.sh --------------------------------------------------

PREWARM = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "prewarm"


def _run_prewarm(tmp_path, manifest, *flags):
  bindir = tmp_path / "bin"
  bindir.mkdir()
  (bindir / "polygradd").symlink_to(daemon_binary())
  env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", TMPDIR=str(tmp_path))
  return subprocess.run(["/bin/sh", str(PREWARM / "prewarm.sh"), str(manifest), *flags], env=env, capture_output=True,
                        text=True, timeout=600)


@needs_daemon
def test_the_prewarm_job_compiles_the_deployed_manifest_and_exits(tmp_path):
  r = _run_prewarm(tmp_path, PREWARM / "manifest.txtpb")
  assert r.returncode == 0, r.stdout + r.stderr
  m = re.search(r"prewarm finished\"? graphs=(\d+) kernels=(\d+) compiled=(\d+)", r.stdout)
  assert m and int(m.group(1)) == 2 and int(m.group(3)) == int(m.group(2)) > 0, r.stdout
  assert not list(tmp_path.glob("tmp.*")), "prewarm.sh left its work directory"


@needs_daemon
@pytest.mark.parametrize("manifest", ["bad graph", "missing"])
def test_the_prewarm_job_fails_when_its_manifest_does(tmp_path, manifest):
  path = tmp_path / "m.txtpb"
  if manifest == "bad graph":
    path.write_text('graphs { name: "bad" nodes { id: 1 op: NEG src: 5 } outputs: 1 }\n')
  r = _run_prewarm(tmp_path, path)
  assert r.returncode == 1, r.stdout + r.stderr


# --- resolving a target (no daemon) ----------------------------------------------------------------

def _fake_dns(monkeypatch, answers):
  def getaddrinfo(host, port, *a, **kw):
    if host not in answers:
      raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return [(fam, socket.SOCK_STREAM, 6, "", (ip, port) if fam == socket.AF_INET else (ip, port, 0, 0))
            for fam, ip in answers[host]]
  monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_name_with_several_addresses_is_one_endpoint_each(monkeypatch):
  _fake_dns(monkeypatch, {"polygradd.ns.svc": [(socket.AF_INET, "10.0.0.7"), (socket.AF_INET, "10.0.0.5"),
                                               (socket.AF_INET, "10.0.0.7")]})
  want = [Endpoint("10.0.0.5:50051", "polygradd.ns.svc"), Endpoint("10.0.0.7:50051", "polygradd.ns.svc")]
  assert resolve_target("polygradd.ns.svc:50051") == want
  assert resolve_target("dns:///polygradd.ns.svc:50051") == want


def test_targets_that_name_one_daemon_stay_as_written(monkeypatch):
  # localhost answers in two families: one daemon, not two.
  _fake_dns(monkeypatch, {"localhost": [(socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")],
                          "box": [(socket.AF_INET, "10.1.1.1")]})
  for t in ("localhost:50051", "box:50051", "dns:///box:50051", "unix:/run/p.sock", "127.0.0.1:5",
            "ipv4:127.0.0.1:5", "[::1]:5", "xds:///polygradd", "nowhere.invalid:1"):
    assert resolve_target(t) == [Endpoint(t)], t


def test_lists_give_one_endpoint_per_item(monkeypatch):
  _fake_dns(monkeypatch, {"a": [(socket.AF_INET, "10.0.0.1")], "b": [(socket.AF_INET, "10.0.0.2")]})
  assert resolve_target("ipv4:127.0.0.1:5001,127.0.0.1:5002") == [Endpoint("127.0.0.1:5001"), Endpoint("127.0.0.1:5002")]
  assert resolve_target("ipv6:[::1]:5001,[::1]:5002") == [Endpoint("[::1]:5001"), Endpoint("[::1]:5002")]
  assert resolve_target("a:1, b:1,a:1") == [Endpoint("a:1"), Endpoint("b:1")]


def test_new_sessions_take_endpoints_in_turn_and_suspects_last(monkeypatch):
  eps = [Endpoint("e0:1"), Endpoint("e1:1"), Endpoint("e2:1")]
  monkeypatch.setattr(pc, "_suspect", {})
  firsts = [pc._endpoint_order(eps)[0] for _ in range(6)]
  assert sorted(firsts, key=eps.index) == [eps[0], eps[0], eps[1], eps[1], eps[2], eps[2]]
  pc._suspect["e1:1"] = pc.time.monotonic()
  for _ in range(3):
    assert pc._endpoint_order(eps)[-1] == eps[1]
