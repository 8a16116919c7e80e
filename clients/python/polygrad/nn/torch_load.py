"""PyTorch checkpoints (`torch.save` files) read without torch.

Two layouts exist. Since torch 1.6 a checkpoint is a zip archive `<name>/data.pkl` (the pickled
object, each tensor a reference to a storage by key) plus `<name>/data/<key>` (each storage's raw
bytes) and `<name>/byteorder`. Before, it was a run of pickles in one stream: a magic number, the
protocol version, system information, the object, the list of storage keys, then each storage as
an 8-byte element count and its bytes.

A checkpoint is untrusted input and a pickle can name any Python callable, so the unpickler here
resolves only what a checkpoint of tensors and containers needs (the tensor and parameter
rebuilders, storage types, OrderedDict) and refuses every other global by name. Every storage is
bounds-checked against the bytes present and every tensor view against its storage; damage is a
ValueError naming the file.
"""
from __future__ import annotations

import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from ..dtype import DType, dtypes
from ..tensor import Tensor

PathLike = Union[str, os.PathLike]

# torch storage class names -> polygrad dtypes
_STORAGES: Dict[str, DType] = {
    "FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
    "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
    "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8,
    "BoolStorage": dtypes.bool,
}
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
_MAX_DIMS = 64


class CheckpointError(ValueError):
  """A damaged or malformed checkpoint; the message names the file."""


class RefusedGlobal(pickle.UnpicklingError):
  """The checkpoint names a callable torch_load does not resolve (it would run code)."""


class _StorageType:
  def __init__(self, dtype: DType):
    self.dtype = dtype


class _Storage:
  """A storage: its key and dtype, and once read, its bytes as little-endian elements of the wire
  type (bfloat16: uint16 bits). The legacy stream stores the bytes after the object."""

  def __init__(self, key: str, dtype: DType, numel: int, data: Optional[np.ndarray] = None):
    self.key, self.dtype, self.numel, self.data = key, dtype, numel, data


class _View:
  """A tensor waiting for its storage's bytes (legacy stream)."""

  def __init__(self, storage: _Storage, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...]):
    self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


def _wire(dt: DType) -> np.dtype:
  return np.dtype("<u2") if dt == dtypes.bfloat16 else np.dtype(dt.np).newbyteorder("<")


def _check_view(fn: Path, storage: Any, offset: Any, size: Any, stride: Any) -> None:
  bad = lambda why: CheckpointError(f"{fn}: a tensor {why}")
  if not isinstance(storage, _Storage):
    raise bad("whose storage is not a storage")
  ints = lambda xs: isinstance(xs, tuple) and all(type(x) is int for x in xs)
  if type(offset) is not int or not ints(size) or not ints(stride) or len(size) != len(stride) \
      or len(size) > _MAX_DIMS:
    raise bad(f"with a malformed view (offset {str(offset)[:40]}, size {str(size)[:80]}, stride {str(stride)[:80]})")
  if offset < 0 or any(d < 0 for d in size) or any(s < 0 for s in stride):
    raise bad(f"with a negative offset, size or stride (size {size}, stride {stride})")
  if 0 not in size:
    last = offset + sum((d - 1) * s for d, s in zip(size, stride))
    if last >= storage.numel:
      raise bad(f"of size {size} and stride {stride} at offset {offset} that reads past its storage of "
                f"{storage.numel} elements")


def _tensor(v: _View) -> Tensor:
  data, item = v.storage.data, v.storage.data.itemsize
  base = data[v.offset:] if 0 not in v.size else data[:0]
  view = np.lib.stride_tricks.as_strided(base, shape=v.size, strides=[s * item for s in v.stride], writeable=False)
  return Tensor.from_wire_array(view.copy(order="C"), v.storage.dtype)  # (ascontiguousarray makes 0-d 1-d)


class _TorchUnpickler(pickle.Unpickler):
  """Resolves only the globals a checkpoint of tensors needs. `storage(key, dtype, numel)` gives
  the storage a persistent reference names; tensors come out as _View."""

  def __init__(self, file, fn: Path, storage: Callable[[str, DType, int], _Storage]):
    super().__init__(file)
    self.fn, self.storage = fn, storage

  def find_class(self, module: str, name: str) -> Any:
    if module == "collections" and name == "OrderedDict":
      return OrderedDict
    if module == "torch._utils" and name == "_rebuild_tensor_v2":
      return self._rebuild_tensor
    if module == "torch._utils" and name == "_rebuild_parameter":
      return lambda data, requires_grad, backward_hooks, *state: data
    if module == "torch" and name in _STORAGES:
      return _StorageType(_STORAGES[name])
    raise RefusedGlobal(f"{self.fn}: refusing to load the global {module[:80]}.{name[:80]}: torch_load "
                                 "reads tensors, parameters and containers only")

  def persistent_load(self, pid: Any) -> _Storage:
    if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" or not isinstance(pid[1], _StorageType):
      raise CheckpointError(f"{self.fn}: a persistent reference that is not a storage")
    numel = pid[4]
    if type(numel) is not int or numel < 0:
      raise CheckpointError(f"{self.fn}: storage {str(pid[2])[:40]} with a malformed size {str(numel)[:20]}")
    return self.storage(str(pid[2]), pid[1].dtype, numel)

  def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> _View:
    _check_view(self.fn, storage, offset, size, stride)
    return _View(storage, offset, size, stride)


