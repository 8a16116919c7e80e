"""Linear algebra: matmul/dot, linear, einsum and rearrange, qr, svd, newton_schulz."""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from .. import graph as g
from ..dtype import DTypeLike, least_upper_dtype, sum_acc_dtype, to_dtype
from ..errors import ShapeError
from ..shape import factor_shape, linear_shape, matmul_shape
from .core import Tensor, tensor_methods
from .einsum import einsum as einsum_formula, rearrange as rearrange_formula


@tensor_methods
class LinAlg:
  """Tensor.dot, Tensor.einsum, Tensor.svd, ... (attached to Tensor)."""

  # --- linear algebra ---------------------------------------------------------------------------

  @staticmethod
  def einsum(formula: str, *operands) -> "Tensor":
    """numpy.einsum over Tensors ("ij,jk->ik", implicit output, "..."); see tensor/einsum.py."""
    return einsum_formula(formula, *operands)

  def rearrange(self, formula: str, **sizes: int) -> "Tensor":
    """einops-style rearrange ("b (h w) c -> b h w c", h=2); see tensor/einsum.py."""
    return rearrange_formula(self, formula, **sizes)

  def dot(self, w: "Tensor", dtype: Optional[DTypeLike] = None) -> "Tensor":
    """numpy matmul semantics, computed by the daemon's MATMUL (which the client only types and
    shapes): 1-D operands are promoted and the added axis dropped, batch axes broadcast.
    float16/bfloat16 and small integer types accumulate in float32/int32 and are cast back."""
    if not isinstance(w, Tensor):
      w = Tensor(w)
    shape = matmul_shape(self.shape, w.shape)
    out_dt = least_upper_dtype(self.dtype, w.dtype) if dtype is None else to_dtype(dtype)
    acc = sum_acc_dtype(out_dt)
    a, b = self.cast(acc), w.cast(acc)
    return Tensor._make(g.MATMUL, acc, shape, (a, b)).cast(out_dt)

  matmul = dot

  def __matmul__(self, x) -> "Tensor":
    return self.dot(x)

  def __rmatmul__(self, x) -> "Tensor":
    return Tensor(x).dot(self)

  def linear(self, weight: "Tensor", bias: Optional["Tensor"] = None) -> "Tensor":
    """tinygrad's linear: self @ weight (self * weight for a 1-D weight) + bias, the daemon's
    LINEAR, run in the accumulation dtype of the three's common dtype as dot is."""
    src = [t if isinstance(t, Tensor) else Tensor(t) for t in (self, weight, bias) if t is not None]
    out = least_upper_dtype(*(t.dtype for t in src))
    acc = sum_acc_dtype(out)
    shape = linear_shape(self.shape, src[1].shape, None if bias is None else src[2].shape)
    return Tensor._make(g.LINEAR, acc, shape, tuple(t.cast(acc) for t in src)).cast(out)

  def sequential(self, layers: Sequence[Callable[["Tensor"], "Tensor"]]) -> "Tensor":
    return functools.reduce(lambda x, f: f(x), layers, self)

  def qr(self) -> Tuple["Tensor", "Tensor"]:
    """(Q, R) of the last two axes, reduced as torch.linalg.qr: Householder reflections with
    LAPACK's signs (each R[j, j] is minus the sign of the column's leading element times its
    norm), so Q and R match torch's: the daemon's QR, one node per factor; differentiable."""
    if self.ndim < 2:
      raise ShapeError(f"qr needs a matrix (or a batch of them), got shape {self.shape}")
    x = self._float()
    return tuple(Tensor._make(g.QR, x.dtype, factor_shape(x.shape, f), (x,), g.Composite(mode=f)) for f in ("q", "r"))

  def svd(self, full_matrices: bool = True, sweeps: int = 12) -> Tuple["Tensor", "Tensor", "Tensor"]:
    """(U, S, Vh) of the last two axes by one-sided Jacobi rotations (Hestenes): `sweeps` passes
    over every column pair, the daemon's SVD (one node per factor; the graph grows with
    sweeps * n² / 2 for n = min(m, n) columns: meant for small matrices). Singular values
    descending; singular vectors are unique up to sign (torch's may differ in sign). With
    full_matrices the square cases only (the reduced and full factors coincide)."""
    if self.ndim < 2:
      raise ShapeError(f"svd needs a matrix (or a batch of them), got shape {self.shape}")
    m, n = self.shape[-2:]
    if full_matrices and m != n:
      raise NotImplementedError(f"svd(full_matrices=True) of a non-square {m}x{n} matrix: pass full_matrices=False")
    if isinstance(sweeps, bool) or not isinstance(sweeps, int) or not 1 <= sweeps <= 64:
      raise ValueError(f"svd: sweeps must be 1 to 64, got {sweeps!r}")
    x = self._float()
    return tuple(Tensor._make(g.SVD, x.dtype, factor_shape(x.shape, f), (x,), g.Composite(mode=f, n=sweeps))
                 for f in ("u", "s", "vh"))

  def newton_schulz(self, steps: int, params: Sequence[float], eps: float = 1.0e-7) -> "Tensor":
    """Orthogonalizes the last two axes (tinygrad's newton_schulz, Muon's core): X = self / (its
    Frobenius norm + eps), then `steps` times X = sum_i params[i] * (X X^T)^i X, computed on the
    wide orientation (a tall matrix is transposed there and back): the daemon's NEWTON_SCHULZ."""
    if self.ndim < 2:
      raise ShapeError(f"newton_schulz needs a matrix (or a batch of them), got shape {self.shape}")
    coefficients = [float(p) for p in params]
    if not 1 <= len(coefficients) <= 16 or isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 64:
      raise ShapeError(f"newton_schulz takes 1 to 64 steps and 1 to 16 coefficients, got {steps!r} and {len(coefficients)}")
    x = self._float()
    c = Tensor(np.array(coefficients, dtype=np.float64), device=x.device)
    return Tensor._make(g.NEWTON_SCHULZ, x.dtype, x.shape, (x, c), g.Composite(n=steps, eps=float(eps)))
