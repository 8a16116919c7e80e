"""Every protobuf message the client sends, built in one place from plain Python values.

The generated modules (polygrad/v1, git-ignored) come from the cmake build; connection.py, graph.py,
step.py and admin.py pass values here and get messages back, so the wire format has one owner."""
from __future__ import annotations

import struct
from typing import Iterator, Sequence, Tuple

import numpy as np
from google.protobuf import text_format

from ._ops_gen import AXES_ARG_OPS, PAIRS_ARG_OPS, SHAPE_ARG_OPS
from .ops import BUFFER, COMPOSITE_ARG_OPS, COMPOSITE_FIELDS, CONST
from .variable import SymInt, _made, daemon_shape, has_symbolic

try:
  from .v1 import admin_pb2 as admin_pb
  from .v1 import admin_pb2_grpc as admin_pb_grpc
  from .v1 import polygrad_pb2 as pb
  from .v1 import polygrad_pb2_grpc as pb_grpc
except ImportError as e:  # pragma: no cover - depends on the build
  raise ImportError(
      "polygrad's generated gRPC stubs (polygrad/v1/polygrad_pb2.py) are missing: run the cmake "
      "build, or protoc --python_out/--grpc_python_out on proto/polygrad/v1/polygrad.proto") from e


def polygrad_stub(channel):
  return pb_grpc.PolygradStub(channel)


def realize_call(channel):
  """Realize taking its request as bytes from realize_bytes."""
  return channel.unary_unary("/polygrad.v1.Polygrad/Realize", request_serializer=None,
                             response_deserializer=pb.RealizeResponse.FromString)


def admin_stub(channel):
  return admin_pb_grpc.PolygradAdminStub(channel)


# --- graphs -----------------------------------------------------------------------------------

# Which ops carry which Node.arg message (node() and _node_bytes below both follow these) is the
# op schema's, generated: SHAPE_ARG_OPS (Shape.dims), AXES_ARG_OPS (Axes.axes), PAIRS_ARG_OPS
# (Pairs.begin, Pairs.end), COMPOSITE_ARG_OPS.


def _add_symbolic(msg, axis: int, s: SymInt, begin: bool = False) -> None:
  msg.symbolic.add(axis=axis, extent=int.__int__(s), variable=s.variable.name, mul=s.mul, add=s.add, begin=begin)


def _symbolic_dims(n, msg) -> None:
  """SymInt entries of a RESHAPE/EXPAND shape or a SHRINK's ends (polygrad.variable; shrink and pad
  leave no other): the arg gets the largest size, Node.symbolic the value. A SHRINK's SymInt begin
  (its end a plain number: begin + count) is a begin entry; the arg keeps the current values."""
  if n.op in SHAPE_ARG_OPS:
    for i, s in enumerate(n.arg):
      if isinstance(s, SymInt):
        msg.shape.dims[i] = s.max
        _add_symbolic(msg, i, s)
    return
  for i, (b, e) in enumerate(n.arg):
    if isinstance(e, SymInt):
      msg.pairs.end[i] = e.max
      _add_symbolic(msg, i, e)
    elif isinstance(b, SymInt):
      _add_symbolic(msg, i, b, begin=True)


