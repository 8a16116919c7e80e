'use strict';
// Reductions and the reducing composites (MEAN, VAR, SOFTMAX, LOGSUMEXP, LAYERNORM, ARGMAX, CUMSUM),
// called as t.sum({ axis, keepdim }) or t.sum(axis, keepdim).
const { OPS, OP_NAMES } = require('../ops');
const { Composite } = require('../composite');
const { dtypes, toDType, leastUpperFloat, sumAccDType } = require('../dtype');
const { normalizeAxis, normalizeAxes } = require('../shape');
const { Tensor, isOptions } = require('../tensor');

const P = Tensor.prototype;

// { axis, keepdim, ... } from (options) or (axis, keepdim).
function reduceArgs(a, b) {
  if (isOptions(a)) return { axis: a.axis ?? null, keepdim: Boolean(a.keepdim), ...a };
  return { axis: a ?? null, keepdim: Boolean(b) };
}

function reducedShape(shape, axes, keepdim) {
  if (keepdim) return shape.map((s, i) => (axes.includes(i) ? 1 : s));
  return shape.filter((_, i) => !axes.includes(i));
}

function axisOf(axis, ndim, what) {
  if (typeof axis !== 'number' || !Number.isInteger(axis)) throw new TypeError(`${what}: axis must be an integer, got ${String(axis)}`);
  if (axis < -ndim || axis >= ndim) throw new RangeError(`${what}: axis ${axis} is out of range for ${ndim} axes`);
  return ((axis % ndim) + ndim) % ndim;
}

P._reduce = function _reduce(op, axis, keepdim) {
  const axes = normalizeAxes(axis, this.ndim);
  if (!axes.length) return this;
  const kept = this._node.shape.map((s, i) => (axes.includes(i) ? 1 : s));
  const r = Tensor._make(op, this.dtype, kept, [this], axes);
  return keepdim ? r : r.reshape(this._node.shape.filter((_, i) => !axes.includes(i)));
};

// sum and prod accumulate in a wider dtype (or the one asked for); 16-bit floats come back in
// their own dtype, as in the Python client.
function accumulatingReduce(t, op, a, b) {
  const o = reduceArgs(a, b);
  const acc = o.dtype ? toDType(o.dtype) : sumAccDType(t.dtype);
  const ret = t.cast(acc)._reduce(op, o.axis, o.keepdim);
  return !o.dtype && (t.dtype === dtypes.float16 || t.dtype === dtypes.bfloat16) ? ret.cast(t.dtype) : ret;
}

P.sum = function sum(a, b) { return accumulatingReduce(this, OPS.REDUCE_SUM, a, b); };

P.prod = function prod(a, b) { return accumulatingReduce(this, OPS.REDUCE_PROD, a, b); };

P.max = function max(a, b) {
  const o = reduceArgs(a, b);
  return this._reduce(OPS.REDUCE_MAX, o.axis, o.keepdim);
};

P.min = function min(a, b) {
  const o = reduceArgs(a, b);
  const axes = normalizeAxes(o.axis, this.ndim);
  if (!axes.length) return this;
  return Tensor._make(OPS.REDUCE_MIN, this.dtype, reducedShape(this._node.shape, axes, o.keepdim), [this],
    new Composite({ axes, keepdim: o.keepdim }));
};

// Whether any / every element along the axes is nonzero (bool); every is true over no elements.
P._boolReduce = function _boolReduce(op, a, b) {
  const o = reduceArgs(a, b);
  const axes = normalizeAxes(o.axis, this.ndim);
  if (!axes.length) return this.bool();
  return Tensor._make(op, dtypes.bool, reducedShape(this._node.shape, axes, o.keepdim), [this],
    new Composite({ axes, keepdim: o.keepdim }));
};
P.any = function any(a, b) { return this._boolReduce(OPS.REDUCE_ANY, a, b); };
P.all = function all(a, b) { return this._boolReduce(OPS.REDUCE_ALL, a, b); };

// (this as the float dtype a reducing composite runs in, the dtype to return): float16/bfloat16
// compute in float32 and are cast back.
P._accFloat = function _accFloat() {
  const out = leastUpperFloat(this.dtype);
  return [this.cast(sumAccDType(out)), out];
};

P._composite = function _composite(op, shape, arg) {
  const [x, out] = this._accFloat();
  return Tensor._make(op, x.dtype, shape, [x], arg).cast(out);
};

P.mean = function mean(a, b) {
  const o = reduceArgs(a, b);
  const axes = normalizeAxes(o.axis, this.ndim);
  if (!axes.length) return this._float();
  return this._composite(OPS.MEAN, reducedShape(this._node.shape, axes, o.keepdim), new Composite({ axes, keepdim: o.keepdim }));
};

// VAR and STD: over no axes the variance is 0 (nan for a correction of 1 or more), as numpy's.
P._spread = function _spread(op, a, b, c) {
  const o = isOptions(a) ? { correction: 1, ...reduceArgs(a) } : { ...reduceArgs(a, b), correction: c ?? 1 };
  const axes = normalizeAxes(o.axis, this.ndim);
  return this._composite(op, reducedShape(this._node.shape, axes, o.keepdim),
    new Composite({ axes, keepdim: o.keepdim, correction: Number(o.correction), no_axes: !axes.length }));
};

