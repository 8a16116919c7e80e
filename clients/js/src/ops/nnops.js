'use strict';
// Linear algebra, convolution and pooling, index ops, losses, normalization and attention: the
// daemon's composites, typed and shaped here.
const { OPS, OP_NAMES, MAX_ARITY } = require('../ops');
const { Composite } = require('../composite');
const { dtypes, leastUpperDType, leastUpperFloat, sumAccDType, toDType } = require('../dtype');
const { broadcastShape, normalizeAxis, normalizeAxes, sameShape, einsumShape, factorShape } = require('../shape');
const { Tensor } = require('../tensor');
const { axisOf } = require('./reduce');
const { broadcastSources } = require('./generated');
const { pair } = require('./sorting');

const P = Tensor.prototype;
const asTensor = (x) => (x instanceof Tensor ? x : Tensor.from(x));

// numpy matmul's result shape. A mismatch is left for the daemon to reject, so the error carries
// its message naming the node (the shape given here is then only provisional).
function matmulShape(sa, sb) {
  if (!sa.length || !sb.length) throw new RangeError(`matmul: both tensors need to be at least 1D, got ${sa.length}D and ${sb.length}D`);
  const a = sa.length === 1 ? [1, ...sa] : sa;
  const b = sb.length === 1 ? [...sb, 1] : sb;
  let batch;
  try {
    batch = broadcastShape(a.slice(0, -2), b.slice(0, -2));
  } catch {
    batch = a.slice(0, -2);
  }
  return [...batch, ...(sa.length > 1 ? [a[a.length - 2]] : []), ...(sb.length > 1 ? [b[b.length - 1]] : [])];
}

// numpy matmul semantics by the daemon's MATMUL; small types accumulate wider and are cast back.
P.matmul = function matmul(w, { dtype } = {}) {
  w = asTensor(w);
  const shape = matmulShape(this._node.shape, w._node.shape);
  const outDt = dtype ? toDType(dtype) : leastUpperDType(this.dtype, w.dtype);
  const acc = sumAccDType(outDt);
  return Tensor._make(OPS.MATMUL, acc, shape, [this.cast(acc), w.cast(acc)]).cast(outDt);
};
P.dot = P.matmul;

// The daemon's SHAPE_LINEAR rule: x @ w's shape (x and w broadcast for a 1-D w), with the bias's.
function linearShape(sx, sw, sb) {
  const y = sw.length === 1 ? broadcastShape(sx, sw) : matmulShape(sx, sw);
  return sb ? broadcastShape(y, sb) : y;
}

// tinygrad's linear by the daemon's LINEAR: x @ weight (x * weight for a 1-D weight) + bias, run
// in the accumulation dtype of the three's common dtype as matmul is.
P.linear = function linear(weight, bias) {
  const src = [this, asTensor(weight), ...(bias == null ? [] : [asTensor(bias)])];
  const outDt = leastUpperDType(...src.map((t) => t.dtype));
  const acc = sumAccDType(outDt);
  const shape = linearShape(this._node.shape, src[1]._node.shape, src[2]?._node.shape);
  return Tensor._make(OPS.LINEAR, acc, shape, src.map((t) => t.cast(acc))).cast(outDt);
};

P.sequential = function sequential(layers) {
  return layers.reduce((x, f) => (typeof f === 'function' ? f(x) : f.forward(x)), this);
};

// --- convolution and pooling over 1, 2 or 3 spatial axes (the wire ops are named for 2-D) -------

function ints(v, what) {
  const out = typeof v === 'number' ? [v] : [...v];
  if (!out.every((x) => Number.isInteger(x))) throw new RangeError(`${what} must be an integer or a list of integers, got ${v}`);
  return out;
}

// n values from a number (repeated) or n values, each >= low.
function ntuple(v, n, what, low) {
  let out = ints(v, what);
  if (out.length === 1 && typeof v === 'number') out = Array(n).fill(out[0]);
  if (out.length !== n) throw new RangeError(`${what} needs an integer or ${n} values (one per spatial axis), got ${v}`);
  if (out.some((x) => x < low)) throw new RangeError(`${what} values must be >= ${low}, got ${v}`);
  return out;
}

