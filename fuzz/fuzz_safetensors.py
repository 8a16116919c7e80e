#!/usr/bin/env python3
"""Fuzzes the Python client's safetensors reader (polygrad.nn.state: safe_load_numpy and
safe_load_metadata), the one reader of untrusted files that lives outside the daemon.

libFuzzer cannot instrument Python and atheris is not packaged for Debian 12, so this is a
structure-aware mutation fuzzer without coverage feedback: it mutates the seeds of
fuzz/corpus/fuzz_safetensors (bytes, the JSON header, the length prefix) and checks every input.

An input starting with '{' is a sharded checkpoint's index, read from a folder that also holds two
valid shards and, one level up, a decoy file that no index may reach; any other input is one
.safetensors file. The reader must either
  - return tensors that are exactly the bytes the header names, inside the file's data, or
  - raise ValueError, TypeError (a dtype it does not support) or FileNotFoundError naming the file,
within 10 s per input. Anything else is a finding: the input is saved to --crashes and the run
exits 1.

  fuzz_safetensors.py [--seconds S] [--seed N] [--crashes DIR] CORPUS

Prints `stat::number_of_executed_units: N` at the end, as libFuzzer does (scripts/fuzz reads it).
"""
import argparse
import hashlib
import json
import random
import signal
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from polygrad.nn.state import SAFE_DTYPES, safe_load_metadata, safe_load_numpy

SHARDS = {"model-00001-of-00002.safetensors": "a", "model-00002-of-00002.safetensors": "b"}
DECOY = "OUTSIDE"
PER_INPUT_SECONDS = 10

INTERESTING_JSON = [-1, 0, 1, 7, 2**31, 2**63 - 1, 2**63, 2**64, -2**63, 1.5, -0.0, 1e308, "x", "", "F32",
                    "BF16", "__metadata__", None, True, False, [], {}, [0], [0, 0, 0], [1, 0], [-1, 3],
                    {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}]
INTERESTING_LENGTHS = [0, 1, 7, 8, 2**31, 2**63, 2**64 - 1]


def spec_file(tensors):
  """A .safetensors file from {name: (dtype name, little-endian bytes, shape)}, written from the
  format's description, independently of the reader under test."""
  header, data, off = {}, b"", 0
  for name, (dt, raw, shape) in tensors.items():
    header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
    data += raw
    off += len(raw)
  hb = json.dumps(header).encode()
  return struct.pack("<Q", len(hb)) + hb + data


class Timeout(Exception):
  pass


def _on_alarm(signum, frame):
  raise Timeout()


class Checker:
  """Runs the reader on one input in a scratch folder and says what was wrong, if anything."""

  def __init__(self, scratch: Path):
    self.folder = scratch / "checkpoint"
    self.folder.mkdir()
    for fn, name in SHARDS.items():
      (self.folder / fn).write_bytes(spec_file({name: ("F32", np.arange(3, dtype="<f4").tobytes(), (3,))}))
    (scratch / "outside.safetensors").write_bytes(spec_file({DECOY: ("U8", b"\x01", (1,))}))
    self.file = scratch / "input.safetensors"
    self.index = self.folder / "model.safetensors.index.json"
    self.shard_tensors = set(SHARDS.values())  # what an index may load: the shards' tensors

  def check(self, data: bytes):
    path = self.index if data[:1] == b"{" else self.file
    path.write_bytes(data)
    signal.alarm(PER_INPUT_SECONDS)
    try:
      try:
        loaded = safe_load_numpy(path)
        safe_load_metadata(path)
      except (ValueError, TypeError, FileNotFoundError) as e:
        if path.name not in str(e):
          return f"{type(e).__name__} that does not name the file: {str(e)[:300]}"
        return None
      except Timeout:
        return f"no answer within {PER_INPUT_SECONDS} s"
      except BaseException as e:  # noqa: B902: every other exception is the finding
        if isinstance(e, KeyboardInterrupt):
          raise
        return f"{type(e).__name__}: {str(e)[:300]}\n{traceback.format_exc(limit=-3)}"
    finally:
      signal.alarm(0)
    return self.wrong_result(path, data, loaded)

  def wrong_result(self, path, data, loaded):
    if path == self.file:
      return self.wrong_tensors(data, loaded)
    if DECOY in loaded:
      return "the index reached a file outside its folder"
    if not set(loaded) <= self.shard_tensors:
      return f"tensors from nowhere: {sorted(set(loaded) - self.shard_tensors)[:5]}"
    return None

  @staticmethod
  def wrong_tensors(data, loaded):
    hb = _header_bytes(data)
    header = json.loads(hb)
    payload = data[8 + len(hb):]
    for name, (arr, dt) in loaded.items():
      info = header.get(name)
      if not isinstance(info, dict) or name == "__metadata__":
        return f"tensor {name!r} is not in the header"
      b, e = info["data_offsets"]
      if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e <= len(payload)):
        return f"tensor {name!r} was read from offsets {b}..{e} outside the data ({len(payload)} bytes)"
      if arr.tobytes() != payload[b:e]:
        return f"tensor {name!r} does not hold the bytes {b}..{e}"
      if SAFE_DTYPES.get(info["dtype"]) != dt or list(arr.shape) != list(info["shape"]):
        return f"tensor {name!r} came back as {dt}{list(arr.shape)}, the header says {info['dtype']}{info['shape']}"
    return None


def _header_bytes(data: bytes) -> bytes:
  (n,) = struct.unpack("<Q", data[:8])
  return data[8:8 + n]


