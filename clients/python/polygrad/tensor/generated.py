"""The one-op methods the op schema names (METHODS, written by scripts/gen-ops into _ops_gen.py):
exp, log, sqrt, sigmoid, erf, logaddexp, lerp, softplus, ... Each is built here by the one
implementation of its shape rule; scripts/gen-ops refuses a method whose rule has none."""
from __future__ import annotations

from typing import Sequence

from .. import graph as g
from ..dtype import dtypes
from ..shape import normalize_axis
from .core import Tensor, tensor_methods

_CONVERT = {"float": float, "int": int, "bool": bool, "str": str}


def _composite(params: Sequence[tuple], values: Sequence, ndim: int) -> g.Composite:
  fields = {}
  for (_, field, kind, _default), v in zip(params, values):
    # One axis into axes; a 0-d tensor's axis (0 or -1) is 0: the daemon's composites take rank 0.
    fields[field] = (normalize_axis(v, max(ndim, 1)),) if kind == "axis" else _CONVERT[kind](v)
  return g.Composite(**fields)


def broadcast_sources(self: Tensor, operands: Sequence) -> list:
  """self and the operands (tensors or numbers) broadcast to one shape and promoted to one dtype,
  as a binary op does: each operand against self, then the earlier ones again against the final
  dtype and shape."""
  x, srcs = self, []
  for o in operands:
    x, t = x._broadcasted(o)
    srcs.append(t)
  for i in range(len(srcs) - 1):
    x, srcs[i] = x._broadcasted(srcs[i])
  return [x, *srcs]


def _elementwise(record: tuple, self: Tensor, operands: Sequence, values: Sequence) -> Tensor:
  """SHAPE_ELEMENTWISE: self and the operands broadcast to one shape and promoted to one dtype
  (broadcast_sources); DT_FLOAT casts every source to float, DT_BOOL gives bool, DT_SAME the dtype
  they share."""
  _, op, _, _, params, dtype_rule, _ = record
  srcs = broadcast_sources(self, operands)
  if dtype_rule == "DT_FLOAT":
    srcs = [s._float() for s in srcs]
  dtype = dtypes.bool if dtype_rule == "DT_BOOL" else srcs[0].dtype
  arg = _composite(params, values, srcs[0].ndim) if op in g.COMPOSITE_ARG_OPS else None
  return Tensor._make(op, dtype, srcs[0].shape, srcs, arg)


SHAPE_RULES = {"SHAPE_ELEMENTWISE": _elementwise}


def _method(record: tuple):
  """The method of one METHODS record, with its real signature: self, the operands, then the
  parameters with their defaults (compiled from the record, so help() shows it and a call costs
  no argument binding)."""
  _, _, name, operands, params, _, shape_rule = record
  build = SHAPE_RULES.get(shape_rule)
  if build is None:
    raise RuntimeError(f"Tensor.{name}: the client has no implementation of {shape_rule} (regenerate _ops_gen.py)")
  sig = ", ".join(["self", *operands, *(f"{p[0]}=_default{i}" for i, p in enumerate(params))])
  tup = lambda names: "(" + "".join(f"{n}, " for n in names) + ")"  # noqa: E731
  src = (f"def {name}({sig}):\n"
         f"  return _build(_record, self, {tup(operands)}, {tup(p[0] for p in params)})\n")
  ns = {"_build": build, "_record": record, **{f"_default{i}": p[3] for i, p in enumerate(params)}}
  exec(src, ns)  # noqa: S102 - identifiers from the generated table (gen-ops checks them); defaults by value
  fn = ns[name]
  fn.__doc__ = g.METHOD_DOCS.get(name)
  fn.__qualname__ = f"Generated.{name}"
  fn.__module__ = __name__
  return fn


Generated = tensor_methods(type("Generated", (), {r[2]: _method(r) for r in g.METHODS}))