// The wire's (before, after) per spatial axis in axis order ([top, bottom, left, right] in 2-D)
// from a number, n values (one per axis), or tinygrad's 2n values, which list the pairs from the
// last axis back ([left, right, top, bottom] in 2-D).
function paddingPairs(padding, n) {
  let p = ints(padding, 'padding');
  if (p.length === 1 && typeof padding === 'number') p = Array(n).fill(p[0]);
  let out;
  if (p.length === n) out = p.flatMap((x) => [x, x]);
  else if (p.length === 2 * n) out = [...Array(n).keys()].reverse().flatMap((i) => [p[2 * i], p[2 * i + 1]]);
  else throw new RangeError(`padding needs an integer, ${n} values or ${2 * n} ((before, after) from the last axis back), got ${padding}`);
  if (out.some((x) => x < 0)) throw new RangeError(`padding must be >= 0, got ${padding}`);
  return out;
}

// A pooling's kernel: a number is 2-D (tinygrad), else 1 to 3 values >= 1.
function windowKernel(kernelSize, name) {
  const k = typeof kernelSize === 'number' ? ntuple(kernelSize, 2, 'kernelSize', 1) : ints(kernelSize, 'kernelSize');
  if (k.length < 1 || k.length > 3 || k.some((v) => v < 1)) throw new RangeError(`${name}: kernelSize needs an integer or 1 to 3 values >= 1, got ${kernelSize}`);
  return k;
}

// The output size of each spatial axis of a window op. ceilMode (pools): a last partial window
// counts when it starts inside the input or its before-padding (torch; the daemon pads for it).
function windowOut(spatial, k, stride, dil, pads, what, ceilMode = false) {
  return spatial.map((size, i) => {
    const span = dil[i] * (k[i] - 1) + 1;
    const padded = size + pads[2 * i] + pads[2 * i + 1];
    if (padded < span) throw new RangeError(`${what}: a window of ${span} (kernel ${k[i]}, dilation ${dil[i]}) does not fit spatial axis ${i} = ${size} padded to ${padded}`);
    let windows = (ceilMode ? Math.ceil((padded - span) / stride[i]) : Math.floor((padded - span) / stride[i])) + 1;
    if (ceilMode && (windows - 1) * stride[i] >= size + pads[2 * i]) windows -= 1;
    return windows;
  });
}

// The spatial axes of a convolution: weight.ndim - 2, 1 to 3, the input of the same rank.
function spatialCount(sx, sw, what, layout) {
  if (sw.length < 3 || sw.length > 5 || sx.length !== sw.length) {
    throw new RangeError(`${what} takes input (N, C, *spatial) and weight ${layout} of the same rank with 1 to 3 spatial axes, got [${sx}] and [${sw}]`);
  }
  return sw.length - 2;
}

// Cross-correlation of x (N, C, *spatial) with weight (O, C/groups, *kernel) over 1, 2 or 3
// spatial axes (weight.ndim - 2 of them), as tinygrad's conv2d and torch's conv1d/2d/3d.
P.conv2d = function conv2d(weight, bias = null, { groups = 1, stride = 1, dilation = 1, padding = 0 } = {}) {
  weight = asTensor(weight);
  const sx = this._node.shape;
  const sw = weight._node.shape;
  const n = spatialCount(sx, sw, 'conv2d', '(O, C/groups, *kernel)');
  const st = ntuple(stride, n, 'stride', 1);
  const dil = ntuple(dilation, n, 'dilation', 1);
  const pads = paddingPairs(padding, n);
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`conv2d: groups must be an integer >= 1, got ${groups}`);
  if (sw[1] * groups !== sx[1] || sw[0] % groups) {
    throw new RangeError(`conv2d: weight [${sw}] with groups=${groups} does not fit input [${sx}] (need C = groups * weight.shape[1] and O divisible by groups)`);
  }
  if (sw.slice(2).some((k) => k < 1)) throw new RangeError(`conv2d: empty kernel [${sw}]`);
  const shape = [sx[0], sw[0], ...windowOut(sx.slice(2), sw.slice(2), st, dil, pads, 'conv2d')];
  const [out, srcs] = this._convSources(weight, convBias(bias, sw[0], 'conv2d'));
  const arg = new Composite({ stride: st, padding: pads, dilation: dil, groups });
  return Tensor._make(OPS.CONV2D, srcs[0].dtype, shape, srcs, arg).cast(out);
};

