"""Elementwise unary math and activations with client glue: relu, gelu, clip, isclose, ...
(the ones that are one op of the daemon, exp, cos, erf, abs, round, softplus, mish, ..., are generated.py's)."""
from __future__ import annotations

from .. import graph as g
from ..dtype import dtypes
from ..errors import ShapeError
from . import generated  # noqa: F401  (Tensor.silu, which swish names, and the other one-op methods)
from .core import Tensor, tensor_methods


@tensor_methods
class Unary:
  """Tensor.exp, Tensor.relu, Tensor.clip, ... (attached to Tensor)."""

  # --- unary math -------------------------------------------------------------------------------

  def relu(self) -> "Tensor":
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype):
      return self
    return self._unop(g.RELU)

  swish = Tensor.silu

  def gelu(self, approximate: str = "tanh") -> "Tensor":
    """The tanh approximation (tinygrad's gelu, the default), or with approximate='none' the exact
    x * Phi(x) through erf (torch's default)."""
    if approximate not in ("tanh", "none"):
      raise ShapeError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")
    return self._float()._unop(g.GELU if approximate == "tanh" else g.GELU_ERF)

  def clip(self, min_=None, max_=None) -> "Tensor":
    """torch's clamp: min_ and max_ are numbers or tensors (broadcast, promoting the dtype). A nan
    anywhere gives nan; at a bound the whole gradient reaches self."""
    if min_ is None and max_ is None:
      raise ShapeError("clip needs min_ or max_")
    x = self if min_ is None else self._clamp(g.CLAMP_MIN, min_)
    return x if max_ is None else x._clamp(g.CLAMP_MAX, max_)

  def clamp_min(self, min_) -> "Tensor":
    return self._clamp(g.CLAMP_MIN, min_)

  def clamp_max(self, max_) -> "Tensor":
    return self._clamp(g.CLAMP_MAX, max_)

  def _clamp(self, op: int, bound) -> "Tensor":
    if self.dtype == dtypes.bool:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} does not take bool tensors")
    return self._binop(op, bound)

  clamp = clip

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> "Tensor":
    """|self - other| <= atol + rtol * |other| elementwise (bool), as torch.isclose."""
    if rtol < 0 or atol < 0:
      raise ValueError(f"isclose needs rtol >= 0 and atol >= 0, got {rtol} and {atol}")
    a, b = self._broadcasted(other)
    return Tensor._make(g.ISCLOSE, dtypes.bool, a.shape, (a, b),
                        g.Composite(rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan)))

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element isclose (a Python bool: this realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())
