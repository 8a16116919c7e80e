"""The lazy Tensor (tinygrad names and semantics). Methods only add nodes to the local graph;
realize()/numpy()/item()/tolist() send the graph to polygradd and bring results back.

The wire's elementwise ops take equal shapes and equal dtypes, so the client does broadcasting
(RESHAPE then EXPAND) and dtype promotion (CAST, tinygrad's lattice) itself.

core.py defines the class; each other module adds the methods of one area (see core.py), generated.py
the one-op methods the op schema names."""
# Each area module adds its methods to Tensor when imported.
from . import (creation, elementwise, functional, generated, indexing, linalg, movement, random,  # noqa: F401
               reduce, unary)
from .core import Tensor, ValuesIndices, _to_wire_array, take_pending_losses, untracked  # noqa: F401