// t (a tensor, or data for one) as a tensor, which must have `shape`; `what` names it.
function ofShape(t, shape, what) {
  t = asTensor(t);
  if (!sameShape(t._node.shape, shape)) throw new RangeError(`${what} must have shape [${shape}], got [${t._node.shape}]`);
  return t;
}

// The bias as a tensor of shape [channels], or null.
function convBias(bias, channels, name) {
  return bias === null || bias === undefined ? null : ofShape(bias, [channels], `${name}: bias`);
}

// [the result dtype, the sources in its float accumulator]: x, weight and the bias if any; the
// bias is added per output channel in the op.
P._convSources = function _convSources(weight, bias) {
  const ts = [this, weight, bias].filter((t) => t !== null);
  const out = leastUpperFloat(leastUpperDType(...ts.map((t) => t.dtype)));
  const acc = sumAccDType(out);
  return [out, ts.map((t) => t.cast(acc))];
};

// The transposed convolution over 1, 2 or 3 spatial axes (torch's conv_transpose1d/2d/3d),
// weight (Cin, Cout/groups, *kernel).
P.convTranspose2d = function convTranspose2d(weight, bias = null, { groups = 1, stride = 1, dilation = 1, padding = 0, outputPadding = 0 } = {}) {
  weight = asTensor(weight);
  const sx = this._node.shape;
  const ws = weight._node.shape;
  const n = spatialCount(sx, ws, 'convTranspose2d', '(Cin, Cout/groups, *kernel)');
  const st = ntuple(stride, n, 'stride', 1);
  const dil = ntuple(dilation, n, 'dilation', 1);
  const pad = ntuple(padding, n, 'padding', 0);
  const opad = ntuple(outputPadding, n, 'outputPadding', 0);
  const cin = sx[1];
  if (ws[0] !== cin || cin % groups) throw new RangeError(`convTranspose2d: weight [${ws}] does not fit ${cin} input channels in ${groups} groups`);
  for (let i = 0; i < n; i++) {
    if (opad[i] >= st[i] && opad[i] >= dil[i]) throw new RangeError(`convTranspose2d: outputPadding [${opad}] must be smaller than stride or dilation`);
  }
  const sp = sx.slice(2).map((v, i) => (v - 1) * st[i] - 2 * pad[i] + dil[i] * (ws[2 + i] - 1) + opad[i] + 1);
  if (sp.some((v) => v <= 0)) throw new RangeError(`convTranspose2d: padding [${pad}] leaves no output for input [${sx}]`);
  const cout = ws[1] * groups;
  const [out, srcs] = this._convSources(weight, convBias(bias, cout, 'convTranspose2d'));
  const arg = new Composite({ stride: st, padding: pad, dilation: dil, groups, output_padding: opad });
  return Tensor._make(OPS.CONV_TRANSPOSE2D, srcs[0].dtype, [sx[0], cout, ...sp], srcs, arg).cast(out);
};

// Pooling over the last kernelSize.length axes, 1 to 3 (a number: 2-D, as tinygrad); ceilMode
// keeps a last partial window (torch).
P._pool = function _pool(op, kernelSize, { stride = null, dilation = 1, padding = 0, ceilMode = false } = {}) {
  const name = OP_NAMES[op].toLowerCase();
  const k = windowKernel(kernelSize, name);
  const n = k.length;
  const st = stride === null || stride === undefined ? k : ntuple(stride, n, 'stride', 1);
  const dil = ntuple(dilation, n, 'dilation', 1);
  const pads = paddingPairs(padding, n);
  if (this.ndim < n) throw new RangeError(`${name} pools over the last ${n} axes, got shape [${this._node.shape}]`);
  const ceil = Boolean(ceilMode);
  const sp = windowOut(this._node.shape.slice(-n), k, st, dil, pads, name, ceil);
  return [[...this._node.shape.slice(0, -n), ...sp], new Composite({ kernel: k, stride: st, padding: pads, dilation: dil, ceil_mode: ceil })];
};

