'use strict';
// Elementwise ops: casts, broadcasting binary ops with tinygrad's dtype promotion, comparisons,
// integer and bitwise ops, unary math and activations composed on the client (the Python client's
// rules exactly).
const { OPS, OP_NAMES } = require('../ops');
const { GRAPH } = require('../graph');
const { Composite } = require('../composite');
const { dtypes, toDType, leastUpperDType, leastUpperFloat } = require('../dtype');
const { broadcastShape, sameShape, resolveExpand } = require('../shape');
const { Tensor, isScalar, dtypeFromPy } = require('../tensor');
const { isSym } = require('../variable');

const P = Tensor.prototype;
const isFloat = (dt) => dt.kind === 'f';
const isInt = (dt) => dt.kind === 'i' || dt.kind === 'u';

P.cast = function cast(dtype) {
  const dt = toDType(dtype);
  if (dt === this.dtype) return this;
  const n = this._node;
  if (n.op === OPS.CONST && !n.sent && (dt.kind === 'f' || Number.isFinite(Number(n.arg)))) {
    return Tensor._const(n.arg, dt, n.shape); // fold: a constant of the new dtype
  }
  return Tensor._make(OPS.CAST, dt, n.shape, [this]);
};

// Each element's bits read as `dtype` (torch's view(dtype)); a differing itemsize regroups the
// bytes of the last axis. No gradient passes it.
P.bitcast = function bitcast(dtype) {
  const dt = toDType(dtype);
  if (dt === this.dtype) return this;
  let shape = this.shape;
  const a = this.dtype.itemsize;
  const b = dt.itemsize;
  if (a !== b) {
    const what = `bitcast from ${this.dtype.name} (${a} bytes) to ${dt.name} (${b} bytes)`;
    if (!shape.length) throw new RangeError(`${what} of a 0-d tensor: differing itemsizes need a last axis`);
    if (b > a && shape[shape.length - 1] % (b / a)) throw new RangeError(`${what}: the last axis (${shape[shape.length - 1]}) must be a multiple of ${b / a}`);
    shape = [...shape.slice(0, -1), (shape[shape.length - 1] * a) / b];
  }
  return new Tensor(GRAPH.node(OPS.BITCAST, dt, shape, [this._node], null));
};

P.float = function float() { return this.cast(dtypes.float32); };
P.half = function half() { return this.cast(dtypes.float16); };
P.int = function int() { return this.cast(dtypes.int32); };
P.bool = function bool() { return this.cast(dtypes.bool); };
P.long = function long() { return this.cast(dtypes.int64); };
P.short = function short() { return this.cast(dtypes.int16); };
P.bfloat16 = function bfloat16() { return this.cast(dtypes.bfloat16); };
P.isFloatingPoint = function isFloatingPoint() { return isFloat(this.dtype); };
P.double = function double() { return this.cast(dtypes.float64); };

P._float = function _float() { return this.cast(leastUpperFloat(this.dtype)); };

// This tensor on `device`: itself when it is there, else an explicit COPY node.
P.to = function to(device) {
  const target = canonicalDevice(device);
  if (target === this.device) return this;
  return Tensor._make(OPS.COPY, this.dtype, this.shape, [this], new Composite({ device: target }));
};
P.cpu = function cpu() { return this.to('CPU'); };
P.cuda = function cuda() { return this.to('CUDA'); };

function canonicalDevice(device) {
  const d = String(device || 'CPU').toUpperCase();
  return d.endsWith(':0') ? d.slice(0, -2) : d;
}

// A non-Tensor operand as a Tensor, with tinygrad's scalar dtype rule.
P._operand = function _operand(y) {
  if (y instanceof Tensor) return y;
  if (isSym(y)) y = y.valueOf(); // a Variable's value as a plain number (jit notes the use), as in Python
  if (isScalar(y)) {
    const intLike = typeof y === 'bigint' || (typeof y === 'number' && Number.isInteger(y));
    const ydt = isFloat(this.dtype) || (isInt(this.dtype) && intLike) ? this.dtype : dtypeFromPy(y);
    return Tensor._const(y, ydt, this._node.shape);
  }
  if (Array.isArray(y) || ArrayBuffer.isView(y)) return Tensor.from(y);
  throw new TypeError(`unsupported operand ${String(y)} for a Tensor op`);
};

P._broadcastTo = function _broadcastTo(shape) {
  if (sameShape(this._node.shape, shape)) return this;
  let x = this;
  if (x.ndim < shape.length) x = x.reshape([...Array(shape.length - x.ndim).fill(1), ...x._node.shape]);
  resolveExpand(x._node.shape, shape);
  if (sameShape(x._node.shape, shape)) return x;
  return Tensor._make(OPS.EXPAND, x.dtype, shape, [x], [...shape]);
};

P._broadcasted = function _broadcasted(y, reverse = false, matchDtype = true) {
  let x = this;
  y = this._operand(y);
  if (matchDtype && x.dtype !== y.dtype) {
    const out = leastUpperDType(x.dtype, y.dtype);
    x = x.cast(out);
    y = y.cast(out);
  }
  if (reverse) [x, y] = [y, x];
  const shape = broadcastShape(x._node.shape, y._node.shape);
  return [x._broadcastTo(shape), y._broadcastTo(shape)];
};

