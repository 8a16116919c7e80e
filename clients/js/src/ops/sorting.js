'use strict';
// Sorting and running extremes: the daemon's SORT, TOPK, CUMMAX, CUMMIN, CUMPROD and LOGCUMSUMEXP
// (core/frontend/sorting.h): NaN sorts last (first when descending), ties keep their order.
// sort, topk, cummax and cummin return [values, indices] that also has .values and .indices.
const { OPS } = require('../ops');
const { Composite } = require('../composite');
const { dtypes, sumAccDType } = require('../dtype');
const { Tensor, isOptions } = require('../tensor');
const { axisOf } = require('./reduce');

const P = Tensor.prototype;

// [values, indices] that also has .values and .indices (max pooling's returnIndices too).
function pair(values, indices) {
  const r = [values, indices];
  r.values = values;
  r.indices = indices;
  return r;
}

// values and indices of one composite along `axis` (a 0-d tensor as a 1-element one).
P._valuesIndices = function _valuesIndices(op, axis, name, shape, fields = {}) {
  if (this.ndim === 0) {
    axisOf(axis, 1, name);
    const r = this.reshape([1])._valuesIndices(op, 0, name, shape && [1], fields);
    return pair(r.values.reshape([]), r.indices.reshape([]));
  }
  const ax = axisOf(axis, this.ndim, name);
  const out = shape || this._node.shape;
  const values = Tensor._make(op, this.dtype, out, [this], new Composite({ ...fields, axes: [ax] }));
  const indices = Tensor._make(op, dtypes.int32, out, [this], new Composite({ ...fields, axes: [ax], indices: true }));
  return pair(values, indices);
};

// t.sort(dim = -1, descending = false) or t.sort({ dim, descending }).
P.sort = function sort(a = -1, b = false) {
  const o = isOptions(a) ? { dim: a.dim ?? -1, descending: Boolean(a.descending) } : { dim: a, descending: Boolean(b) };
  return this._valuesIndices(OPS.SORT, o.dim, 'sort', null, { descending: o.descending });
};

P.argsort = function argsort(a = -1, b = false) { return this.sort(a, b).indices; };

// t.topk(k, dim = -1, largest = true) or t.topk(k, { dim, largest }).
P.topk = function topk(k, a = -1, b = true) {
  const o = isOptions(a) ? { dim: a.dim ?? -1, largest: a.largest ?? true } : { dim: a, largest: b };
  if (this.ndim === 0) return this.reshape([1]).topk(k, 0, o.largest);
  const ax = axisOf(o.dim, this.ndim, 'topk');
  const n = this._node.shape[ax];
  if (!Number.isInteger(k) || k < 0 || k > n) throw new RangeError(`topk: k must be an integer from 0 to ${n}, got ${k}`);
  const shape = this._node.shape.map((d, i) => (i === ax ? k : d));
  return this._valuesIndices(OPS.TOPK, ax, 'topk', shape, { n: k, descending: Boolean(o.largest) });
};

P.cummax = function cummax(axis = 0) { return this._valuesIndices(OPS.CUMMAX, isOptions(axis) ? (axis.axis ?? 0) : axis, 'cummax'); };
P.cummin = function cummin(axis = 0) { return this._valuesIndices(OPS.CUMMIN, isOptions(axis) ? (axis.axis ?? 0) : axis, 'cummin'); };

// A running op along one axis in the sum's accumulation dtype, cast back (a 0-d tensor as a
// 1-element one): the shape shared by cumprod and logcumsumexp.
P._scan = function _scan(op, name, a) {
  const axis = isOptions(a) ? (a.axis ?? 0) : a;
  if (this.ndim === 0) {
    axisOf(axis, 1, name);
    return this.reshape([1])._scan(op, name, 0).reshape([]);
  }
  const ax = axisOf(axis, this.ndim, name);
  const acc = this.dtype.kind === 'f' ? sumAccDType(this.dtype) : this.dtype;
  return Tensor._make(op, acc, this._node.shape, [this.cast(acc)], new Composite({ axes: [ax] })).cast(this.dtype);
};

// Running product (bool as int32; float16/bfloat16 multiply in float32).
P.cumprod = function cumprod(a = 0) {
  const x = this.dtype === dtypes.bool ? this.cast(dtypes.int32) : this;
  return x._scan(OPS.CUMPROD, 'cumprod', a);
};

// log(cumsum(exp(x))) without overflow; ints and bool become float32.
P.logcumsumexp = function logcumsumexp(a = 0) {
  const x = this.dtype.kind === 'f' ? this : this.cast(dtypes.float32);
  return x._scan(OPS.LOGCUMSUMEXP, 'logcumsumexp', a);
};

module.exports = { pair };