def node(n, msg=None):
  """A graph.Node as a polygrad.v1.Node (a BUFFER's numpy data inline, else its upload handle),
  written into `msg` when given (an element just added to a request: no copy), else a new one."""
  if msg is None:
    msg = pb.Node()
  msg.id = n.id
  msg.op = n.op
  msg.dtype = n.dtype.wire
  if n.src:
    msg.src.extend([s.id for s in n.src])
  a = n.arg
  if n.op in SHAPE_ARG_OPS:
    msg.shape.dims.extend(a)
  elif n.op in AXES_ARG_OPS:
    msg.axes.axes.extend(a)
  elif n.op in PAIRS_ARG_OPS:
    # int.__int__: a SymInt's value here is not a use of it as a number (a TinyJit would capture again)
    msg.pairs.begin.extend(int.__int__(p[0]) for p in a)
    msg.pairs.end.extend(int.__int__(p[1]) for p in a)
  if (n.op in SHAPE_ARG_OPS or n.op in PAIRS_ARG_OPS) and _made[0]:
    _symbolic_dims(n, msg)
  elif n.op in COMPOSITE_ARG_OPS:
    c = msg.composite
    for name, kind in COMPOSITE_FIELDS:
      if kind == "repeated":
        getattr(c, name).extend(getattr(a, name))
      else:
        setattr(c, name, getattr(a, name))
  elif n.op == CONST:
    c = msg.constant
    c.shape.extend(daemon_shape(n.shape))
    k = n.dtype.kind
    if k == "f":
      c.float_value = float(a)
    elif k == "b":
      c.bool_value = bool(a)
    elif k == "u":
      c.uint_value = int(a)
    else:
      c.int_value = int(a)
  elif n.op == BUFFER:
    b = msg.buffer
    b.shape.extend(n.shape)
    if isinstance(a, np.ndarray):
      b.data = a.tobytes()
    else:
      b.handle = int(a)
  return msg


# --- Realize, encoded by hand ---------------------------------------------------------------------
#
# Debian's protobuf runtime (the C++ one behind Python) serializes messages built from Python by
# reflection: ~6 us for a 70-byte RealizeRequest, and building it field by field ~5 us more, which
# a tiny realize pays every time. Realize requests are therefore written here straight into bytes,
# field for field what RealizeRequest.SerializeToString() would give for the same values
# (tests/e2e/test_wire_encoding.py compares the two for every op the client makes). Node arguments
# other than shapes, axes, constants and buffers are rare in a request and go through pb.Node.

_U64 = 1 << 64


def _varint(v: int, out: bytearray) -> None:
  """A varint; a negative int64 as its 64-bit two's complement, as protobuf writes it."""
  if 0 <= v < 0x80:
    out.append(v)
    return
  if 0 < v < 0x4000:  # node ids: most take two bytes
    out.append((v & 0x7F) | 0x80)
    out.append(v >> 7)
    return
  if v < 0:
    if v < -(1 << 63):
      raise ValueError(f"{v} does not fit an int64")
    v += _U64
  elif v >= _U64:
    raise ValueError(f"{v} does not fit a uint64")
  while v > 0x7F:
    out.append((v & 0x7F) | 0x80)
    v >>= 7
  out.append(v)


def _packed(tag: int, values, out: bytearray) -> None:
  """A packed repeated varint field; nothing when empty, as protobuf omits it."""
  if values:
    p = bytearray()
    for v in values:
      if 0 <= v < 0x80:  # most dims and axes: no call per value
        p.append(v)
      else:
        _varint(v, p)
    out.append(tag)
    _varint(len(p), out)
    out += p


def _message(tag: int, body, out: bytearray) -> None:
  """A length-delimited field (bytes, string or sub-message)."""
  out.append(tag)
  _varint(len(body), out)
  out += body


_pack_double = struct.Struct("<d").pack
# Node.arg's sub-message tag (field << 3 | 2) for the ops whose argument is a list of int64.
_LIST_ARG_TAG = {**dict.fromkeys(SHAPE_ARG_OPS, 0x52), **dict.fromkeys(AXES_ARG_OPS, 0x5A)}  # shape = 10, axes = 11
# Ops whose argument is left to pb.Node: rare in a request, and many fields to get right.
_PB_ARG_OPS = PAIRS_ARG_OPS | COMPOSITE_ARG_OPS


