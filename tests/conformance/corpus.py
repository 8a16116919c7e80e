"""The language-neutral half of the conformance corpus, in Python: reading cases.json, the input
generator, the wire op list from the proto, and the results file. The JavaScript runner
(conformance.test.mjs) implements the same few functions; README.md is the specification both
follow, and its test vectors are checked by both."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Dict, Iterator, List

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES = HERE / "cases.json"
PROTO = REPO / "proto" / "polygrad" / "v1" / "polygrad.proto"

M64 = (1 << 64) - 1
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
FLOATS = {"float16", "bfloat16", "float32", "float64"}
# Results up to this many bytes are kept as hex too, so a mismatch shows the values.
HEX_LIMIT = 1024


def splitmix64(seed: int) -> Iterator[int]:
  """Steele, Lea and Flood's splitmix64 (the reference constants), as unsigned 64-bit ints."""
  state = seed & M64
  while True:
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    yield z ^ (z >> 31)


def input_values(spec: dict) -> list:
  """An input's elements in row-major order: Python ints (integer dtypes), floats or bools."""
  n = 1
  for s in spec["shape"]:
    n *= s
  gen = splitmix64(spec["seed"])
  dt = spec["dtype"]
  out = []
  for _ in range(n):
    z = next(gen)
    if spec.get("bits"):
      bits = 8 * ITEMSIZE[dt]
      v = z & ((1 << bits) - 1)
      if dt.startswith("int") and v >= 1 << (bits - 1):
        v -= 1 << bits
      out.append(v)
      continue
    v = spec["lo"] + z % (spec["hi"] - spec["lo"] + 1)
    if dt == "bool":
      out.append(v != 0)
    elif dt in FLOATS:
      out.append(v / spec["div"])  # div is a power of two: exact
    else:
      out.append(v)
  return out


def normalize_numbers(x):
  """Integral floats become ints: the corpus means 2 whether it says 2 or 2.0, because a
  JavaScript client cannot tell them apart."""
  if isinstance(x, float) and x.is_integer():
    return int(x)
  if isinstance(x, list):
    return [normalize_numbers(v) for v in x]
  if isinstance(x, dict):
    return {k: normalize_numbers(v) for k, v in x.items()}
  return x


def load_cases() -> List[dict]:
  doc = json.loads(CASES.read_text())
  assert doc["version"] == 1, f"unknown corpus version {doc['version']}"
  cases = doc["cases"]
  for c in cases:
    c["args"] = normalize_numbers(c["args"])
    for step in c.get("then", []):
      step["args"] = normalize_numbers(step["args"])
  return cases


def wire_ops() -> List[str]:
  """The names of polygrad.v1.Op's values a current client may send, from the proto text (no
  generated code involved): deprecated values, kept for older clients, are left out."""
  text = PROTO.read_text()
  body = re.search(r"enum Op \{(.*?)\n\}", text, re.S).group(1)
  return [name for name, opts in re.findall(r"^\s*([A-Z0-9_]+)\s*=\s*\d+\s*([;[].*)$", body, re.M)
          if name != "OP_UNSPECIFIED" and "deprecated = true" not in opts]


def result_entry(dtype: str, shape, daemon_dtype: str, daemon_shape, data: bytes) -> Dict:
  entry = {"status": "ok", "dtype": dtype, "shape": list(shape), "daemon_dtype": daemon_dtype,
           "daemon_shape": list(daemon_shape), "nbytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
  if len(data) <= HEX_LIMIT:
    entry["hex"] = data.hex()
  return entry


def out_dir() -> Path:
  """Where runners write their results: $POLYGRAD_CONFORMANCE_OUT, else tests/conformance/out."""
  d = Path(os.environ.get("POLYGRAD_CONFORMANCE_OUT") or HERE / "out")
  d.mkdir(parents=True, exist_ok=True)
  return d


def write_results(client: str, results: Dict[str, Dict]) -> Path:
  path = out_dir() / f"{client}.json"
  doc = {"client": client, "corpus_sha256": hashlib.sha256(CASES.read_bytes()).hexdigest(), "cases": results}
  tmp = path.with_suffix(".json.tmp")
  tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
  tmp.replace(path)
  return path