// Max over windows of the last kernelSize.length axes (stride defaults to the kernel; padding never
// wins). returnIndices: [values, indices] (also .values, .indices), the indices (int32) torch's:
// each maximum's flat position in the input's spatial volume, as maxUnpool2d takes them.
P.maxPool2d = function maxPool2d(kernelSize = [2, 2], { returnIndices = false, ...opts } = {}) {
  const [shape, arg] = this._pool(OPS.MAX_POOL2D, kernelSize, opts);
  const values = Tensor._make(OPS.MAX_POOL2D, this.dtype, shape, [this], arg);
  if (!returnIndices) return values;
  return pair(values, Tensor._make(OPS.MAX_POOL2D, dtypes.int32, shape, [this], new Composite({ ...arg, indices: true })));
};

// Mean over windows of the last kernelSize.length axes; padded zeros count unless countIncludePad
// is false (torch's count_include_pad: the daemon then divides by the elements inside the input).
P.avgPool2d = function avgPool2d(kernelSize = [2, 2], opts = {}) {
  let [shape, arg] = this._pool(OPS.AVG_POOL2D, kernelSize, opts);
  if (opts.countIncludePad === false) arg = new Composite({ ...arg, counted_padding: arg.padding.map(() => 0) });
  const [x, out] = this._accFloat();
  return Tensor._make(OPS.AVG_POOL2D, x.dtype, shape, [x], arg).cast(out);
};

// torch's max_unpool1d/2d/3d over the last kernelSize.length axes (a number: 2-D): zeros of the
// pooled input's spatial shape, each value written at its flat position from maxPool2d's indices
// (the daemon's MAX_UNPOOL2D).
P.maxUnpool2d = function maxUnpool2d(indices, { kernelSize = [2, 2], stride, padding = 0, outputSize } = {}) {
  const k = windowKernel(kernelSize, 'maxUnpool2d');
  const n = k.length;
  const st = stride === undefined || stride === null ? k : ntuple(stride, n, 'stride', 1);
  const pad = ntuple(padding, n, 'padding', 0);
  indices = asTensor(indices);
  const s = this._node.shape;
  if (this.ndim < n || !sameShape(indices._node.shape, s)) {
    throw new RangeError(`maxUnpool2d: indices [${indices._node.shape}] must have the values' shape [${s}], of at least ${n} axes (1 to 3)`);
  }
  const spatial = outputSize ? ints([...outputSize].slice(-n), 'outputSize')
    : s.slice(-n).map((o, i) => (o - 1) * st[i] - 2 * pad[i] + k[i]);
  return Tensor._make(OPS.MAX_UNPOOL2D, this.dtype, [...s.slice(0, -n), ...spatial], [this, indices], new Composite({ shape: spatial }));
};

// tinygrad's newton_schulz over the last two axes (Muon's orthogonalization): X = x / (||x|| + eps),
// then `steps` times X = sum_i params[i] (X X^T)^i X (the daemon's NEWTON_SCHULZ).
// numpy's einsum, the daemon's EINSUM: Tensor.einsum('ij,jk->ik', a, b) (or an array of tensors);
// "...", diagonals of repeated labels and implicit outputs as numpy. Operands of different dtypes
// are promoted to one.
Tensor.einsum = function einsum(formula, ...operands) {
  const xs = operands.length === 1 && Array.isArray(operands[0]) ? operands[0] : operands;
  if (typeof formula !== 'string' || !xs.length || !xs.every((t) => t instanceof Tensor)) {
    throw new TypeError('einsum takes a formula and one or more Tensors');
  }
  if (xs.length > MAX_ARITY.get(OPS.EINSUM)) throw new RangeError(`einsum takes at most ${MAX_ARITY.get(OPS.EINSUM)} operands, got ${xs.length}`);
  const shape = einsumShape(formula, xs.map((t) => t._node.shape));
  const dt = leastUpperDType(...xs.map((t) => t.dtype));
  return Tensor._make(OPS.EINSUM, dt, shape, xs.map((t) => t.cast(dt)), new Composite({ equation: formula }));
};

