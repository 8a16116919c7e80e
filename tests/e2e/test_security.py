"""The Python client against a real polygradd with bearer tokens and TLS/mTLS (certificates made by
openssl in a temporary directory): POLYGRAD_TOKEN / token=, POLYGRAD_TLS_CA, POLYGRAD_TLS_CERT/KEY."""
import re
import shutil
import subprocess

import grpc
import pytest

from conftest import daemon_binary, wait_until

from polygrad.connection import Connection
from polygrad.errors import PolygradError
from polygrad.v1 import polygrad_pb2 as pb

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789abc"

pytestmark = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")


def _openssl(*args, cwd):
  subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
  if shutil.which("openssl") is None:
    pytest.skip("openssl CLI not installed")
  ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  (tmp_path / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
  _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=ca", cwd=tmp_path)
  for name, extra in (("server", ["-extfile", "san.ext"]), ("client", [])):
    _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=tmp_path)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "1", *extra, cwd=tmp_path)
  return tmp_path


@pytest.fixture
def start_daemon(tmp_path):
  procs = []

  def start(*flags):
    (tmp_path / "tokens").write_text(f"# tenants\n{ALICE} alice\n{BOB} bob\n")
    log = tmp_path / f"d{len(procs)}.log"
    sock = tmp_path / f"d{len(procs)}.sock"
    proc = subprocess.Popen([str(daemon_binary()), "--metrics-listen=", f"--unix-socket={sock}",
                             f"--cache-dir={tmp_path / 'cache'}", f"--tokens-file={tmp_path / 'tokens'}", *flags],
                            stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    procs.append(proc)
    m = wait_until(lambda: re.search(r"listening grpc=(\S*)", log.read_text(errors="replace")),
                   f"polygradd's listening line in {log}", alive=proc)
    return m.group(1), f"unix:{sock}"

  yield start
  for p in procs:
    p.terminate()
    assert p.wait(timeout=30) == 0


def _roundtrip(conn: Connection) -> None:
  data = bytes(range(200))
  handle = conn.upload(pb.UINT8, (200,), memoryview(data))
  _, shape, got = conn.download(handle)
  assert tuple(shape) == (200,) and got == data


def test_token_from_argument_and_environment(start_daemon, monkeypatch):
  _, unix = start_daemon("--listen=")
  with pytest.raises(PolygradError) as e:
    Connection(unix, connect_timeout=10)
  assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
  with pytest.raises(PolygradError) as e:
    Connection(unix, connect_timeout=10, token="wrong-token-0123456789")
  assert e.value.code == grpc.StatusCode.UNAUTHENTICATED

  alice = Connection(unix, connect_timeout=10, token=ALICE)
  _roundtrip(alice)
  monkeypatch.setenv("POLYGRAD_TOKEN", BOB)
  bob = Connection(unix, connect_timeout=10)
  _roundtrip(bob)
  # Bob cannot reach alice's session, even knowing its id.
  with pytest.raises(PolygradError) as e:
    bob._call("Release", bob.stub.Release, pb.ReleaseRequest(session_id=alice.session_id))
  assert e.value.code == grpc.StatusCode.NOT_FOUND
  alice.close()
  bob.close()


def test_mutual_tls_with_token(start_daemon, pki, monkeypatch):
  tcp, _ = start_daemon("--listen=127.0.0.1:0", f"--tls-cert={pki / 'server.pem'}",
                        f"--tls-key={pki / 'server.key'}", f"--tls-client-ca={pki / 'ca.pem'}")
  monkeypatch.setenv("POLYGRAD_TLS_CA", str(pki / "ca.pem"))
  monkeypatch.setenv("POLYGRAD_TLS_SERVER_NAME", "localhost")
  # Without a client certificate the handshake fails.
  with pytest.raises(PolygradError):
    Connection(tcp, connect_timeout=3, token=ALICE)
  monkeypatch.setenv("POLYGRAD_TLS_CERT", str(pki / "client.pem"))
  monkeypatch.setenv("POLYGRAD_TLS_KEY", str(pki / "client.key"))
  conn = Connection(tcp, connect_timeout=10, token=ALICE)
  _roundtrip(conn)
  conn.close()
