"""The gRPC-Web port (--web-listen) against a real polygradd: unary and server-streaming calls in
the gRPC-Web framing over plain HTTP/1.1 (http.client, no gRPC library), the status in the body's
trailer frame, CORS restricted to --web-allow-origin, bearer tokens, and the adversarial cases
the gRPC port meets (bad frames, undecodable messages, huge bodies, slow clients), each with the
daemon serving afterwards and nothing left on it."""
import base64
import http.client
import re
import socket
import struct
import urllib.request

import grpc
import numpy as np
import pytest

from conftest import WAIT_LIMIT, Daemon, daemon_binary, wait_until
from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc

TOKEN = "web-token-0123456789abcdef"
ALLOWED = "http://app.example:8080"


def web_port(d: Daemon) -> int:
  line = wait_until(lambda: re.search(r"^\S+ info listening .*$", d.log_path.read_text(errors="replace"), re.M),
                    "polygradd's listening line", alive=d.proc)
  m = re.search(r'web="?https?://[^"\s]*:(\d+)', line.group(0))
  assert m, f"no web address in the listening line: {line.group(0)}"
  return int(m.group(1))


@pytest.fixture
def web(tmp_path):
  """A daemon with the gRPC-Web port on loopback, /metrics, and one allowed foreign origin."""
  d = Daemon(daemon_binary(), tmp_path, "127.0.0.1:0", "--web-listen=127.0.0.1:0",
             f"--web-allow-origin={ALLOWED}", "--max-message-bytes=4194304")
  try:
    d.wait_ready()
    d.web_port = web_port(d)
    yield d
  finally:
    d.stop()


def frame(message: bytes, flag: int = 0) -> bytes:
  return struct.pack(">BI", flag, len(message)) + message


def parse(body: bytes):
  """(messages, trailers) of a gRPC-Web response body; fails on anything malformed."""
  messages, trailers, pos = [], None, 0
  while pos < len(body):
    assert trailers is None, "a frame after the trailer frame"
    flag, n = struct.unpack(">BI", body[pos:pos + 5])
    payload = body[pos + 5:pos + 5 + n]
    assert len(payload) == n, "a truncated frame"
    pos += 5 + n
    if flag & 0x80:
      trailers = dict(line.split(":", 1) for line in payload.decode().split("\r\n") if line)
    else:
      messages.append(payload)
  assert trailers is not None, "no trailer frame"
  return messages, trailers


def post(port: int, method: str, body: bytes, headers=None, service="polygrad.v1.Polygrad"):
  """(HTTP status, response headers, body bytes) of one POST on a fresh connection."""
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_LIMIT)
  try:
    conn.request("POST", f"/{service}/{method}", body=body,
                 headers={"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1", **(headers or {})})
    r = conn.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
  finally:
    conn.close()


def call(port: int, method: str, request, response_type=None, headers=None, service="polygrad.v1.Polygrad"):
  """(messages parsed as response_type, grpc-status, grpc-message) of a call."""
  status, _, body = post(port, method, frame(request.SerializeToString()), headers, service)
  assert status == 200, body
  messages, trailers = parse(body)
  parsed = [response_type.FromString(m) for m in messages] if response_type else messages
  return parsed, int(trailers["grpc-status"]), trailers.get("grpc-message", "")


def metric(d: Daemon, pattern: str) -> float:
  text = urllib.request.urlopen(d.metrics_url(), timeout=WAIT_LIMIT).read().decode()
  return sum(float(v) for v in re.findall(r"^" + pattern + r" (\S+)$", text, re.M))


def const_node(nid, value, shape):
  return pb.Node(id=nid, op=pb.CONST, dtype=pb.FLOAT32, constant=pb.Constant(float_value=value, shape=shape))


def session(port, headers=None) -> str:
  (resp,), code, message = call(port, "CreateSession", pb.CreateSessionRequest(), pb.CreateSessionResponse, headers)
  assert code == 0, message
  return resp.session_id


