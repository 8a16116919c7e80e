"""tinygrad's Variable: a named integer with bounds, bound to a value for one call.

    start_pos = Variable("start_pos", 1, 1024).bind(k)
    keys = cache[:, :, 0:start_pos + 1]

A bound variable is an int (a subclass: arithmetic, slices and ranges take it as its value) that
remembers its Variable. Adding an int to it or multiplying it by a positive int gives a SymInt, a
dim `variable * mul + add` at its bound value. In the shape of `reshape`, `expand` or the end of a
`shrink` it makes a symbolic dim: the daemon keeps the dim at its largest size (`.max`) and
receives the value as data, so one set of kernels serves every value, and reductions over the dim
read only the part below the value (docs/PROTOCOL.md, "Variables and symbolic dims"). A tensor with
a symbolic dim can be computed on but not read back: reduce or shrink the dim first. Any other use
takes the value as a plain number (int(), an index, a float, `//`, `-v`, ...). A TinyJit replays a
new value of a Variable it saw only in symbolic dims and captures again when the capture took it as
a number (compiling nothing: the kernels are cached).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Tuple

__all__ = ["Variable", "BoundVariable", "SymInt"]

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


_int = int.__int__
_made = [False]  # whether any SymInt was made: until then every shape is plain ints

# While a TinyJit captures: the names of the Variables whose bound value was taken as a plain
# number (int(), an index, a float), which a replay with another value would not follow.
_concrete_uses: Optional[set] = None


@contextlib.contextmanager
def watching_concrete_uses() -> Iterator[set]:
  global _concrete_uses
  before, _concrete_uses = _concrete_uses, set()
  try:
    yield _concrete_uses
  finally:
    _concrete_uses = before


def _value_of(k):
  return _int(k) if isinstance(k, SymInt) else k


class SymInt(int):
  """`variable * mul + add` at the variable's bound value: an int of that value that knows how
  it was made, so a shape can carry it to the daemon as a symbolic dim."""

  variable: Variable
  mul: int
  add: int

  def __new__(cls, variable: Variable, value: int, mul: int = 1, add: int = 0) -> "SymInt":
    _made[0] = True
    obj = super().__new__(cls, value * mul + add)
    obj.variable, obj.mul, obj.add, obj._value = variable, mul, add, value
    return obj

  def _taken(self) -> int:
    if _concrete_uses is not None:
      _concrete_uses.add(self.variable.name)
    return _int(self)

  def __int__(self) -> int:
    return self._taken()

  def __index__(self) -> int:
    return self._taken()

  def __float__(self) -> float:
    return float(self._taken())

  @property
  def max(self) -> int:
    """The largest value: the dim's size on the daemon."""
    return self.variable.max_val * self.mul + self.add

  def _plain(self, k) -> bool:
    return isinstance(k, int) and not isinstance(k, (bool, SymInt))

  def __add__(self, k):
    if self._plain(k):
      return SymInt(self.variable, self._value, self.mul, self.add + k)
    return self._taken() + _value_of(k)

  __radd__ = __add__

  def __sub__(self, k):
    if self._plain(k):
      return SymInt(self.variable, self._value, self.mul, self.add - k)
    return self._taken() - _value_of(k)

  def __mul__(self, k):
    if self._plain(k) and k >= 1:
      return SymInt(self.variable, self._value, self.mul * k, self.add * k)
    return self._taken() * _value_of(k)

  __rmul__ = __mul__

  def __hash__(self) -> int:
    return int.__hash__(self)

  def __repr__(self) -> str:
    term = self.variable.name if self.mul == 1 else f"{self.mul}*{self.variable.name}"
    return f"({term}{self.add:+d})={_int(self)}" if self.add else f"{term}={_int(self)}"


def _taking_the_value(name: str):
  op = getattr(int, name)

  def method(self, *args):
    return op(self._taken(), *(_value_of(a) for a in args))

  method.__name__ = name
  return method


# Every other arithmetic takes the value as a plain number (noted while a TinyJit captures, so a
# replay never reuses a number computed from an old value).
for _name in ("__rsub__", "__floordiv__", "__rfloordiv__", "__truediv__", "__rtruediv__", "__mod__", "__rmod__",
              "__divmod__", "__rdivmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__", "__invert__",
              "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__and__", "__rand__", "__or__", "__ror__",
              "__xor__", "__rxor__", "__round__", "__trunc__", "__floor__", "__ceil__"):
  setattr(SymInt, _name, _taking_the_value(_name))


def has_symbolic(shape) -> bool:
  """Whether a shape (or any sequence of sizes) holds a SymInt; free until a SymInt was made."""
  return _made[0] and any(isinstance(d, SymInt) for d in shape)


def daemon_shape(shape):
  """A shape as the daemon holds it: each symbolic dim at its largest size."""
  return tuple(daemon_size(d) for d in shape) if has_symbolic(shape) else tuple(shape)


def same_dims(a, b) -> bool:
  """Shapes `a` and `b` equal as the daemon holds them: equal values, symbolic in the same places
  (a symbolic dim of value 1 is not a plain 1)."""
  if a != b:
    return False
  return not _made[0] or all(isinstance(x, SymInt) == isinstance(y, SymInt) for x, y in zip(a, b))


def dim(s):
  """A shape entry as an int, or the SymInt itself."""
  return s if isinstance(s, SymInt) else int(s)


def daemon_size(s) -> int:
  """The size a shape entry has on the daemon: a SymInt's largest value, else the int."""
  return s.max if isinstance(s, SymInt) else int(s)


class BoundVariable(SymInt):
  """A Variable's value: an int that knows its Variable (`.variable`, `.unbind()`)."""

  def __new__(cls, variable: Variable, value: int) -> "BoundVariable":
    return super().__new__(cls, variable, value)

  def unbind(self) -> Tuple[Variable, int]:
    return self.variable, _int(self)

  def __repr__(self) -> str:
    return f"{self.variable.name}={_int(self)}"
