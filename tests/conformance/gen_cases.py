#!/usr/bin/env python3
"""Writes tests/conformance/cases.json, the cross-client conformance corpus (see README.md).

The corpus is data; this script only saves typing it by hand. cases.json is committed, and
test_conformance_python.py fails when it differs from what this script writes, so the two
cannot drift:

    /usr/bin/python3 tests/conformance/gen_cases.py          # rewrite cases.json
    /usr/bin/python3 tests/conformance/gen_cases.py --check  # exit 1 if cases.json is stale

Rules the cases keep, because every client must read them identically:
- Input values are integers lo..hi (divided by `div`, a power of two, for float dtypes), small
  enough to be exact in the dtype (float16: |v| <= 2048, bfloat16: |v| <= 256), or raw bits of an
  integer dtype. No float conversion that could round differently in another language.
- A number in `args` is an int when it is integral and a float otherwise: JavaScript has one
  number type, so a case never relies on 2 and 2.0 being different.
- Every number in the file is a safe integer for JavaScript (|x| < 2^53) or a float with few
  binary digits.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "cases.json"

FLOATS = ["float32", "float16", "bfloat16", "float64"]
SINTS = ["int8", "int16", "int32", "int64"]
UINTS = ["uint8", "uint16", "uint32", "uint64"]
INTS = SINTS + UINTS
ALL = FLOATS + INTS + ["bool"]

# Integer ranges per dtype for 'default' inputs: well inside the dtype, so sums stay exact.
INT_RANGE = {
    "int8": (-100, 100), "int16": (-1000, 1000), "int32": (-100000, 100000), "int64": (-1000000, 1000000),
    "uint8": (0, 200), "uint16": (0, 60000), "uint32": (0, 100000), "uint64": (0, 1000000), "bool": (0, 1),
}

cases: list = []
_seed = [0]


def inp(dtype: str, shape, kind: str = "default", lo=None, hi=None, div=None) -> dict:
  """One input tensor: its dtype, shape and generator parameters (seeds are handed out in order)."""
  _seed[0] += 1
  g = {"dtype": dtype, "shape": list(shape), "seed": _seed[0]}
  if kind == "bits":
    assert dtype in INTS, "raw bits only for integer dtypes (float bits could be NaN payloads)"
    g["bits"] = True
    return g
  if lo is None:
    if dtype in FLOATS:
      lo, hi, div = {"default": (-16, 16, 4), "pos": (1, 32, 4), "unit": (-8, 8, 8),
                     "small": (-4, 4, 2), "int": (-50, 50, 1)}[kind]
    elif kind == "small":
      lo, hi = (0, 9) if dtype in UINTS else (-9, 9)
    elif kind == "pos":
      lo, hi = 1, 9
    else:
      lo, hi = INT_RANGE[dtype]
  g["lo"], g["hi"] = lo, hi
  if dtype in FLOATS:
    g["div"] = div or 1
    limit = 256 if dtype == "bfloat16" else 2048
    assert max(abs(lo), abs(hi)) <= limit, f"{lo}..{hi} is not exact in {dtype}"
  else:
    assert div is None
  return g


def case(cid: str, op: str, wire, inputs=(), args=None, requires=None, then=None) -> None:
  c = {"id": cid, "op": op, "wire": sorted(set([wire] if isinstance(wire, str) else wire)),
       "inputs": list(inputs), "args": args or {}}
  if then:
    c["then"] = [{"op": o, "args": a} for o, a in then]
  if requires:
    c["requires"] = requires
  assert cid not in {x["id"] for x in cases}, cid
  cases.append(c)


def short(dt: str) -> str:
  return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "bool"}.get(
      dt, dt.replace("uint", "u").replace("int", "i"))


# ---- creation (no inputs) ----------------------------------------------------------------------
case("from/f32", "from", "BUFFER", [inp("float32", (2, 3))])
for dt in ["float16", "bfloat16", "float64", "int8", "int16", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]:
  case(f"from/{short(dt)}", "from", "BUFFER", [inp(dt, (3, 2), "bits" if dt in INTS else "default")])
case("from/f32-0d", "from", "BUFFER", [inp("float32", ())])
case("full/f32", "full", "CONST", args={"shape": [2, 3], "value": 1.5, "dtype": "float32"})
case("full/i64-neg", "full", "CONST", args={"shape": [4], "value": -7, "dtype": "int64"})
case("full/u8", "full", "CONST", args={"shape": [2, 2], "value": 200, "dtype": "uint8"})
case("full/bool", "full", "CONST", args={"shape": [3], "value": True, "dtype": "bool"})
case("full/bf16", "full", "CONST", args={"shape": [2, 2], "value": -0.75, "dtype": "bfloat16"})
case("full/inferred-int", "full", "CONST", args={"shape": [2], "value": 3})
case("full/inferred-float", "full", "CONST", args={"shape": [2], "value": 2.5})
case("zeros/f16", "zeros", "CONST", args={"shape": [2, 3], "dtype": "float16"})
case("zeros/default", "zeros", "CONST", args={"shape": [3]})
case("ones/i32", "ones", "CONST", args={"shape": [3, 1], "dtype": "int32"})
case("ones/f64", "ones", "CONST", args={"shape": [2], "dtype": "float64"})
case("arange/int", "arange", "ARANGE", args={"start": 0, "stop": 7})
case("arange/int-step", "arange", "ARANGE", args={"start": 2, "stop": 20, "step": 3})
# integer bounds past int32 default to int64 (torch's default) in every client
case("arange/past-int32", "arange", "ARANGE", args={"start": 2147483600, "stop": 2147483700, "step": 25})
case("arange/float-step", "arange", "ARANGE", args={"start": 0, "stop": 2.5, "step": 0.5})
case("arange/neg-step-f64", "arange", "ARANGE", args={"start": 5, "stop": -3, "step": -2, "dtype": "float64"})
case("arange/u8", "arange", "ARANGE", args={"start": 0, "stop": 10, "dtype": "uint8"})
# start and step are ARANGE's sources; a float step into ints counts in float32, then casts
case("arange/start-only-i64", "arange", "ARANGE", args={"start": 3, "stop": 9, "dtype": "int64"})
case("arange/float-step-into-i32", "arange", ["ARANGE", "CAST"], args={"start": 1, "stop": 4, "step": 0.5, "dtype": "int32"})
case("linspace/f32", "linspace", "LINSPACE", args={"start": 0, "stop": 1, "steps": 5})
case("linspace/f32-inexact", "linspace", "LINSPACE", args={"start": 0, "stop": 1, "steps": 7})
case("linspace/f64", "linspace", "LINSPACE", args={"start": -2, "stop": 2, "steps": 9, "dtype": "float64"})
case("linspace/descending-i32", "linspace", "LINSPACE", args={"start": 7.5, "stop": -3, "steps": 6, "dtype": "int32"})
case("linspace/one", "linspace", "LINSPACE", args={"start": 2.5, "stop": 9, "steps": 1})
case("eye/square", "eye", "EYE", args={"n": 3})
case("eye/rect-i32", "eye", "EYE", args={"n": 2, "m": 4, "dtype": "int32"})
case("eye/tall-bool", "eye", "EYE", args={"n": 4, "m": 2, "dtype": "bool"})
# The daemon's generator (threefry2x32 from (seed, counter)); manualSeed resets the counter.
case("rand/f32", "rand", "RAND", args={"seed": 42, "shape": [3, 4]})
case("rand/f16", "rand", "RAND", args={"seed": 7, "shape": [5], "dtype": "float16"})
case("randn/f32", "randn", "RANDN", args={"seed": 42, "shape": [2, 3]})
case("randn/f64", "randn", "RANDN", args={"seed": 3, "shape": [4], "dtype": "float64"})
case("randint/i32", "randint", "RANDINT", args={"seed": 11, "shape": [6], "low": -5, "high": 5})
case("randint/u8", "randint", "RANDINT", args={"seed": 12, "shape": [2, 3], "low": 0, "high": 200, "dtype": "uint8"})
case("dropout/f32", "dropout", "DROPOUT", [inp("float32", (4, 5))], {"seed": 5, "p": 0.25})

# ---- elementwise unary -------------------------------------------------------------------------
UNARY = {"neg": "NEG", "exp2": "EXP2", "log2": "LOG2", "sqrt": "SQRT", "reciprocal": "RECIPROCAL", "sin": "SIN",
         "cos": "COS", "exp": "EXP", "log": "LOG", "relu": "RELU", "sigmoid": "SIGMOID", "tanh": "TANH",
         "gelu": "GELU", "silu": "SILU"}
POSITIVE = {"log2", "sqrt", "reciprocal", "log"}
for name, wire in UNARY.items():
  for dt in FLOATS:
    case(f"{name}/{short(dt)}", name, wire, [inp(dt, (2, 3), "pos" if name in POSITIVE else "default")])
# Integer inputs: the float ops compute in the default float, neg and relu keep the dtype.
case("exp/i32", "exp", "EXP", [inp("int32", (5,), "small")])
case("sqrt/u8", "sqrt", "SQRT", [inp("uint8", (5,))])
case("sigmoid/i8", "sigmoid", "SIGMOID", [inp("int8", (5,), "small")])
case("log/i64", "log", "LOG", [inp("int64", (4,), "pos")])
case("neg/i16", "neg", "NEG", [inp("int16", (5,))])
case("neg/i64-bits", "neg", "NEG", [inp("int64", (5,), "bits")])
case("neg/i8-bits", "neg", "NEG", [inp("int8", (8,), "bits")])
case("relu/i32", "relu", "RELU", [inp("int32", (6,))])
case("softplus/f32", "softplus", "SOFTPLUS", [inp("float32", (2, 3))])
case("softplus/f16-beta", "softplus", "SOFTPLUS", [inp("float16", (6,))], {"beta": 2, "threshold": 4.5})
case("softplus/i32", "softplus", ["CAST", "SOFTPLUS"], [inp("int32", (5,), "small")])
case("leakyRelu/f32", "leakyRelu", "LEAKY_RELU", [inp("float32", (2, 4))], {"negSlope": 0.125})
case("gelu/none-f32", "gelu", "GELU_ERF", [inp("float32", (2, 4))], {"approximate": "none"})
case("gelu/none-bf16", "gelu", "GELU_ERF", [inp("bfloat16", (6,))], {"approximate": "none"})
case("abs/f32", "abs", "ABS", [inp("float32", (6,))])
case("abs/i8", "abs", "ABS", [inp("int8", (6,))])
case("abs/u8", "abs", "ABS", [inp("uint8", (6,))])
case("abs/bf16", "abs", "ABS", [inp("bfloat16", (6,))])

# ---- elementwise binary ------------------------------------------------------------------------
for dt in FLOATS + INTS:
  case(f"add/{short(dt)}", "add", "ADD", [inp(dt, (2, 3)), inp(dt, (2, 3))])
case("add/i32-bits-wrap", "add", "ADD", [inp("int32", (6,), "bits"), inp("int32", (6,), "bits")])
case("add/u8-bits-wrap", "add", "ADD", [inp("uint8", (6,), "bits"), inp("uint8", (6,), "bits")])
case("add/broadcast", "add", ["ADD", "EXPAND", "RESHAPE"], [inp("float32", (2, 1, 3)), inp("float32", (4, 1))])
# Promotion (tinygrad's lattice), computed locally by each client: every pair of distinct dtypes,
# with small values that every dtype of the pair holds exactly.
for i, a in enumerate(ALL):
  for b in ALL[i + 1:]:
    case(f"add/promote-{short(a)}-{short(b)}", "add", ["ADD", "CAST"], [inp(a, (4,), "small"), inp(b, (4,), "small")])
# A Python/JavaScript scalar operand: an int keeps an integer tensor's dtype, a float makes it the
# default float, a bool promotes like a bool tensor; float tensors keep their dtype for all three.
for dt in ALL:
  for kind, v in [("int", 3), ("float", 2.5), ("bool", True)]:
    if dt == "bool" and kind == "bool":
      continue  # bool + bool has no ADD on the wire
    case(f"add/scalar-{kind}-{short(dt)}", "add", ["ADD", "CONST"], [inp(dt, (4,), "small")], {"scalar": v})
case("add/scalar-big-u8", "add", ["ADD", "CONST"], [inp("uint8", (4,))], {"scalar": 100})
for dt in ["float32", "int32", "uint8", "bfloat16"]:
  case(f"sub/{short(dt)}", "sub", "SUB", [inp(dt, (2, 3)), inp(dt, (2, 3))])
case("sub/scalar-f64", "sub", ["SUB", "CONST"], [inp("float64", (3,))], {"scalar": 0.5})
for dt, kind in [("float32", "default"), ("bfloat16", "default"), ("float16", "default"), ("int16", "bits"),
                 ("uint32", "bits"), ("int64", "bits"), ("int8", "small"), ("float64", "default")]:
  case(f"mul/{short(dt)}", "mul", "MUL", [inp(dt, (2, 3), kind), inp(dt, (2, 3), kind)])
case("mul/scalar-f32", "mul", ["MUL", "CONST"], [inp("float32", (5,))], {"scalar": -1.25})
for dt in FLOATS:
  case(f"div/{short(dt)}", "div", "DIV", [inp(dt, (2, 3)), inp(dt, (2, 3), "pos")])
case("div/i32-true", "div", ["DIV", "CAST"], [inp("int32", (5,)), inp("int32", (5,), "pos")])
case("div/u8-scalar", "div", ["DIV", "CAST", "CONST"], [inp("uint8", (5,))], {"scalar": 4})
case("pow/f32-tensor", "pow", "POW", [inp("float32", (2, 3), "pos"), inp("float32", (2, 3), "unit")])
case("pow/f16-tensor", "pow", "POW", [inp("float16", (2, 3), "pos"), inp("float16", (2, 3), "unit")])
case("pow/f32-neg-base", "pow", "POW", [inp("float32", (6,), "small"), inp("float32", (6,), "int", -3, 3, 1)])
case("pow/scalar-half", "pow", ["POW", "CONST"], [inp("float32", (5,), "pos")], {"scalar": 0.5})
case("pow/scalar-int-square", "pow", ["POW", "CONST"], [inp("float32", (5,))], {"scalar": 2})
case("pow/scalar-int-cube-i32", "pow", ["INT_POW", "CONST"], [inp("int32", (5,), "small")], {"scalar": 3})
case("pow/scalar-neg-int", "pow", ["POW", "CONST"], [inp("float32", (5,), "pos")], {"scalar": -2})
for dt in ["float32", "int8", "uint8", "bfloat16", "bool", "int64"]:
  case(f"maximum/{short(dt)}", "maximum", "MAX", [inp(dt, (2, 3)), inp(dt, (2, 3))])
for dt in ["float32", "int8", "uint8", "bool", "float16"]:
  case(f"minimum/{short(dt)}", "minimum", "MINIMUM", [inp(dt, (2, 3)), inp(dt, (2, 3))])
case("minimum/i32-bits", "minimum", "MINIMUM", [inp("int32", (2, 4), "bits"), inp("int32", (2, 4), "bits")])
case("maximum/scalar-f32", "maximum", ["MAX", "CONST"], [inp("float32", (5,))], {"scalar": 0.5})
case("clamp/f32", "clamp", ["CLAMP_MIN", "CLAMP_MAX"], [inp("float32", (6,))], {"min": -1.5, "max": 2.25})
case("clamp/i32", "clamp", ["CLAMP_MIN", "CLAMP_MAX"], [inp("int32", (6,), "small")], {"min": -3, "max": 4})
case("clamp/f64-min", "clamp", "CLAMP_MIN", [inp("float64", (6,))], {"min": 0.5})
case("clamp/u8-max", "clamp", "CLAMP_MAX", [inp("uint8", (6,))], {"max": 7})
case("clamp/i16-float-min", "clamp", ["CAST", "CLAMP_MIN"], [inp("int16", (6,), "small")], {"min": 0.5})
for name, wire in [("lt", "CMPLT"), ("le", "CMPLE"), ("gt", "CMPLT"), ("ge", "CMPLE"), ("eq", "CMPEQ"), ("ne", "CMPNE")]:
  for dt in ["float32", "int32", "uint8"]:
    case(f"{name}/{short(dt)}", name, wire, [inp(dt, (2, 3), "small"), inp(dt, (2, 3), "small")])
case("lt/f16-scalar", "lt", ["CMPLT", "CONST"], [inp("float16", (5,))], {"scalar": 0.5})
case("eq/bool", "eq", "CMPEQ", [inp("bool", (6,)), inp("bool", (6,))])
case("ne/bf16", "ne", "CMPNE", [inp("bfloat16", (6,), "small"), inp("bfloat16", (6,), "small")])
case("gt/i64-bits", "gt", "CMPLT", [inp("int64", (6,), "bits"), inp("int64", (6,), "bits")])
case("where/f32", "where", "WHERE", [inp("bool", (2, 3)), inp("float32", (2, 3)), inp("float32", (2, 3))])
case("where/i8-broadcast", "where", ["WHERE", "EXPAND"], [inp("bool", (2, 1)), inp("int8", (2, 3)), inp("int8", (1, 3))])
case("where/scalars", "where", ["WHERE", "CONST"], [inp("bool", (5,))], {"x": 1.5, "y": -0.5})
case("where/promote", "where", ["WHERE", "CAST"], [inp("bool", (4,)), inp("int32", (4,)), inp("float16", (4,))])
# Integer division and remainders (x / 0 and x % 0 give 0 on the wire).
for dt in ["int32", "int8", "uint16", "int64"]:
  case(f"idiv/{short(dt)}", "idiv", "IDIV", [inp(dt, (8,)), inp(dt, (8,), "small")])
for dt in ["int32", "uint8"]:
  case(f"fmod/{short(dt)}", "fmod", "FMOD", [inp(dt, (8,)), inp(dt, (8,), "small")])
case("fmod/f32", "fmod", "FMOD", [inp("float32", (6,)), inp("float32", (6,), "pos")])
case("remainder/i16", "remainder", "REMAINDER", [inp("int16", (8,)), inp("int16", (8,), "small")])
case("floorDivide/i32", "floorDivide", "FLOOR_DIVIDE", [inp("int32", (8,)), inp("int32", (8,), "small")])
for name, wire in [("bitwiseAnd", "AND"), ("bitwiseOr", "OR"), ("bitwiseXor", "XOR")]:
  case(f"{name}/i32-bits", name, wire, [inp("int32", (6,), "bits"), inp("int32", (6,), "bits")])
  case(f"{name}/u8-bits", name, wire, [inp("uint8", (6,), "bits"), inp("uint8", (6,), "bits")])
case("bitwiseXor/i64-bits", "bitwiseXor", "XOR", [inp("int64", (6,), "bits"), inp("int64", (6,), "bits")])
case("bitwiseAnd/bool", "bitwiseAnd", "WHERE", [inp("bool", (6,)), inp("bool", (6,))])
case("bitwiseOr/bool", "bitwiseOr", "WHERE", [inp("bool", (6,)), inp("bool", (6,))])
case("bitwiseNot/u16-bits", "bitwiseNot", "XOR", [inp("uint16", (6,), "bits")])
case("bitwiseNot/i8-bits", "bitwiseNot", "XOR", [inp("int8", (6,), "bits")])
case("logicalNot/bool", "logicalNot", "CMPNE", [inp("bool", (6,))])

# ---- dtype ---------------------------------------------------------------------------------------
for src, dst, kind in [("float32", "float16", "default"), ("float32", "bfloat16", "default"), ("float32", "int32", "default"),
                       ("float32", "uint8", "pos"), ("int32", "float32", "default"), ("int64", "int32", "bits"),
                       ("int32", "bool", "small"), ("bool", "float32", "default"), ("float16", "float64", "default"),
                       ("bfloat16", "float32", "default"), ("uint8", "int8", "bits"), ("int8", "uint32", "bits"),
                       ("float64", "float32", "default"), ("int16", "float16", "small"), ("uint32", "int64", "bits"),
                       ("float64", "int64", "int"), ("bool", "uint16", "default"), ("int8", "bfloat16", "small")]:
  case(f"cast/{short(src)}-{short(dst)}", "cast", "CAST", [inp(src, (2, 3), kind)], {"dtype": dst})
for src, dst, shape, kind in [("float32", "int32", (2, 3), "default"), ("float32", "uint8", (2, 2), "default"),
                              ("int32", "uint32", (5,), "bits"), ("uint8", "int16", (2, 4), "bits"),
                              ("int16", "float16", (2, 3), "small"), ("uint8", "bool", (6,), "small"),
                              ("int64", "float64", (3,), "small"), ("uint16", "bfloat16", (4,), "small")]:
  case(f"bitcast/{short(src)}-{short(dst)}", "bitcast", "BITCAST", [inp(src, shape, kind)], {"dtype": dst})

# ---- reductions ----------------------------------------------------------------------------------
for dt in ALL:
  case(f"sum/{short(dt)}-all", "sum", "REDUCE_SUM", [inp(dt, (3, 4))])
case("sum/f32-axis1-keepdim", "sum", "REDUCE_SUM", [inp("float32", (3, 4))], {"axis": 1, "keepdim": True})
case("sum/f32-axes02", "sum", "REDUCE_SUM", [inp("float32", (2, 3, 4))], {"axis": [0, 2]})
case("sum/i8-axis-neg", "sum", "REDUCE_SUM", [inp("int8", (3, 4))], {"axis": -1})
case("sum/u32-bits-axis0", "sum", "REDUCE_SUM", [inp("uint32", (3, 4), "bits")], {"axis": 0})
for dt in ["float32", "int16", "uint8", "bool", "bfloat16"]:
  case(f"max/{short(dt)}-axis0", "max", "REDUCE_MAX", [inp(dt, (3, 4))], {"axis": 0})
case("max/f64-all", "max", "REDUCE_MAX", [inp("float64", (3, 4))])
for dt in ["float32", "int32", "uint16", "bool"]:
  case(f"min/{short(dt)}-axis1", "min", "REDUCE_MIN", [inp(dt, (3, 4))], {"axis": 1, "keepdim": True})
case("min/i32-bits-all", "min", "REDUCE_MIN", [inp("int32", (3, 4), "bits")])
case("min/u64-bits-axis0", "min", "REDUCE_MIN", [inp("uint64", (3, 4), "bits")], {"axis": 0})
for dt in ["float32", "float16", "int32", "bfloat16"]:
  case(f"mean/{short(dt)}", "mean", "MEAN", [inp(dt, (3, 4))], {"axis": 1})
case("mean/f32-all", "mean", "MEAN", [inp("float32", (2, 3, 4))])
case("var/f32", "var", "VAR", [inp("float32", (3, 4))], {"axis": 1})
case("var/f64-biased-keepdim", "var", "VAR", [inp("float64", (3, 4))], {"axis": 0, "keepdim": True, "correction": 0})
case("var/f16-all", "var", "VAR", [inp("float16", (3, 4))])
case("std/f32", "std", "STD", [inp("float32", (3, 4))], {"axis": 0})
case("std/i32", "std", "STD", [inp("int32", (3, 4), "small")], {"axis": 1})
case("std/f16-keepdim-biased", "std", "STD", [inp("float16", (2, 5))], {"axis": 1, "keepdim": True, "correction": 0})
case("var/f32-no-axes", "var", "VAR", [inp("float32", (3, 4))], {"axis": []})
case("std/f64-no-axes-biased", "std", "STD", [inp("float64", (2, 3))], {"axis": [], "correction": 0})
case("logsumexp/f32", "logsumexp", "LOGSUMEXP", [inp("float32", (3, 4))], {"axis": 1})
case("logsumexp/f32-keepdim", "logsumexp", "LOGSUMEXP", [inp("float32", (3, 4))], {"axis": 0, "keepdim": True})
case("logsumexp/bf16", "logsumexp", "LOGSUMEXP", [inp("bfloat16", (3, 4))], {"axis": -1})
case("argmax/f32", "argmax", "ARGMAX", [inp("float32", (3, 4), "small")], {"axis": 1})
case("argmax/i8-all", "argmax", "ARGMAX", [inp("int8", (3, 4), "small")])
case("argmax/u8-keepdim", "argmax", "ARGMAX", [inp("uint8", (3, 4), "small")], {"axis": 0, "keepdim": True})
case("argmin/f16", "argmin", "ARGMIN", [inp("float16", (3, 4), "small")], {"axis": 0})
case("argmin/i64-all", "argmin", "ARGMIN", [inp("int64", (3, 4), "small")])
case("argmin/i32-bits", "argmin", "ARGMIN", [inp("int32", (3, 4), "bits")], {"axis": 1})
for dt in ["float32", "int32", "float16", "uint8"]:
  case(f"prod/{short(dt)}", "prod", "REDUCE_PROD", [inp(dt, (3, 4), "small")], {"axis": 1})
case("prod/i64-all", "prod", "REDUCE_PROD", [inp("int64", (2, 3), "small")])
for dt, ax in [("float32", 0), ("int32", 1), ("float16", -1), ("uint8", 1), ("bool", 0), ("float64", 1)]:
  case(f"cumsum/{short(dt)}-axis{ax}", "cumsum", "CUMSUM", [inp(dt, (3, 4), "small")], {"axis": ax})
# sorting and running extremes (values only: R's indices are 1-based)
case("sort/f32", "sort", "SORT", [inp("float32", (3, 5))], {"axis": 1})
case("sort/i32-desc", "sort", "SORT", [inp("int32", (4, 3), "small")], {"axis": 0, "descending": True})
case("topk/f32", "topk", "TOPK", [inp("float32", (3, 6))], {"k": 2, "axis": -1})
case("topk/i8-smallest", "topk", "TOPK", [inp("int8", (5, 3), "small")], {"k": 3, "axis": 0, "largest": False})
case("cummax/f32", "cummax", "CUMMAX", [inp("float32", (3, 4))], {"axis": 1})
case("cummin/i32", "cummin", "CUMMIN", [inp("int32", (3, 4), "small")], {"axis": 0})
case("cumprod/f32", "cumprod", "CUMPROD", [inp("float32", (2, 5), "small")], {"axis": 1})
case("logcumsumexp/f32", "logcumsumexp", "LOGCUMSUMEXP", [inp("float32", (3, 4))], {"axis": -1})

# ---- movement ------------------------------------------------------------------------------------
case("reshape/f32", "reshape", "RESHAPE", [inp("float32", (2, 6))], {"shape": [3, 4]})
case("reshape/i16-infer", "reshape", "RESHAPE", [inp("int16", (2, 3, 4))], {"shape": [4, -1]})
case("reshape/bool-0d", "reshape", "RESHAPE", [inp("bool", (1, 1))], {"shape": []})
case("permute/f32", "permute", "PERMUTE", [inp("float32", (2, 3, 4))], {"order": [2, 0, 1]})
case("permute/u8", "permute", "PERMUTE", [inp("uint8", (2, 3, 4))], {"order": [1, 2, 0]})
case("transpose/f16", "transpose", "PERMUTE", [inp("float16", (2, 3))], {"dim0": 0, "dim1": 1})
case("transpose/i64-3d", "transpose", "PERMUTE", [inp("int64", (2, 3, 4), "bits")], {"dim0": -1, "dim1": 0})
case("expand/f32", "expand", "EXPAND", [inp("float32", (3, 1))], {"shape": [3, 4]})
case("expand/i32-newaxis", "expand", ["EXPAND", "RESHAPE"], [inp("int32", (1, 3))], {"shape": [2, 4, 3]})
case("pad/f32", "pad", "PAD", [inp("float32", (2, 3))], {"padding": [[1, 0], [2, 1]]})
case("pad/i8-value", "pad", ["PAD", "WHERE"], [inp("int8", (2, 3))], {"padding": [[0, 1], [1, 1]], "value": 7})
case("pad/bf16-negative", "pad", ["PAD", "SHRINK"], [inp("bfloat16", (3, 4))], {"padding": [[-1, 1], [0, -2]]})
case("shrink/f32", "shrink", "SHRINK", [inp("float32", (4, 5))], {"arg": [[1, 3], [0, 4]]})
case("shrink/u32", "shrink", "SHRINK", [inp("uint32", (4, 5), "bits")], {"arg": [[0, 4], [2, 3]]})
case("flip/f32", "flip", "FLIP", [inp("float32", (2, 3))], {"axis": 1})
case("flip/i16-both", "flip", "FLIP", [inp("int16", (2, 3))], {"axis": [0, 1]})
case("squeeze/f32", "squeeze", "RESHAPE", [inp("float32", (2, 1, 3))], {"dim": 1})
case("squeeze/all", "squeeze", "RESHAPE", [inp("int32", (1, 3, 1))])
case("unsqueeze/f64", "unsqueeze", "RESHAPE", [inp("float64", (2, 3))], {"dim": -1})
case("flatten/f32", "flatten", "RESHAPE", [inp("float32", (2, 3, 4))])
case("flatten/start1", "flatten", "RESHAPE", [inp("uint8", (2, 3, 4))], {"start": 1})
case("cat/f32", "cat", "CAT", [inp("float32", (2, 3)), inp("float32", (1, 3))], {"dim": 0})
case("cat/i32-3way-dim1", "cat", "CAT", [inp("int32", (2, 1)), inp("int32", (2, 2)), inp("int32", (2, 3))], {"dim": 1})
case("cat/promote", "cat", ["CAT", "CAST"], [inp("int8", (2,)), inp("float16", (3,))], {"dim": 0})
case("stack/f32", "stack", ["CAT", "RESHAPE"], [inp("float32", (2, 3)), inp("float32", (2, 3))], {"dim": 0})
case("stack/bf16-dim1", "stack", ["CAT", "RESHAPE"], [inp("bfloat16", (2, 3)), inp("bfloat16", (2, 3))], {"dim": 1})
case("cat/bool-last-axis", "cat", "CAT", [inp("bool", (2, 2)), inp("bool", (2, 3))], {"dim": -1})
case("cat/f64-with-empty", "cat", "CAT", [inp("float64", (0, 2)), inp("float64", (3, 2)), inp("float64", (1, 2))], {"dim": 0})
case("einsum/matmul", "einsum", "EINSUM", [inp("float32", (2, 3)), inp("float32", (3, 4))], {"equation": "ij,jk->ik"})
case("einsum/trace-implicit", "einsum", "EINSUM", [inp("float64", (3, 3))], {"equation": "ii"})
case("einsum/ellipsis-promote", "einsum", ["EINSUM", "CAST"], [inp("int16", (2, 1, 3)), inp("float32", (4, 3))],
     {"equation": "...j,kj->...k"})
case("einsum/three-ints", "einsum", "EINSUM", [inp("int32", (3,)), inp("int32", (3,)), inp("int32", (2, 3))],
     {"equation": "i, i, ji -> j"})
case("rearrange/split", "rearrange", "RESHAPE", [inp("float32", (2, 6, 3))], {"formula": "b (h w) c -> b h w c", "sizes": {"h": 2}})
case("rearrange/merge-move", "rearrange", ["RESHAPE", "PERMUTE"], [inp("int16", (2, 3, 4))], {"formula": "a b c -> (c a) () b", "sizes": {}})
case("qr/q-tall", "qr", "QR", [inp("float32", (4, 3))], {"factor": "q"})
case("qr/r-wide-int", "qr", ["QR", "CAST"], [inp("int32", (2, 3, 5), "small")], {"factor": "r"})
case("svd/s-wide", "svd", "SVD", [inp("float32", (3, 4))], {"factor": "s", "full": False, "sweeps": 4})
case("svd/u-square", "svd", "SVD", [inp("float64", (3, 3))], {"factor": "u", "full": True, "sweeps": 6})
case("svd/vh-tall", "svd", "SVD", [inp("float32", (5, 2))], {"factor": "vh", "full": False, "sweeps": 3})
# Indexing: an entry is an int, null (a new axis), "..." or {"slice": [start, stop, step]} (nulls
# for the defaults), or {"tensor": k} (advanced indexing by input k).
case("index/int-row", "index", ["SHRINK", "RESHAPE"], [inp("float32", (3, 4))], {"index": [1]})
case("index/slice-step", "index", ["SHRINK", "PAD"], [inp("float32", (3, 6))], {"index": [{"slice": [None, None, None]}, {"slice": [1, None, 2]}]})
case("index/neg-step", "index", "FLIP", [inp("int32", (5,))], {"index": [{"slice": [None, None, -1]}]})
case("index/newaxis-ellipsis", "index", "RESHAPE", [inp("uint8", (2, 3, 4))], {"index": ["...", None, -1]})
case("index/tensor", "index", "GATHER", [inp("float32", (4, 3)), inp("int32", (5,), lo=-4, hi=3)], {"index": [{"tensor": 1}]})

# ---- linear algebra, nn ops ----------------------------------------------------------------------
case("matmul/f32-2d", "matmul", "MATMUL", [inp("float32", (3, 4)), inp("float32", (4, 5))])
case("matmul/f32-vec-mat", "matmul", "MATMUL", [inp("float32", (4,)), inp("float32", (4, 2))])
case("matmul/f32-batch-broadcast", "matmul", "MATMUL", [inp("float32", (2, 1, 3, 4)), inp("float32", (3, 4, 2))])
case("matmul/f16", "matmul", ["MATMUL", "CAST"], [inp("float16", (3, 4)), inp("float16", (4, 3))])
case("matmul/bf16", "matmul", ["MATMUL", "CAST"], [inp("bfloat16", (2, 5)), inp("bfloat16", (5, 3))])
case("matmul/i32", "matmul", "MATMUL", [inp("int32", (3, 4), "small"), inp("int32", (4, 2), "small")])
case("matmul/i8-acc", "matmul", ["MATMUL", "CAST"], [inp("int8", (3, 4)), inp("int8", (4, 2))])
case("matmul/f64-mat-vec", "matmul", "MATMUL", [inp("float64", (3, 4)), inp("float64", (4,))])
case("softmax/f32", "softmax", "SOFTMAX", [inp("float32", (3, 5))], {"axis": -1})
case("softmax/f32-axis0", "softmax", "SOFTMAX", [inp("float32", (3, 5))], {"axis": 0})
case("softmax/f16", "softmax", ["SOFTMAX", "CAST"], [inp("float16", (2, 4))], {"axis": 1})
case("softmax/i32", "softmax", ["SOFTMAX", "CAST"], [inp("int32", (2, 4), "small")], {"axis": 1})
case("softmin/f32", "softmin", "SOFTMIN", [inp("float32", (3, 5))], {"axis": -1})
case("normalize/f32", "normalize", "NORMALIZE", [inp("float32", (3, 5))], {"p": 2.0, "dim": 1})
case("logSoftmax/f32", "logSoftmax", "LOG_SOFTMAX", [inp("float32", (3, 5))], {"axis": 1})
case("logSoftmax/bf16", "logSoftmax", ["LOG_SOFTMAX", "CAST"], [inp("bfloat16", (3, 5))], {"axis": -1})
case("layernorm/f32", "layernorm", "LAYERNORM", [inp("float32", (3, 8))], {"axis": -1, "eps": 0.00001})
case("layernorm/f32-2axes", "layernorm", "LAYERNORM", [inp("float32", (2, 3, 4))], {"axis": [1, 2], "eps": 0.001})
case("layernorm/f64-inner", "layernorm", ["LAYERNORM", "PERMUTE"], [inp("float64", (3, 4, 2))], {"axis": 1, "eps": 0.00001})
case("rmsNorm/f32", "rmsNorm", "RMS_NORM", [inp("float32", (3, 8))], {"axis": -1, "eps": 0.000001})
case("rmsNorm/f16", "rmsNorm", ["RMS_NORM", "CAST"], [inp("float16", (2, 6))], {"axis": -1, "eps": 0.0001})
# The affine part is LAYERNORM's and RMS_NORM's own sources (the normalized axes' shape).
case("layernorm/affine", "layernorm", "LAYERNORM",
     [inp("float32", (3, 2, 4)), inp("float32", (2, 4)), inp("float32", (2, 4))], {"axis": [1, 2], "eps": 0.00001})
case("layernorm/affine-inner-f64", "layernorm", ["LAYERNORM", "PERMUTE", "CAST"],
     [inp("float64", (3, 4, 2)), inp("float32", (4,))], {"axis": 1, "eps": 0.00001})
case("rmsNorm/affine-f16", "rmsNorm", ["RMS_NORM", "CAST"], [inp("float16", (2, 6)), inp("float16", (6,))],
     {"axis": -1, "eps": 0.0001})
case("groupNorm/f32", "groupNorm", "GROUP_NORM", [inp("float32", (2, 4, 3, 3))], {"groups": 2, "eps": 0.00001})
case("groupNorm/affine", "groupNorm", "GROUP_NORM",
     [inp("float32", (2, 6, 4)), inp("float32", (6,)), inp("float32", (6,))], {"groups": 3, "eps": 0.00001})
case("batchNorm/train", "batchNorm", "BATCHNORM_TRAIN", [inp("float32", (4, 3, 2, 2))], {"training": True, "eps": 0.00001})
case("batchNorm/train-affine-f64", "batchNorm", "BATCHNORM_TRAIN",
     [inp("float64", (3, 2, 4)), inp("float64", (2,)), inp("float64", (2,), "pos"), inp("float64", (2,)), inp("float64", (2,))],
     {"training": True, "eps": 0.001})
case("batchNorm/eval", "batchNorm", "BATCHNORM_EVAL",
     [inp("float32", (4, 3, 2)), inp("float32", (3,)), inp("float32", (3,), "pos")], {"training": False, "eps": 0.00001})
case("batchNorm/eval-affine-f16", "batchNorm", ["BATCHNORM_EVAL", "CAST"],
     [inp("float16", (2, 3, 2)), inp("float16", (3,)), inp("float16", (3,), "pos"), inp("float16", (3,)), inp("float16", (3,))],
     {"training": False, "eps": 0.001})
# tinygrad's batchnorm(weight, bias, mean, invstd, axis): inputs x, mean, invstd, then weight and
# bias at the input positions the args name (null: not given).
case("batchnorm/f32", "batchnorm", "BATCHNORM_INVSTD",
     [inp("float32", (2, 3, 4, 4)), inp("float32", (3,)), inp("float32", (3,), "pos"), inp("float32", (3,)),
      inp("float32", (3,))], {"axis": 1, "weight": 3, "bias": 4})
case("batchnorm/two-axes-broadcast-invstd-f64", "batchnorm", "BATCHNORM_INVSTD",
     [inp("float64", (2, 3, 4)), inp("float64", (3, 4)), inp("float64", (4,), "pos")], {"axis": [1, 2], "weight": None, "bias": None})
case("batchnorm/f16-bias-only-promotes", "batchnorm", ["BATCHNORM_INVSTD", "CAST"],
     [inp("float16", (2, 3)), inp("float32", (3,)), inp("float32", (3,), "pos"), inp("float32", (3,))],
     {"axis": -1, "weight": None, "bias": 3})
case("crossEntropy/indices", "crossEntropy", "CROSS_ENTROPY",
     [inp("float32", (4, 5)), inp("int32", (4,), lo=0, hi=4)])
case("crossEntropy/sum-smoothing", "crossEntropy", "CROSS_ENTROPY",
     [inp("float32", (3, 4)), inp("int64", (3,), lo=0, hi=3)], {"reduction": "sum", "labelSmoothing": 0.125})
case("crossEntropy/probs", "crossEntropy", "CROSS_ENTROPY",
     [inp("float32", (2, 3)), inp("float32", (2, 3), lo=0, hi=4, div=4)])
case("crossEntropy/none-3d-f16", "crossEntropy", "CROSS_ENTROPY",
     [inp("float16", (2, 4, 3)), inp("int32", (2, 3), lo=0, hi=3)], {"reduction": "none"})
case("oneHot/i32", "oneHot", "ONE_HOT", [inp("int32", (2, 3), lo=-1, hi=5)], {"n": 5})
case("oneHot/u8", "oneHot", "ONE_HOT", [inp("uint8", (4,), lo=0, hi=3)], {"n": 3})
case("tril/f32", "tril", "TRIL", [inp("float32", (4, 4))])
case("tril/i32-diag1", "tril", "TRIL", [inp("int32", (2, 3, 4))], {"diagonal": 1})
case("triu/f16-diag-neg", "triu", "TRIU", [inp("float16", (4, 3))], {"diagonal": -1})
case("triu/bool", "triu", "TRIU", [inp("bool", (3, 3))])
case("gather/f32-axis1", "gather", "GATHER", [inp("float32", (3, 4)), inp("int32", (3, 2), lo=0, hi=3)], {"dim": 1})
case("gather/i16-axis0", "gather", "GATHER", [inp("int16", (3, 4)), inp("int64", (2, 4), lo=0, hi=2)], {"dim": 0})
# scatter and selection by index (positions are 1-based in R: its runner converts)
case("scatter/f32", "scatter", "SCATTER_REDUCE", [inp("float32", (3, 5)), inp("int32", (3, 4), lo=0, hi=4),
                                                  inp("float32", (3, 4))], {"dim": 1})
case("scatter/i16-scalar", "scatter", "SCATTER_REDUCE", [inp("int16", (4, 3)), inp("int64", (2, 3), lo=0, hi=3)],
     {"dim": 0, "value": 7})
case("scatter/bool", "scatter", "SCATTER_REDUCE", [inp("bool", (2, 4)), inp("int32", (2, 3), lo=0, hi=3),
                                                   inp("bool", (2, 3))], {"dim": -1})
for red, dt, self_ in [("sum", "float32", True), ("prod", "float64", True), ("mean", "int32", True),
                       ("mean", "float16", False), ("amax", "int16", False), ("amin", "float32", True)]:
  case(f"scatterReduce/{red}-{short(dt)}" + ("" if self_ else "-exclude-self"), "scatterReduce", "SCATTER_REDUCE",
       [inp(dt, (3, 4), "small"), inp("int32", (3, 6), lo=0, hi=3), inp(dt, (3, 7), "small")],
       {"dim": 1, "reduce": red, "includeSelf": self_})
case("nllLoss/f32", "nllLoss", "NLL_LOSS", [inp("float32", (4, 5)), inp("int32", (4,), lo=0, hi=4)])
case("nllLoss/weight-ignore-sum", "nllLoss", "NLL_LOSS",
     [inp("float32", (6, 3)), inp("int64", (6,), lo=0, hi=2), inp("float32", (3,), "pos")],
     {"ignoreIndex": 1, "reduction": "sum"})
case("nllLoss/none-3d-f64", "nllLoss", "NLL_LOSS", [inp("float64", (2, 3, 4)), inp("int32", (2, 4), lo=0, hi=2)],
     {"reduction": "none"})
case("interpolate/linear-2d", "interpolate", "INTERPOLATE", [inp("float32", (1, 2, 3, 4))], {"size": [5, 7]})
case("interpolate/linear-1d-align", "interpolate", "INTERPOLATE", [inp("float64", (2, 5))],
     {"size": [8], "alignCorners": True})
case("interpolate/linear-int", "interpolate", "INTERPOLATE", [inp("int32", (2, 3), "small")], {"size": [5]})
case("interpolate/nearest-u8", "interpolate", "INTERPOLATE", [inp("uint8", (2, 3, 4))], {"size": [5, 3], "mode": "nearest"})
case("interpolate/nearest-exact-3d", "interpolate", "INTERPOLATE", [inp("float16", (1, 2, 3, 2))],
     {"size": [3, 4, 5], "mode": "nearest-exact"})
case("unfold/f32", "unfold", "UNFOLD", [inp("float32", (2, 9, 3))], {"dim": 1, "size": 4, "step": 2})
case("unfold/i8-last", "unfold", "UNFOLD", [inp("int8", (4, 5))], {"dim": -1, "size": 5, "step": 3})
case("nonzero/f32", "nonzero", "NONZERO", [inp("float32", (3, 4), lo=-1, hi=1, div=1)])
case("nonzero/bool-3d", "nonzero", "NONZERO", [inp("bool", (2, 3, 2))])
case("maskedSelect/i32", "maskedSelect", "MASKED_SELECT", [inp("int32", (3, 4)), inp("bool", (3, 1))])
case("multinomial/replacement", "multinomial", "MULTINOMIAL", [inp("float32", (2, 4), "pos")],
     {"seed": 5, "n": 6, "replacement": True})
case("multinomial/without-1d", "multinomial", "MULTINOMIAL", [inp("float32", (6,), "pos")], {"seed": 9, "n": 4})
case("randperm/10", "randperm", ["RAND", "SORT"], args={"seed": 3, "n": 10})
case("normal/f32", "normal", "NORMAL", args={"seed": 4, "shape": [2, 3], "mean": 1.5, "std": 0.5})
# indices may repeat (the last write wins) or fall outside the volume (nothing is written)
case("maxUnpool2d/f32", "maxUnpool2d", "MAX_UNPOOL2D",
     [inp("float32", (1, 2, 2, 2)), inp("int32", (1, 2, 2, 2), lo=0, hi=15)])
case("maxUnpool2d/1d-i64-stride", "maxUnpool2d", "MAX_UNPOOL2D",
     [inp("int64", (2, 3, 4)), inp("int64", (2, 3, 4), lo=0, hi=10)], {"kernel": [3], "stride": 2, "padding": 1})
case("maxUnpool2d/3d-f64-size", "maxUnpool2d", "MAX_UNPOOL2D",
     [inp("float64", (1, 2, 2, 2)), inp("int32", (1, 2, 2, 2), lo=0, hi=40)], {"kernel": [1, 2, 2], "outputSize": [2, 4, 5]})
case("conv2d/f32", "conv2d", "CONV2D", [inp("float32", (2, 3, 6, 6)), inp("float32", (4, 3, 3, 3))])
case("conv2d/stride-pad-bias", "conv2d", "CONV2D",
     [inp("float32", (1, 2, 7, 7)), inp("float32", (3, 2, 3, 3)), inp("float32", (3,))], {"stride": 2, "padding": 1})
case("conv2d/groups-dilation", "conv2d", "CONV2D", [inp("float32", (1, 4, 8, 8)), inp("float32", (4, 2, 3, 3))],
     {"groups": 2, "dilation": 2})
case("conv2d/f16", "conv2d", ["CONV2D", "CAST"], [inp("float16", (1, 2, 5, 5)), inp("float16", (2, 2, 2, 2))],
     {"padding": [1, 0]})
case("conv2d/bf16", "conv2d", ["CONV2D", "CAST"], [inp("bfloat16", (1, 1, 4, 4)), inp("bfloat16", (2, 1, 3, 3))])
# the bias is the op's third source, in the accumulator of the three dtypes (float32 here)
case("conv2d/f16-bias-f32", "conv2d", ["CONV2D", "CAST"],
     [inp("float16", (2, 2, 4, 4)), inp("float16", (3, 2, 2, 2)), inp("float32", (3,))], {"padding": 1})
case("convTranspose2d/f32", "convTranspose2d", "CONV_TRANSPOSE2D", [inp("float32", (1, 2, 3, 3)), inp("float32", (2, 3, 3, 3))])
case("convTranspose2d/stride-outpad", "convTranspose2d", "CONV_TRANSPOSE2D",
     [inp("float32", (1, 2, 3, 3)), inp("float32", (2, 2, 2, 2))], {"stride": 2, "padding": 1, "outputPadding": 1})
case("convTranspose2d/groups-bias", "convTranspose2d", "CONV_TRANSPOSE2D",
     [inp("float32", (2, 4, 3, 3)), inp("float32", (4, 3, 2, 2)), inp("float32", (6,))], {"groups": 2, "stride": 2})
case("maxPool2d/f32", "maxPool2d", "MAX_POOL2D", [inp("float32", (1, 2, 4, 4))])
case("maxPool2d/k3-s1-pad", "maxPool2d", "MAX_POOL2D", [inp("float32", (2, 1, 5, 5))], {"kernel": 3, "stride": 1, "padding": 1})
case("maxPool2d/i32", "maxPool2d", "MAX_POOL2D", [inp("int32", (1, 1, 4, 6))], {"kernel": [2, 3]})
case("maxPool2d/bf16-dilation", "maxPool2d", "MAX_POOL2D", [inp("bfloat16", (1, 1, 6, 6))], {"kernel": 2, "dilation": 2})
case("avgPool2d/f32", "avgPool2d", "AVG_POOL2D", [inp("float32", (1, 2, 4, 4))])
case("avgPool2d/pad-stride", "avgPool2d", "AVG_POOL2D", [inp("float32", (1, 1, 5, 5))], {"kernel": 3, "stride": 2, "padding": 1})
case("avgPool2d/f16", "avgPool2d", ["AVG_POOL2D", "CAST"], [inp("float16", (1, 1, 4, 4))], {"kernel": 2})
# count_include_pad=False: the daemon divides by each window's elements inside the input (counted_padding)
case("avgPool2d/exclude-pad", "avgPool2d", "AVG_POOL2D", [inp("float32", (2, 1, 5, 5))],
     {"kernel": 3, "stride": 2, "padding": 1, "countIncludePad": False})
case("avgPool2d/exclude-pad-1d-f64", "avgPool2d", "AVG_POOL2D", [inp("float64", (3, 7))],
     {"kernel": [4], "stride": 3, "padding": 2, "countIncludePad": False})
# 1-D and 3-D forms of the same wire ops: the weight's rank or the kernel list's length gives the
# spatial count (a number kernel is 2-D)
case("conv2d/1d-stride-pad", "conv2d", "CONV2D", [inp("float32", (2, 3, 9)), inp("float32", (4, 3, 3))],
     {"stride": 2, "padding": [1]})
case("conv2d/1d-groups-dilation-bias", "conv2d", "CONV2D",
     [inp("float32", (1, 4, 10)), inp("float32", (2, 2, 2)), inp("float32", (2,))], {"groups": 2, "dilation": 3})
case("conv2d/3d", "conv2d", "CONV2D", [inp("float32", (1, 2, 4, 5, 4)), inp("float32", (3, 2, 2, 3, 2))],
     {"padding": [1, 0, 1], "stride": [1, 2, 1]})
case("conv2d/3d-f16", "conv2d", ["CONV2D", "CAST"], [inp("float16", (1, 2, 3, 4, 3)), inp("float16", (2, 1, 2, 2, 2))],
     {"groups": 2, "dilation": [1, 2, 1]})
case("convTranspose2d/1d", "convTranspose2d", "CONV_TRANSPOSE2D", [inp("float32", (1, 2, 5)), inp("float32", (2, 3, 3))],
     {"stride": 2, "padding": 1, "outputPadding": 1})
case("convTranspose2d/3d", "convTranspose2d", "CONV_TRANSPOSE2D",
     [inp("float32", (1, 2, 2, 3, 2)), inp("float32", (2, 2, 2, 2, 3))], {"stride": [2, 1, 2], "padding": [0, 1, 1]})
case("maxPool2d/1d", "maxPool2d", "MAX_POOL2D", [inp("float32", (2, 3, 9))], {"kernel": [3], "stride": 2, "padding": 1})
case("maxPool2d/3d-i32", "maxPool2d", "MAX_POOL2D", [inp("int32", (1, 2, 4, 5, 4))],
     {"kernel": [2, 3, 2], "stride": 1, "dilation": [1, 1, 2]})
case("avgPool2d/1d", "avgPool2d", "AVG_POOL2D", [inp("float32", (2, 8))], {"kernel": [3], "stride": 2, "padding": 1})
case("avgPool2d/3d-pad", "avgPool2d", "AVG_POOL2D", [inp("float32", (1, 1, 5, 4, 5))],
     {"kernel": [3, 2, 3], "stride": 2, "padding": [1, 0, 1]})
# ceil_mode: the clients send the flag and compute torch's window count; the daemon pads for the
# last partial window, and that padding never counts in a mean
# return_indices: torch's flat positions in the spatial volume (R's are 1-based; its runner
# subtracts 1), the first maximum of a window on ties
case("maxPool2dIndices/overlap-pad-ties", "maxPool2dIndices", "MAX_POOL2D", [inp("int8", (2, 1, 5, 6), lo=-2, hi=2)],
     {"kernel": 3, "stride": 2, "padding": 1})
case("maxPool2dIndices/1d-ceil", "maxPool2dIndices", "MAX_POOL2D", [inp("float32", (1, 2, 9))],
     {"kernel": [2], "stride": 2, "ceilMode": True})
case("maxPool2d/ceil-3d-i16", "maxPool2d", "MAX_POOL2D", [inp("int16", (1, 2, 5, 6, 7))],
     {"kernel": [2, 3, 2], "stride": 2, "padding": [0, 1, 1], "ceilMode": True})
case("avgPool2d/ceil-pad", "avgPool2d", "AVG_POOL2D", [inp("float32", (2, 1, 7, 6))],
     {"kernel": 3, "stride": 2, "padding": 1, "dilation": [1, 2], "ceilMode": True})
case("avgPool2d/ceil-exclude-pad-1d", "avgPool2d", "AVG_POOL2D", [inp("float64", (2, 3, 10))],
     {"kernel": [4], "stride": 3, "padding": 1, "ceilMode": True, "countIncludePad": False})
# Muon's orthogonalization: tall (transposed to the wide side and back) and batched wide
case("newtonSchulz/tall", "newtonSchulz", ["NEWTON_SCHULZ", "BUFFER"], [inp("float32", (5, 3))],
     {"steps": 3, "params": [3.4445, -4.775, 2.0315]})
case("newtonSchulz/batch-f64", "newtonSchulz", ["NEWTON_SCHULZ", "BUFFER"], [inp("float64", (2, 2, 4))],
     {"steps": 2, "params": [1.5, -0.5], "eps": 0.001})
case("sdpa/f32", "scaledDotProductAttention", "SCALED_DOT_PRODUCT_ATTENTION",
     [inp("float32", (2, 3, 4)), inp("float32", (2, 5, 4)), inp("float32", (2, 5, 6))])
case("sdpa/causal", "scaledDotProductAttention", "SCALED_DOT_PRODUCT_ATTENTION",
     [inp("float32", (1, 4, 4)), inp("float32", (1, 4, 4)), inp("float32", (1, 4, 3))], {"causal": True})
case("sdpa/bool-mask", "scaledDotProductAttention", "SCALED_DOT_PRODUCT_ATTENTION_MASKED",
     [inp("float32", (2, 3, 4)), inp("float32", (2, 5, 4)), inp("float32", (2, 5, 2)), inp("bool", (3, 5))])
case("sdpa/float-mask-f16", "scaledDotProductAttention", ["SCALED_DOT_PRODUCT_ATTENTION_MASKED", "CAST"],
     [inp("float16", (3, 4)), inp("float16", (3, 4)), inp("float16", (3, 4)), inp("float16", (3, 3), "unit")])
# dropout on the attention weights, drawn on the device from the seed
case("sdpa/dropout-causal", "scaledDotProductAttention", "SCALED_DOT_PRODUCT_ATTENTION",
     [inp("float32", (2, 4, 3)), inp("float32", (2, 4, 3)), inp("float32", (2, 4, 5))], {"causal": True, "seed": 7, "p": 0.3})
case("sdpa/dropout-mask", "scaledDotProductAttention", "SCALED_DOT_PRODUCT_ATTENTION_MASKED",
     [inp("float32", (3, 4)), inp("float32", (5, 4)), inp("float32", (5, 2)), inp("bool", (3, 5))], {"seed": 2, "p": 0.5})

# ---- ops the clients compose themselves from wire ops (where their rules drift most easily) ------
# (rsqrt to hardswish were composed until issue 33; they are core composites now)
case("trunc/f32", "trunc", "TRUNC", [inp("float32", (8,))])
case("trunc/bf16", "trunc", "TRUNC", [inp("bfloat16", (8,))])
case("floor/f32", "floor", "FLOOR", [inp("float32", (8,))])
case("ceil/f64", "ceil", "CEIL", [inp("float64", (8,))])
case("ceil/f16", "ceil", "CEIL", [inp("float16", (8,))])
case("round/f32-half-even", "round", "ROUND", [inp("float32", (12,), lo=-12, hi=12, div=2)])
case("round/f16", "round", "ROUND", [inp("float16", (8,))])
case("floor/i32", "floor", "FLOOR", [inp("int32", (6,))])
case("sign/f32", "sign", "SIGN", [inp("float32", (8,), "small")])
case("sign/i8", "sign", "SIGN", [inp("int8", (8,), "small")])
case("square/i16", "square", "SQUARE", [inp("int16", (6,), "small")])
case("square/f16", "square", "SQUARE", [inp("float16", (6,), "small")])
case("rsqrt/f32", "rsqrt", "RSQRT", [inp("float32", (6,), "pos")])
case("tan/f32", "tan", "TAN", [inp("float32", (6,), "unit")])
case("elu/f32", "elu", "ELU", [inp("float32", (8,))], {"alpha": 0.5})
case("relu6/f32", "relu6", "RELU6", [inp("float32", (8,), lo=-32, hi=40, div=4)])
case("logsigmoid/f32", "logsigmoid", "LOGSIGMOID", [inp("float32", (8,))])
case("quickGelu/f32", "quickGelu", "QUICK_GELU", [inp("float32", (8,))])
case("mish/f32", "mish", "MISH", [inp("float32", (8,))])
case("hardtanh/f32", "hardtanh", "HARDTANH", [inp("float32", (8,))], {"minVal": -0.5, "maxVal": 1.5})
case("hardsigmoid/f32", "hardsigmoid", "HARDSIGMOID", [inp("float32", (8,))])
case("hardswish/f32", "hardswish", "HARDSWISH", [inp("float32", (8,))])
case("lshift/i32", "lshift", "LSHIFT", [inp("int32", (6,))], {"n": 3})
case("lshift/u8-bits", "lshift", "LSHIFT", [inp("uint8", (6,), "bits")], {"n": 5})
case("rshift/i32", "rshift", "RSHIFT", [inp("int32", (6,))], {"n": 2})
case("rshift/i8-bits", "rshift", "RSHIFT", [inp("int8", (6,), "bits")], {"n": 7})
case("repeat/f32", "repeat", ["EXPAND", "RESHAPE"], [inp("float32", (2, 3))], {"repeats": [2, 1, 3]})
case("unflatten/i32", "unflatten", "RESHAPE", [inp("int32", (2, 6))], {"dim": 1, "sizes": [2, 3]})
case("split/f32-piece1", "split", "SHRINK", [inp("float32", (2, 5))], {"sizes": [1, 3, 1], "dim": 1, "piece": 1})
case("chunk/i16-piece1", "chunk", "SHRINK", [inp("int16", (5, 2))], {"chunks": 2, "dim": 0, "piece": 1})
case("linear/f32", "linear", "LINEAR", [inp("float32", (3, 4)), inp("float32", (4, 2)), inp("float32", (2,))])
case("linear/f16-no-bias", "linear", ["LINEAR", "CAST"], [inp("float16", (3, 4)), inp("float16", (4, 2))])
case("linear/bf16-batch", "linear", ["LINEAR", "CAST"], [inp("bfloat16", (2, 3, 4)), inp("bfloat16", (4, 2)), inp("bfloat16", (2,))])
case("linear/f32-vector-weight", "linear", "LINEAR", [inp("float32", (3, 4)), inp("float32", (4,)), inp("float32", (3, 1))])
case("linear/mixed-i32-f32", "linear", ["LINEAR", "CAST"], [inp("int32", (3, 4), "small"), inp("float32", (4, 2))])
case("sparseCategoricalCrossentropy/f32", "sparseCategoricalCrossentropy", "SPARSE_CATEGORICAL_CROSSENTROPY",
     [inp("float32", (4, 5)), inp("int32", (4,), lo=0, hi=4)], {"ignoreIndex": 2})
case("sparseCategoricalCrossentropy/none-smoothing-f64", "sparseCategoricalCrossentropy",
     "SPARSE_CATEGORICAL_CROSSENTROPY", [inp("float64", (2, 3, 4)), inp("int64", (2, 3), lo=0, hi=3)],
     {"reduction": "none", "labelSmoothing": 0.25})
case("binaryCrossentropy/f32", "binaryCrossentropy", "BINARY_CROSSENTROPY",
     [inp("float32", (2, 3), lo=1, hi=7, div=8), inp("float32", (2, 3), lo=0, hi=4, div=4)])
case("binaryCrossentropy/none-broadcast-f16", "binaryCrossentropy", ["BINARY_CROSSENTROPY", "EXPAND"],
     [inp("float16", (2, 3), lo=1, hi=7, div=8), inp("float16", (3,), lo=0, hi=4, div=4)], {"reduction": "none"})
case("binaryCrossentropyLogits/sum", "binaryCrossentropyLogits", "BINARY_CROSSENTROPY_LOGITS",
     [inp("float32", (2, 3)), inp("float32", (2, 3), lo=0, hi=4, div=4)], {"reduction": "sum"})
case("binaryCrossentropyLogits/pos-weight", "binaryCrossentropyLogits", ["BINARY_CROSSENTROPY_LOGITS", "EXPAND"],
     [inp("float32", (2, 3)), inp("float32", (2, 3), lo=0, hi=4, div=4), inp("float32", (3,), "pos")])
# One optimizer step (the daemon's update rules): the new parameter from its gradient.
case("optimizerStep/sgd-nesterov", "optimizerStep", "SGD_UPDATE", [inp("float32", (3, 4)), inp("float32", (3, 4))],
     {"optimizer": "sgd", "lr": 0.125, "options": {"momentum": 0.5, "weightDecay": 0.25, "nesterov": True}})
case("optimizerStep/adam", "optimizerStep", "ADAM_STEP", [inp("float32", (5,)), inp("float32", (5,))],
     {"optimizer": "adam", "lr": 0.0625, "options": {"weightDecay": 0.125}})
case("optimizerStep/adamw", "optimizerStep", "ADAM_STEP", [inp("float32", (2, 3)), inp("float32", (2, 3))],
     {"optimizer": "adamw", "lr": 0.0625})
case("optimizerStep/lamb", "optimizerStep", "LAMB_STEP", [inp("float32", (4, 2)), inp("float32", (4, 2))],
     {"optimizer": "lamb", "lr": 0.25, "options": {"weightDecay": 0.5}})
case("optimizerStep/lars-classic", "optimizerStep", "LARS_UPDATE", [inp("float32", (3, 2)), inp("float32", (3, 2))],
     {"optimizer": "lars", "lr": 0.25, "options": {"weightDecay": 0.125, "tcoef": 0.5}})
case("optimizerStep/lars-nesterov-after", "optimizerStep", "LARS_UPDATE", [inp("float32", (4,)), inp("float32", (4,))],
     {"optimizer": "lars", "lr": 0.5, "options": {"nesterov": True, "classic": False, "tcoef": 0.25}})
case("optimizerStep/muon", "optimizerStep", "MUON_STEP", [inp("float32", (3, 2, 2)), inp("float32", (3, 2, 2))],
     {"optimizer": "muon", "lr": 0.25, "options": {"weightDecay": 0.125, "nsSteps": 2}})
case("optimizerStep/muon-plain-momentum", "optimizerStep", "MUON_STEP", [inp("float32", (2, 5)), inp("float32", (2, 5))],
     {"optimizer": "muon", "lr": 0.5, "options": {"nesterov": False, "nsCoefficients": [1.5, -0.5]}})
# Chains (`then`): each step applies to the previous result. Dividing by zeros makes inf and nan,
# which the generator never produces directly.
case("isnan/div-by-zero", "div", ["DIV", "ISNAN"], [inp("float32", (8,), "small"), inp("float32", (8,), lo=-1, hi=1, div=1)],
     then=[("isnan", {})])
case("isinf/div-by-zero", "div", ["DIV", "ISINF"], [inp("float32", (8,), "small"), inp("float32", (8,), lo=-1, hi=1, div=1)],
     then=[("isinf", {})])
case("isinf/positive-only", "div", ["DIV", "ISINF"], [inp("float32", (8,), "small"), inp("float32", (8,), lo=-1, hi=1, div=1)],
     then=[("isinf", {"detectNegative": False})])
case("sign/f32-of-nan", "div", ["DIV", "SIGN"], [inp("float32", (8,), "small"), inp("float32", (8,), lo=-1, hi=1, div=1)],
     then=[("sign", {})])
case("div/f16-by-zero", "div", "DIV", [inp("float16", (8,), "small"), inp("float16", (8,), lo=-1, hi=1, div=1)])
case("chain/matmul-relu-sum", "matmul", ["MATMUL", "RELU", "REDUCE_SUM"], [inp("float32", (3, 4)), inp("float32", (4, 5))],
     then=[("relu", {}), ("sum", {"axis": 0})])
case("chain/cast-cumsum-flip", "cast", ["CAST", "CUMSUM", "FLIP"], [inp("uint8", (2, 5), "small")], {"dtype": "int16"},
     then=[("cumsum", {"axis": 1}), ("flip", {"axis": 0})])
case("chain/permute-reshape-max", "permute", ["PERMUTE", "RESHAPE", "REDUCE_MAX"], [inp("bfloat16", (2, 3, 4))],
     {"order": [2, 0, 1]}, then=[("reshape", {"shape": [4, 6]}), ("max", {"axis": 1})])

# ---- autograd: the gradient of sum(op(inputs)) with respect to input `wrt` -------------------
GRADS = [
    ("tanh", [inp("float32", (2, 3))], {}, 0),
    ("mul", [inp("float32", (2, 3)), inp("float32", (2, 3))], {}, 1),
    ("matmul", [inp("float32", (3, 4)), inp("float32", (4, 2))], {}, 0),
    ("logSoftmax", [inp("float32", (2, 5))], {"axis": 1}, 0),
    ("layernorm", [inp("float32", (2, 6))], {"axis": -1, "eps": 0.00001}, 0),
    ("conv2d", [inp("float32", (1, 2, 5, 5)), inp("float32", (3, 2, 3, 3))], {}, 1),
    ("maxPool2d", [inp("float32", (1, 1, 4, 4))], {}, 0),
    ("crossEntropy", [inp("float32", (4, 5)), inp("int32", (4,), lo=0, hi=4)], {}, 0),
    ("div", [inp("float32", (2, 3)), inp("float32", (2, 3), "pos")], {}, 1),
    ("gelu", [inp("float16", (2, 3))], {}, 0),
    ("sum", [inp("float32", (3, 4))], {"axis": 1}, 0),
    ("sdpa", [inp("float32", (1, 3, 4)), inp("float32", (1, 3, 4)), inp("float32", (1, 3, 2))], {"causal": True}, 2),
    ("scatterReduce", [inp("float32", (3, 4)), inp("int32", (3, 5), lo=0, hi=3), inp("float32", (3, 5))],
     {"dim": 1, "reduce": "mean", "includeSelf": True}, 2),
    ("nllLoss", [inp("float32", (4, 3)), inp("int32", (4,), lo=0, hi=2)], {}, 0),
    ("interpolate", [inp("float32", (1, 1, 3, 3))], {"size": [5, 4]}, 0),
]
for of, ins, a, wrt in GRADS:
  op = "scaledDotProductAttention" if of == "sdpa" else of
  case(f"grad/{of}", "grad", "GRADIENT", ins, {"of": op, "args": a, "wrt": wrt})

# ---- devices: COPY needs a second device; the case is skipped where the daemon has no CUDA -------
case("to/cuda", "to", "COPY", [inp("float32", (2, 3))], {"device": "CUDA"}, requires="CUDA")
case("to/cuda-and-back", "to", "COPY", [inp("int32", (4,))], {"device": "CUDA", "back": True}, requires="CUDA")

# ---- elementwise math the daemon computes (core/frontend/math.h) -------------------------------
# Last in the file, so the cases above keep their seeds. `unit` inputs include ±1 (asin's ends,
# atanh's poles); `pos` ones start at 1/4, below acosh's domain (nan there).
MATH = {"erf": "ERF", "atan": "ATAN", "asin": "ASIN", "acos": "ACOS", "sinh": "SINH", "cosh": "COSH",
        "asinh": "ASINH", "acosh": "ACOSH", "atanh": "ATANH", "log10": "LOG10", "log1p": "LOG1P", "expm1": "EXPM1",
        "softsign": "SOFTSIGN", "selu": "SELU"}
MATH_KIND = {"asin": "unit", "acos": "unit", "atanh": "unit", "acosh": "pos", "log10": "pos"}
for name, wire in MATH.items():
  case(f"{name}/f32", name, wire, [inp("float32", (2, 4), MATH_KIND.get(name, "default"))])
for name, dt in [("erf", "float16"), ("atan", "bfloat16"), ("sinh", "float64"), ("expm1", "float64"),
                 ("atanh", "float16")]:
  case(f"{name}/{short(dt)}", name, MATH[name], [inp(dt, (6,), MATH_KIND.get(name, "default"))])
case("log1p/i32", "log1p", ["LOG1P", "CAST"], [inp("int32", (5,), "small")])
case("celu/f32", "celu", "CELU", [inp("float32", (8,))], {"alpha": 0.5})
case("logaddexp/f32", "logaddexp", "LOGADDEXP", [inp("float32", (2, 3)), inp("float32", (2, 3))])
case("logaddexp/bf16-broadcast", "logaddexp", ["LOGADDEXP", "EXPAND"], [inp("bfloat16", (2, 1)), inp("bfloat16", (1, 3))])
case("copysign/f32", "copysign", "COPYSIGN", [inp("float32", (2, 4)), inp("float32", (2, 4), "small")])
case("lerp/f32", "lerp", "LERP", [inp("float32", (2, 3)), inp("float32", (2, 3)), inp("float32", (2, 3), "unit")])
case("lerp/scalar-weight", "lerp", ["LERP", "CONST"], [inp("float32", (4,)), inp("float32", (4,))], {"weight": 0.25})
case("isfinite/div-by-zero", "div", ["DIV", "ISFINITE"],
     [inp("float32", (8,), "small"), inp("float32", (8,), lo=-1, hi=1, div=1)], then=[("isfinite", {})])
case("isfinite/i32", "isfinite", "ISFINITE", [inp("int32", (4,))])
case("isclose/f32", "isclose", "ISCLOSE", [inp("float32", (6,), "small"), inp("float32", (6,), "small")],
     {"rtol": 0.25, "atol": 0.5})
case("isclose/i16-equal-nan", "isclose", "ISCLOSE", [inp("int16", (6,), "small"), inp("int16", (6,), "small")],
     {"rtol": 0, "atol": 2, "equalNan": True})
case("any/f32-axis", "any", "REDUCE_ANY", [inp("float32", (3, 4), "int", -1, 1, 1)], {"axis": 1})
case("all/bool-keepdim", "all", "REDUCE_ALL", [inp("bool", (3, 4))], {"axis": 0, "keepdim": True})
case("all/i32", "all", "REDUCE_ALL", [inp("int32", (5,), "small")])

# ---- math and activations that are core composites since issue 33 (more dtypes and edges) -----
# Last in the file, so the cases above keep their seeds.
case("rsqrt/f16", "rsqrt", "RSQRT", [inp("float16", (6,), "pos")])
case("tan/f64", "tan", "TAN", [inp("float64", (6,), "unit")])
case("cos/f64-wide", "cos", "COS", [inp("float64", (8,), "int")])
case("relu6/i32", "relu6", ["CAST", "RELU6"], [inp("int32", (8,), lo=-4, hi=9)])
case("leakyRelu/bf16", "leakyRelu", "LEAKY_RELU", [inp("bfloat16", (6,))], {"negSlope": 0.25})
case("elu/f16", "elu", "ELU", [inp("float16", (8,))], {"alpha": 1})
case("mish/f64", "mish", "MISH", [inp("float64", (8,))])
case("hardtanh/f16-bounds", "hardtanh", "HARDTANH", [inp("float16", (8,), lo=-8, hi=8, div=4)], {"minVal": -1, "maxVal": 1})
case("hardsigmoid/f64-kinks", "hardsigmoid", "HARDSIGMOID", [inp("float64", (8,), lo=-4, hi=4, div=1)])
case("hardswish/bf16", "hardswish", "HARDSWISH", [inp("bfloat16", (8,))])
case("quickGelu/f16", "quickGelu", "QUICK_GELU", [inp("float16", (8,))])
case("logsigmoid/i8", "logsigmoid", ["CAST", "LOGSIGMOID"], [inp("int8", (6,), "small")])
for of, ins, a in [("relu6", [inp("float32", (8,), lo=-4, hi=28, div=4)], {}),
                   ("hardswish", [inp("float32", (8,), lo=-16, hi=16, div=4)], {}),
                   ("elu", [inp("float32", (8,), "small")], {"alpha": 0.5})]:
  case(f"grad/{of}", "grad", "GRADIENT", ins, {"of": of, "args": a, "wrt": 0})

# Division, remainders, integer powers, comparisons and any/all as core composites (issue 33).
case("floorDivide/f64-signs", "floorDivide", "FLOOR_DIVIDE", [inp("float64", (8,)), inp("float64", (8,), "small")])
case("remainder/f32-neg-divisor", "remainder", "REMAINDER", [inp("float32", (8,)), inp("float32", (8,), lo=-9, hi=-1, div=2)])
case("fmod/i64-signs", "fmod", "FMOD", [inp("int64", (8,)), inp("int64", (8,), "small")])
case("remainder/u32", "remainder", "REMAINDER", [inp("uint32", (8,)), inp("uint32", (8,), "small")])
case("floorDivide/i8-scalar", "floorDivide", ["FLOOR_DIVIDE", "CONST"], [inp("int8", (8,))], {"scalar": -3})
case("pow/i32-tensor", "pow", "INT_POW", [inp("int32", (8,), "small"), inp("int32", (8,), lo=-2, hi=9)])
case("pow/u8-wraps", "pow", "INT_POW", [inp("uint8", (6,), "pos"), inp("uint8", (6,), lo=0, hi=12)])
case("pow/f64-scalar-int", "pow", ["POW", "CONST"], [inp("float64", (6,), "small")], {"scalar": 5})
case("ge/nan", "div", ["DIV", "CMPLE"], [inp("float32", (8,), lo=-1, hi=1, div=1), inp("float32", (8,), lo=-1, hi=1, div=1)],
     then=[("ge", {"scalar": 0})])
case("le/i64-bits", "le", "CMPLE", [inp("int64", (6,), "bits"), inp("int64", (6,), "bits")])
case("eq/f16", "eq", "CMPEQ", [inp("float16", (6,), "small"), inp("float16", (6,), "small")])
case("any/u8-all-axes", "any", "REDUCE_ANY", [inp("uint8", (2, 3), lo=0, hi=1)])
case("all/f32-zero-rows", "all", "REDUCE_ALL", [inp("float32", (0, 3))], {"axis": 0})
case("lshift/i64-top-bit", "lshift", "LSHIFT", [inp("int64", (6,), "bits")], {"n": 63})
case("rshift/i16-sign", "rshift", "RSHIFT", [inp("int16", (6,), "bits")], {"n": 15})
case("rshift/u32-bits", "rshift", "RSHIFT", [inp("uint32", (6,), "bits")], {"n": 31})

# x[index] = value (Python's __setitem__, returning x): the index as index's, the value input 1 or
# args' number. Basic entries write through the view (WRITE_VIEW), index tensors by a scatter.
case("setitem/slice-step", "setitem", ["WRITE_VIEW", "SHRINK", "PAD"], [inp("float32", (3, 6)), inp("float32", (3, 3))],
     {"index": [{"slice": [None, None, None]}, {"slice": [1, None, 2]}]})
case("setitem/neg-step-number-into-int", "setitem", ["WRITE_VIEW", "FLIP"], [inp("int32", (5,))],
     {"index": [{"slice": [None, None, -2]}], "value": 2.5})
case("setitem/index-tensor", "setitem", "SCATTER_REDUCE",
     [inp("float32", (4, 3)), inp("float32", (3, 3)), inp("int32", (3,), lo=-4, hi=3)], {"index": [{"tensor": 2}]})
case("setitem/int-and-index-tensor-number", "setitem", "SCATTER_REDUCE", [inp("int16", (3, 5)), inp("int64", (4,), lo=0, hi=4)],
     {"index": [1, {"tensor": 1}], "value": -7})


def render() -> str:
  """One case per line, so a diff of the corpus reads case by case."""
  head = {"version": 1, "generator": "splitmix64",
          "comment": "Cross-client conformance corpus; see tests/conformance/README.md. Written by gen_cases.py."}
  lines = ["{", *(f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()), '  "cases": [']
  lines += [f"    {json.dumps(c, separators=(', ', ': '))}," for c in cases]
  lines[-1] = lines[-1].rstrip(",")
  lines += ["  ]", "}"]
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  text = render()
  if "--check" in sys.argv[1:]:
    if OUT.read_text() != text:
      sys.exit(f"{OUT} is stale: run {Path(__file__).name}")
    sys.exit(0)
  OUT.write_text(text)
  print(f"wrote {len(cases)} cases to {OUT}")