def _node_bytes(n) -> bytes:
  """A graph.Node as the bytes of a polygrad.v1.Node (what node(n).SerializeToString() gives)."""
  op = n.op
  if op in _PB_ARG_OPS or (op in SHAPE_ARG_OPS and has_symbolic(n.arg)):
    return node(n).SerializeToString()
  b = bytearray()
  if n.id:
    b.append(0x08)  # id = 1
    _varint(n.id, b)
  if op:
    b.append(0x10)  # op = 2
    _varint(op, b)
  w = n.dtype.wire
  if w:
    b.append(0x18)  # dtype = 3
    _varint(w, b)
  if n.src:
    _packed(0x22, [s.id for s in n.src], b)  # src = 4
  a = n.arg
  tag = _LIST_ARG_TAG.get(op)
  if tag is not None:
    body = bytearray()
    _packed(0x0A, a, body)  # dims / axes = 1
    _message(tag, body, b)
  elif op == CONST:
    c = bytearray()
    k = n.dtype.kind
    if k == "f":
      c.append(0x09)  # float_value = 1 (double)
      c += _pack_double(float(a))
    elif k == "b":
      c += b"\x18\x01" if a else b"\x18\x00"  # bool_value = 3
    elif k == "u":
      c.append(0x20)  # uint_value = 4
      _varint(int(a), c)
    else:
      c.append(0x10)  # int_value = 2
      _varint(int(a), c)
    _packed(0x2A, daemon_shape(n.shape), c)  # shape = 5
    _message(0x6A, c, b)  # constant = 13
  elif op == BUFFER:
    c = bytearray()
    if isinstance(a, np.ndarray):
      _message(0x12, memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8)), c)  # data = 2
    else:
      c.append(0x08)  # handle = 1
      _varint(int(a), c)
    _packed(0x1A, n.shape, c)  # shape = 3
    _message(0x72, c, b)  # buffer = 14
  return b


def realize_bytes(session_id: str, nodes: Sequence, outputs: Sequence[int], want_data: bool,
                  release_nodes: Sequence[int], default_device: str) -> bytes:
  """A serialized RealizeRequest. `nodes` are graph.Nodes or polygrad.v1.Node messages."""
  b = bytearray()
  if session_id:
    _message(0x0A, session_id.encode(), b)  # session_id = 1
  for n in nodes:
    _message(0x12, n.SerializeToString() if isinstance(n, pb.Node) else _node_bytes(n), b)  # nodes = 2
  _packed(0x1A, outputs, b)  # outputs = 3
  if want_data:
    b += b"\x20\x01"  # want_data = 4
  _packed(0x2A, release_nodes, b)  # release_nodes = 5
  if default_device:
    _message(0x32, default_device.encode(), b)  # default_device = 6
  return bytes(b)


def execute_bytes(request_id: int, field: int, body: bytes) -> bytes:
  """A serialized ExecuteRequest whose command (field number `field`) is the serialized `body`: a
  realize's bytes are spliced in as they are, not parsed into a message first."""
  out = bytearray(b"\x08")  # request_id = 1
  _varint(request_id, out)
  _varint(field << 3 | 2, out)  # run_step = 41: a two-byte tag, which _message does not write
  _varint(len(body), out)
  return bytes(out) + body


def release(session_id: str, node_ids: Sequence[int] = (), handles: Sequence[int] = ()):
  return pb.ReleaseRequest(session_id=session_id, node_ids=list(node_ids), handles=list(handles))


def compile_step(session_id: str, nodes: Sequence, inputs: Sequence[int], outputs: Sequence[int],
                 assigns: Sequence[Tuple[int, int]], materialize: Sequence[int], random=None):
  """`assigns` are (target node id, value node id) pairs; `random` is the traced streams (seed,
  first counter, count), or None."""
  req = pb.CompileStepRequest(session_id=session_id, nodes=nodes, inputs=list(inputs), outputs=list(outputs),
                              assigns=[pb.StepAssign(target_node=t, value=v) for t, v in assigns],
                              materialize=list(materialize))
  if random is not None:
    req.random.seed, req.random.counter_base, req.random.count = random
  return req