# --- mutations ---------------------------------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytearray) -> bytearray:
  kind = rng.randrange(6)
  pos = rng.randrange(len(data) + 1)
  if kind == 0 and data:
    data[pos % len(data)] ^= 1 << rng.randrange(8)
  elif kind == 1 and data:
    data[pos % len(data)] = rng.choice([0, 1, 0x20, 0x22, 0x2c, 0x5b, 0x7b, 0x7f, 0x80, 0xff])
  elif kind == 2:
    data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
  elif kind == 3:
    del data[pos:pos + rng.randrange(1, 32)]
  elif kind == 4 and data:
    a = rng.randrange(len(data))
    data[pos:pos] = data[a:a + rng.randrange(1, 64)]
  else:
    del data[pos:]
  return data


def _paths(obj, here=()):
  yield here
  if isinstance(obj, dict):
    for k, v in obj.items():
      yield from _paths(v, here + (k,))
  elif isinstance(obj, list):
    for i, v in enumerate(obj):
      yield from _paths(v, here + (i,))


def mutate_json(rng: random.Random, obj):
  """One change at a random place of a parsed header or index: a new value, a deletion, an
  added key, or a tensor's offsets swapped with another's."""
  path = rng.choice(list(_paths(obj)))
  if not path:
    return rng.choice(INTERESTING_JSON) if rng.random() < 0.1 else obj
  parent = obj
  for p in path[:-1]:
    parent = parent[p]
  key, kind = path[-1], rng.randrange(5)
  if kind <= 1:
    parent[key] = rng.choice(INTERESTING_JSON)
  elif kind == 2:
    del parent[key]
  elif kind == 3 and isinstance(parent, dict):
    parent[rng.choice(["__metadata__", "y", str(key) + "2", "dtype", "shape", "data_offsets"])] = parent[key]
  elif isinstance(obj, dict):  # the entries are the top level's (an earlier round may have made it a list)
    entries = [v for v in obj.values() if isinstance(v, dict) and "data_offsets" in v]
    if len(entries) >= 2:
      x, y = rng.sample(entries, 2)
      x["data_offsets"], y["data_offsets"] = y["data_offsets"], x["data_offsets"]
  return obj


def mutate(rng: random.Random, seed: bytes) -> bytes:
  data = bytearray(seed)
  for _ in range(rng.choice([1, 1, 2, 4])):
    choice = rng.random()
    is_index = data[:1] == b"{"
    text = bytes(data) if is_index else _header_or_none(data)
    if choice < 0.45 and text is not None:
      try:
        encoded = json.dumps(mutate_json(rng, json.loads(text))).encode()
      except (ValueError, RecursionError):  # not JSON any more, or nested past what Python parses
        data = mutate_bytes(rng, data)
        continue
      if rng.random() < 0.05:  # a deeply nested value where a tensor's entry belongs
        depth = rng.choice([100, 5000, 200000])
        encoded = encoded[:-1] + (b', "deep": ' if len(encoded) > 2 else b'"deep": ') + b"[" * depth + b"]" * depth + b"}"
      if is_index:
        data = bytearray(encoded)
      else:
        rest = bytes(data[8 + len(text):])
        data = bytearray(struct.pack("<Q", len(encoded)) + encoded + rest)
    elif choice < 0.55 and not is_index and len(data) >= 8:
      data[:8] = struct.pack("<Q", rng.choice(INTERESTING_LENGTHS + [len(data) - 8, len(data) - 7]) % 2**64)
    else:
      data = mutate_bytes(rng, data)
  return bytes(data)


def _header_or_none(data):
  if len(data) < 8:
    return None
  (n,) = struct.unpack("<Q", data[:8])
  return bytes(data[8:8 + n]) if 8 + n <= len(data) else None


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("corpus", type=Path)
  ap.add_argument("--seconds", type=float, default=60)
  ap.add_argument("--seed", type=int, default=None)
  ap.add_argument("--crashes", type=Path, default=Path("."))
  args = ap.parse_args()
  seeds = [p.read_bytes() for p in sorted(args.corpus.iterdir()) if p.is_file()]
  if not seeds:
    print(f"fuzz_safetensors: no seeds in {args.corpus}", file=sys.stderr)
    return 2
  seed = args.seed if args.seed is not None else random.randrange(2**32)
  print(f"fuzz_safetensors: seed {seed}, {len(seeds)} seeds, {args.seconds:g} s")
  rng = random.Random(seed)
  signal.signal(signal.SIGALRM, _on_alarm)
  execs, end = 0, time.monotonic() + args.seconds
  with tempfile.TemporaryDirectory(prefix="polygrad-fuzz-safetensors.") as scratch:
    checker = Checker(Path(scratch))
    for s in seeds:  # every seed must load cleanly or fail cleanly before any mutation
      execs += 1
      finding = checker.check(s)
      if finding:
        return report(args.crashes, s, finding, execs)
    while time.monotonic() < end:
      data = mutate(rng, rng.choice(seeds))
      execs += 1
      finding = checker.check(data)
      if finding:
        return report(args.crashes, data, finding, execs)
  print(f"stat::number_of_executed_units: {execs}")
  return 0


def report(crashes: Path, data: bytes, finding: str, execs: int) -> int:
  crashes.mkdir(parents=True, exist_ok=True)
  out = crashes / f"crash-{hashlib.sha1(data).hexdigest()}"
  out.write_bytes(data)
  print(f"fuzz_safetensors: FINDING after {execs} inputs: {finding}")
  print(f"fuzz_safetensors: input saved in {out} ({len(data)} bytes)")
  print(f"stat::number_of_executed_units: {execs}")
  return 1


if __name__ == "__main__":
  sys.exit(main())
