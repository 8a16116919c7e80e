"""State dicts and safetensors files (read and written with json + numpy; no torch needed).

safetensors layout: an 8-byte little-endian header length N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}), then the
raw little-endian data, offsets relative to the end of the header. A sharded checkpoint is a set
of such files plus `model.safetensors.index.json` ({"metadata": {"total_size"}, "weight_map":
{name: file}}), as written by HuggingFace.
"""
from __future__ import annotations

import json
import os
import struct
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..dtype import DType, dtypes
from ..tensor import Tensor

PathLike = Union[str, os.PathLike]

# safetensors dtype names ↔ polygrad dtypes
SAFE_DTYPES: Dict[str, DType] = {
    "BOOL": dtypes.bool, "I8": dtypes.int8, "U8": dtypes.uint8, "I16": dtypes.int16, "U16": dtypes.uint16,
    "I32": dtypes.int32, "U32": dtypes.uint32, "I64": dtypes.int64, "U64": dtypes.uint64,
    "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F32": dtypes.float32, "F64": dtypes.float64,
}
_SAFE_NAMES = {dt: name for name, dt in SAFE_DTYPES.items()}
INDEX_NAME = "model.safetensors.index.json"


# --- state dicts -----------------------------------------------------------------------------------

def get_state_dict(obj: Any, prefix: str = "", tensor_type=Tensor) -> Dict[str, Tensor]:
  """Every Tensor reachable through obj's attributes, lists, tuples and dicts, named by path
  ("layers.0.weight"), as tinygrad does."""
  if isinstance(obj, tensor_type):
    return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"):  # namedtuple
    return get_state_dict(obj._asdict(), prefix, tensor_type)
  if isinstance(obj, OrderedDict):
    return get_state_dict(dict(obj), prefix, tensor_type)
  if hasattr(obj, "__dict__"):
    return get_state_dict(obj.__dict__, prefix, tensor_type)
  out: Dict[str, Tensor] = {}
  if isinstance(obj, (list, tuple)):
    for i, x in enumerate(obj):
      out.update(get_state_dict(x, f"{prefix}{i}.", tensor_type))
  elif isinstance(obj, dict):
    for k, v in obj.items():
      out.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
  return out


def get_parameters(obj: Any) -> List[Tensor]:
  """The tensors of get_state_dict(obj), in order (the same tensor once)."""
  seen, out = set(), []
  for t in get_state_dict(obj).values():
    if id(t) not in seen:
      seen.add(id(t))
      out.append(t)
  return out


def load_state_dict(model: Any, state_dict: Dict[str, Any], strict: bool = True, verbose: bool = False,
                    realize: bool = True) -> List[str]:
  """Point each of model's tensors at the value of the same name in state_dict (Tensors or
  numpy arrays; cast to the model tensor's dtype), then realize them all in one request.
  strict: a missing name raises KeyError. Returns the names in state_dict the model lacks."""
  model_sd = get_state_dict(model)
  for name, t in model_sd.items():
    if name not in state_dict:
      if strict:
        raise KeyError(f"load_state_dict: {name!r} is missing from the state dict")
      if verbose:
        print(f"load_state_dict: {name!r} missing, left as it is")
      continue
    v = state_dict[name]
    if not isinstance(v, Tensor):
      v = Tensor(np.asarray(v))
    if v.shape != t.shape:
      raise ValueError(f"load_state_dict: {name!r} has shape {v.shape}, the model expects {t.shape}")
    t.assign(v.cast(t.dtype))
  if realize and model_sd:
    Tensor.realize(*model_sd.values())
  return [k for k in state_dict if k not in model_sd]


# --- safetensors -----------------------------------------------------------------------------------

def _to_bytes(t: Union[Tensor, np.ndarray]) -> Tuple[str, Tuple[int, ...], bytes]:
  """(safetensors dtype, shape, little-endian bytes) of a realized tensor or a numpy array."""
  if isinstance(t, Tensor):
    dt = t.dtype
    arr = t.numpy()
    if dt == dtypes.bfloat16:  # numpy() widened it to float32 exactly: take the top 16 bits back
      arr = (np.array(arr, dtype=np.float32, order="C").view(np.uint32) >> 16).astype("<u2")
  else:
    arr = np.asarray(t)
    dt = dtypes.from_np(arr.dtype)
  if dt not in _SAFE_NAMES:
    raise TypeError(f"safetensors cannot store {dt.name}")
  if dt != dtypes.bfloat16:
    arr = np.array(arr, dtype=np.dtype(dt.np).newbyteorder("<"), order="C")
  return _SAFE_NAMES[dt], tuple(int(s) for s in arr.shape), np.array(arr, order="C", copy=False).tobytes()