def run_step(session_id: str, step_id: int, inputs: Sequence, want_data: bool, random=None, variables=()):
  """`inputs` are (node id, bytes) or (node id, handle int) pairs; `random` is this run's (seed,
  first counter) for the step's traced random nodes, or None; `variables` (name, value) pairs."""
  msgs = [pb.StepInput(node_id=n, handle=v) if isinstance(v, int) else pb.StepInput(node_id=n, data=v)
          for n, v in inputs]
  req = pb.RunStepRequest(session_id=session_id, step_id=step_id, inputs=msgs, want_data=want_data,
                          variables=[pb.VariableValue(name=k, value=v) for k, v in variables])
  if random is not None:
    req.random.seed, req.random.counter_base = random
  return req


def release_step(session_id: str, step_id: int):
  return pb.ReleaseStepRequest(session_id=session_id, step_id=step_id)


# --- sessions ---------------------------------------------------------------------------------


def get_info():
  return pb.GetInfoRequest()


def create_session():
  return pb.CreateSessionRequest()


def close_session(session_id: str):
  return pb.CloseSessionRequest(session_id=session_id)


# --- transfers --------------------------------------------------------------------------------


def upload_chunks(session_id: str, wire_dtype: int, shape: Sequence[int], data: memoryview,
                  chunk: int) -> Iterator:
  """An Upload stream: the header rides in the first chunk; an empty tensor is one empty chunk."""
  header = pb.UploadHeader(session_id=session_id, dtype=wire_dtype, shape=list(shape))
  total = len(data)
  if total == 0:
    yield pb.UploadChunk(header=header, data=b"", last=True)
    return
  for off in range(0, total, chunk):
    end = min(total, off + chunk)
    msg = pb.UploadChunk(data=bytes(data[off:end]), last=end == total)
    if off == 0:
      msg.header.CopyFrom(header)
    yield msg


def download(session_id: str, handle: int):
  return pb.DownloadRequest(session_id=session_id, handle=handle, chunk_bytes=0)


def create_shm(session_id: str, size: int):
  return pb.CreateSharedMemoryRequest(session_id=session_id, bytes=size)


def commit_shm(session_id: str, region: int, wire_dtype: int, shape: Sequence[int]):
  return pb.CommitSharedMemoryRequest(session_id=session_id, region=region, dtype=wire_dtype, shape=list(shape))


def read_shm(session_id: str, handle: int, region: int):
  return pb.ReadSharedMemoryRequest(session_id=session_id, handle=handle, region=region)


def free_shm(session_id: str, region: int):
  return pb.FreeSharedMemoryRequest(session_id=session_id, region=region)


def has_blobs(hashes: Sequence[str]):
  return pb.HasBlobsRequest(sha256=list(hashes))


def blob_chunks(data: memoryview, sha256: str, chunk: int) -> Iterator:
  """An UploadBlob stream: the hash and size ride in the first chunk."""
  total = len(data)
  first = True
  for off in range(0, max(total, 1), chunk):
    msg = pb.BlobChunk(data=bytes(data[off:off + chunk]))
    if first:
      msg.sha256, msg.size, first = sha256, total, False
    yield msg


def buffer_from_blob(session_id: str, sha256: str, wire_dtype: int, shape: Sequence[int]):
  return pb.BufferFromBlobRequest(session_id=session_id, sha256=sha256, dtype=wire_dtype, shape=list(shape))


# --- PolygradAdmin ----------------------------------------------------------------------------


def cache_stats():
  return admin_pb.CacheStatsRequest()


def export_cache():
  return admin_pb.ExportCacheRequest()


def cache_entry(data: bytes):
  return admin_pb.CacheEntry.FromString(data)


def prewarm_manifest(data: bytes, text: bool):
  """A PrewarmManifest from its binary form, or its text form when `text`."""
  if not text:
    return admin_pb.PrewarmManifest.FromString(data)
  return text_format.Parse(data.decode(), admin_pb.PrewarmManifest())