def test_unary_and_streaming_calls(web):
  port = web.web_port
  (info,), code, _ = call(port, "GetInfo", pb.GetInfoRequest(), pb.ServerInfo)
  assert code == 0 and info.version
  sid = session(port)
  data = np.arange(12, dtype=np.float32).reshape(3, 4)
  req = pb.RealizeRequest(session_id=sid, outputs=[3], want_data=True, nodes=[
      pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=data.tobytes(), shape=[3, 4])),
      const_node(2, 0.5, [3, 4]),
      pb.Node(id=3, op=pb.MUL, src=[1, 2])])
  (resp,), code, message = call(port, "Realize", req, pb.RealizeResponse)
  assert code == 0, message
  got = np.frombuffer(resp.results[0].data, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(got, data * 0.5)
  # Download is server-streaming: several chunks, then the trailer.
  big = pb.RealizeRequest(session_id=sid, outputs=[7], nodes=[
      pb.Node(id=6, op=pb.RESHAPE, src=[3], shape=pb.Shape(dims=[3, 4, 1])),
      pb.Node(id=7, op=pb.EXPAND, src=[6], shape=pb.Shape(dims=[3, 4, 100000]))])
  (resp_big,), code, message = call(port, "Realize", big, pb.RealizeResponse)
  assert code == 0, message
  chunks, code, message = call(port, "Download", pb.DownloadRequest(session_id=sid, handle=resp_big.results[0].handle,
                                                                    chunk_bytes=1 << 20), pb.DownloadChunk)
  assert code == 0, message
  assert len(chunks) == 5 and chunks[-1].last
  np.testing.assert_array_equal(np.frombuffer(b"".join(c.data for c in chunks), dtype=np.float32),
                                np.repeat((data * 0.5).ravel(), 100000))
  _, code, message = call(port, "CloseSession", pb.CloseSessionRequest(session_id=sid))
  assert code == 0, message
  assert metric(web, r'polygradd_transport_requests_total\{[^}]*code="OK"[^}]*method="Polygrad.Download"[^}]*'
                     r'transport="web"\}') == 1
  assert metric(web, r"polygradd_buffers") == 0
  assert metric(web, r"polygradd_sessions") == 0


TEXT = {"Content-Type": "application/grpc-web-text+proto"}


def text_call(port: int, method: str, body: bytes, response_type=None):
  """A call in grpc-web-text: `body` is sent as given (base64); the response must be base64 pieces,
  each a whole number of 4-character groups, whose bytes are a valid gRPC-Web response."""
  status, headers, out = post(port, method, body, TEXT)
  assert status == 200, out
  assert headers["content-type"] == "application/grpc-web-text+proto"
  raw = b"".join(base64.b64decode(p, validate=True) for p in re.findall(rb"[A-Za-z0-9+/]+=*", out))
  messages, trailers = parse(raw)
  parsed = [response_type.FromString(m) for m in messages] if response_type else messages
  return parsed, int(trailers["grpc-status"]), trailers.get("grpc-message", "")


def test_text_mode_is_base64_both_ways(web):
  port = web.web_port
  (info,), code, _ = text_call(port, "GetInfo", base64.b64encode(frame(pb.GetInfoRequest().SerializeToString())),
                               pb.ServerInfo)
  assert code == 0 and info.version
  (resp,), code, _ = text_call(port, "CreateSession", base64.b64encode(frame(b"")), pb.CreateSessionResponse)
  assert code == 0
  sid = resp.session_id
  data = np.arange(4, dtype=np.float32)
  req = frame(pb.RealizeRequest(session_id=sid, outputs=[2], nodes=[
      pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(data=data.tobytes(), shape=[4, 1])),
      pb.Node(id=2, op=pb.EXPAND, src=[1], shape=pb.Shape(dims=[4, 100000]))]).SerializeToString())
  # A body in two padded pieces, as a client encoding chunk by chunk sends it.
  (realized,), code, message = text_call(port, "Realize", base64.b64encode(req[:7]) + base64.b64encode(req[7:]),
                                         pb.RealizeResponse)
  assert code == 0, message
  # A stream: every DownloadChunk frame and the trailer come as pieces of their own.
  status, _, out = post(port, "Download", base64.b64encode(frame(pb.DownloadRequest(
      session_id=sid, handle=realized.results[0].handle, chunk_bytes=1 << 18).SerializeToString())), TEXT)
  assert status == 200
  pieces = re.findall(rb"[A-Za-z0-9+/]+=*", out)
  assert len(pieces) >= 4, out
  chunks, code, _ = text_call(port, "Download", base64.b64encode(frame(pb.DownloadRequest(
      session_id=sid, handle=realized.results[0].handle, chunk_bytes=1 << 18).SerializeToString())), pb.DownloadChunk)
  assert code == 0 and chunks[-1].last
  np.testing.assert_array_equal(np.frombuffer(b"".join(c.data for c in chunks), dtype=np.float32),
                                np.repeat(data, 100000))
  # Not base64; base64 of a bad frame; a base64 body past the bound (read, dropped, refused).
  _, code, message = text_call(port, "GetInfo", b"frame!!")
  assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "base64" in message, message
  _, code, message = text_call(port, "GetInfo", base64.b64encode(b"\x00\x00\x00\x00\x09abc"))
  assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "says 9 bytes" in message, message
  # The bound is max_message_bytes before encoding: a 3.5 MiB part is 4.7 MB as base64, accepted.
  big = np.ones(7 << 17, dtype=np.float32)
  (opened,), code, message = text_call(port, "OpenUpload", base64.b64encode(frame(pb.UploadHeader(
      session_id=sid, dtype=pb.FLOAT32, shape=[big.size]).SerializeToString())), pb.OpenUploadResponse)
  assert code == 0, message
  (done,), code, message = text_call(port, "UploadPart", base64.b64encode(frame(pb.UploadPartRequest(
      session_id=sid, upload_id=opened.upload_id, offset=0, data=big.tobytes(), last=True).SerializeToString())),
                                     pb.UploadResponse)
  assert code == 0 and done.bytes == big.nbytes, message
  # One byte past the encoded bound is refused from the headers alone.
  with socket.create_connection(("127.0.0.1", port), timeout=WAIT_LIMIT) as s:
    s.sendall(b"POST /polygrad.v1.Polygrad/Realize HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/grpc-web-text\r\nContent-Length: %d\r\n\r\n" % ((4194304 + 5 + 2) // 3 * 4 + 1))
    head = read_until(s, b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    body = head.split(b"\r\n\r\n", 1)[1]
    while len(body) < length:
      body += s.recv(65536)
  _, trailers = parse(base64.b64decode(body))
  assert trailers["grpc-status"] == "8" and "max_message_bytes 4194304" in trailers["grpc-message"], trailers
  _, code, message = text_call(port, "Release", base64.b64encode(frame(pb.ReleaseRequest(
      session_id=sid, handles=[done.handle]).SerializeToString())))
  assert code == 0, message
  _, code, message = text_call(port, "CloseSession", base64.b64encode(frame(
      pb.CloseSessionRequest(session_id=sid).SerializeToString())))
  assert code == 0, message
  assert metric(web, r"polygradd_buffers") == 0


def test_errors_are_statuses_and_the_daemon_keeps_serving(web):
  port = web.web_port
  sid = session(port)
  # A graph error names the node, as on the gRPC port.
  bad = pb.RealizeRequest(session_id=sid, outputs=[2], nodes=[const_node(1, 1.0, [2]),
                                                            pb.Node(id=2, op=pb.ADD, src=[1, 999999])])
  _, code, message = call(port, "Realize", bad)
  assert code != 0 and "999999" in message, message
  # The same request on the gRPC port, in the same session (one service behind both), fails alike.
  with grpc.insecure_channel(web.address) as ch:
    with pytest.raises(grpc.RpcError) as e:
      pb_grpc.PolygradStub(ch).Realize(bad, timeout=WAIT_LIMIT)
  assert (e.value.code().value[0], e.value.details()) == (code, message)
  # Bytes that are no RealizeRequest.
  status, _, body = post(port, "Realize", frame(b"\xff\xff\xff\xff"))
  assert status == 200 and int(parse(body)[1]["grpc-status"]) == 3
  # A frame whose length lies, two frames, a compressed frame, a trailer frame as request.
  msg = pb.GetInfoRequest().SerializeToString()
  for body_bytes, want in ((struct.pack(">BI", 0, 100) + b"x", 3), (frame(msg) + frame(msg), 3),
                           (frame(msg, flag=1), 12), (frame(b"", flag=0x80), 3), (b"", 3)):
    status, _, body = post(port, "GetInfo", body_bytes)
    assert status == 200
    assert int(parse(body)[1]["grpc-status"]) == want, (body_bytes[:12], parse(body)[1])
  # No such method; a client-streaming method; another service.
  for method, service in (("NoSuchMethod", "polygrad.v1.Polygrad"), ("Upload", "polygrad.v1.Polygrad"),
                          ("Check", "grpc.health.v1.Health")):
    _, code, message = call(port, method, pb.GetInfoRequest(), service=service)
    assert code == 12, (method, message)
  # A method path far past any bound is echoed bounded.
  _, code, message = call(port, "x" * 3000, pb.GetInfoRequest())
  assert code == 12 and len(message) < 400
  # Not gRPC-Web at all.
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_LIMIT)
  conn.request("GET", "/")
  assert conn.getresponse().status == 405
  conn.close()
  status, _, _ = post(port, "GetInfo", frame(msg), {"Content-Type": "application/json"})
  assert status == 415
  _, code, _ = call(port, "GetInfo", pb.GetInfoRequest(), pb.ServerInfo, {"grpc-timeout": "soon"})
  assert code == 3
  # Still serving, nothing left behind.
  (info,), code, _ = call(port, "GetInfo", pb.GetInfoRequest(), pb.ServerInfo)
  assert code == 0
  _, code, _ = call(port, "CloseSession", pb.CloseSessionRequest(session_id=sid))
  assert code == 0
  assert metric(web, r"polygradd_buffers") == 0
  assert web.proc.poll() is None


def read_until(s: socket.socket, marker: bytes) -> bytes:
  """What the daemon sent on `s` until `marker` (the connection stays open: keep-alive), or until it
  closed the connection."""
  reply = b""
  while marker not in reply:
    chunk = s.recv(65536)
    if not chunk:
      break
    reply += chunk
  return reply


def test_huge_bodies_are_refused_without_being_read(web):
  port = web.web_port
  # Announced: refused from the headers alone (the body is never sent).
  with socket.create_connection(("127.0.0.1", port), timeout=WAIT_LIMIT) as s:
    s.sendall(b"POST /polygrad.v1.Polygrad/Realize HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/grpc-web+proto\r\nContent-Length: 1073741824\r\n\r\n")
    reply = read_until(s, b"max_message_bytes 4194304\r\n")
  assert b"grpc-status:8" in reply and b"max_message_bytes 4194304" in reply
  # Sent in chunks without a length: read to its end (dropped past the bound), then refused.
  big = frame(b"\0" * (5 << 20))
  with socket.create_connection(("127.0.0.1", port), timeout=WAIT_LIMIT) as s:
    s.sendall(b"POST /polygrad.v1.Polygrad/Realize HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/grpc-web+proto\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(big), 65536):
      part = big[i:i + 65536]
      s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    reply = read_until(s, b"max_message_bytes 4194304\r\n")
  assert b"grpc-status:8" in reply and b"exceeds max_message_bytes 4194304" in reply
  (info,), code, _ = call(port, "GetInfo", pb.GetInfoRequest(), pb.ServerInfo)
  assert code == 0


def test_a_slow_client_does_not_hold_up_others(web):
  """A connection that sends half a request and stalls keeps its own thread; calls on other
  connections are answered meanwhile."""
  port = web.web_port
  with socket.create_connection(("127.0.0.1", port), timeout=WAIT_LIMIT) as stalled:
    stalled.sendall(b"POST /polygrad.v1.Polygrad/GetInfo HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/grpc-web+proto\r\nContent-Length: 5\r\n\r\n\0")
    for _ in range(3):
      (info,), code, _ = call(port, "GetInfo", pb.GetInfoRequest(), pb.ServerInfo)
      assert code == 0
  assert web.proc.poll() is None


def test_cors_is_limited_to_the_allowed_origins(web):
  port = web.web_port

  def preflight(origin):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_LIMIT)
    conn.request("OPTIONS", "/polygrad.v1.Polygrad/GetInfo",
                 headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                          "Access-Control-Request-Headers": "content-type,x-grpc-web"})
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return out

  status, headers = preflight(ALLOWED)
  assert status == 204
  assert headers["access-control-allow-origin"] == ALLOWED
  assert "POST" in headers["access-control-allow-methods"]
  assert "x-grpc-web" in headers["access-control-allow-headers"]
  status, headers = preflight("http://evil.example")
  assert status == 403 and "access-control-allow-origin" not in headers

  msg = frame(pb.GetInfoRequest().SerializeToString())
  status, headers, body = post(port, "GetInfo", msg, {"Origin": ALLOWED})
  assert status == 200 and headers["access-control-allow-origin"] == ALLOWED
  assert "grpc-status" in headers["access-control-expose-headers"]
  status, headers, body = post(port, "GetInfo", msg, {"Origin": "http://evil.example"})
  assert status == 403 and b"not allowed" in body
  # The page the web port itself serves is same-origin: allowed without being listed.
  status, headers, _ = post(port, "GetInfo", msg, {"Origin": f"http://127.0.0.1:{port}", "Host": f"127.0.0.1:{port}"})
  assert status == 200


def test_tokens_are_required_on_the_web_port(tmp_path):
  (tmp_path / "tokens").write_text(f"{TOKEN} alice\n")
  d = Daemon(daemon_binary(), tmp_path, "127.0.0.1:0", "--web-listen=127.0.0.1:0",
             f"--tokens-file={tmp_path / 'tokens'}")
  try:
    port = web_port(d)  # waits for the listening line (the unix socket needs a token to probe)
    _, code, message = call(port, "GetInfo", pb.GetInfoRequest())
    assert code == 16 and "token" in message
    _, code, message = call(port, "GetInfo", pb.GetInfoRequest(), headers={"Authorization": "Bearer wrong-token-0000000"})
    assert code == 16 and "unknown token" in message
    _, code, message = call(port, "CacheStats", pb.GetInfoRequest(), headers={"Authorization": f"Bearer {TOKEN}"},
                            service="polygrad.v1.PolygradAdmin")
    assert code == 7, message  # an admin method needs an admin token
    auth = {"Authorization": f"Bearer {TOKEN}"}
    sid = session(port, auth)
    (resp,), code, message = call(port, "Realize", pb.RealizeRequest(session_id=sid, outputs=[1], want_data=True,
                                                                    nodes=[const_node(1, 2.0, [2])]),
                                  pb.RealizeResponse, auth)
    assert code == 0, message
    assert np.frombuffer(resp.results[0].data, dtype=np.float32).tolist() == [2.0, 2.0]
    _, code, _ = call(port, "CloseSession", pb.CloseSessionRequest(session_id=sid), headers=auth)
    assert code == 0
    assert metric(d, r'polygradd_auth_rejections_total\{[^}]*\}') >= 2
  finally:
    d.stop()


def test_a_remote_web_port_needs_tls(tmp_path):
  d = Daemon(daemon_binary(), tmp_path, "", "--web-listen=0.0.0.0:0")
  try:
    assert d.proc.wait(timeout=WAIT_LIMIT) != 0
    assert "browsers off this host need HTTPS" in d.log_tail()
  finally:
    d.stop()
  (tmp_path / "b").mkdir()
  d = Daemon(daemon_binary(), tmp_path / "b", "", "--web-allow-origin=http://x.example/path", "--web-listen=127.0.0.1:0")
  try:
    assert d.proc.wait(timeout=WAIT_LIMIT) != 0
    assert "is not an origin" in d.log_tail()
  finally:
    d.stop()


def test_uploads_in_parts(web):
  """OpenUpload and UploadPart: Upload's unary form, the way a browser sends a tensor larger
  than one message; mistakes abandon the upload, and nothing is left once the session closes."""
  port = web.web_port
  sid = session(port)
  data = np.random.default_rng(0).standard_normal((3, 1000, 500)).astype(np.float32)  # 6 MB: past 4 MiB
  raw = data.tobytes()
  (opened,), code, message = call(port, "OpenUpload", pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32,
                                                                      shape=list(data.shape)), pb.OpenUploadResponse)
  assert code == 0, message
  part = 1 << 20
  for off in range(0, len(raw), part):
    (resp,), code, message = call(port, "UploadPart", pb.UploadPartRequest(
        session_id=sid, upload_id=opened.upload_id, offset=off, data=raw[off:off + part],
        last=off + part >= len(raw)), pb.UploadResponse)
    assert code == 0, message
  assert resp.handle and resp.bytes == len(raw)
  req = pb.RealizeRequest(session_id=sid, outputs=[2], want_data=True, nodes=[
      pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(handle=resp.handle, shape=list(data.shape))),
      pb.Node(id=2, op=pb.REDUCE_SUM, src=[1], axes=pb.Axes(axes=[0, 1, 2]))])
  (out,), code, message = call(port, "Realize", req, pb.RealizeResponse)
  assert code == 0, message
  np.testing.assert_allclose(np.frombuffer(out.results[0].data, dtype=np.float32)[0], data.sum(dtype=np.float64),
                             rtol=1e-4)
  # Mistakes: a part out of order abandons its upload; an unknown id; too much data; too many open.
  (a,), _, _ = call(port, "OpenUpload", pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32, shape=[4]),
                    pb.OpenUploadResponse)
  _, code, message = call(port, "UploadPart", pb.UploadPartRequest(session_id=sid, upload_id=a.upload_id, offset=8,
                                                                   data=b"\0" * 8))
  assert code == 3 and "in order" in message
  _, code, message = call(port, "UploadPart", pb.UploadPartRequest(session_id=sid, upload_id=a.upload_id, offset=0,
                                                                   data=b"\0" * 16, last=True))
  assert code == 5 and "not open" in message
  (b,), _, _ = call(port, "OpenUpload", pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32, shape=[4]),
                    pb.OpenUploadResponse)
  _, code, message = call(port, "UploadPart", pb.UploadPartRequest(session_id=sid, upload_id=b.upload_id, offset=0,
                                                                   data=b"\0" * 20, last=True))
  assert code == 3 and "16 bytes" in message
  _, code, message = call(port, "UploadPart", pb.UploadPartRequest(session_id=sid, upload_id=999, offset=0, data=b""))
  assert code == 5
  for _ in range(16):
    _, code, message = call(port, "OpenUpload", pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32, shape=[1 << 16]))
    assert code == 0, message
  _, code, message = call(port, "OpenUpload", pb.UploadHeader(session_id=sid, dtype=pb.FLOAT32, shape=[4]))
  assert code == 8 and "16 uploads open" in message
  # Sixteen open uploads (4 MiB) and the realized tensor go with the session.
  _, code, _ = call(port, "CloseSession", pb.CloseSessionRequest(session_id=sid))
  assert code == 0
  assert metric(web, r"polygradd_buffers") == 0