// torch.linalg.qr's reduced [Q, R] of the last two axes (Householder, LAPACK's signs): the daemon's
// QR, one node per factor.
P.qr = function qr() {
  if (this.ndim < 2) throw new RangeError(`qr needs a matrix (or a batch of them), got shape [${this._node.shape}]`);
  const x = this._float();
  return ['q', 'r'].map((f) => Tensor._make(OPS.QR, x.dtype, factorShape(x._node.shape, f), [x], new Composite({ mode: f })));
};

// [U, S, Vh] of the last two axes by one-sided Jacobi rotations (the daemon's SVD; meant for small
// matrices): singular values descending, vectors unique up to sign. fullMatrices (the default)
// takes square matrices only, where the reduced and full factors coincide.
P.svd = function svd({ fullMatrices = true, sweeps = 12 } = {}) {
  if (this.ndim < 2) throw new RangeError(`svd needs a matrix (or a batch of them), got shape [${this._node.shape}]`);
  const [m, n] = this._node.shape.slice(-2);
  if (fullMatrices && m !== n) throw new RangeError(`svd({ fullMatrices: true }) of a non-square ${m}x${n} matrix: pass fullMatrices: false`);
  if (!Number.isInteger(sweeps) || sweeps < 1 || sweeps > 64) throw new RangeError(`svd: sweeps must be 1 to 64, got ${sweeps}`);
  const x = this._float();
  return ['u', 's', 'vh'].map((f) => Tensor._make(OPS.SVD, x.dtype, factorShape(x._node.shape, f), [x], new Composite({ mode: f, n: sweeps })));
};

P.newtonSchulz = function newtonSchulz(steps, params, { eps = 1e-7 } = {}) {
  if (this.ndim < 2) throw new RangeError(`newtonSchulz needs a matrix (or a batch of them), got shape [${this._node.shape}]`);
  if (!Number.isInteger(steps) || steps < 1 || steps > 64 || !Array.isArray(params) || params.length < 1 || params.length > 16) {
    throw new RangeError(`newtonSchulz takes 1 to 64 steps and 1 to 16 coefficients, got ${steps} and ${params}`);
  }
  const x = this._float();
  const c = Tensor.from(new Float64Array(params.map(Number)), { dtype: dtypes.float64, device: x.device === 'CPU' ? undefined : x.device });
  return Tensor._make(OPS.NEWTON_SCHULZ, x.dtype, x._node.shape, [x, c], new Composite({ n: steps, eps }));
};

// --- index ops -----------------------------------------------------------------------------------

P._triangle = function _triangle(op, diagonal) {
  if (this.ndim < 2) throw new RangeError(`${OP_NAMES[op].toLowerCase()} needs at least 2 axes, got shape [${this._node.shape}]`);
  if (!Number.isInteger(diagonal)) throw new RangeError(`diagonal must be an integer, got ${diagonal}`);
  return Tensor._make(op, this.dtype, this._node.shape, [this], new Composite({ diagonal }));
};
P.tril = function tril(diagonal = 0) { return this._triangle(OPS.TRIL, diagonal); };
P.triu = function triu(diagonal = 0) { return this._triangle(OPS.TRIU, diagonal); };

// out[..., i, ...] = this[..., index[..., i, ...], ...] along axis (torch.gather).
P.gather = function gather(dim, index) {
  index = asTensor(index);
  if (!(index.dtype.kind === 'i' || index.dtype.kind === 'u')) throw new TypeError(`gather needs an integer index, got ${index.dtype.name}`);
  if (this.ndim === 0) throw new RangeError('gather needs a tensor of at least 1 axis');
  const ax = axisOf(dim, this.ndim, 'gather');
  if (index.ndim !== this.ndim) throw new RangeError(`gather: index has ${index.ndim} axes, the input ${this.ndim}`);
  const is = index._node.shape;
  const s = this._node.shape;
  is.forEach((a, i) => {
    if (i !== ax && a > s[i]) throw new RangeError(`gather: index size ${a} on axis ${i} exceeds the input's ${s[i]} (index [${is}], input [${s}])`);
  });
  let x = this;
  if (is.some((a, i) => i !== ax && a !== s[i])) x = this.shrink(is.map((v, i) => (i === ax ? [0, s[i]] : [0, v])));
  if (s[ax] === 0 && is[ax] > 0) throw new RangeError(`gather from an empty axis ${ax}`);
  return Tensor._make(OPS.GATHER, this.dtype, is, [x, index], new Composite({ axes: [ax] }));
};

