#!/usr/bin/python3
"""A reference polygradd written with numpy, for developing the clients without the real daemon.

It speaks the unary RPCs of polygrad.v1 and enforces the wire rules strictly (known sources only,
equal shapes and dtypes for elementwise ops, a stated dtype must match the derived one), so a
client that passes against it sends well-formed graphs. Not a replacement for the real daemon:
run the e2e suite against it with POLYGRAD_TEST_DAEMON=tests/e2e/fake_polygradd.py.

Flags mirror polygradd's: --unix-socket=PATH (required here), --listen=, --metrics-listen=,
--cache-dir= (ignored), --max-inline-bytes=N.
"""
import itertools
import os
import signal
import sys
import threading
import uuid
from concurrent import futures

import grpc
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from polygrad.v1 import polygrad_pb2 as pb, polygrad_pb2_grpc as pb_grpc  # noqa: E402

NP = {pb.BOOL: np.bool_, pb.INT8: np.int8, pb.INT16: np.int16, pb.INT32: np.int32, pb.INT64: np.int64,
      pb.UINT8: np.uint8, pb.UINT16: np.uint16, pb.UINT32: np.uint32, pb.UINT64: np.uint64,
      pb.FLOAT16: np.float16, pb.FLOAT32: np.float32, pb.FLOAT64: np.float64}
FLOATS = {pb.FLOAT16, pb.FLOAT32, pb.FLOAT64}


class BadRequest(Exception):
  pass


class OverLimit(Exception):
  pass


MAX_RANK, MAX_ELEMENTS = 16, 1 << 31


def _check_shape(where, shape):
  if len(shape) > MAX_RANK:
    raise OverLimit(f"{where}: shape has rank {len(shape)}, over max_rank ({MAX_RANK})")
  if int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
    raise OverLimit(f"{where}: shape {list(shape)} has more elements than max_elements ({MAX_ELEMENTS})")


class Session:
  def __init__(self):
    self.nodes = {}  # id -> (dtype, np value)
    self.handles = {}
    self.node_handle = {}  # node id -> the handle given out for its result
    self.lock = threading.Lock()

  def drop_node(self, nid):
    self.nodes.pop(nid, None)
    h = self.node_handle.pop(nid, None)
    if h is not None:
      self.handles.pop(h, None)