P._binop = function _binop(op, y, reverse = false) {
  const [a, b] = this._broadcasted(y, reverse);
  return Tensor._make(op, a.dtype, a._node.shape, [a, b]);
};

P._unop = function _unop(op) {
  return Tensor._make(op, this.dtype, this._node.shape, [this]);
};

P.add = function add(x, reverse = false) { return this._binop(OPS.ADD, x, reverse); };
P.sub = function sub(x, reverse = false) { return this._binop(OPS.SUB, x, reverse); };
P.mul = function mul(x, reverse = false) { return this._binop(OPS.MUL, x, reverse); };

// True division; integer operands divide in float32 (tinygrad).
P.div = function div(x, reverse = false) {
  let [a, b] = this._broadcasted(x, reverse);
  a = a._float();
  b = b._float();
  return Tensor._make(OPS.DIV, a.dtype, a._node.shape, [a, b]);
};

P.maximum = function maximum(x) { return this._binop(OPS.MAX, x); };

P.minimum = function minimum(x) { return this._binop(OPS.MINIMUM, x); };

P.neg = function neg() {
  return this.dtype === dtypes.bool ? this.logicalNot() : this._unop(OPS.NEG);
};

// Integer tensors to integer powers stay integers (INT_POW: exact, wrapping; a negative scalar
// exponent throws, as torch); otherwise the float POW (constant integral exponents multiply).
P.pow = function pow(x, reverse = false) {
  let [a, b] = this._broadcasted(x, reverse);
  if (isInt(a.dtype)) {
    if (!reverse && (typeof x === 'number' || typeof x === 'bigint') && x < 0) {
      throw new RangeError('Integers to negative integer powers are not allowed.');
    }
    return Tensor._make(OPS.INT_POW, a.dtype, a._node.shape, [a, b]);
  }
  a = a._float();
  b = b._float();
  return Tensor._make(OPS.POW, a.dtype, a._node.shape, [a, b]);
};

// --- comparisons (bool results) ---------------------------------------------------------------

P.lt = function lt(x) { const [a, b] = this._broadcasted(x); return Tensor._make(OPS.CMPLT, dtypes.bool, a._node.shape, [a, b]); };
P.gt = function gt(x) { const [a, b] = this._broadcasted(x, true); return Tensor._make(OPS.CMPLT, dtypes.bool, a._node.shape, [a, b]); };
P.ne = function ne(x) { const [a, b] = this._broadcasted(x); return Tensor._make(OPS.CMPNE, dtypes.bool, a._node.shape, [a, b]); };
P.eq = function eq(x) { const [a, b] = this._broadcasted(x); return Tensor._make(OPS.CMPEQ, dtypes.bool, a._node.shape, [a, b]); };
P.ge = function ge(x) { const [a, b] = this._broadcasted(x, true); return Tensor._make(OPS.CMPLE, dtypes.bool, a._node.shape, [a, b]); };
P.le = function le(x) { const [a, b] = this._broadcasted(x); return Tensor._make(OPS.CMPLE, dtypes.bool, a._node.shape, [a, b]); };

P.logicalNot = function logicalNot() {
  const b = this.cast(dtypes.bool);
  return Tensor._make(OPS.CMPNE, dtypes.bool, b._node.shape, [b, Tensor._const(true, dtypes.bool, b._node.shape)]);
};

P.bitwiseAnd = function bitwiseAnd(x) {
  const [a, b] = this._broadcasted(x);
  return a.dtype === dtypes.bool ? b.where(a, false) : a._intBinop(OPS.AND, '&', b);
};
P.bitwiseOr = function bitwiseOr(x) {
  const [a, b] = this._broadcasted(x);
  return a.dtype === dtypes.bool ? b.where(true, a) : a._intBinop(OPS.OR, '|', b);
};
P.bitwiseXor = function bitwiseXor(x) {
  const [a, b] = this._broadcasted(x);
  return a.dtype === dtypes.bool ? a.ne(b) : a._intBinop(OPS.XOR, '^', b);
};
P.logicalAnd = P.bitwiseAnd;
P.logicalOr = P.bitwiseOr;

P.bitwiseNot = function bitwiseNot() {
  if (this.dtype === dtypes.bool) return this.logicalNot();
  const ones = this.dtype.kind === 'u' ? dtypes.max(this.dtype) : -1;
  return this._intBinop(OPS.XOR, '~', Tensor._const(ones, this.dtype, this._node.shape));
};

P._intBinop = function _intBinop(op, name, y) {
  if (!isInt(this.dtype)) throw new TypeError(`${name} needs integer tensors, got ${this.dtype.name}`);
  return Tensor._make(op, this.dtype, this._node.shape, [this, y]);
};

// Integer division truncating toward zero; x / 0 gives 0.
P.idiv = function idiv(x, reverse = false) { const [a, b] = this._broadcasted(x, reverse); return a._intBinop(OPS.IDIV, 'idiv', b); };