// One-hot along a new last axis, in the indices' dtype; indices outside [0, n) give zeros.
P.oneHot = function oneHot(numClasses) {
  if (!(this.dtype.kind === 'i' || this.dtype.kind === 'u')) throw new TypeError(`oneHot needs an integer tensor, got ${this.dtype.name}`);
  if (!Number.isInteger(numClasses) || numClasses < 1) throw new RangeError(`oneHot needs numClasses >= 1, got ${numClasses}`);
  return Tensor._make(OPS.ONE_HOT, this.dtype, [...this._node.shape, numClasses], [this], new Composite({ n: numClasses }));
};

// --- losses --------------------------------------------------------------------------------------

// SHAPE_LOSS: one loss op of the predictions' float dtype, the per-element losses' shape when
// reduction is 'none', else 0-d (its formula is the daemon's: core/frontend/losses.h).
P._loss = function _loss(op, srcs, perElement, reduction, fields = {}) {
  if (!['mean', 'sum', 'none'].includes(reduction)) throw new RangeError(`reduction must be 'mean', 'sum' or 'none', got '${reduction}'`);
  return Tensor._make(op, leastUpperFloat(srcs[0].dtype), reduction === 'none' ? perElement : [], srcs,
    new Composite({ mode: reduction, ...fields }));
};

// Cross entropy of logits with class indices (one axis less) or class probabilities (this shape) Y;
// the class axis is 1 (torch), or -1 for a 1-D input, unless axis is given.
P.crossEntropy = function crossEntropy(Y, { reduction = 'mean', labelSmoothing = 0, axis } = {}) {
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1)) throw new RangeError('labelSmoothing must be in [0, 1]');
  const ax = normalizeAxis(axis !== undefined ? axis : (this.ndim >= 2 ? 1 : -1), this.ndim);
  Y = asTensor(Y);
  const s = this._node.shape;
  const per = s.filter((_, i) => i !== ax);
  if (!sameShape(Y._node.shape, per) && !sameShape(Y._node.shape, s)) {
    throw new RangeError(`crossEntropy: targets of shape [${Y._node.shape}] fit neither class indices [${per}] nor class probabilities [${s}]`);
  }
  return this._loss(OPS.CROSS_ENTROPY, [this, Y], per, reduction, { axes: [ax], label_smoothing: labelSmoothing });
};

// tinygrad's: logits over the last axis, class indices Y (one axis less); targets equal to
// ignoreIndex (when it is not -1) count for nothing, and the mean is over the others.
P.sparseCategoricalCrossentropy = function sparseCategoricalCrossentropy(Y, { ignoreIndex = -1, labelSmoothing = 0, reduction = 'mean' } = {}) {
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1)) throw new RangeError('labelSmoothing must be in [0, 1]');
  Y = asTensor(Y);
  const s = this._node.shape;
  if (!s.length || !sameShape(Y._node.shape, s.slice(0, -1))) {
    throw new RangeError(`sparseCategoricalCrossentropy: targets of shape [${Y._node.shape}] do not fit logits [${s}]`);
  }
  return this._loss(OPS.SPARSE_CATEGORICAL_CROSSENTROPY, [this, Y], Y._node.shape, reduction,
    { ignore_index: ignoreIndex, label_smoothing: labelSmoothing });
};

// -Y log(this) - (1 - Y) log(1 - this) for probabilities (tinygrad's: not clamped).
P.binaryCrossentropy = function binaryCrossentropy(Y, { reduction = 'mean' } = {}) {
  const srcs = broadcastSources(this, [Y]).map((t) => t._float());
  return this._loss(OPS.BINARY_CROSSENTROPY, srcs, srcs[0]._node.shape, reduction);
};