P.var = function variance(a, b, c) { return this._spread(OPS.VAR, a, b, c); };
P.std = function std(a, b, c) { return this._spread(OPS.STD, a, b, c); };
P.stdMean = function stdMean(a, b, c) { return [this.std(a, b, c), this.mean(a, b)]; };
P.varMean = function varMean(a, b, c) { return [this.var(a, b, c), this.mean(a, b)]; };

P._softmaxLike = function _softmaxLike(op, axis, dtype) {
  let x = dtype ? this.cast(dtype) : this._float();
  if (x.ndim === 0) return x.reshape([1])._softmaxLike(op, 0, null).reshape([]);
  const ax = normalizeAxis(axis, x.ndim);
  return x._composite(op, x._node.shape, new Composite({ axes: [ax] }));
};

function axisArgs(a, dflt) {
  return isOptions(a) ? { axis: a.axis ?? dflt, dtype: a.dtype } : { axis: a ?? dflt };
}

P.softmax = function softmax(a = -1) { const o = axisArgs(a, -1); return this._softmaxLike(OPS.SOFTMAX, o.axis, o.dtype); };
P.logSoftmax = function logSoftmax(a = -1) { const o = axisArgs(a, -1); return this._softmaxLike(OPS.LOG_SOFTMAX, o.axis, o.dtype); };

// log(sum(exp(x))) over axis (null: all axes), computed stably by the daemon.
P.logsumexp = function logsumexp(a, b) {
  const o = reduceArgs(a, b);
  let x = this._float();
  let axes = normalizeAxes(o.axis, x.ndim);
  if (!axes.length) return x;
  const outShape = reducedShape(x._node.shape, axes, o.keepdim);
  if (axes.length > 1) { // the wire takes one axis: move the reduced axes last and merge them
    const rest = [...Array(x.ndim).keys()].filter((i) => !axes.includes(i));
    x = x.permute([...rest, ...axes]);
    x = x.reshape([...x._node.shape.slice(0, rest.length), -1]);
    axes = [x.ndim - 1];
  }
  return x._composite(OPS.LOGSUMEXP, reducedShape(x._node.shape, axes, false), new Composite({ axes })).reshape(outShape);
};

// (x - mean) / sqrt(var + eps) over axis (a number or an array), then * weight + bias when given
// (shaped as the normalized axes in their order; the daemon's LAYERNORM does both).
P.layernorm = function layernorm(a = -1, b = 1e-5) {
  const o = isOptions(a) ? { axis: a.axis ?? -1, eps: a.eps ?? 1e-5, weight: a.weight ?? null, bias: a.bias ?? null }
    : { axis: a, eps: b, weight: null, bias: null };
  const x = this._float();
  const axes = normalizeAxes(o.axis, x.ndim);
  if (!axes.length) throw new RangeError('layernorm needs at least one axis');
  const n = axes.length;
  if (axes.every((ax, i) => ax === x.ndim - n + i)) {
    return x._trailingNorm(OPS.LAYERNORM, new Composite({ normalized_axes: n, eps: Number(o.eps) }), o.weight, o.bias);
  }
  const rest = [...Array(x.ndim).keys()].filter((i) => !axes.includes(i));
  const order = [...rest, ...axes];
  const inverse = [...Array(x.ndim).keys()].map((i) => order.indexOf(i));
  const inner = [...Array(n).keys()].map((i) => rest.length + i);
  return x.permute(order).layernorm({ ...o, axis: inner }).permute(inverse);
};

P._argExtreme = function _argExtreme(op, axis, keepdim) {
  const name = OP_NAMES[op].toLowerCase();
  if (axis === null || axis === undefined) return this.reshape([-1])._argExtreme(op, 0, false);
  if (this.ndim === 0) {
    axisOf(axis, 1, name);
    return Tensor._make(op, dtypes.int32, [], [this.reshape([1])], new Composite({ axes: [0], keepdim: false }));
  }
  const ax = axisOf(axis, this.ndim, name);
  if (this._node.shape[ax] === 0) throw new RangeError(`${name} of an empty axis ${ax} (shape [${this._node.shape}])`);
  return Tensor._make(op, dtypes.int32, reducedShape(this._node.shape, [ax], keepdim), [this],
    new Composite({ axes: [ax], keepdim: Boolean(keepdim) }));
};

// int32 index of the largest value along axis (null: of the flattened tensor); the first wins on ties.
P.argmax = function argmax(a, b) { const o = reduceArgs(a, b); return this._argExtreme(OPS.ARGMAX, o.axis, o.keepdim); };
P.argmin = function argmin(a, b) { const o = reduceArgs(a, b); return this._argExtreme(OPS.ARGMIN, o.axis, o.keepdim); };

P.cumsum = function cumsum(a = 0) {
  const axis = isOptions(a) ? (a.axis ?? 0) : a;
  if (this.ndim === 0) {
    axisOf(axis, 1, 'cumsum');
    return this.reshape([1]).cumsum(0).reshape([]);
  }
  const ax = axisOf(axis, this.ndim, 'cumsum');
  if (this.dtype === dtypes.bool) return this.cast(dtypes.int32).cumsum(ax);
  const acc = this.dtype.kind === 'f' ? sumAccDType(this.dtype) : this.dtype;
  return Tensor._make(OPS.CUMSUM, acc, this._node.shape, [this.cast(acc)], new Composite({ axes: [ax] })).cast(this.dtype);
};

module.exports = { reducedShape, axisOf };