P._divmodOp = function _divmodOp(op, name, x, reverse) {
  const [a, b] = this._broadcasted(x, reverse);
  if (a.dtype === dtypes.bool) throw new TypeError(`${name} needs integer or float tensors, got bool`);
  return Tensor._make(op, a.dtype, a._node.shape, [a, b]);
};
// Remainder with the dividend's sign (torch.fmod); integer x % 0 gives 0.
P.fmod = function fmod(x, reverse = false) { return this._divmodOp(OPS.FMOD, 'fmod', x, reverse); };
// Division rounded toward negative infinity (Python's //); integer x // 0 gives 0.
P.floorDivide = function floorDivide(x, reverse = false) { return this._divmodOp(OPS.FLOOR_DIVIDE, '//', x, reverse); };
// a % b with the divisor's sign (Python's %).
P.remainder = function remainder(x, reverse = false) { return this._divmodOp(OPS.REMAINDER, '%', x, reverse); };
P.mod = P.remainder;

// x << n (x * 2^n, wrapping) and x >> n (arithmetic for signed types), for 0 <= n < bits.
P._shift = function _shift(op, name, n) {
  if (!isInt(this.dtype)) throw new TypeError(`${name} needs an integer tensor, got ${this.dtype.name}`);
  const bits = 8 * this.dtype.itemsize;
  if (!Number.isInteger(n) || n < 0 || n >= bits) throw new RangeError(`${name} takes a shift in [0, ${bits}) for ${this.dtype.name}, got ${n}`);
  return Tensor._make(op, this.dtype, this._node.shape, [this, Tensor._const(n, this.dtype, this._node.shape)]);
};
P.lshift = function lshift(n) { return this._shift(OPS.LSHIFT, '<<', n); };
P.rshift = function rshift(n) { return this._shift(OPS.RSHIFT, '>>', n); };

// this is the condition: cond.where(x, y); scalars allowed.
P.where = function where(x, y) {
  if (x instanceof Tensor) [x, y] = x._broadcasted(y);
  else if (y instanceof Tensor) [y, x] = y._broadcasted(x);
  let cond;
  [cond, x] = this._broadcasted(x, false, false);
  [cond, y] = cond._broadcasted(y, false, false);
  [x, y] = x._broadcasted(y);
  const shape = broadcastShape(cond._node.shape, x._node.shape);
  cond = cond.cast(dtypes.bool)._broadcastTo(shape);
  return Tensor._make(OPS.WHERE, x.dtype, shape, [cond, x._broadcastTo(shape), y._broadcastTo(shape)]);
};
Tensor.where = (cond, x, y) => cond.where(x, y);

// --- unary math and activations ---------------------------------------------------------------

// The one-op math (exp, cos, erf, sigmoid, logaddexp, lerp, elu, mish, softplus, ...) is generated.js's.
// The tanh approximation (tinygrad's, the default), or with approximate 'none' torch's exact
// x * Phi(x) through erf.
P.gelu = function gelu(approximate = 'tanh') {
  if (approximate !== 'tanh' && approximate !== 'none') throw new TypeError(`gelu: approximate must be 'tanh' or 'none', got ${String(approximate).slice(0, 40)}`);
  return this._float()._unop(approximate === 'tanh' ? OPS.GELU : OPS.GELU_ERF);
};
P.swish = P.silu;
P.isclose = function isclose(other, { rtol = 1e-5, atol = 1e-8, equalNan = false } = {}) {
  if (!(rtol >= 0) || !(atol >= 0)) throw new RangeError(`isclose needs rtol >= 0 and atol >= 0, got ${rtol} and ${atol}`);
  const [a, b] = this._broadcasted(other);
  return Tensor._make(OPS.ISCLOSE, dtypes.bool, a._node.shape, [a, b],
    new Composite({ rtol: Number(rtol), atol: Number(atol), equal_nan: Boolean(equalNan) }));
};
// Whether every element isclose: a Promise of a boolean (this realizes).
P.allclose = async function allclose(other, options = {}) { return Boolean(await this.isclose(other, options).all().item()); };

P.relu = function relu() {
  if (this.dtype === dtypes.bool || this.dtype.kind === 'u') return this;
  return this._unop(OPS.RELU);
};
// torch's clamp (the daemon's CLAMP_MIN and CLAMP_MAX): a nan anywhere gives nan, and at a bound
// the whole gradient reaches x.
P.clip = function clip(min, max) {
  const none = (v) => v === undefined || v === null;
  if (none(min) && none(max)) throw new TypeError('clip needs min or max');
  const x = none(min) ? this : this.clampMin(min);
  return none(max) ? x : x.clampMax(max);
};
P._clamp = function _clamp(op, bound) {
  if (this.dtype === dtypes.bool) throw new TypeError(`${OP_NAMES[op].toLowerCase()} does not take bool tensors`);
  return this._binop(op, bound);
};
P.clampMin = function clampMin(min) { return this._clamp(OPS.CLAMP_MIN, min); };
P.clampMax = function clampMax(max) { return this._clamp(OPS.CLAMP_MAX, max); };
P.clamp = P.clip;