// -(posWeight Y logsigmoid(this) + (1 - Y) logsigmoid(-this)) for logits, stable at any size.
P.binaryCrossentropyLogits = function binaryCrossentropyLogits(Y, { reduction = 'mean', posWeight } = {}) {
  const operands = posWeight === undefined || posWeight === null ? [Y] : [Y, posWeight];
  const srcs = broadcastSources(this, operands).map((t) => t._float());
  return this._loss(OPS.BINARY_CROSSENTROPY_LOGITS, srcs, srcs[0]._node.shape, reduction);
};

// Zeros elements with probability p and scales the rest by 1/(1-p), only while Tensor.training.
P.dropout = function dropout(p = 0.5) {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`dropout probability must be in [0, 1], got ${p}`);
  if (!Tensor.training || p === 0) return this;
  const x = this._float();
  const [seed, counter] = Tensor._randomKey();
  return Tensor._make(OPS.DROPOUT, x.dtype, x._node.shape, [x], new Composite({ seed, counter, p: Number(p) }));
};

// --- normalization and attention -------------------------------------------------------------------

// Times weight (the normalized axes' shape) when given.
P.rmsNorm = function rmsNorm(axis = -1, eps = 1e-6, weight = null) {
  const axes = normalizeAxes(axis, this.ndim);
  if (!axes.length || !axes.every((a, i) => a === this.ndim - axes.length + i)) {
    throw new RangeError(`rmsNorm normalizes over the last axes, got axis=${axis} for shape [${this._node.shape}]`);
  }
  return this._trailingNorm(OPS.RMS_NORM, new Composite({ normalized_axes: axes.length, eps: Number(eps) }), weight, null);
};

// LAYERNORM or RMS_NORM over the last arg.normalized_axes axes with the optional weight and bias of
// those axes' shape: computed in the float accumulator of the common dtype of this, weight and
// bias, and returned in that dtype (as x * weight + bias would promote).
P._trailingNorm = function _trailingNorm(op, arg, weight, bias) {
  const dts = [weight, bias].filter((t) => t instanceof Tensor).map((t) => t.dtype);
  const out = leastUpperFloat(leastUpperDType(this.dtype, ...dts));
  const x = this.cast(sumAccDType(out));
  const affine = x._affine(weight, bias, this._node.shape.slice(this.ndim - arg.normalized_axes));
  return Tensor._make(op, x.dtype, x._node.shape, [x, ...affine], arg).cast(out);
};

// The per-channel weight and bias sources of a normalization of this (N, C, ...), in its dtype:
// none, [weight] or [weight, bias], a bias alone with a weight of ones (the daemon applies them).
P._affine = function _affine(weight, bias, shape = [this._node.shape[1]]) {
  if (!weight && !bias) return [];
  return [['weight', weight || Tensor.ones(shape)], ['bias', bias]].filter(([, t]) => t)
    .map(([name, t]) => ofShape(t, shape, name).cast(this.dtype));
};

P.groupNorm = function groupNorm(numGroups, weight = null, bias = null, eps = 1e-5) {
  if (this.ndim < 2) throw new RangeError(`groupNorm needs (N, C, ...), got shape [${this._node.shape}]`);
  if (!Number.isInteger(numGroups) || numGroups < 1 || this._node.shape[1] % numGroups) {
    throw new RangeError(`groupNorm: ${this._node.shape[1]} channels do not split into ${numGroups} groups`);
  }
  const [x, out] = this._accFloat();
  return Tensor._make(OPS.GROUP_NORM, x.dtype, x._node.shape, [x, ...x._affine(weight, bias)],
    new Composite({ groups: numGroups, eps: Number(eps) })).cast(out);
};

