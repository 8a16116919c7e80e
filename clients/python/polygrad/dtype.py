"""Element types and tinygrad's promotion rules, computed locally (no round trip)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ._ops_gen import DTYPE_TABLE
from .errors import UnknownDTypeError


@dataclass(frozen=True, eq=False)
class DType:
  """One element type. `priority` orders types for promotion ties (tinygrad's order)."""

  priority: int
  itemsize: int
  name: str
  kind: str  # 'b' bool, 'i' signed int, 'u' unsigned int, 'f' float
  wire: int  # polygrad.v1.DType enum value
  np: Optional[type]  # numpy scalar type; None where numpy has none (bfloat16)

  def __repr__(self) -> str:
    return f"dtypes.{self.name}"

  def __lt__(self, other: "DType") -> bool:
    return self.priority < other.priority

  def __hash__(self) -> int:
    return hash(self.name)

  def __eq__(self, other) -> bool:
    # A dtype also equals its name (the seed polygrad API: t.dtype == 'float32'); the hash is the
    # name's, so the two agree in sets and dicts too.
    if other is self:
      return True
    if isinstance(other, str):
      return other == self.name
    return isinstance(other, DType) and other.name == self.name

  def __reduce__(self):
    return (getattr, (dtypes, self.name))

  @property
  def min(self):
    return dtypes.min(self)

  @property
  def max(self):
    return dtypes.max(self)


# Each dtype's facts (wire number, itemsize, kind, priority, promotion edges) are polygrad.v1.DType's
# schema options, from the generated table (_ops_gen.py, which needs no stubs, so the pure-local parts
# import without them); the numpy scalar types are this client's own.
_NP_TYPES = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
             "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
             "float16": np.float16, "bfloat16": None, "float32": np.float32, "float64": np.float64}
_BY_NAME = {name.lower(): DType(priority, itemsize, name.lower(), kind, number, _NP_TYPES[name.lower()])
            for name, number, itemsize, kind, priority, _ in DTYPE_TABLE}
# tinygrad's promotion lattice: each dtype and the types it promotes to directly.
_PROMO_LATTICE = {_BY_NAME[name.lower()]: tuple(_BY_NAME[p.lower()] for p in promotes)
                  for name, _, _, _, _, promotes in DTYPE_TABLE}

# In tinygrad's priority order.
ALL_DTYPES = tuple(sorted(_BY_NAME.values(), key=lambda d: d.priority))
(_BOOL, _INT8, _UINT8, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _FLOAT16, _BFLOAT16, _FLOAT32,
 _FLOAT64) = (_BY_NAME[n] for n in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                    "uint64", "float16", "bfloat16", "float32", "float64"))


class dtypes:  # noqa: N801 - tinygrad's spelling
  """The dtype namespace: `dtypes.float32`, `dtypes.int32`, `dtypes.bool`, ... plus helpers."""

  bool = _BOOL
  int8 = _INT8
  uint8 = _UINT8
  int16 = _INT16
  uint16 = _UINT16
  int32 = _INT32
  uint32 = _UINT32
  int64 = _INT64
  uint64 = _UINT64
  float16 = _FLOAT16
  bfloat16 = _BFLOAT16
  float32 = _FLOAT32
  float64 = _FLOAT64
  # tinygrad's aliases
  char = _INT8
  uchar = _UINT8
  short = _INT16
  ushort = _UINT16
  int = _INT32
  uint = _UINT32
  long = _INT64
  ulong = _UINT64
  half = _FLOAT16
  float = _FLOAT32
  double = _FLOAT64
  default_float = _FLOAT32
  default_int = _INT32

  @staticmethod
  def is_float(dt: DType) -> bool:
    return dt.kind == "f"

  @staticmethod
  def is_int(dt: DType) -> bool:
    """Signed or unsigned integer (not bool), as in tinygrad."""
    return dt.kind in "iu"

  @staticmethod
  def is_unsigned(dt: DType) -> bool:
    return dt.kind == "u"

  @staticmethod
  def is_bool(dt: DType) -> bool:
    return dt.kind == "b"

  @staticmethod
  def from_py(x) -> DType:
    """The dtype a Python value (or nested list of them) gets by default."""
    if isinstance(x, (list, tuple)):
      return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
    if isinstance(x, bool):
      return dtypes.bool
    if isinstance(x, int):
      return dtypes.default_int
    if isinstance(x, float):
      return dtypes.default_float
    raise TypeError(f"cannot infer a dtype from {type(x).__name__}")

  @staticmethod
  def from_np(np_dtype) -> DType:
    """The polygrad dtype of a numpy dtype; TypeError for kinds polygrad has no type for."""
    key = np.dtype(np_dtype)
    for dt in ALL_DTYPES:
      if dt.np is not None and np.dtype(dt.np) == key:
        return dt
    raise TypeError(f"numpy dtype {key} is not supported by polygrad "
                    f"(supported: {', '.join(d.name for d in ALL_DTYPES if d.np is not None)})")

  @staticmethod
  def from_wire(value: int) -> DType:
    for dt in ALL_DTYPES:
      if dt.wire == value:
        return dt
    raise ValueError(f"unknown wire dtype {value}")

  @staticmethod
  def from_name(name: str) -> DType:
    dt = getattr(dtypes, name, None)
    if not isinstance(dt, DType):
      raise UnknownDTypeError(f"unknown dtype {name[:100]!r}")
    return dt

  @staticmethod
  def min(dt: DType):
    if dt.kind == "b":
      return False
    if dt.kind in "iu":
      return int(np.iinfo(dt.np).min)
    return -math.inf

  @staticmethod
  def max(dt: DType):
    if dt.kind == "b":
      return True
    if dt.kind in "iu":
      return int(np.iinfo(dt.np).max)
    return math.inf

  @staticmethod
  def as_const(value, dt: DType):
    """A Python value converted the way a constant of dtype `dt` holds it."""
    if dt.kind == "b":
      return bool(value)
    if dt.kind in "iu":
      return int(value)
    return float(value)


DTypeLike = Union[DType, str, type, np.dtype]


def to_dtype(x: DTypeLike) -> DType:
  """Accept a DType, a dtype name ('float32'), or a numpy dtype / scalar type."""
  if isinstance(x, DType):
    return x
  if isinstance(x, str):
    return dtypes.from_name(x)
  if x is bool:
    return dtypes.bool
  if x is int:
    return dtypes.default_int
  if x is float:
    return dtypes.default_float
  return dtypes.from_np(x)


@functools.lru_cache(maxsize=None)
def _parents(dt: DType) -> frozenset:
  out = {dt}
  for p in _PROMO_LATTICE[dt]:
    out |= _parents(p)
  return frozenset(out)


def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every one of `ds` promotes to (tinygrad's rule)."""
  common = frozenset.intersection(*[_parents(d) for d in ds])
  return min(common)


def least_upper_float(dt: DType) -> DType:
  return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)


def sum_acc_dtype(dt: DType) -> DType:
  """The dtype a sum accumulates in (tinygrad): ints widen to at least int32, floats to float32."""
  if dtypes.is_unsigned(dt):
    return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt == dtypes.bool:
    return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, dtypes.float32)


def np_dtype(dt: DType) -> np.dtype:
  """The little-endian numpy dtype used on the wire (bfloat16 travels as raw uint16)."""
  return np.dtype("<u2") if dt == dtypes.bfloat16 else np.dtype(dt.np).newbyteorder("<")