def _eval(sess, n):
  name = pb.Op.Name(n.op)
  where = f"node {n.id} ({name})"
  if n.id in sess.nodes:
    raise BadRequest(f"{where}: id already defined")
  src = []
  for s in n.src:
    if s not in sess.nodes:
      raise BadRequest(f"{where}: unknown source node {s}")
    src.append(sess.nodes[s])
  dts = [d for d, _ in src]
  vals = [v for _, v in src]
  op = n.op
  if op == pb.BUFFER:
    b = n.buffer
    shape = tuple(b.shape)
    if n.dtype not in NP:
      raise BadRequest(f"{where}: unsupported dtype")
    if b.WhichOneof("source") == "handle":
      if b.handle not in sess.handles:
        raise BadRequest(f"{where}: unknown handle {b.handle}")
      v = sess.handles[b.handle]
      if v.shape != shape or v.dtype != NP[n.dtype]:
        raise BadRequest(f"{where}: handle shape/dtype mismatch")
      return n.dtype, v
    v = np.frombuffer(b.data, dtype=np.dtype(NP[n.dtype]).newbyteorder("<"))
    if v.size != int(np.prod(shape)):
      raise BadRequest(f"{where}: {len(b.data)} bytes do not match shape {shape}")
    return n.dtype, v.reshape(shape).astype(NP[n.dtype])
  if op == pb.CONST:
    c = n.constant
    _check_shape(where, tuple(c.shape))
    kind = c.WhichOneof("value")
    val = getattr(c, kind) if kind else 0
    return n.dtype, np.full(tuple(c.shape), val, dtype=NP[n.dtype])
  if op in (pb.NEG, pb.EXP2, pb.LOG2, pb.SQRT, pb.RECIPROCAL, pb.SIN, pb.CAST):
    if len(vals) != 1:
      raise BadRequest(f"{where}: needs 1 source")
    x, dt = vals[0], dts[0]
    if op == pb.CAST:
      return n.dtype, x.astype(NP[n.dtype])
    if op == pb.NEG and dt == pb.BOOL:
      raise BadRequest(f"{where}: NEG of bool")
    if op != pb.NEG and dt not in FLOATS:
      raise BadRequest(f"{where}: needs a float source")
    with np.errstate(all="ignore"):
      f = {pb.NEG: np.negative, pb.EXP2: np.exp2, pb.LOG2: np.log2, pb.SQRT: np.sqrt,
           pb.RECIPROCAL: np.reciprocal, pb.SIN: np.sin}[op]
      out = (dt, f(x))
  elif op in (pb.ADD, pb.SUB, pb.MUL, pb.DIV, pb.MAX, pb.CMPLT, pb.CMPNE):
    if len(vals) != 2:
      raise BadRequest(f"{where}: needs 2 sources")
    if vals[0].shape != vals[1].shape:
      raise BadRequest(f"{where}: shapes differ {vals[0].shape} {vals[1].shape}")
    if dts[0] != dts[1]:
      raise BadRequest(f"{where}: dtypes differ {pb.DType.Name(dts[0])} {pb.DType.Name(dts[1])}")
    a, b = vals
    if op == pb.DIV and dts[0] not in FLOATS:
      raise BadRequest(f"{where}: DIV needs floats")
    with np.errstate(all="ignore"):
      if op == pb.CMPLT:
        out = (pb.BOOL, a < b)
      elif op == pb.CMPNE:
        out = (pb.BOOL, a != b)
      elif dts[0] == pb.BOOL and op in (pb.ADD, pb.MAX):
        out = (pb.BOOL, a | b)
      elif dts[0] == pb.BOOL and op == pb.MUL:
        out = (pb.BOOL, a & b)
      else:
        f = {pb.ADD: np.add, pb.SUB: np.subtract, pb.MUL: np.multiply, pb.DIV: np.divide,
             pb.MAX: np.maximum}[op]
        out = (dts[0], f(a, b).astype(NP[dts[0]]))
  elif op == pb.WHERE:
    if len(vals) != 3 or dts[0] != pb.BOOL or dts[1] != dts[2]:
      raise BadRequest(f"{where}: needs (bool, x, y) with x, y of one dtype")
    if not (vals[0].shape == vals[1].shape == vals[2].shape):
      raise BadRequest(f"{where}: shapes differ")
    out = (dts[1], np.where(*vals))
  elif op in (pb.REDUCE_SUM, pb.REDUCE_MAX):
    axes = tuple(n.axes.axes)
    x = vals[0]
    if op == pb.REDUCE_SUM and dts[0] == pb.BOOL:
      raise BadRequest(f"{where}: sum of a bool tensor")
    if any(not -x.ndim <= a < x.ndim for a in axes):
      raise BadRequest(f"{where}: axis out of range")
    f = np.sum if op == pb.REDUCE_SUM else np.max
    out = (dts[0], f(x, axis=axes, keepdims=True).astype(x.dtype))
  elif op == pb.RESHAPE:
    shape = tuple(n.shape.dims)
    if int(np.prod(shape)) != vals[0].size:
      raise BadRequest(f"{where}: reshape {vals[0].shape} -> {shape}")
    out = (dts[0], vals[0].reshape(shape))
  elif op == pb.EXPAND:
    shape = tuple(n.shape.dims)
    x = vals[0]
    if len(shape) != x.ndim or any(s != d and s != 1 for s, d in zip(x.shape, shape)):
      raise BadRequest(f"{where}: expand {x.shape} -> {shape}")
    out = (dts[0], np.broadcast_to(x, shape))
  elif op == pb.PERMUTE:
    axes = tuple(n.axes.axes)
    if sorted(axes) != list(range(vals[0].ndim)):
      raise BadRequest(f"{where}: bad permutation {axes}")
    out = (dts[0], vals[0].transpose(axes))
  elif op == pb.FLIP:
    out = (dts[0], np.flip(vals[0], tuple(n.axes.axes)))
  elif op in (pb.PAD, pb.SHRINK):
    p = n.pairs
    x = vals[0]
    if len(p.begin) != x.ndim or len(p.end) != x.ndim:
      raise BadRequest(f"{where}: one pair per axis")
    if op == pb.PAD:
      if any(b < 0 or e < 0 for b, e in zip(p.begin, p.end)):
        raise BadRequest(f"{where}: negative pad")
      out = (dts[0], np.pad(x, list(zip(p.begin, p.end))))
    else:
      if any(not 0 <= b <= e <= s for b, e, s in zip(p.begin, p.end, x.shape)):
        raise BadRequest(f"{where}: shrink out of range")
      out = (dts[0], x[tuple(slice(b, e) for b, e in zip(p.begin, p.end))])
  else:
    raise BadRequest(f"{where}: unsupported op")
  if n.dtype != pb.DTYPE_UNSPECIFIED and n.dtype != out[0]:
    raise BadRequest(f"{where}: stated dtype {pb.DType.Name(n.dtype)} but derived {pb.DType.Name(out[0])}")
  return out[0], np.array(out[1], order="C", copy=True)