def _write_file(path: Path, items: List[Tuple[str, str, Tuple[int, ...], bytes]],
                metadata: Optional[Dict[str, str]]) -> int:
  header: Dict[str, Any] = {}
  if metadata:
    header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
  off = 0
  for name, dt, shape, data in items:
    header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
    off += len(data)
  hb = json.dumps(header, separators=(",", ":")).encode()
  hb += b" " * (-len(hb) % 8)  # data starts 8-byte aligned, as the reference writer does
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(hb)))
    f.write(hb)
    for _, _, _, data in items:
      f.write(data)
  return off


def safe_save(tensors: Dict[str, Union[Tensor, np.ndarray]], path: PathLike,
              metadata: Optional[Dict[str, str]] = None, max_shard_size: Optional[int] = None) -> List[str]:
  """Write tensors (realized together first) to a safetensors file. With max_shard_size (bytes of
  data per file), write HuggingFace shards `<stem>-0000i-of-0000n.safetensors` next to `path`
  plus `model.safetensors.index.json`. Returns the files written."""
  path = Path(path)
  live = [t for t in tensors.values() if isinstance(t, Tensor)]
  if live:
    Tensor.realize(*live)
  items = [(name, *_to_bytes(t)) for name, t in tensors.items()]
  if max_shard_size is None:
    _write_file(path, items, metadata)
    return [str(path)]
  shards: List[List] = [[]]
  size = 0
  for it in items:
    if shards[-1] and size + len(it[3]) > max_shard_size:
      shards.append([])
      size = 0
    shards[-1].append(it)
    size += len(it[3])
  stem = path.name[:-len(".safetensors")] if path.name.endswith(".safetensors") else path.name
  written, weight_map, total = [], {}, 0
  for i, shard in enumerate(shards):
    fn = path.parent / f"{stem}-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    total += _write_file(fn, shard, metadata)
    written.append(str(fn))
    weight_map.update({name: fn.name for name, *_ in shard})
  index = path.parent / INDEX_NAME
  index.write_text(json.dumps({"metadata": {"total_size": total, **(metadata or {})},
                               "weight_map": weight_map}, indent=2))
  return [str(index)] + written


# The reference implementation's limit: a header this large is a damaged or hostile file.
MAX_HEADER_BYTES = 100_000_000
_MAX_RANK = 32  # numpy 1.x's most dimensions of an array


def _short(name: Any) -> str:
  """A file-supplied name as it may appear in an error message: quoted and bounded."""
  text = repr(name)
  return text if len(text) <= 80 else text[:77] + "..."


def _parse_json(raw: bytes, what: str) -> Any:
  """JSON from a file, every failure a ValueError naming `what`: not UTF-8, not JSON, nested too
  deeply for Python's parser, or an object with a key twice (the last would silently win)."""
  def no_duplicates(pairs):
    seen: Dict[str, Any] = {}
    for k, v in pairs:
      if k in seen:
        raise ValueError(f"the key {_short(k)} appears twice")
      seen[k] = v
    return seen
  try:
    return json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
  except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
    raise ValueError(f"{what} is not valid JSON: {str(e)[:200]}") from None


def _read_header(path: Path) -> Tuple[Dict[str, Any], int]:
  with open(path, "rb") as f:
    raw = f.read(8)
    if len(raw) != 8:
      raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (n,) = struct.unpack("<Q", raw)
    if n > os.path.getsize(path) - 8:
      raise ValueError(f"{path}: header length {n} exceeds the file")
    if n > MAX_HEADER_BYTES:
      raise ValueError(f"{path}: header length {n} is over the limit of {MAX_HEADER_BYTES} bytes")
    header = _parse_json(f.read(n), f"{path}: the header")
  if not isinstance(header, dict):
    raise ValueError(f"{path}: the header is not a JSON object")
  meta = header.get("__metadata__")
  if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
    raise ValueError(f"{path}: __metadata__ is not an object of strings")
  return header, 8 + n


