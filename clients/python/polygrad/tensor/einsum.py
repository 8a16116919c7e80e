"""Tensor.einsum and Tensor.rearrange: formulas turned into the movement ops, products and sums
the daemon already has (so gradients come for free). Formulas are parsed here, on the client:
they only name axes, and nothing of them travels to the daemon but the ops they become.
"""
from __future__ import annotations

import string
from typing import Dict, List, Sequence, Tuple

from ..errors import ShapeError
from .core import Tensor

__all__ = ["einsum", "rearrange"]

_ELLIPSIS_LETTERS = string.ascii_uppercase  # stand-ins for the axes "..." covers


def _split_operand(spec: str, rank: int, what: str) -> Tuple[str, int]:
  """The letters of one operand's spec and how many axes its "..." covers."""
  if spec.count("...") > 1:
    raise ShapeError(f"einsum: {what} has more than one '...'")
  letters = spec.replace("...", "")
  for c in letters:
    if c not in string.ascii_letters:
      raise ShapeError(f"einsum: {what}: {c!r} is not a letter")
  covered = rank - len(letters)
  if covered < 0 or ("..." not in spec and covered != 0):
    raise ShapeError(f"einsum: {what} names {len(letters)} axes but its operand has {rank}")
  return spec, covered


def einsum(formula: str, *operands):
  """numpy.einsum's semantics for one or more tensors: explicit ("ij,jk->ik") or implicit
  output (letters used once, sorted), "..." for broadcast axes. A letter repeated within one
  operand takes that operand's diagonal ("ii->i"; "ii->" is the trace)."""
  if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
    operands = tuple(operands[0])
  if not operands or not all(isinstance(t, Tensor) for t in operands):
    raise TypeError("einsum takes a formula and one or more Tensors")
  formula = formula.replace(" ", "")
  lhs, arrow, rhs = formula.partition("->")
  specs = lhs.split(",")
  if len(specs) != len(operands):
    raise ShapeError(f"einsum: the formula has {len(specs)} operands, {len(operands)} tensors given")
  parsed = [_split_operand(s, t.ndim, f"operand {i} ({s!r})") for i, (s, t) in enumerate(zip(specs, operands))]
  ell = max(c for _, c in parsed)
  ell_letters = _ELLIPSIS_LETTERS[:ell]
  if any(c in _ELLIPSIS_LETTERS for s in specs for c in s):
    raise ShapeError("einsum: use lower-case letters for axes")
  # Each operand's axes as letters, "..." expanded right-aligned (numpy's broadcasting).
  written = [spec.replace("...", ell_letters[ell - c:]) for spec, c in parsed]
  axes, operands = map(list, zip(*[_diagonals(a, t) for a, t in zip(written, operands)]))
  if arrow:
    out = rhs.replace("...", ell_letters)
    if "..." not in rhs and any(c in ell_letters for c in out):
      raise ShapeError("einsum: '...' in the output needs '...' in the inputs")
    for c in out:
      if not any(c in a for a in axes):
        raise ShapeError(f"einsum: output letter {c!r} is not in any input")
    if len(set(out)) != len(out):
      raise ShapeError(f"einsum: output {rhs!r} repeats a letter")
  else:
    counts: Dict[str, int] = {}
    for a in written:
      for c in a:
        counts[c] = counts.get(c, 0) + 1
    out = ell_letters + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell_letters))
  summed = [c for c in dict.fromkeys("".join(axes)) if c not in out]
  order = list(out) + summed
  sizes: Dict[str, int] = {}
  for a, t in zip(axes, operands):
    for c, n in zip(a, t.shape):
      if n != 1 and sizes.get(c, 1) not in (1, n):
        raise ShapeError(f"einsum: axis {c!r} has sizes {sizes[c]} and {n}")
      sizes[c] = max(sizes.get(c, 1), n)
  # Every operand permuted to the global letter order, with size-1 axes for letters it lacks;
  # then one broadcast product and one sum over the letters not in the output.
  result = None
  for a, t in zip(axes, operands):
    mine = [c for c in order if c in a]
    t = t.permute([a.index(c) for c in mine]) if mine else t
    t = t.reshape([t.shape[mine.index(c)] if c in a else 1 for c in order]) if order else t
    result = t if result is None else result * t
  result = result.expand([sizes[c] for c in order]) if order else result
  if summed:
    result = result.sum(axis=tuple(range(len(out), len(order))))
  return result


def _diagonals(letters: str, t: Tensor):
  """An operand with each letter it repeats taken along its diagonal (that axis moves last)."""
  while len(set(letters)) != len(letters):
    c = next(c for c in letters if letters.count(c) > 1)
    p = letters.index(c)
    q = letters.index(c, p + 1)
    if t.shape[p] != t.shape[q]:
      raise ShapeError(f"einsum: letter {c!r} repeats over axes of sizes {t.shape[p]} and {t.shape[q]}")
    t = t.diagonal(0, p, q)
    letters = letters[:p] + letters[p + 1:q] + letters[q + 1:] + c
  return letters, t


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
