"""Tensor.einsum and Tensor.rearrange. einsum is one EINSUM node the daemon expands
(core/frontend/einsum.h); here is only its shape rule (SHAPE_EINSUM), so `t.shape` is known and a
bad equation is refused before any round trip. rearrange is einops' notation turned into the
movement ops it names: formulas only name axes, and nothing of them travels but the ops they
become.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from .. import graph as wire_graph
from ..dtype import least_upper_dtype
from ..errors import ShapeError
from .core import Tensor

__all__ = ["einsum", "einsum_shape", "rearrange"]

_MAX_EQUATION = 512  # core's kMaxEinsumEquation


def _spec(s: str, what: str) -> Tuple[List[str], int]:
  """A spec's labels with "..." as one "..." entry, and where "..." is (-1: none)."""
  if s.count("...") > 1:
    raise ShapeError(f"einsum: {what} has more than one '...'")
  letters = s.replace("...", "")
  for c in letters:
    if not ("a" <= c <= "z" or "A" <= c <= "Z"):
      raise ShapeError(f"einsum: {what}: {c!r} is not a letter or '...'")
  at = s.find("...")
  return list(letters), (len(s[:at]) if at >= 0 else -1)


def _expand(letters: List[str], at: int, covered: int, ell: int) -> List[str]:
  """Labels with "..." standing for `covered` axes, right-aligned among `ell` ('.0', '.1', ...)."""
  stand_ins = [f".{j}" for j in range(ell - covered, ell)]
  return letters if at < 0 else letters[:at] + stand_ins + letters[at:]


def einsum_shape(formula: str, shapes: Sequence[Tuple[int, ...]]) -> Tuple[int, ...]:
  """The result shape of numpy's einsum (core/frontend/einsum.h's rule): explicit or implicit
  output, "...", diagonals of repeated labels, size-1 broadcasting of shared labels."""
  if len(formula) > _MAX_EQUATION:
    raise ShapeError(f"einsum: the equation has {len(formula)} characters, more than {_MAX_EQUATION}")
  eq = formula.replace(" ", "")
  lhs, arrow, rhs = eq.partition("->")
  if "->" in rhs:
    raise ShapeError("einsum: the equation has more than one '->'")
  specs = lhs.split(",")
  if len(specs) != len(shapes):
    raise ShapeError(f"einsum: the equation has {len(specs)} operands, {len(shapes)} tensors given")
  parsed = []
  for i, (spec, shape) in enumerate(zip(specs, shapes)):
    letters, at = _spec(spec, f"operand {i}")
    covered = len(shape) - len(letters)
    if covered < 0 or (at < 0 and covered != 0):
      raise ShapeError(f"einsum: operand {i} names {len(letters)} axes but has {len(shape)}")
    parsed.append((letters, at, covered))
  ell = max(c for _, _, c in parsed)
  sizes: Dict[str, int] = {}
  uses: Dict[str, int] = {}
  for i, ((letters, at, covered), shape) in enumerate(zip(parsed, shapes)):
    mine: Dict[str, int] = {}
    for label, n in zip(_expand(letters, at, covered, ell), shape):
      uses[label] = uses.get(label, 0) + 1
      if label in mine and mine[label] != n:
        raise ShapeError(f"einsum: label {label!r} repeats in operand {i} over axes of sizes {mine[label]} and {n}")
      mine[label] = n
    for label, n in mine.items():
      if label not in sizes or sizes[label] == 1:
        sizes[label] = n
      elif n not in (1, sizes[label]):
        raise ShapeError(f"einsum: label {label!r} has sizes {sizes[label]} and {n}")
  if arrow:
    letters, at = _spec(rhs, "the output")
    out = _expand(letters, at, ell, ell)
    for i, label in enumerate(out):
      if label not in sizes:
        raise ShapeError(f"einsum: output label {label!r} is not in any input")
      if label in out[i + 1:]:
        raise ShapeError(f"einsum: output label {label!r} repeats")
  else:
    out = [f".{j}" for j in range(ell)] + sorted(c for c, n in uses.items() if n == 1 and not c.startswith("."))
  return tuple(sizes[label] for label in out)


