"""The graph's vocabulary: wire op numbers and the composite ops' argument.

Shared by graph.py (which builds nodes of them) and wire.py (which encodes them), so neither has
to import the other."""
from __future__ import annotations

import dataclasses
from typing import Tuple

# Wire op numbers, from proto/polygrad/v1/polygrad.proto (checked against the stubs in tests).
BUFFER, CONST = 1, 2
NEG, EXP2, LOG2, SQRT, RECIPROCAL, SIN, CAST = 10, 11, 12, 13, 14, 15, 16
ADD, SUB, MUL, DIV, MAX, CMPLT, CMPNE, WHERE = 30, 31, 32, 33, 34, 35, 36, 37
IDIV, MOD, AND, OR, XOR = 38, 39, 40, 41, 42
REDUCE_SUM, REDUCE_MAX = 50, 51
RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP = 70, 71, 72, 73, 74, 75
GRADIENT = 90
MATMUL, SOFTMAX, LOG_SOFTMAX, LOGSUMEXP, MEAN, VAR, LAYERNORM = 100, 101, 102, 103, 104, 105, 106
EXP, LOG, RELU, SIGMOID, TANH, GELU, SILU = 110, 111, 112, 113, 114, 115, 116
ARANGE, CONV2D, MAX_POOL2D, AVG_POOL2D, CUMSUM, ONE_HOT = 120, 121, 122, 123, 124, 125
ARGMAX, ARGMIN, TRIL, TRIU, GATHER = 126, 127, 128, 129, 130
REDUCE_PROD, POW, RAND, RANDN, RANDINT, DROPOUT, CONV_TRANSPOSE2D = 131, 132, 133, 134, 135, 136, 137
RMS_NORM, GROUP_NORM, BATCHNORM_TRAIN, BATCHNORM_EVAL = 138, 139, 140, 141
SCALED_DOT_PRODUCT_ATTENTION, SCALED_DOT_PRODUCT_ATTENTION_MASKED = 142, 143
BITCAST = 144
COPY = 145  # an explicit transfer to Composite.device
ERF, ATAN, ASIN, ACOS, SINH, COSH, ASINH, ACOSH, ATANH = 146, 147, 148, 149, 150, 151, 152, 153, 154
LOG10, LOG1P, EXPM1, LOGADDEXP, COPYSIGN, LERP, SOFTSIGN, CELU, SELU = 155, 156, 157, 158, 159, 160, 161, 162, 163
ISFINITE, ISCLOSE = 164, 165
SORT, TOPK, CUMMAX, CUMMIN, CUMPROD, LOGCUMSUMEXP = 200, 201, 202, 203, 204, 205
SCATTER_REDUCE, NLL_LOSS, INTERPOLATE, UNFOLD, NONZERO, MULTINOMIAL = 206, 207, 208, 209, 210, 211
SOFTPLUS, CLAMP_MIN, CLAMP_MAX = 220, 221, 222

OP_NAMES = {v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)}
# Composite ops whose node carries a CompositeArg (the others take no argument).
COMPOSITE_ARG_OPS = frozenset({SOFTMAX, LOG_SOFTMAX, LOGSUMEXP, MEAN, VAR, LAYERNORM, CONV2D, MAX_POOL2D,
                               AVG_POOL2D, CUMSUM, ONE_HOT, ARGMAX, ARGMIN, TRIL, TRIU, GATHER, RAND, RANDN,
                               RANDINT, DROPOUT, CONV_TRANSPOSE2D, RMS_NORM, GROUP_NORM, BATCHNORM_TRAIN,
                               BATCHNORM_EVAL, SCALED_DOT_PRODUCT_ATTENTION,
                               SCALED_DOT_PRODUCT_ATTENTION_MASKED, COPY, CELU, ISCLOSE, SORT, TOPK, CUMMAX,
                               CUMMIN, CUMPROD, LOGCUMSUMEXP, SOFTPLUS, SCATTER_REDUCE, NLL_LOSS, INTERPOLATE, UNFOLD,
                               NONZERO, MULTINOMIAL})


@dataclasses.dataclass(frozen=True)
class Composite:
  """The argument of a composite op (polygrad.v1.CompositeArg); each op reads its own fields."""

  axes: Tuple[int, ...] = ()
  keepdim: bool = False
  eps: float = 0.0
  correction: float = 0.0
  normalized_axes: int = 0
  kernel: Tuple[int, ...] = ()  # pooling window, one value per spatial axis (1 to 3)
  stride: Tuple[int, ...] = ()
  padding: Tuple[int, ...] = ()  # per spatial axis, or (before, after) per axis in axis order
  dilation: Tuple[int, ...] = ()
  groups: int = 0
  n: int = 0  # ONE_HOT classes
  diagonal: int = 0  # TRIL, TRIU
  seed: int = 0  # RAND, RANDN, RANDINT, DROPOUT: the generator's key
  counter: int = 0  # the stream within the seed
  shape: Tuple[int, ...] = ()  # RAND, RANDN, RANDINT
  low: int = 0  # RANDINT: [low, high)
  high: int = 0
  p: float = 0.0  # DROPOUT
  output_padding: Tuple[int, ...] = ()  # CONV_TRANSPOSE2D, per spatial axis
  causal: bool = False  # SCALED_DOT_PRODUCT_ATTENTION*
  device: str = ""  # COPY: the target device ("CPU", "CUDA:0")
  alpha: float = 0.0  # CELU
  rtol: float = 0.0  # ISCLOSE
  atol: float = 0.0
  equal_nan: bool = False
  descending: bool = False  # SORT, TOPK (largest)
  indices: bool = False  # SORT, TOPK, CUMMAX, CUMMIN, MAX_POOL2D: positions instead of values
  beta: float = 0.0  # SOFTPLUS
  threshold: float = 0.0  # SOFTPLUS
  mode: str = ""  # SCATTER_REDUCE (reduce), NLL_LOSS (reduction), INTERPOLATE
  include_self: bool = False  # SCATTER_REDUCE
  align_corners: bool = False  # INTERPOLATE
  ignore_index: int = 0  # NLL_LOSS (-100, torch's, for none)
  step: int = 0  # UNFOLD
  replacement: bool = False  # MULTINOMIAL

__all__ = [name for name in dict(globals()) if name.isupper()] + ["Composite"]