def _is_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _tensor_entries(fn: Path, header: Dict[str, Any],
                    data_size: int) -> List[Tuple[str, DType, np.dtype, Tuple[int, ...], int, int]]:
  """(name, dtype, wire numpy dtype, shape, begin, end) of every tensor of a header, checked as the format demands:
  known dtypes, non-negative dimensions, offsets that hold exactly the tensor's bytes, and tensors
  that tile the data from its first byte to its last without overlapping (so nothing is read from
  the header or past the file)."""
  entries = []
  for name, info in header.items():
    if name == "__metadata__":
      continue
    what = f"{fn}: tensor {_short(name)}"
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
      raise ValueError(f"{what} is not an object with dtype, shape and data_offsets")
    if not isinstance(info["dtype"], str):
      raise ValueError(f"{what} has dtype {_short(info['dtype'])}, not a string")
    dt = SAFE_DTYPES.get(info["dtype"])
    if dt is None:
      raise TypeError(f"{what} has unsupported dtype {_short(info['dtype'])}")
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
      raise ValueError(f"{what} has shape {_short(shape)}, not a list of non-negative integers")
    if len(shape) > _MAX_RANK:
      raise ValueError(f"{what} has {len(shape)} dimensions, more than numpy's {_MAX_RANK}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]):
      raise ValueError(f"{what} has data_offsets {_short(offsets)}, not [begin, end] with 0 <= begin <= end")
    b, e = offsets
    # bfloat16 as its raw 16-bit patterns: numpy has no bfloat16
    wire = np.dtype("<u2") if dt == dtypes.bfloat16 else np.dtype(dt.np).newbyteorder("<")
    count = 1
    for d in shape:
      count *= d
    if e - b != count * wire.itemsize:
      raise ValueError(f"{what} data_offsets {b}..{e} do not fit {info['dtype']}{shape}")
    entries.append((name, dt, wire, tuple(shape), b, e))
  covered = 0
  for name, *_, b, e in sorted(entries, key=lambda t: (t[4], t[5])):
    if b != covered:
      gap = "overlaps the tensor before it" if b < covered else f"leaves bytes {covered}..{b} unused"
      raise ValueError(f"{fn}: tensor {_short(name)} at {b}..{e} {gap}")
    covered = e
  if covered != data_size:
    raise ValueError(f"{fn}: the tensors cover {covered} bytes of data, the file holds {data_size}")
  return entries


def _files_of(path: PathLike) -> List[Path]:
  """The safetensors files behind a file, an index .json, or a directory holding either."""
  path = Path(path)
  if path.is_dir():
    if (path / INDEX_NAME).exists():
      path = path / INDEX_NAME
    elif (path / "model.safetensors").exists():
      path = path / "model.safetensors"
    else:
      found = sorted(path.glob("*.safetensors"))
      if not found:
        raise FileNotFoundError(f"no safetensors files in {path}")
      return found
  if path.suffix == ".json":
    index = _parse_json(path.read_bytes(), f"{path}")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
      raise ValueError(f"{path}: not a sharded checkpoint's index (no weight_map object)")
    for n in weight_map.values():
      # A shard is a file beside the index: a path would let a downloaded index read any file.
      if not isinstance(n, str) or n in ("", ".", "..") or "/" in n or "\\" in n or "\0" in n:
        raise ValueError(f"{path}: weight_map names {_short(n)}, which is not a file name in the index's folder")
    names = list(dict.fromkeys(weight_map.values()))
    for n in names:
      if not (path.parent / n).is_file():
        raise FileNotFoundError(f"{path}: the shard {_short(n)} does not exist")
    return [path.parent / n for n in names]
  return [path]


def safe_load_metadata(path: PathLike) -> Dict[str, Any]:
  """The JSON headers of the file(s), merged; `__metadata__` of the first file."""
  out: Dict[str, Any] = {}
  for fn in _files_of(path):
    header, _ = _read_header(fn)
    meta = header.pop("__metadata__", None)
    if meta is not None and "__metadata__" not in out:
      out["__metadata__"] = meta
    out.update(header)
  return out


def safe_load_numpy(path: PathLike) -> Dict[str, Tuple[np.ndarray, DType]]:
  """{name: (array in the wire layout, dtype)}: bfloat16 as its raw uint16 bits. A damaged or
  hostile file raises ValueError naming the file and what is wrong (TypeError for a dtype polygrad
  does not have); nothing outside a tensor's own bytes is ever read."""
  out: Dict[str, Tuple[np.ndarray, DType]] = {}
  for fn in _files_of(path):
    header, start = _read_header(fn)
    entries = _tensor_entries(fn, header, os.path.getsize(fn) - start)
    mm = np.memmap(fn, dtype=np.uint8, mode="r") if entries else None
    for name, dt, wire, shape, b, e in entries:
      try:
        out[name] = (np.frombuffer(mm[start + b:start + e].tobytes(), dtype=wire).reshape(shape), dt)
      except ValueError as err:  # an empty tensor with a dimension past numpy's index range
        raise ValueError(f"{fn}: tensor {_short(name)} has shape {_short(list(shape))}, which numpy cannot hold "
                         f"({str(err)[:100]})") from None
  return out


def safe_load(path: PathLike) -> Dict[str, Tensor]:
  """Tensors from a safetensors file, a sharded checkpoint's index .json, or a directory holding
  either; dtypes as stored (F32, F16, BF16, ...). The data is sent when first used."""
  return {name: Tensor.from_wire_array(arr, dt) for name, (arr, dt) in safe_load_numpy(path).items()}


# --- PyTorch checkpoints ---------------------------------------------------------------------------

from .torch_load import torch_load  # noqa: E402  (re-exported: tinygrad's nn.state has it)
