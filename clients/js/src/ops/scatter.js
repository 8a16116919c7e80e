'use strict';
// Writes at data-dependent positions and selection by index: the daemon's SCATTER_REDUCE,
// NLL_LOSS, INTERPOLATE, UNFOLD, NONZERO and MULTINOMIAL (core/frontend/scatter.h), and the
// few methods built from them. nonzero and maskedSelect are async: their result's size is data,
// so the count is realized first.
const { OPS } = require('../ops');
const { Composite } = require('../composite');
const { dtypes, toDType } = require('../dtype');
const { Tensor, isOptions } = require('../tensor');
const { axisOf } = require('./reduce');

const P = Tensor.prototype;
const asTensor = (x) => (x instanceof Tensor ? x : Tensor.from(x));
const isInt = (dt) => dt.kind === 'i' || dt.kind === 'u';
const isCount = (v) => Number.isInteger(v) && typeof v === 'number';

P._scatter = function _scatter(dim, index, src, mode, includeSelf, name) {
  if (this.ndim === 0) throw new RangeError(`${name} needs a tensor of at least 1 axis`);
  const ax = axisOf(dim, this.ndim, name);
  index = asTensor(index);
  const s = this._node.shape;
  const is = index._node.shape;
  if (!isInt(index.dtype) || index.ndim !== this.ndim) {
    throw new RangeError(`${name}: index must be an integer tensor of rank ${this.ndim}, got ${index.dtype.name} of shape [${is}]`);
  }
  if (is.some((v, a) => a !== ax && v > s[a])) throw new RangeError(`${name}: index [${is}] exceeds [${s}] on an axis other than ${ax}`);
  src = src instanceof Tensor ? src : Tensor.full(is, src, { dtype: this.dtype });
  if (src.ndim !== this.ndim || is.some((v, a) => v > src._node.shape[a])) {
    throw new RangeError(`${name}: src [${src._node.shape}] must be at least index's shape [${is}]`);
  }
  return Tensor._make(OPS.SCATTER_REDUCE, this.dtype, s, [this, index, src],
    new Composite({ axes: [ax], mode, include_self: includeSelf }));
};

// torch's scatter: src's elements (a tensor or a number) written at index along dim; of two updates
// landing on one position the later in index order wins (torch on the CPU). reduce 'add' or
// 'multiply' (or { reduce }) combines them with this instead.
P.scatter = function scatter(dim, index, src, reduce) {
  if (isOptions(reduce)) reduce = reduce.reduce;
  if (reduce !== undefined && reduce !== null) {
    return this.scatterReduce(dim, index, src, { add: 'sum', multiply: 'prod' }[reduce] || reduce);
  }
  return this._scatter(dim, index, src, 'none', false, 'scatter');
};

// torch's scatter_reduce: reduce 'sum', 'prod', 'mean', 'amax' or 'amin'; { includeSelf = true }.
P.scatterReduce = function scatterReduce(dim, index, src, reduce, { includeSelf = true } = {}) {
  if (!['sum', 'prod', 'mean', 'amax', 'amin'].includes(reduce)) {
    throw new RangeError(`scatterReduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '${reduce}'`);
  }
  return this._scatter(dim, index, src, reduce, Boolean(includeSelf), 'scatterReduce');
};

// torch's nll_loss: log-probabilities (N, C, ...) or (C), class indices Y (N, ...) or ().
P.nllLoss = function nllLoss(Y, { weight, ignoreIndex, reduction = 'mean' } = {}) {
  const s = this._node.shape;
  if (this.ndim === 0 || this.dtype.kind !== 'f') {
    throw new RangeError(`nllLoss: log-probabilities must be a float tensor with a class axis, got ${this.dtype.name} of shape [${s}]`);
  }
  Y = asTensor(Y);
  const ax = this.ndim >= 2 ? 1 : 0;
  const want = s.filter((_, i) => i !== ax);
  if (Y.ndim !== want.length || Y._node.shape.some((v, i) => v !== want[i]) || Y.dtype === dtypes.bool) {
    throw new RangeError(`nllLoss: targets of shape [${Y._node.shape}] do not fit log-probabilities [${s}] (want class indices of shape [${want}])`);
  }
  const src = [this, Y];
  if (weight !== undefined && weight !== null) {
    weight = asTensor(weight);
    if (weight.ndim !== 1 || weight._node.shape[0] !== s[ax]) throw new RangeError(`nllLoss: weight [${weight._node.shape}] must have one entry per class (${s[ax]})`);
    src.push(weight);
  }
  // -100 is torch's default: never a class, like no ignoreIndex.
  return this._loss(OPS.NLL_LOSS, src, Y._node.shape, reduction,
    { ignore_index: ignoreIndex === undefined || ignoreIndex === null ? -100 : ignoreIndex });
};

// Resizes the last size.length axes: { mode: 'linear' | 'nearest' | 'nearest-exact', alignCorners }.
P.interpolate = function interpolate(size, { mode = 'linear', alignCorners = false } = {}) {
  if (!['linear', 'nearest', 'nearest-exact'].includes(mode)) {
    throw new RangeError(`interpolate: mode must be 'linear', 'nearest' or 'nearest-exact', got '${mode}'`);
  }
  size = [...size];
  const s = this._node.shape;
  if (!size.length || size.length > this.ndim || size.some((m) => !isCount(m) || m < 1)) {
    throw new RangeError(`interpolate: size [${size}] must be 1 to ${this.ndim} positive integers for a tensor of shape [${s}]`);
  }
  const lead = this.ndim - size.length;
  if (s.slice(lead).includes(0)) throw new RangeError(`interpolate: cannot resize the empty axes of shape [${s}]`);
  const dt = mode !== 'linear' || this.dtype.kind === 'f' ? this.dtype : dtypes.float32;
  return Tensor._make(OPS.INTERPOLATE, dt, [...s.slice(0, lead), ...size], [this],
    new Composite({ shape: size, mode, align_corners: Boolean(alignCorners) }));
};

