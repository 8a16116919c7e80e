"""The graph's vocabulary: wire op numbers (generated from the op schema) and the composite ops'
argument.

Shared by graph.py (which builds nodes of them) and wire.py (which encodes them), so neither has
to import the other."""
from __future__ import annotations

import dataclasses
from typing import Tuple

# The wire op numbers, OP_NAMES, COMPOSITE_ARG_OPS (the ops whose node carries a CompositeArg),
# DTYPE_NUMBERS, COMPOSITE_FIELDS and the generated methods' table: written by scripts/gen-ops
# from the op schema.
from ._ops_gen import *  # noqa: F401,F403
from ._ops_gen import COMPOSITE_ARG_OPS, COMPOSITE_FIELDS, DTYPE_NUMBERS, METHOD_DOCS, METHODS, OP_NAMES  # noqa: F401


# Each CompositeArg field's Python type and default, by the generated table's kind.
_FIELD_KINDS = {"repeated": (Tuple[int, ...], ()), "float": (float, 0.0), "int": (int, 0), "bool": (bool, False),
                "str": (str, "")}

# The argument of a composite op (polygrad.v1.CompositeArg), one field per proto field, each op
# reading the ones its comment in polygrad.proto names; built from the generated field table so
# that a field added to the proto needs no client edit.
Composite = dataclasses.make_dataclass(
    "Composite", [(name, _FIELD_KINDS[kind][0], dataclasses.field(default=_FIELD_KINDS[kind][1]))
                  for name, kind in COMPOSITE_FIELDS], frozen=True)
Composite.__module__ = __name__  # pickling and repr find it here
Composite.__doc__ = "The argument of a composite op (polygrad.v1.CompositeArg); each op reads its own fields."

__all__ = [name for name in dict(globals()) if name.isupper()] + ["Composite"]