// tinygrad's batchnorm: (x - mean) * invstd * weight + bias with the statistics along axis (a number
// or an array): mean, weight and bias reshaped to those axes' sizes, invstd too when it has as many
// axes, else broadcast to x. One BATCHNORM_INVSTD in the float dtype all of them promote to.
P.batchnorm = function batchnorm(weight, bias, mean, invstd, axis = 1) {
  const axes = [...normalizeAxes(axis, this.ndim)].sort((a, b) => a - b);
  const stat = axes.map((a) => this._node.shape[a]);
  const ts = [mean, invstd, weight, bias].map((t) => (t == null ? null : asTensor(t)));
  const out = leastUpperFloat(leastUpperDType(this.dtype, ...ts.filter((t) => t).map((t) => t.dtype)));
  const [m, is, w, b] = ts.map((t) => (t ? t.cast(out) : null));
  if (is.ndim !== axes.length && !sameShape(broadcastShape(is._node.shape, this._node.shape), this._node.shape)) {
    throw new RangeError(`batchnorm: invstd of shape [${is._node.shape}] does not broadcast to [${this._node.shape}]`);
  }
  const srcs = [this.cast(out), m.reshape(stat), is.ndim === axes.length ? is.reshape(stat) : is];
  if (w || b) srcs.push(w ? w.reshape(stat) : Tensor.ones(stat, { dtype: out }));
  if (b) srcs.push(b.reshape(stat));
  return Tensor._make(OPS.BATCHNORM_INVSTD, out, this._node.shape, srcs, new Composite({ axes }));
};

P.batchNorm = function batchNorm({ runningMean = null, runningVar = null, weight = null, bias = null, training = false, eps = 1e-5 } = {}) {
  if (this.ndim < 2) throw new RangeError(`batchNorm needs (N, C, ...), got shape [${this._node.shape}]`);
  const [x, out] = this._accFloat();
  const affine = x._affine(weight, bias);
  let y;
  if (training || !runningMean || !runningVar) {
    y = Tensor._make(OPS.BATCHNORM_TRAIN, x.dtype, x._node.shape, [x, ...affine], new Composite({ eps: Number(eps) }));
  } else {
    y = Tensor._make(OPS.BATCHNORM_EVAL, x.dtype, x._node.shape, [x, runningMean.cast(x.dtype), runningVar.cast(x.dtype), ...affine],
      new Composite({ eps: Number(eps) }));
  }
  return y.cast(out);
};

// softmax(q k^T / sqrt(d) + mask) v, batch axes broadcasting (the daemon's SDPA).
P.scaledDotProductAttention = function scaledDotProductAttention(key, value, { attnMask = null, isCausal = false, dropoutP = 0 } = {}) {
  if (!(dropoutP >= 0 && dropoutP <= 1)) throw new RangeError(`scaledDotProductAttention: dropoutP must be in [0, 1], got ${dropoutP}`);
  const q = this;
  const k = key;
  const v = value;
  if (q.ndim < 2 || k.ndim < 2 || v.ndim < 2) throw new RangeError('scaledDotProductAttention needs q, k, v of rank >= 2');
  const qs = q._node.shape;
  const ks = k._node.shape;
  const vs = v._node.shape;
  const batch = broadcastShape(broadcastShape(qs.slice(0, -2), ks.slice(0, -2)), vs.slice(0, -2));
  const dt = leastUpperFloat(leastUpperDType(q.dtype, k.dtype, v.dtype));
  const acc = sumAccDType(dt);
  const src = [q.cast(acc), k.cast(acc), v.cast(acc)];
  let op = OPS.SCALED_DOT_PRODUCT_ATTENTION;
  if (attnMask) {
    attnMask = asTensor(attnMask);
    src.push(attnMask.dtype === dtypes.bool ? attnMask : attnMask.cast(acc));
    op = OPS.SCALED_DOT_PRODUCT_ATTENTION_MASKED;
  }
  const outShape = [...batch, qs[qs.length - 2], vs[vs.length - 1]];
  // dropout on the attention weights, only while training, drawn on the device as dropout's
  const drop = dropoutP > 0 && Tensor.training;
  const [seed, counter] = drop ? Tensor._randomKey() : [0, 0];
  const arg = new Composite({ causal: Boolean(isCausal), ...(drop ? { p: Number(dropoutP), seed, counter } : {}) });
  return Tensor._make(op, acc, outShape, src, arg).cast(dt);
};
