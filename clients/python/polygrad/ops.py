"""The graph's vocabulary: wire op numbers (generated from the op schema) and the composite ops'
argument.

Shared by graph.py (which builds nodes of them) and wire.py (which encodes them), so neither has
to import the other."""
from __future__ import annotations

import dataclasses
from typing import Tuple

# The wire op numbers, OP_NAMES, COMPOSITE_ARG_OPS (the ops whose node carries a CompositeArg),
# DTYPE_NUMBERS and the generated methods' table: written by scripts/gen-ops from the op schema.
from ._ops_gen import *  # noqa: F401,F403
from ._ops_gen import COMPOSITE_ARG_OPS, DTYPE_NUMBERS, METHOD_DOCS, METHODS, OP_NAMES  # noqa: F401


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
  alpha: float = 0.0  # CELU, ELU, HARDSIGMOID
  rtol: float = 0.0  # ISCLOSE
  atol: float = 0.0
  equal_nan: bool = False
  descending: bool = False  # SORT, TOPK (largest)
  indices: bool = False  # SORT, TOPK, CUMMAX, CUMMIN, MAX_POOL2D: positions instead of values
  beta: float = 0.0  # SOFTPLUS, HARDSIGMOID
  threshold: float = 0.0  # SOFTPLUS
  neg_slope: float = 0.0  # LEAKY_RELU
  min_val: float = 0.0  # HARDTANH
  max_val: float = 0.0
  mode: str = ""  # SCATTER_REDUCE (reduce), NLL_LOSS (reduction), INTERPOLATE
  include_self: bool = False  # SCATTER_REDUCE
  align_corners: bool = False  # INTERPOLATE
  ignore_index: int = 0  # NLL_LOSS (-100, torch's, for none)
  step: int = 0  # UNFOLD
  replacement: bool = False  # MULTINOMIAL

__all__ = [name for name in dict(globals()) if name.isupper()] + ["Composite"]
