"""tinygrad's Variable: a named integer with bounds, bound to a value for one call.

    start_pos = Variable("start_pos", 1, 1024).bind(k)
    keys = cache[:, :, 0:start_pos + 1]

A bound variable is an int (a subclass: arithmetic, shapes, slices and ranges take it as its value)
that remembers its Variable. Shapes are not symbolic yet: the graph gets the bound value, so each
value has kernels of its own (compiled once each, then cached), and a TinyJit captures again when a
bound argument's value changes rather than replaying another value's step.
"""
from __future__ import annotations

from typing import Tuple

__all__ = ["Variable", "BoundVariable"]

_MAX_NAME = 64


class Variable:
  """A named integer in [min_val, max_val]."""

  def __init__(self, name: str, min_val: int, max_val: int):
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
      raise ValueError(f"a Variable's name is a non-empty string of at most {_MAX_NAME} characters")
    for what, v in (("min_val", min_val), ("max_val", max_val)):
      if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"Variable {name!r}: {what} must be an int, got {type(v).__name__}")
    if min_val > max_val:
      raise ValueError(f"Variable {name!r}: min_val {min_val} exceeds max_val {max_val}")
    self.name, self.min_val, self.max_val = name, int(min_val), int(max_val)

  # tinygrad's names for the same things
  @property
  def expr(self) -> str:
    return self.name

  @property
  def vmin(self) -> int:
    return self.min_val

  @property
  def vmax(self) -> int:
    return self.max_val

  def bind(self, value: int) -> "BoundVariable":
    """This variable at `value`; AssertionError outside [min_val, max_val], as tinygrad."""
    if isinstance(value, bool) or not isinstance(value, int):
      raise TypeError(f"Variable {self.name!r} binds an int, got {type(value).__name__}")
    if not self.min_val <= value <= self.max_val:
      raise AssertionError(f"Variable {self.name!r}: {value} is outside [{self.min_val}, {self.max_val}]")
    return BoundVariable(self, int(value))

  def __repr__(self) -> str:
    return f"Variable({self.name!r}, {self.min_val}, {self.max_val})"


class BoundVariable(int):
  """A Variable's value: an int that knows its Variable (`.variable`, `.unbind()`)."""

  variable: Variable

  def __new__(cls, variable: Variable, value: int) -> "BoundVariable":
    obj = super().__new__(cls, value)
    obj.variable = variable
    return obj

  def unbind(self) -> Tuple[Variable, int]:
    return self.variable, int(self)

  def __repr__(self) -> str:
    return f"{self.variable.name}={int(self)}"