def einsum(formula: str, *operands):
  """numpy.einsum's semantics for one or more tensors: explicit ("ij,jk->ik") or implicit
  output (labels used once, in ASCII order), "..." for broadcast axes. A label repeated within
  one operand takes that operand's diagonal ("ii->i"; "ii->" is the trace). The daemon's EINSUM;
  operands of different dtypes are promoted to one first."""
  if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
    operands = tuple(operands[0])
  if not operands or not all(isinstance(t, Tensor) for t in operands) or not isinstance(formula, str):
    raise TypeError("einsum takes a formula and one or more Tensors")
  if len(operands) > 64:
    raise ShapeError(f"einsum takes at most 64 operands, got {len(operands)}")
  shape = einsum_shape(formula, [t.shape for t in operands])
  dt = least_upper_dtype(*[t.dtype for t in operands])
  xs = [t if t.dtype == dt else t.cast(dt) for t in operands]
  return Tensor._make(wire_graph.EINSUM, dt, shape, xs, wire_graph.Composite(equation=formula))


def _groups(side: str, what: str) -> List[List[str]]:
  """einops groups of one side: "b (h w) c" -> [["b"], ["h", "w"], ["c"]]."""
  out: List[List[str]] = []
  current = None
  for tok in side.replace("(", " ( ").replace(")", " ) ").split():
    if tok == "(":
      if current is not None:
        raise ShapeError(f"rearrange: nested parentheses in {what}")
      current = []
    elif tok == ")":
      if current is None:
        raise ShapeError(f"rearrange: unbalanced ')' in {what}")
      out.append(current)
      current = None
    elif tok.isidentifier():
      if current is not None:
        current.append(tok)
      else:
        out.append([tok])
    else:
      raise ShapeError(f"rearrange: {tok!r} in {what} is not an axis name")
  if current is not None:
    raise ShapeError(f"rearrange: unbalanced '(' in {what}")
  return out


def rearrange(t, formula: str, **sizes: int):
  """einops.rearrange for one tensor: regroups, splits, merges and reorders named axes
  ("b (h w) c -> b h w c", h=2). Every name appears once on each side."""
  lhs, arrow, rhs = formula.partition("->")
  if not arrow:
    raise ShapeError(f"rearrange: {formula!r} has no '->'")
  left, right = _groups(lhs, "the input pattern"), _groups(rhs, "the output pattern")
  left_names = [n for g in left for n in g]
  right_names = [n for g in right for n in g]
  if len(set(left_names)) != len(left_names) or sorted(left_names) != sorted(right_names):
    raise ShapeError(f"rearrange: both sides must name the same axes once each: {formula!r}")
  if len(left) != t.ndim:
    raise ShapeError(f"rearrange: the input pattern has {len(left)} axes, the tensor {t.ndim}")
  unknown = set(sizes) - set(left_names)
  if unknown:
    raise ShapeError(f"rearrange: sizes given for axes not in the pattern: {sorted(unknown)}")
  known: Dict[str, int] = {k: int(v) for k, v in sizes.items()}
  for g, dim in zip(left, t.shape):
    missing = [n for n in g if n not in known]
    product = 1
    for n in g:
      product *= known.get(n, 1)
    if len(missing) > 1:
      raise ShapeError(f"rearrange: cannot infer both {missing} from size {dim}")
    if missing:
      if product == 0 or dim % product:
        raise ShapeError(f"rearrange: size {dim} does not split by {product} for {g}")
      known[missing[0]] = dim // product
    elif product != dim:
      raise ShapeError(f"rearrange: axes {g} multiply to {product}, the tensor's axis is {dim}")
  split = t.reshape([known[n] for n in left_names])
  moved = split.permute([left_names.index(n) for n in right_names]) if right_names else split
  out_shape: Sequence[int] = []
  for g in right:
    n = 1
    for name in g:
      n *= known[name]
    out_shape.append(n)
  return moved.reshape(list(out_shape))
