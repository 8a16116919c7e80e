#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/ (committed; rerun after a
wire change):  PYTHONPATH=clients/python /usr/bin/python3 fuzz/make_seeds.py  (the Python stubs come
from a build). Each seed is a small valid input that reaches deep into its target, so a short
run starts from real requests instead of rediscovering the wire format."""
import hashlib
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
from fuzz_safetensors import SHARDS, spec_file
from polygrad.v1 import polygrad_pb2 as pb

CORPUS = Path(__file__).resolve().parent / "corpus"


def node(id, op, src=(), dtype=0, **arg):
  n = pb.Node(id=id, op=op, src=list(src), dtype=dtype)
  for field, value in arg.items():
    getattr(n, field).CopyFrom(value)
  return n


def f32(id, *shape, handle=None):
  count = 1
  for d in shape:
    count *= d
  source = pb.BufferSource(handle=handle) if handle else pb.BufferSource(data=struct.pack(f"<{count}f", *range(count)))
  source.shape.extend(shape)
  return node(id, pb.BUFFER, dtype=pb.FLOAT32, buffer=source)


def comp(**kw):
  return pb.CompositeArg(**kw)


# Graphs a client sends, by theme: elementwise and movement, reductions, composites, gradients.
GRAPHS = {
    "elementwise": [f32(1, 2, 3), f32(2, 2, 3), node(3, pb.ADD, [1, 2]), node(4, pb.NEG, [3]), node(5, pb.CMPLT, [4, 1]),
                    node(6, pb.WHERE, [5, 1, 2]), node(7, pb.CAST, [6], dtype=pb.INT32),
                    node(8, pb.BITCAST, [6], dtype=pb.UINT32), node(9, pb.SQRT, [2]), node(10, pb.DIV, [9, 1])],
    "movement": [f32(1, 2, 3), node(2, pb.RESHAPE, [1], shape=pb.Shape(dims=[3, 2, 1])),
                 node(3, pb.EXPAND, [2], shape=pb.Shape(dims=[3, 2, 4])), node(4, pb.PERMUTE, [3], axes=pb.Axes(axes=[2, 0, 1])),
                 node(5, pb.PAD, [4], pairs=pb.Pairs(begin=[1, 0, 0], end=[0, 2, 1])),
                 node(6, pb.SHRINK, [5], pairs=pb.Pairs(begin=[0, 1, 0], end=[4, 3, 3])), node(7, pb.FLIP, [6], axes=pb.Axes(axes=[1]))],
    "reduce": [f32(1, 2, 3, 4), node(2, pb.REDUCE_SUM, [1], axes=pb.Axes(axes=[1])), node(3, pb.REDUCE_MAX, [2], axes=pb.Axes(axes=[0, 2])),
               node(4, pb.REDUCE_PROD, [1], axes=pb.Axes(axes=[2])),
               node(5, pb.CONST, dtype=pb.INT64, constant=pb.Constant(int_value=7, shape=[2, 3])),
               node(6, pb.IDIV, [5, 5]), node(7, pb.MOD, [6, 5]), node(8, pb.XOR, [7, 5])],
    "nn": [f32(1, 2, 4), f32(2, 4, 3), node(3, pb.MATMUL, [1, 2]), node(4, pb.SOFTMAX, [3], composite=comp(axes=[1])),
           node(5, pb.LAYERNORM, [4], composite=comp(normalized_axes=1, eps=1e-5)), node(6, pb.GELU, [5]),
           node(7, pb.LOGSUMEXP, [6], composite=comp(axes=[0], keepdim=True)), node(8, pb.VAR, [3], composite=comp(axes=[1], correction=1)),
           node(9, pb.DROPOUT, [6], composite=comp(seed=1, p=0.5)), node(10, pb.ARGMAX, [9], composite=comp(axes=[1]))],
    "conv": [f32(1, 1, 2, 5, 5), f32(2, 3, 2, 3, 3), node(3, pb.CONV2D, [1, 2], composite=comp(stride=[2, 2], padding=[1, 1])),
             node(4, pb.MAX_POOL2D, [3], composite=comp(kernel=[2, 2])), node(5, pb.AVG_POOL2D, [1], composite=comp(kernel=[3, 3], stride=[1, 1])),
             f32(6, 3, 2, 2, 2), node(7, pb.CONV_TRANSPOSE2D, [3, 6], composite=comp(stride=[2, 2])),
             node(8, pb.GROUP_NORM, [7], composite=comp(groups=1, eps=1e-5)), node(9, pb.BATCHNORM_TRAIN, [3], composite=comp(eps=1e-5))],
    "index": [node(1, pb.ARANGE, dtype=pb.INT32, shape=pb.Shape(dims=[6])), node(2, pb.ONE_HOT, [1], composite=comp(n=6)),
              node(3, pb.CUMSUM, [2], composite=comp(axes=[0])), node(4, pb.TRIL, [3], composite=comp(diagonal=1)),
              node(5, pb.RANDINT, dtype=pb.INT32, composite=comp(shape=[6, 1], low=0, high=6, seed=3)),
              f32(6, 6, 6), node(7, pb.GATHER, [6, 5], composite=comp(axes=[1])),
              node(8, pb.RAND, dtype=pb.FLOAT32, composite=comp(shape=[2, 2], seed=5, counter=1))],
    "attention": [f32(1, 1, 3, 4), f32(2, 1, 5, 4), f32(3, 1, 5, 2),
                  node(4, pb.SCALED_DOT_PRODUCT_ATTENTION, [1, 2, 3], composite=comp(causal=True)),
                  node(5, pb.RMS_NORM, [4], composite=comp(normalized_axes=1, eps=1e-6))],
    "math": [f32(1, 2, 3), f32(2, 2, 3), node(3, pb.ERF, [1]), node(4, pb.ATANH, [3]), node(5, pb.LOGADDEXP, [4, 2]),
             node(6, pb.CELU, [5], composite=comp(alpha=0.5)), node(7, pb.LERP, [6, 1, 2]), node(8, pb.COPYSIGN, [7, 4]),
             node(9, pb.ISCLOSE, [8, 1], composite=comp(rtol=1e-3, atol=1e-6, equal_nan=True)), node(10, pb.ISFINITE, [4]),
             node(11, pb.SOFTPLUS, [7], composite=comp(beta=2.0, threshold=10.0)), node(12, pb.CLAMP_MIN, [11, 1]),
             node(13, pb.CLAMP_MAX, [12, 2])],
    "scatter": [f32(1, 3, 4), node(2, pb.RANDINT, dtype=pb.INT32, composite=comp(shape=[3, 6], low=0, high=4, seed=2)),
                f32(3, 3, 6), node(4, pb.SCATTER_REDUCE, [1, 2, 3], composite=comp(axes=[1], mode="mean", include_self=True)),
                node(5, pb.RANDINT, dtype=pb.INT64, composite=comp(shape=[3], low=0, high=4, seed=3)),
                node(6, pb.NLL_LOSS, [4, 5], composite=comp(mode="mean", ignore_index=-100)),
                node(7, pb.INTERPOLATE, [1], composite=comp(shape=[5, 7], mode="linear", align_corners=True)),
                node(8, pb.UNFOLD, [7], composite=comp(axes=[1], n=3, step=2)),
                node(9, pb.NONZERO, [8], composite=comp(n=4)),
                node(10, pb.MULTINOMIAL, [3], composite=comp(n=2, seed=4, counter=1))],
    "view": [f32(1, 6, 4), f32(2, 1, 4),
             pb.Node(id=3, op=pb.SHRINK, src=[1], pairs=pb.Pairs(begin=[2, 0], end=[3, 4]),
                     symbolic=[pb.SymbolicDim(axis=0, extent=2, variable="pos", mul=1, begin=True)]),
             node(4, pb.WRITE_VIEW, [1, 3, 2], composite=comp()), node(5, pb.REDUCE_SUM, [4], axes=pb.Axes(axes=[0, 1]))],
    "gradient": [f32(1, 3, 4), f32(2, 4, 2), node(3, pb.MATMUL, [1, 2]), node(4, pb.TANH, [3]), node(5, pb.MUL, [4, 4]),
                 node(6, pb.REDUCE_SUM, [5], axes=pb.Axes(axes=[0, 1])), node(7, pb.GRADIENT, [6, 1]), node(8, pb.GRADIENT, [6, 2]),
                 node(9, pb.GRADIENT, [7, 2])],
}


def write(target, name, data):
  d = CORPUS / target
  d.mkdir(parents=True, exist_ok=True)
  (d / name).write_bytes(data)


class Provider:
  """Builds bytes that clang's FuzzedDataProvider reads back as the values given: integers are
  taken from the end of the data (the last byte is the most significant), strings from the front."""

  def __init__(self):
    self.front, self.back = b"", b""

  def integer(self, value, lo, hi):
    span, width = hi - lo, 0
    while width < 8 and span >> (8 * width) > 0:
      width += 1
    v = value - lo
    self.back = bytes((v >> (8 * i)) & 0xFF for i in range(width)) + self.back

  def boolean(self, value):
    self.integer(int(value), 0, 255)

  def data(self):
    return self.front + self.back


def upload_seed(dtype, shape, chunks):
  """A header, then chunks: small dimensions go through ConsumeBool() == true."""
  p = Provider()
  p.integer(dtype, -1, max(pb.DType.values()) + 2)
  p.integer(len(shape), 0, 8)
  for d in shape:
    p.boolean(True)
    p.integer(d, -1, 9)
  itemsize = {pb.FLOAT32: 4, pb.BOOL: 1, pb.INT16: 2, pb.FLOAT64: 8}[dtype]
  total = itemsize
  for d in shape:
    total *= d
  for size in chunks:
    p.integer(size, 0, total + 4)
    p.front += bytes(range(size % 256)) if size < 256 else bytes(size)
  return p.data()


def main():
  shutil.rmtree(CORPUS, ignore_errors=True)
  for name, nodes in GRAPHS.items():
    ids = [n.id for n in nodes]
    write("fuzz_realize_decode", name, pb.RealizeRequest(nodes=nodes, outputs=ids[-2:], want_data=True).SerializeToString())
  # Steps: an SGD update of a weight node, one of the uploaded handle 1 the fuzz target holds,
  # and a step with an input that each run replaces.
  w = GRAPHS["gradient"][:9]
  sgd = w + [node(10, pb.CONST, dtype=pb.FLOAT32, constant=pb.Constant(float_value=0.1, shape=[3, 4])),
             node(11, pb.MUL, [7, 10]), node(12, pb.SUB, [1, 11])]
  write("fuzz_compile_step_decode", "sgd", pb.CompileStepRequest(
      nodes=sgd, outputs=[6], materialize=[8], assigns=[pb.StepAssign(target_node=1, value=12)]).SerializeToString())
  on_handle = [f32(1, 2, 2, handle=1), node(2, pb.EXP, [1]), node(3, pb.ADD, [1, 2])]
  write("fuzz_compile_step_decode", "handle", pb.CompileStepRequest(
      nodes=on_handle, outputs=[2], assigns=[pb.StepAssign(target_handle=1, value=3)]).SerializeToString())
  # A KV-cache row written in place: the assign's value is a write through a shrink view at a begin
  # held per run (a box assign).
  write("fuzz_compile_step_decode", "box", pb.CompileStepRequest(
      nodes=GRAPHS["view"], outputs=[5], assigns=[pb.StepAssign(target_node=1, value=4)]).SerializeToString())
  fed = [f32(1, 2, 3), f32(2, 3, 2), node(3, pb.MATMUL, [1, 2]), node(4, pb.RELU, [3])]
  write("fuzz_compile_step_decode", "input", pb.CompileStepRequest(nodes=fed, inputs=[1], outputs=[4]).SerializeToString())
  for name, nodes in GRAPHS.items():
    write("fuzz_compile_step_decode", name, pb.CompileStepRequest(nodes=nodes, outputs=[nodes[-1].id]).SerializeToString())

  write("fuzz_upload_chunks", "one_chunk", upload_seed(pb.FLOAT32, [2, 3], [24]))
  write("fuzz_upload_chunks", "three_chunks", upload_seed(pb.INT16, [3, 3], [5, 8, 5]))
  write("fuzz_upload_chunks", "bools", upload_seed(pb.BOOL, [4, 2], [8]))
  write("fuzz_upload_chunks", "overrun", upload_seed(pb.FLOAT64, [2], [10, 10]))
  write("fuzz_upload_chunks", "short", upload_seed(pb.FLOAT32, [1, 4], [4, 4]))
  write("fuzz_upload_chunks", "empty", upload_seed(pb.FLOAT32, [0, 3], [0]))

  for i, payload in enumerate([b"", b"\x7fELF kernel bytes", bytes(range(256)) * 3]):
    key = hashlib.sha256(b"key %d" % i).digest()
    entry = b"PGKCACHE" + struct.pack("<II", 1, 0) + key + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest() + payload
    write("fuzz_cache_entry", f"entry{i}", key + entry)

  # Any bytes make an expression; these are a few of different sizes and shapes.
  for i, seed in enumerate([b"\x05\x03\x17\x28" + bytes(range(40)), bytes(range(255, 0, -3)), b"\x11" * 64,
                            hashlib.sha512(b"symbolic").digest() * 2]):
    write("fuzz_symbolic", f"expr{i}", seed)
  # safetensors files (fuzz_safetensors.py): every dtype and rank, metadata, no tensors, and
  # sharded-checkpoint indexes, one of them naming a file outside its folder.
  rows = {"w": ("F32", np.arange(6, dtype="<f4").tobytes(), (2, 3)), "step": ("I64", struct.pack("<q", -3), ()),
          "h": ("BF16", np.arange(4, dtype="<u2").tobytes(), (4,)), "mask": ("BOOL", b"\x01\x00\x01", (3,)),
          "none": ("U8", b"", (0, 5)), "half": ("F16", np.ones(2, "<f2").tobytes(), (1, 2))}
  write("fuzz_safetensors", "dtypes", spec_file(rows))
  meta = json.dumps({"__metadata__": {"format": "pt"}, "b": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}}).encode()
  write("fuzz_safetensors", "metadata", struct.pack("<Q", len(meta)) + meta + struct.pack("<2i", 1, -1))
  write("fuzz_safetensors", "empty", struct.pack("<Q", 2) + b"{}")
  shards = list(SHARDS)
  write("fuzz_safetensors", "index", json.dumps({"metadata": {"total_size": 24},
                                                  "weight_map": {"a": shards[0], "b": shards[1]}}).encode())
  write("fuzz_safetensors", "index_escape", json.dumps({"metadata": {}, "weight_map": {"a": shards[0],
                                                         "z": "../outside.safetensors"}}).encode())
  for d in sorted(CORPUS.iterdir()):
    print(f"{d.name}: {len(list(d.iterdir()))} seeds")


if __name__ == "__main__":
  sys.exit(main())