class Servicer(pb_grpc.PolygradServicer):
  def __init__(self, max_inline):
    self.sessions = {}
    self.max_inline = max_inline
    self.handle_ids = itertools.count(1)

  def _sess(self, sid, ctx):
    s = self.sessions.get(sid)
    if s is None:
      ctx.abort(grpc.StatusCode.NOT_FOUND, f"unknown session {sid!r}")
    return s

  def GetInfo(self, req, ctx):
    return pb.ServerInfo(version="fake-0", devices=[pb.Device(name="CPU", available=True, detail="numpy")],
                         max_inline_bytes=self.max_inline, max_nodes_per_request=100000, max_rank=16,
                         max_elements=1 << 31, chunk_bytes=1 << 20)

  def CreateSession(self, req, ctx):
    sid = uuid.uuid4().hex
    self.sessions[sid] = Session()
    return pb.CreateSessionResponse(session_id=sid)

  def CloseSession(self, req, ctx):
    self.sessions.pop(req.session_id, None)
    return pb.CloseSessionResponse()

  def Realize(self, req, ctx):
    s = self._sess(req.session_id, ctx)
    with s.lock:
      staged = {}
      view = Session()
      view.nodes = dict(s.nodes)
      view.handles = s.handles
      try:
        for n in req.nodes:
          view.nodes[n.id] = staged[n.id] = _eval(view, n)
        for o in req.outputs:
          if o not in view.nodes:
            raise BadRequest(f"output node {o} is unknown")
        for nid in req.release_nodes:
          if nid not in view.nodes:
            ctx.abort(grpc.StatusCode.NOT_FOUND, f"release_nodes: node {nid} is not defined in this session")
      except BadRequest as e:
        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
      except OverLimit as e:
        ctx.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
      s.nodes.update(staged)
      resp = pb.RealizeResponse()
      for o in req.outputs:
        dt, v = s.nodes[o]
        h = s.node_handle.get(o)
        if h is None:
          h = s.node_handle[o] = next(self.handle_ids)
          s.handles[h] = v
        r = resp.results.add(node_id=o, handle=h, dtype=dt, shape=v.shape)
        data = np.ascontiguousarray(v, dtype=np.dtype(NP[dt]).newbyteorder("<")).tobytes()
        if req.want_data and len(data) <= self.max_inline:
          r.has_data = True
          r.data = data
      for nid in req.release_nodes:
        s.drop_node(nid)
      resp.stats.kernels = len(req.outputs)
      return resp

  def Release(self, req, ctx):
    s = self._sess(req.session_id, ctx)
    with s.lock:
      for nid in req.node_ids:
        if nid not in s.nodes:
          ctx.abort(grpc.StatusCode.NOT_FOUND, f"node {nid} is not defined in this session")
      for h in req.handles:
        if h not in s.handles:
          ctx.abort(grpc.StatusCode.NOT_FOUND, f"handle {h} is not a buffer of this session")
      for nid in req.node_ids:
        s.drop_node(nid)
      for h in req.handles:
        s.handles.pop(h, None)
    return pb.ReleaseResponse()

  def Upload(self, it, ctx):
    first = next(it)
    h = first.header
    s = self._sess(h.session_id, ctx)
    buf = bytearray(first.data)
    for c in it:
      buf += c.data
    v = np.frombuffer(bytes(buf), dtype=np.dtype(NP[h.dtype]).newbyteorder("<"))
    if v.size != int(np.prod(tuple(h.shape))):
      ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "upload size does not match its shape")
    handle = next(self.handle_ids)
    s.handles[handle] = v.reshape(tuple(h.shape)).astype(NP[h.dtype])
    return pb.UploadResponse(handle=handle, bytes=len(buf))

  def Download(self, req, ctx):
    s = self._sess(req.session_id, ctx)
    v = s.handles.get(req.handle)
    if v is None:
      ctx.abort(grpc.StatusCode.NOT_FOUND, f"unknown handle {req.handle}")
    data = np.ascontiguousarray(v).tobytes()
    step = req.chunk_bytes or (1 << 20)
    dt = [k for k, t in NP.items() if np.dtype(t) == v.dtype][0]
    for off in range(0, max(len(data), 1), step):
      chunk = pb.DownloadChunk(offset=off, data=data[off:off + step], last=off + step >= len(data))
      if off == 0:
        chunk.dtype = dt
        chunk.shape.extend(v.shape)
      yield chunk


def main():
  flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
  sock = flags.get("unix-socket")
  if not sock:
    sys.exit("fake_polygradd: --unix-socket=PATH is required")
  server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                       options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
  pb_grpc.add_PolygradServicer_to_server(Servicer(int(flags.get("max-inline-bytes", 1 << 20))), server)
  server.add_insecure_port("unix:" + sock)
  server.start()
  stop = threading.Event()
  signal.signal(signal.SIGTERM, lambda *a: stop.set())
  signal.signal(signal.SIGINT, lambda *a: stop.set())
  print(f"fake polygradd listening on unix:{sock}", flush=True)
  stop.wait()
  server.stop(1).wait()


if __name__ == "__main__":
  main()