// torch's unfold: windows of size elements every step along dim, as a new last axis.
P.unfold = function unfold(dim, size, step) {
  const ax = axisOf(dim, Math.max(this.ndim, 1), 'unfold');
  const s = this._node.shape;
  const n = this.ndim ? s[ax] : 1;
  if (!isCount(size) || size < 0 || size > n) throw new RangeError(`unfold: size ${size} must be an integer from 0 to ${n} (the size of dim ${dim})`);
  if (!isCount(step) || step < 1) throw new RangeError(`unfold: step must be an integer >= 1, got ${step}`);
  const count = Math.floor((n - size) / step) + 1;
  const shape = this.ndim ? [...s.slice(0, ax), count, ...s.slice(ax + 1), size] : [size];  // 0-d: torch's (size)
  return Tensor._make(OPS.UNFOLD, this.dtype, shape, [this], new Composite({ axes: [ax], n: size, step }));
};

// The (count, ndim) int32 positions of the nonzero elements (async: the count is read first).
// { size, fillValue }: exactly size rows, no round trip; the rows past the count are
// Math.trunc(fillValue) (tinygrad's size=).
P.nonzero = async function nonzero({ size, fillValue = 0 } = {}) {
  if (size === undefined || size === null) {
    const count = Number(await this.ne(0).cast(dtypes.int32).sum().item());
    return Tensor._make(OPS.NONZERO, dtypes.int32, [count, this.ndim], [this], new Composite({ n: count }));
  }
  if (!Number.isInteger(size) || size < 0) throw new RangeError(`nonzero: size must be an integer >= 0, got ${size}`);
  const fill = Math.trunc(Number(fillValue));
  if (!(fill >= -(2 ** 31) && fill < 2 ** 31)) throw new RangeError(`nonzero: fillValue ${fillValue} does not fit int32`);
  return Tensor._make(OPS.NONZERO, dtypes.int32, [size, this.ndim], [this], new Composite({ n: size, fill }));
};

// The elements where mask (broadcast to this shape) is true, flattened (the daemon's
// MASKED_SELECT; async, as nonzero). { size, fillValue }: exactly size elements, no round trip,
// fillValue (in this dtype) after the selected ones.
P.maskedSelect = async function maskedSelect(mask, { size, fillValue = 0 } = {}) {
  const [x, m0] = this._broadcasted(asTensor(mask), false, false);
  const m = m0.cast(dtypes.bool);
  if (size === undefined || size === null) size = Number(await m.ne(0).cast(dtypes.int32).sum().item());
  else if (!Number.isInteger(size) || size < 0) throw new RangeError(`maskedSelect: size must be an integer >= 0, got ${size}`);
  const fill = Tensor._const(fillValue, this.dtype, []);
  return Tensor._make(OPS.MASKED_SELECT, this.dtype, [size], [m, x, fill], new Composite({ n: size }));
};

// Class indices (int32) drawn from the weights along the last axis of a 1-D or 2-D tensor:
// multinomial(numSamples = 1, replacement = false) or multinomial(numSamples, { replacement }).
P.multinomial = function multinomial(numSamples = 1, replacement = false) {
  if (isOptions(replacement)) replacement = Boolean(replacement.replacement);
  const s = this._node.shape;
  if (this.ndim !== 1 && this.ndim !== 2) throw new RangeError(`multinomial takes a 1-D or 2-D tensor of weights, got shape [${s}]`);
  if (!isCount(numSamples) || numSamples < 1) throw new RangeError(`multinomial: numSamples must be an integer >= 1, got ${numSamples}`);
  const n = s[s.length - 1];
  if (n === 0) throw new RangeError('multinomial: no classes to draw from');
  if (!replacement && numSamples > n) throw new RangeError(`multinomial: ${numSamples} samples without replacement from ${n} classes`);
  const [seed, counter] = Tensor._randomKey();
  return Tensor._make(OPS.MULTINOMIAL, dtypes.int32, [...s.slice(0, -1), numSamples], [this],
    new Composite({ n: numSamples, replacement: Boolean(replacement), seed, counter }));
};

// A random permutation of 0..n-1: the positions that sort n uniform draws (as the Python client).
Tensor.randperm = function randperm(n, { dtype } = {}) {
  if (!isCount(n) || n < 0) throw new RangeError(`randperm needs a count n >= 0, got ${n}`);
  const perm = Tensor.rand(n).argsort();
  return dtype === undefined ? perm : perm.cast(toDType(dtype));
};

// Normal with { mean = 0, std = 1 }, drawn on the device (the daemon's NORMAL).
Tensor.normal = function normal(...args) {
  const last = args[args.length - 1];
  const o = isOptions(last) ? last : {};
  const shape = isOptions(last) ? args.slice(0, -1) : args;
  const { mean = 0, std = 1, ...rest } = o;
  return Tensor._randomFloat(OPS.NORMAL, 'normal', [...shape, rest], { mean: Number(mean), std: Number(std) });
};

// tinygrad's contiguous_backward: the daemon lays out every buffer itself, so this tensor.
P.contiguousBackward = function contiguousBackward() { return this; };

// This tensor now stands for x (tinygrad's replace): same shape; x's dtype and history come along.
P.replace = function replace(x) {
  if (!(x instanceof Tensor)) throw new TypeError('replace takes a Tensor');
  const a = x._node.shape;
  const b = this._node.shape;
  if (a.length !== b.length || a.some((v, i) => v !== b[i])) throw new RangeError(`replace: shape [${a}] differs from [${b}]`);
  this._node = x._node;
  return this;
};
