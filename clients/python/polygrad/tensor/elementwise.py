"""Elementwise binary ops: dtype casts, broadcasting and promotion (tinygrad's lattice), arithmetic,
comparisons, logic and bit ops, where."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from .. import graph as g
from ..dtype import DTypeLike, dtypes, least_upper_dtype, to_dtype
from ..errors import DTypeError, ShapeError
from ..shape import broadcast_shape
from .core import _is_scalar, _py_scalar, Tensor, tensor_methods


@tensor_methods
class Elementwise:
  """Tensor.add, Tensor.__lt__, Tensor.where, Tensor.cast, ... (attached to Tensor)."""

  # --- dtype ------------------------------------------------------------------------------------

  def cast(self, dtype: DTypeLike) -> "Tensor":
    dt = to_dtype(dtype)
    if dt == self.dtype:
      return self
    if self._node.op == g.CONST and not self._node.sent and (dt.kind == "f" or math.isfinite(self._node.arg)):
      return Tensor._const(self._node.arg, dt, self.shape)  # fold: a constant of the new dtype
    return Tensor._make(g.CAST, dt, self.shape, (self,))

  def bitcast(self, dtype: DTypeLike) -> "Tensor":
    """Each element's bits read as `dtype` (torch's ``view(dtype)``, tinygrad's ``bitcast``),
    exact on every bit pattern, NaN payloads included. Between integers it wraps like a cast;
    int8/uint8 read as bool is ``x != 0``. A differing itemsize regroups the bytes of the last
    axis (little-endian): its size is multiplied by the ratio, or divided by it, which it must be
    a multiple of; any layout works. No gradient passes it (as in torch), so the result does not
    require grad."""
    dt = to_dtype(dtype)
    if dt == self.dtype:
      return self
    shape, a, b = self.shape, self.dtype.itemsize, dt.itemsize
    if a != b:
      what = f"bitcast from {self.dtype.name} ({a} bytes) to {dt.name} ({b} bytes)"
      if not shape:
        raise ShapeError(f"{what} of a 0-d tensor: differing itemsizes need a last axis")
      if b > a and shape[-1] % (b // a):
        raise ShapeError(f"{what}: the last axis ({shape[-1]}) must be a multiple of {b // a}")
      shape = shape[:-1] + (shape[-1] * a // b,)
    return Tensor(g.GRAPH.node(g.BITCAST, dt, shape, (self._node,), None))

  def float(self) -> "Tensor":
    return self.cast(dtypes.float32)

  def half(self) -> "Tensor":
    return self.cast(dtypes.float16)

  def int(self) -> "Tensor":
    return self.cast(dtypes.int32)

  def bool(self) -> "Tensor":
    return self.cast(dtypes.bool)

  def long(self) -> "Tensor":
    return self.cast(dtypes.int64)

  def short(self) -> "Tensor":
    return self.cast(dtypes.int16)

  def bfloat16(self) -> "Tensor":
    return self.cast(dtypes.bfloat16)

  def is_floating_point(self) -> bool:
    return dtypes.is_float(self.dtype)

  def double(self) -> "Tensor":
    return self.cast(dtypes.float64)

  # --- broadcasting and binary ops --------------------------------------------------------------

  def _operand(self, y) -> "Tensor":
    """A non-Tensor operand as a Tensor, with tinygrad's scalar dtype rule."""
    if isinstance(y, Tensor):
      return y
    if _is_scalar(y):
      y = _py_scalar(y)
      if dtypes.is_float(self.dtype) or (dtypes.is_int(self.dtype) and isinstance(y, int)):
        ydt = self.dtype
      else:
        ydt = dtypes.from_py(y)
      return Tensor._const(y, ydt, self.shape)
    if isinstance(y, (list, tuple, np.ndarray)):
      return Tensor(y)
    raise TypeError(f"unsupported operand type {type(y).__name__} for a Tensor op")

  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True) -> Tuple["Tensor", "Tensor"]:
    t = type(y)
    if (t is float or t is int) and self.dtype.kind == "f":
      # The commonest operand, `x * 2.0`: what the general path below gives (a constant of x's
      # dtype and shape) without its checks, which a tiny realize's client time would feel.
      c = Tensor._const(y, self.dtype, self.shape)
      return (c, self) if reverse else (self, c)
    x, y = self, self._operand(y)
    if match_dtype and x.dtype != y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(out), y.cast(out)
    if reverse:
      x, y = y, x
    shape = broadcast_shape(x.shape, y.shape)
    return x._broadcast_to(shape), y._broadcast_to(shape)

  def _binop(self, op: int, y, reverse: bool = False) -> "Tensor":
    a, b = self._broadcasted(y, reverse)
    return Tensor._make(op, a.dtype, a.shape, (a, b))

  def add(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.ADD, x, reverse)

  def sub(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.SUB, x, reverse)

  def mul(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.MUL, x, reverse)

  def div(self, x, reverse: bool = False, rounding_mode: Optional[str] = None) -> "Tensor":
    """True division; integer operands divide in float32 (tinygrad). torch's rounding_mode:
    'trunc' rounds toward zero, 'floor' toward negative infinity (integers stay integers)."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "floor":
      return a.floor_divide(b)
    if rounding_mode == "trunc":
      return a.idiv(b) if not dtypes.is_float(a.dtype) else a.div(b).trunc()
    if rounding_mode is not None:
      raise ShapeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = a._float(), b._float()
    return Tensor._make(g.DIV, a.dtype, a.shape, (a, b))

  def maximum(self, x) -> "Tensor":
    return self._binop(g.MAX, x)

  def minimum(self, x) -> "Tensor":
    return self._binop(g.MINIMUM, x)

  __add__ = add
  __sub__ = sub
  __mul__ = mul
  __truediv__ = div

  def __radd__(self, x):
    return self.add(x, True)

  def __rsub__(self, x):
    return self.sub(x, True)

  def __rmul__(self, x):
    return self.mul(x, True)

  def __rtruediv__(self, x):
    return self.div(x, True)

  def __neg__(self) -> "Tensor":
    return self.logical_not() if self.dtype == dtypes.bool else self._unop(g.NEG)

  def neg(self) -> "Tensor":
    return -self

  def __pow__(self, x):
    return self.pow(x)

  def __rpow__(self, x):
    return self.pow(x, reverse=True)

  def pow(self, x, reverse: bool = False) -> "Tensor":
    """self ** x. Integer tensors to integer powers stay integers (INT_POW: exact, wrapping as
    torch; a negative scalar exponent raises, as torch's); otherwise the float POW (tinygrad's:
    2 ** (y * log2|x|) with the sign of odd integer powers; constant integral exponents up to 64
    multiply instead)."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype):
      if _is_scalar(x) and not isinstance(_py_scalar(x), bool) and not reverse and _py_scalar(x) < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
      return Tensor._make(g.INT_POW, a.dtype, a.shape, (a, b))
    a, b = a._float(), b._float()
    return Tensor._make(g.POW, a.dtype, a.shape, (a, b))

  # --- comparisons ------------------------------------------------------------------------------

  def __lt__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return Tensor._make(g.CMPLT, dtypes.bool, a.shape, (a, b))

  def __gt__(self, x) -> "Tensor":
    a, b = self._broadcasted(x, reverse=True)
    return Tensor._make(g.CMPLT, dtypes.bool, a.shape, (a, b))

  def __ne__(self, x) -> "Tensor":  # type: ignore[override]
    if not isinstance(x, Tensor) and not _is_scalar(x) and not isinstance(x, (list, tuple, np.ndarray)):
      return NotImplemented
    a, b = self._broadcasted(x)
    return Tensor._make(g.CMPNE, dtypes.bool, a.shape, (a, b))

  def _compare(self, op: int, x, reverse: bool = False):
    if not isinstance(x, Tensor) and not _is_scalar(x) and not isinstance(x, (list, tuple, np.ndarray)):
      return NotImplemented
    a, b = self._broadcasted(x, reverse)
    return Tensor._make(op, dtypes.bool, a.shape, (a, b))

  def __eq__(self, x) -> "Tensor":  # type: ignore[override]
    return self._compare(g.CMPEQ, x)

  def __ge__(self, x) -> "Tensor":
    return self._compare(g.CMPLE, x, reverse=True)

  def __le__(self, x) -> "Tensor":
    return self._compare(g.CMPLE, x)

  def lt(self, x): return self < x
  def gt(self, x): return self > x
  def le(self, x): return self <= x
  def ge(self, x): return self >= x
  def eq(self, x): return self == x
  def ne(self, x): return self != x

  def logical_not(self) -> "Tensor":
    b = self.cast(dtypes.bool)
    return Tensor._make(g.CMPNE, dtypes.bool, b.shape, (b, Tensor._const(True, dtypes.bool, b.shape)))

  def __invert__(self) -> "Tensor":
    return self.bitwise_not()

  def __and__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return b.where(a, False) if a.dtype == dtypes.bool else a._int_binop(g.AND, "&", b)

  def __or__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return b.where(True, a) if a.dtype == dtypes.bool else a._int_binop(g.OR, "|", b)

  def __xor__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return a != b if a.dtype == dtypes.bool else a._int_binop(g.XOR, "^", b)

  __rand__ = __and__
  __ror__ = __or__
  __rxor__ = __xor__
  bitwise_and = __and__
  bitwise_or = __or__
  bitwise_xor = __xor__

  def bitwise_not(self) -> "Tensor":
    """~x: logical not of a bool, every bit flipped in an integer."""
    if self.dtype == dtypes.bool:
      return self.logical_not()
    ones = dtypes.max(self.dtype) if dtypes.is_unsigned(self.dtype) else -1
    return self._int_binop(g.XOR, "~", Tensor._const(ones, self.dtype, self.shape))

  def _int_binop(self, op: int, name: str, y: "Tensor") -> "Tensor":
    """An integer-only ALU op on two tensors already broadcast to one dtype and shape."""
    if not dtypes.is_int(self.dtype):
      raise DTypeError(f"{name} needs integer tensors, got {self.dtype.name}")
    return Tensor._make(op, self.dtype, self.shape, (self, y))

  def idiv(self, x, reverse: bool = False) -> "Tensor":
    """Integer division truncating toward zero (C, tinygrad's idiv); x / 0 gives 0."""
    a, b = self._broadcasted(x, reverse)
    return a._int_binop(g.IDIV, "idiv", b)

  def _divmod_op(self, op: int, name: str, x, reverse: bool) -> "Tensor":
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool:
      raise DTypeError(f"{name} needs integer or float tensors, got bool")
    return Tensor._make(op, a.dtype, a.shape, (a, b))

  def fmod(self, x, reverse: bool = False) -> "Tensor":
    """Remainder with the dividend's sign (torch.fmod); integer x % 0 gives 0."""
    return self._divmod_op(g.FMOD, "fmod", x, reverse)

  def floor_divide(self, x, reverse: bool = False) -> "Tensor":
    """a // b rounded toward negative infinity, as Python and torch do; integer x // 0 gives 0."""
    return self._divmod_op(g.FLOOR_DIVIDE, "//", x, reverse)

  def remainder(self, x, reverse: bool = False) -> "Tensor":
    """a % b with the divisor's sign, as Python and torch do; integer x % 0 gives 0."""
    return self._divmod_op(g.REMAINDER, "%", x, reverse)

  def lshift(self, n) -> "Tensor":
    """x << n for an integer tensor: x * 2**n, wrapping. n: an int in [0, bits), or an integer
    tensor of shifts broadcasting with x."""
    return self._shift(g.LSHIFT, "<<", n)

  def rshift(self, n) -> "Tensor":
    """x >> n for an integer tensor: arithmetic (floor) for signed types, as torch does. n: an int
    in [0, bits), or an integer tensor of shifts broadcasting with x."""
    return self._shift(g.RSHIFT, ">>", n)

  def _shift(self, op: int, name: str, n) -> "Tensor":
    if not dtypes.is_int(self.dtype):
      raise DTypeError(f"{name} needs an integer tensor, got {self.dtype.name}")
    if isinstance(n, Tensor):
      if not dtypes.is_int(n.dtype):
        raise DTypeError(f"{name} by a tensor needs integer amounts, got {n.dtype.name}")
      x, amounts = self._broadcasted(n, match_dtype=False)
      return Tensor._make(op, self.dtype, x.shape, (x, amounts.cast(self.dtype)))
    n = _py_scalar(n)
    bits = 8 * self.dtype.itemsize
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < bits:
      raise ShapeError(f"{name} takes a shift in [0, {bits}) for {self.dtype.name}, got {n!r}")
    return Tensor._make(op, self.dtype, self.shape, (self, Tensor._const(n, self.dtype, self.shape)))

  __floordiv__ = floor_divide
  __mod__ = remainder
  mod = remainder
  __lshift__ = lshift
  __rshift__ = rshift

  def __rfloordiv__(self, x):
    return self.floor_divide(x, True)

  def __rmod__(self, x):
    return self.remainder(x, True)

  def where(self, x, y) -> "Tensor":
    """self is the condition: where(cond, x, y) or cond.where(x, y); scalars allowed."""
    if isinstance(x, Tensor):
      x, y = x._broadcasted(y)
    elif isinstance(y, Tensor):
      y, x = y._broadcasted(x)
    cond, x = self._broadcasted(x, match_dtype=False)
    cond, y = cond._broadcasted(y, match_dtype=False)
    x, y = x._broadcasted(y)
    shape = broadcast_shape(cond.shape, x.shape)
    cond, x, y = cond.cast(dtypes.bool)._broadcast_to(shape), x._broadcast_to(shape), y._broadcast_to(shape)
    return Tensor._make(g.WHERE, x.dtype, shape, (cond, x, y))