def _materialize(obj: Any) -> Any:
  """obj with every _View replaced by its Tensor, through dicts, lists and tuples."""
  if isinstance(obj, _View):
    return _tensor(obj)
  if isinstance(obj, OrderedDict):
    return OrderedDict((k, _materialize(v)) for k, v in obj.items())
  if isinstance(obj, dict):
    return {k: _materialize(v) for k, v in obj.items()}
  if isinstance(obj, list):
    return [_materialize(v) for v in obj]
  if isinstance(obj, tuple):
    return tuple(_materialize(v) for v in obj)
  return obj


def _read_exact(f, n: int, fn: Path, what: str) -> bytes:
  data = f.read(n)
  if len(data) != n:
    raise CheckpointError(f"{fn}: truncated: {what} needs {n} bytes, {len(data)} remain")
  return data


def _load_zip(fn: Path, z: zipfile.ZipFile) -> Any:
  names = set(z.namelist())
  pkls = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
  if len(pkls) != 1:
    raise CheckpointError(f"{fn}: a zip without exactly one <name>/data.pkl: not a torch checkpoint")
  prefix = pkls[0][:-len("data.pkl")]
  if f"{prefix}byteorder" in names and z.read(f"{prefix}byteorder").strip() not in (b"little", b""):
    raise CheckpointError(f"{fn}: big-endian checkpoints are not supported")
  storages: Dict[str, _Storage] = {}

  def storage(key: str, dt: DType, numel: int) -> _Storage:
    if key not in storages:
      member = f"{prefix}data/{key}"
      if member not in names:
        raise CheckpointError(f"{fn}: storage {key[:40]} is missing from the archive")
      wire = _wire(dt)
      if z.getinfo(member).file_size < numel * wire.itemsize:
        raise CheckpointError(f"{fn}: storage {key[:40]} claims {numel} elements; its file holds "
                         f"{z.getinfo(member).file_size} bytes")
      raw = z.read(member)
      storages[key] = _Storage(key, dt, numel, np.frombuffer(raw, dtype=wire, count=numel))
    return storages[key]

  with z.open(pkls[0]) as f:
    return _materialize(_TorchUnpickler(f, fn, storage).load())


def _load_legacy(fn: Path, f) -> Any:
  """The pre-1.6 stream: storages' bytes follow the object that refers to them."""
  plain = lambda: _SafePickle(f, fn).load()
  if plain() != _LEGACY_MAGIC:
    raise CheckpointError(f"{fn}: neither a zip archive nor a legacy torch checkpoint (bad magic number)")
  plain()  # protocol version
  plain()  # system information (byte order, type sizes)
  storages: Dict[str, _Storage] = {}

  def storage(key: str, dt: DType, numel: int) -> _Storage:
    return storages.setdefault(key, _Storage(key, dt, numel))

  obj = _TorchUnpickler(f, fn, storage).load()
  keys = plain()
  if not isinstance(keys, list):
    raise CheckpointError(f"{fn}: the storage key list is missing")
  for key in keys:
    key = str(key)
    if key not in storages:
      raise CheckpointError(f"{fn}: storage {key[:40]} is not referenced")
    st = storages[key]
    count, = struct.unpack("<q", _read_exact(f, 8, fn, f"storage {key[:40]}'s size"))
    if count != st.numel:
      raise CheckpointError(f"{fn}: storage {key[:40]} holds {count} elements, its reference says {st.numel}")
    wire = _wire(st.dtype)
    st.data = np.frombuffer(_read_exact(f, count * wire.itemsize, fn, f"storage {key[:40]}"), dtype=wire)
  missing = [k for k, st in storages.items() if st.data is None]
  if missing:
    raise CheckpointError(f"{fn}: storage {missing[0][:40]} has no data")
  return _materialize(obj)


class _SafePickle(pickle.Unpickler):
  """The legacy stream's plain pickles (magic, protocol, system info, key list): no globals."""

  def __init__(self, f, fn: Path):
    super().__init__(f)
    self.fn = fn

  def find_class(self, module: str, name: str) -> Any:
    raise RefusedGlobal(f"{self.fn}: refusing to load the global {module[:80]}.{name[:80]}")


def torch_load(path: PathLike) -> Any:
  """The object a `torch.save` file holds (usually a state dict), every tensor and parameter a
  polygrad Tensor with torch's dtype and values (views copied out contiguous). Reads both the zip
  layout (torch >= 1.6) and the older stream; no torch needed. A file that names any callable
  beyond tensors and containers raises pickle.UnpicklingError; a damaged one ValueError."""
  fn = Path(path)
  with open(fn, "rb"):
    pass  # a file that is missing or unreadable raises its OSError here; after this, errors are damage
  try:
    if zipfile.is_zipfile(fn):
      with zipfile.ZipFile(fn) as z:
        return _load_zip(fn, z)
    with open(fn, "rb") as f:
      return _load_legacy(fn, f)
  except (CheckpointError, RefusedGlobal):
    raise
  except Exception as e:  # noqa: BLE001 - anything else is the pickle or zip parser meeting bad bytes
    raise CheckpointError(f"{fn}: truncated or damaged ({type(e).__name__}: {str(e)[:100]})") from None
