"""Every protobuf message the client sends, built in one place from plain Python values.

The generated modules (polygrad/v1, git-ignored) come from the cmake build; connection.py, graph.py,
step.py and admin.py pass values here and get messages back, so the wire format has one owner."""
from __future__ import annotations

from typing import Iterator, Sequence, Tuple

import numpy as np
from google.protobuf import text_format

from .ops import (ARANGE, BUFFER, COMPOSITE_ARG_OPS, CONST, EXPAND, FLIP, PAD, PERMUTE, REDUCE_MAX, REDUCE_PROD,
                  REDUCE_SUM, RESHAPE, SHRINK)

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


def admin_stub(channel):
  return admin_pb_grpc.PolygradAdminStub(channel)


# --- graphs -----------------------------------------------------------------------------------


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
  if n.op in (RESHAPE, EXPAND, ARANGE):
    msg.shape.dims.extend(a)
  elif n.op in (PERMUTE, FLIP, REDUCE_SUM, REDUCE_MAX, REDUCE_PROD):
    msg.axes.axes.extend(a)
  elif n.op in (PAD, SHRINK):
    msg.pairs.begin.extend(p[0] for p in a)
    msg.pairs.end.extend(p[1] for p in a)
  elif n.op in COMPOSITE_ARG_OPS:
    c = msg.composite
    c.axes.extend(a.axes)
    c.keepdim = a.keepdim
    c.eps = a.eps
    c.correction = a.correction
    c.normalized_axes = a.normalized_axes
    c.kernel.extend(a.kernel)
    c.stride.extend(a.stride)
    c.padding.extend(a.padding)
    c.dilation.extend(a.dilation)
    c.groups = a.groups
    c.n = a.n
    c.diagonal = a.diagonal
    c.seed = a.seed
    c.counter = a.counter
    c.shape.extend(a.shape)
    c.low = a.low
    c.high = a.high
    c.p = a.p
    c.output_padding.extend(a.output_padding)
    c.descending = a.descending
    c.indices = a.indices
    c.causal = a.causal
    c.device = a.device
    c.alpha = a.alpha
    c.rtol = a.rtol
    c.atol = a.atol
    c.equal_nan = a.equal_nan
    c.beta = a.beta
    c.threshold = a.threshold
    c.mode = a.mode
    c.include_self = a.include_self
    c.align_corners = a.align_corners
    c.ignore_index = a.ignore_index
    c.step = a.step
    c.replacement = a.replacement
  elif n.op == CONST:
    c = msg.constant
    c.shape.extend(n.shape)
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


def realize(session_id: str, nodes: Sequence, outputs: Sequence[int], want_data: bool,
            release_nodes: Sequence[int], default_device: str):
  """`nodes` are polygrad.v1.Node messages or graph.Nodes (encoded straight into the request)."""
  req = pb.RealizeRequest(session_id=session_id, outputs=outputs, want_data=want_data,
                          release_nodes=release_nodes, default_device=default_device)
  add = req.nodes.add
  for n in nodes:
    if isinstance(n, pb.Node):
      add().CopyFrom(n)
    else:
      node(n, add())
  return req


def release(session_id: str, node_ids: Sequence[int] = (), handles: Sequence[int] = ()):
  return pb.ReleaseRequest(session_id=session_id, node_ids=list(node_ids), handles=list(handles))


def compile_step(session_id: str, nodes: Sequence, inputs: Sequence[int], outputs: Sequence[int],
                 assigns: Sequence[Tuple[int, int]], materialize: Sequence[int]):
  """`assigns` are (target node id, value node id) pairs."""
  return pb.CompileStepRequest(session_id=session_id, nodes=nodes, inputs=list(inputs), outputs=list(outputs),
                               assigns=[pb.StepAssign(target_node=t, value=v) for t, v in assigns],
                               materialize=list(materialize))


def run_step(session_id: str, step_id: int, inputs: Sequence, want_data: bool):
  """`inputs` are (node id, bytes) or (node id, handle int) pairs."""
  msgs = [pb.StepInput(node_id=n, handle=v) if isinstance(v, int) else pb.StepInput(node_id=n, data=v)
          for n, v in inputs]
  return pb.RunStepRequest(session_id=session_id, step_id=step_id, inputs=msgs, want_data=want_data)


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
