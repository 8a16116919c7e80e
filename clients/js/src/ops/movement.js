'use strict';
// Movement ops (no data copied: the daemon changes how the source is indexed), concatenation and
// indexing: t.index(...) with numpy's index forms, t.slice(...) for per-axis ranges, t.setitem(...)
// to write where t.index(...) reads.
const { OPS, MAX_ARITY } = require('../ops');
const { Composite } = require('../composite');
const { dtypes, leastUpperDType } = require('../dtype');
const { prod, sameShape, broadcastShape, normalizeAxis, normalizeAxes, resolveReshape, checkPermutation,
  resolveExpand, normalizePairs, asShape } = require('../shape');
const { Tensor, splitOptions } = require('../tensor');
const { isSym, hasSym, plain, current, daemonSize, symbolicPair } = require('../variable');

const P = Tensor.prototype;

// f(2, 3) and f([2, 3]) alike.
function listArg(args) {
  return args.length === 1 && Array.isArray(args[0]) ? [...args[0]] : args;
}

// `sizes` with the SymInts of `want` (same axes) in their places: a node's arg for the wire.
function withSyms(sizes, want) {
  return sizes.map((s, i) => (isSym(want[i]) ? want[i] : s));
}

// A Variable's SymInt in the shape makes a symbolic dim (the shape holds its largest size).
P.reshape = function reshape(...shape) {
  const want = listArg(shape);
  const sym = hasSym(want);
  const nw = resolveReshape(this._node.shape, sym ? want.map(daemonSize) : want);
  if (!sym && sameShape(nw, this._node.shape)) return this;
  return Tensor._make(OPS.RESHAPE, this.dtype, nw, [this], sym ? withSyms(nw, want) : nw);
};
P.view = P.reshape;

P.permute = function permute(...order) {
  const o = checkPermutation(listArg(order), this.ndim);
  if (o.every((a, i) => a === i)) return this;
  return Tensor._make(OPS.PERMUTE, this.dtype, o.map((i) => this._node.shape[i]), [this], o);
};

P.transpose = function transpose(dim0 = -2, dim1 = -1) {
  const order = [...Array(this.ndim).keys()];
  const a = normalizeAxis(dim0, this.ndim);
  const b = normalizeAxis(dim1, this.ndim);
  [order[a], order[b]] = [order[b], order[a]];
  return this.permute(order);
};
Object.defineProperty(P, 'T', { get() { return this.ndim >= 2 ? this.transpose() : this; } });

P.expand = function expand(...shape) {
  const want = listArg(shape);
  if (!hasSym(want)) return this._broadcastTo(resolveExpand(this._node.shape, want));
  // A symbolic size: an EXPAND that carries it, even where the axis already has its largest size.
  let x = this;
  if (x.ndim < want.length) x = x.reshape([...Array(want.length - x.ndim).fill(1), ...x._node.shape]);
  const nw = resolveExpand(x._node.shape, want.map(daemonSize));
  return Tensor._make(OPS.EXPAND, x.dtype, nw, [x], withSyms(nw, want));
};

// padding: one [before, after] pair (or null) per axis, or a flat torch-style list (last axis
// first). Negative amounts shrink. { value } fills (default 0).
P.pad = function pad(padding, { value = 0, mode = 'constant' } = {}) {
  if (mode !== 'constant') throw new Error(`pad mode '${mode}' (only 'constant')`);
  // Pad amounts are numbers: a Variable's value is taken (a symbolic dim is made by shrink).
  let pads = [...padding].map((p) => (isSym(p) ? plain(p) : p));
  if (pads.length && pads.every((p) => typeof p === 'number')) {
    if (pads.length % 2 || pads.length > 2 * this.ndim) throw new RangeError(`pad: flat padding needs an even count ≤ 2*ndim, got ${pads.length}`);
    const flat = [];
    for (let i = 0; i < pads.length; i += 2) flat.push([pads[i], pads[i + 1]]);
    flat.reverse();
    pads = [...Array(this.ndim - flat.length).fill([0, 0]), ...flat];
  }
  let pairs = normalizePairs(pads, this._node.shape, 'pad', () => [0, 0]).map(([b, a]) => [plain(b), plain(a)]);
  let x = this;
  if (pairs.some(([b, a]) => b < 0 || a < 0)) {
    const shr = pairs.map(([b, a], i) => {
      const s = this._node.shape[i];
      const lo = Math.max(0, -b);
      const hi = s - Math.max(0, -a);
      if (lo > hi) throw new RangeError(`pad: [${padding}] removes more than the whole axis of size ${s}`);
      return [lo, hi];
    });
    x = x.shrink(shr);
    pairs = pairs.map(([b, a]) => [Math.max(0, b), Math.max(0, a)]);
  }
  if (pairs.every(([b, a]) => b === 0 && a === 0)) return x;
  const shape = x._node.shape.map((s, i) => s + pairs[i][0] + pairs[i][1]);
  let out = Tensor._make(OPS.PAD, x.dtype, shape, [x], pairs);
  if (value !== 0) {
    const mask = Tensor._make(OPS.PAD, dtypes.bool, shape, [Tensor._const(true, dtypes.bool, x._node.shape)], pairs);
    out = mask.where(out, value);
  }
  return out;
};

// One [begin, end] pair (or null: the whole axis) per axis. A Variable's SymInt as a bound: an end from 0 makes a symbolic dim (the shape holds its largest
// size); a begin with end = begin + k (x[p:p+k]) reads from a begin the daemon holds per run; any
// other SymInt bound takes its value (variable.js symbolicPair, as the Python client).
P.shrink = function shrink(arg) {
  const shape = this._node.shape;
  let pairs = normalizePairs(arg, shape, 'shrink', (s) => [0, s]);
  pairs.forEach(([b, e], i) => {
    const [bv, ev, s] = [current(b), current(e), shape[i]];
    if (!(bv >= 0 && bv <= ev && ev <= s)) throw new RangeError(`shrink: [${bv}, ${ev}] is out of range for an axis of size ${s}`);
  });
  if (hasSym(pairs.flat())) pairs = pairs.map(([b, e], i) => symbolicPair(b, e, shape[i]));
  if (pairs.every(([b, e], i) => b === 0 && e === shape[i])) return this;
  const sizes = pairs.map(([b, e]) => (isSym(b) ? e - b._current : isSym(e) ? e.max : e - b));
  return Tensor._make(OPS.SHRINK, this.dtype, sizes, [this], pairs);
};

P.flip = function flip(...axis) {
  const axes = normalizeAxes(listArg(axis), this.ndim);
  if (!axes.length) return this;
  return Tensor._make(OPS.FLIP, this.dtype, this._node.shape, [this], axes);
};

P.squeeze = function squeeze(dim) {
  const s = this._node.shape;
  if (dim === undefined || dim === null) return this.reshape(s.filter((x) => x !== 1));
  const d = normalizeAxis(dim, this.ndim);
  if (this.ndim === 0 || s[d] !== 1) return this;
  return this.reshape([...s.slice(0, d), ...s.slice(d + 1)]);
};

P.unsqueeze = function unsqueeze(dim) {
  const d = normalizeAxis(dim, this.ndim + 1);
  const s = this._node.shape;
  return this.reshape([...s.slice(0, d), 1, ...s.slice(d)]);
};

P.flatten = function flatten(startDim = 0, endDim = -1) {
  if (this.ndim === 0) return this.reshape([1]);
  const s = this._node.shape;
  const a = normalizeAxis(startDim, this.ndim);
  const e = normalizeAxis(endDim, this.ndim);
  return this.reshape([...s.slice(0, a), prod(s.slice(a, e + 1)), ...s.slice(e + 1)]);
};

P.unflatten = function unflatten(dim, sizes) {
  const d = normalizeAxis(dim, this.ndim);
  const s = this._node.shape;
  return this.reshape([...s.slice(0, d), ...sizes, ...s.slice(d + 1)]);
};

P.repeat = function repeat(...repeats) {
  const reps = asShape(listArg(repeats));
  if (reps.length < this.ndim) throw new RangeError(`repeat: need at least ${this.ndim} repeat counts, got ${reps.length}`);
  const base = [...Array(reps.length - this.ndim).fill(1), ...this._node.shape];
  const x = this.reshape(base.flatMap((s) => [1, s]));
  return x.expand(base.flatMap((s, i) => [reps[i], s])).reshape(base.map((s, i) => reps[i] * s));
};

// einops groups of one side: "b (h w) c" -> [["b"], ["h", "w"], ["c"]].
function rearrangeGroups(side, what) {
  const out = [];
  let current = null;
  for (const tok of side.replace(/\(/g, ' ( ').replace(/\)/g, ' ) ').split(/\s+/).filter(Boolean)) {
    if (tok === '(') {
      if (current !== null) throw new RangeError(`rearrange: nested parentheses in ${what}`);
      current = [];
    } else if (tok === ')') {
      if (current === null) throw new RangeError(`rearrange: unbalanced ')' in ${what}`);
      out.push(current);
      current = null;
    } else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(tok)) {
      if (current !== null) current.push(tok);
      else out.push([tok]);
    } else {
      throw new RangeError(`rearrange: '${tok.slice(0, 40)}' in ${what} is not an axis name`);
    }
  }
  if (current !== null) throw new RangeError(`rearrange: unbalanced '(' in ${what}`);
  return out;
}

// einops.rearrange for one tensor (the Python client's): regroups, splits, merges and reorders
// named axes, t.rearrange('b (h w) c -> b h w c', { h: 2 }); every name once on each side. The
// reshapes and the permute it names, nothing else.
P.rearrange = function rearrange(formula, sizes = {}) {
  const arrow = formula.indexOf('->');
  if (arrow < 0) throw new RangeError(`rearrange: '${formula.slice(0, 100)}' has no '->'`);
  const left = rearrangeGroups(formula.slice(0, arrow), 'the input pattern');
  const right = rearrangeGroups(formula.slice(arrow + 2), 'the output pattern');
  const leftNames = left.flat();
  const rightNames = right.flat();
  if (new Set(leftNames).size !== leftNames.length || [...leftNames].sort().join() !== [...rightNames].sort().join()) {
    throw new RangeError(`rearrange: both sides must name the same axes once each: '${formula.slice(0, 100)}'`);
  }
  if (left.length !== this.ndim) throw new RangeError(`rearrange: the input pattern has ${left.length} axes, the tensor ${this.ndim}`);
  const unknown = Object.keys(sizes).filter((k) => !leftNames.includes(k)).sort();
  if (unknown.length) throw new RangeError(`rearrange: sizes given for axes not in the pattern: ${unknown}`);
  const known = new Map(Object.entries(sizes).map(([k, v]) => [k, Number(v)]));
  left.forEach((group, i) => {
    const dim = this._node.shape[i];
    const missing = group.filter((n) => !known.has(n));
    const product = group.reduce((acc, n) => acc * (known.get(n) ?? 1), 1);
    if (missing.length > 1) throw new RangeError(`rearrange: cannot infer both ${missing} from size ${dim}`);
    if (missing.length) {
      if (product === 0 || dim % product) throw new RangeError(`rearrange: size ${dim} does not split by ${product} for ${group}`);
      known.set(missing[0], dim / product);
    } else if (product !== dim) {
      throw new RangeError(`rearrange: axes ${group} multiply to ${product}, the tensor's axis is ${dim}`);
    }
  });
  const split = this.reshape(leftNames.map((n) => known.get(n)));
  const moved = rightNames.length ? split.permute(rightNames.map((n) => leftNames.indexOf(n))) : split;
  return moved.reshape(right.map((group) => group.reduce((acc, n) => acc * known.get(n), 1)));
};

// Tensor.cat([a, b], { axis }) or a.cat(b, { axis }).
P.cat = function cat(...args) {
  const [others, o] = splitOptions(args);
  const tensors = [this, ...others.flat()];
  const dim = o.axis !== undefined ? o.axis : (o.dim !== undefined ? o.dim : 0);
  const d = normalizeAxis(dim, this.ndim);
  for (const t of tensors) {
    if (t.ndim !== this.ndim || t._node.shape.some((s, i) => i !== d && s !== this._node.shape[i])) {
      throw new RangeError(`cat: shapes ${tensors.map((x) => `[${x._node.shape}]`).join(', ')} differ outside axis ${d}`);
    }
  }
  const dt = leastUpperDType(...tensors.map((t) => t.dtype));
  return joined(tensors.map((t) => t.cast(dt)), d);
};

// One CAT of tensors (checked, one dtype) along axis d; more than the op takes are joined in
// groups first (bit for bit the same elements).
function joined(tensors, d) {
  const limit = MAX_ARITY.get(OPS.CAT);
  if (tensors.length > limit) {
    const groups = [];
    for (let i = 0; i < tensors.length; i += limit) groups.push(joined(tensors.slice(i, i + limit), d));
    return joined(groups, d);
  }
  const shape = tensors[0]._node.shape.slice();
  shape[d] = tensors.reduce((acc, t) => acc + t._node.shape[d], 0);
  return Tensor._make(OPS.CAT, tensors[0].dtype, shape, tensors, new Composite({ axes: [d] }));
}
Tensor.cat = (tensors, o = {}) => tensors[0].cat(...tensors.slice(1), o);

Tensor.stack = (tensors, o = {}) => {
  const dim = o.axis !== undefined ? o.axis : (o.dim !== undefined ? o.dim : 0);
  const d = normalizeAxis(dim, tensors[0].ndim + 1);
  const us = tensors.map((t) => t.unsqueeze(d));
  return us[0].cat(...us.slice(1), { axis: d });
};

// Pieces of `sizes` along axis (a number: pieces of that size, the last one smaller).
P.split = function split(sizes, { axis = 0 } = {}) {
  const d = normalizeAxis(axis, this.ndim);
  const n = this._node.shape[d];
  if (typeof sizes === 'number') {
    if (sizes <= 0) throw new RangeError('split size must be positive');
    const out = [];
    for (let i = 0; i < n; i += sizes) out.push(Math.min(sizes, n - i));
    sizes = out.length ? out : [0];
  }
  if (sizes.reduce((a, b) => a + b, 0) !== n) throw new RangeError(`split sizes [${sizes}] do not add up to ${n}`);
  let off = 0;
  return sizes.map((sz) => {
    const pairs = this._node.shape.map((s) => [0, s]);
    pairs[d] = [off, off + sz];
    off += sz;
    return this.shrink(pairs);
  });
};

P.chunk = function chunk(chunks, { axis = 0 } = {}) {
  const n = this._node.shape[normalizeAxis(axis, this.ndim)];
  return this.split(Math.max(1, Math.ceil(n / chunks)), { axis });
};

// torch.roll: shifted along each of dims, wrapping around; dims null rolls the flattened tensor.
P.roll = function roll(shifts, dims = null) {
  if (dims === null || dims === undefined) return this.flatten().roll(shifts, 0).reshape(this._node.shape);
  const ss = Array.isArray(shifts) ? shifts : [shifts];
  const ds = Array.isArray(dims) ? dims : [dims];
  if (ss.length !== ds.length) throw new RangeError(`roll: ${ss.length} shifts for ${ds.length} dims`);
  let x = this;
  ss.forEach((s, i) => {
    const d = normalizeAxis(ds[i], x.ndim);
    const n = x._node.shape[d];
    const k = n ? ((s % n) + n) % n : 0;
    if (k) {
      const [head, tail] = x.split([n - k, k], { axis: d });
      x = tail.cat(head, { axis: d });
    }
  });
  return x;
};

// torch.diagonal: the elements (i, i + offset) of the planes of dim1 and dim2, as a new last axis.
P.diagonal = function diagonal({ offset = 0, dim1 = 0, dim2 = 1 } = {}) {
  const d1 = normalizeAxis(dim1, this.ndim);
  const d2 = normalizeAxis(dim2, this.ndim);
  if (d1 === d2) throw new RangeError(`diagonal: dim1 and dim2 are both axis ${d1}`);
  let x = this.permute([...[...Array(this.ndim).keys()].filter((i) => i !== d1 && i !== d2), d1, d2]);
  const s = x._node.shape;
  const batch = s.slice(0, -2);
  const [r, c] = s.slice(-2);
  const loR = Math.min(r, Math.max(0, -offset));
  const loC = Math.min(c, Math.max(0, offset));
  const n = Math.max(0, Math.min(r - loR, c - loC));
  const keep = batch.map((b) => [0, b]);
  x = x.shrink([...keep, [loR, loR + n], [loC, loC + n]]);
  // The n x n block read with a row stride of n + 1 walks its diagonal.
  x = x.reshape([...batch, n * n]).pad([...batch.map(() => [0, 0]), [0, n]]).reshape([...batch, n, n + 1]);
  return x.shrink([...keep, [0, n], [0, 1]]).reshape([...batch, n]);
};

// torch.diag: a 1-D tensor's values on a diagonal of a square matrix, or a matrix's diagonal.
P.diag = function diag(diagonal = 0) {
  if (this.ndim === 2) return this.diagonal({ offset: diagonal });
  if (this.ndim !== 1) throw new RangeError(`diag takes a 1-D or 2-D tensor, got ${this.ndim}-D`);
  const n = this._node.shape[0];
  const k = Math.abs(diagonal);
  // diagonal()'s walk backwards: each value followed by n zeros, read as n x n.
  const x = this.reshape([n, 1]).pad([[0, 0], [0, n]]).reshape([n * (n + 1)]).shrink([[0, n * n]]).reshape([n, n]);
  return x.pad(diagonal >= 0 ? [[0, k], [k, 0]] : [[k, 0], [0, k]]);
};

// Grids of this and others (1-D each), one per input, shaped by all their lengths; indexing 'xy'
// swaps the first two axes of that shape, as torch and numpy.
P.meshgrid = function meshgrid(...args) {
  const [others, o] = splitOptions(args);
  const indexing = o.indexing ?? 'ij';
  if (indexing !== 'ij' && indexing !== 'xy') throw new RangeError(`meshgrid indexing must be 'ij' or 'xy', got ${indexing}`);
  const ts = [this, ...others.flat()].map((t) => t.reshape([-1]));
  if (indexing === 'xy' && ts.length > 1) {
    const g = ts[1].meshgrid(ts[0], ...ts.slice(2), { indexing: 'ij' });
    return [g[1], g[0], ...g.slice(2)];
  }
  const shape = ts.map((t) => t._node.shape[0]);
  return ts.map((t, i) => t.reshape(shape.map((n, j) => (j === i ? n : 1))).expand(shape));
};
Tensor.meshgrid = (tensors, o = {}) => tensors[0].meshgrid(...tensors.slice(1), o);

// Each element `repeats` times in a row along axis (null: of the flattened tensor). The count is a
// number, as in tinygrad: per-element tensor counts would make the shape depend on the data.
P.repeatInterleave = function repeatInterleave(repeats, { axis = null } = {}) {
  if (!Number.isInteger(repeats) || repeats < 0) throw new TypeError(`repeatInterleave takes a count >= 0, got ${repeats}`);
  const x0 = axis === null ? this.flatten() : this;
  const d = axis === null ? 0 : normalizeAxis(axis, this.ndim);
  const x = x0.unsqueeze(d + 1);
  const s = x._node.shape;
  return x.expand([...s.slice(0, d + 1), repeats, ...s.slice(d + 2)]).flatten(d, d + 1);
};

// this with `value` where the bool mask (broadcasting to this shape) is true.
P.maskedFill = function maskedFill(mask, value) {
  const m = mask instanceof Tensor ? mask : Tensor.from(mask);
  const b = broadcastShape(m._node.shape, this._node.shape);
  if (!sameShape(b, this._node.shape)) throw new RangeError(`maskedFill: a mask of shape [${m._node.shape}] does not broadcast to [${this._node.shape}]`);
  return m.where(value, this);
};

// --- indexing ----------------------------------------------------------------------------------

// A Python slice from 'a:b:c' (parts may be empty), { start, stop, step } or [start, stop, step].
function parseSlice(s) {
  if (typeof s === 'string') {
    const parts = s.split(':');
    if (parts.length < 2 || parts.length > 3) throw new TypeError(`not a slice: '${s}'`);
    const num = (p) => (p.trim() === '' ? null : Number(p));
    return { start: num(parts[0]), stop: num(parts[1]), step: parts.length === 3 ? num(parts[2]) : null };
  }
  if (Array.isArray(s)) return { start: s[0] ?? null, stop: s[1] ?? null, step: s[2] ?? null };
  return { start: s.start ?? null, stop: s.stop ?? null, step: s.step ?? null };
}

// Python's slice.indices(size).
function sliceIndices({ start, stop, step }, size) {
  step = step === null ? 1 : step;
  if (step === 0) throw new RangeError('slice step cannot be zero');
  const lower = step < 0 ? -1 : 0;
  const upper = step < 0 ? size - 1 : size;
  const clamp = (v, dflt) => {
    if (v === null) return dflt;
    if (v < 0) return Math.max(v + size, lower);
    return Math.min(v, upper);
  };
  return [clamp(start, step < 0 ? upper : lower), clamp(stop, step < 0 ? lower : upper), step];
}

const isSliceSpec = (i) => typeof i === 'string' && i !== '...' || (i !== null && typeof i === 'object'
  && !Array.isArray(i) && !(i instanceof Tensor) && !ArrayBuffer.isView(i) && !isSym(i));
const isAdvanced = (i) => i instanceof Tensor || Array.isArray(i) || ArrayBuffer.isView(i);

// numpy/torch indexing: a number selects (dropping the axis), 'a:b:c' or { start, stop, step }
// slices, null adds an axis, '...' is an ellipsis, a Tensor or array of integers indexes (advanced).
P.index = function index(...idx) {
  idx = this._expandEllipsis(idx);
  if (idx.some(isAdvanced)) return this._indexWithTensor(idx);
  let x = this;
  let axis = 0;
  const final = [];
  for (const i of idx) {
    if (i === null) final.push(1);
    else if (isSliceSpec(i)) {
      let n;
      [x, n] = x._sliceAxis(axis, parseSlice(i));
      final.push(n);
      axis += 1;
    } else {
      x = x._select(axis, i);
    }
  }
  return x.reshape(final);
};

// t[idx] = v, as Python's __setitem__: x.setitem(...idx, v) takes index()'s entries, then v (a
// tensor or a number, cast to this dtype and broadcast to what x.index(...idx) selects), and writes
// v where x.index(...idx) reads, lazily. This tensor keeps its identity: the write is an assign
// (compileStep and jit capture it as one), and setitem returns this. Numbers, slices, null and
// '...' write through the view (the daemon's WRITE_VIEW); index arrays and tensors write each
// selected element (where an index repeats, the last write in row-major order wins; one out of
// range writes nothing); a bool tensor of this shape, the only entry, writes where it is true.
P.setitem = function setitem(...args) {
  if (args.length < 2) throw new TypeError('setitem takes the index entries, then the value: x.setitem(0, \'1:3\', v)');
  const v = args[args.length - 1];
  const idx = args.slice(0, -1);
  if (idx.length === 1 && idx[0] instanceof Tensor && idx[0].dtype === dtypes.bool) return this._setMasked(idx[0], v);
  if (idx.some(isAdvanced)) return this._setPositions(idx, v);
  // A fresh chain of movement nodes from this node: the daemon follows the view back to it.
  const view = this.index(...idx);
  const written = Tensor._make(OPS.WRITE_VIEW, this.dtype, this._node.shape, [this, view, this._written(v, view._node.shape)],
    new Composite());
  return this.assign(written);
};

P._setMasked = function _setMasked(mask, v) {
  if (!sameShape(mask._node.shape, this._node.shape)) {
    throw new RangeError(`a bool mask index must have the tensor's shape [${this._node.shape}], got [${mask._node.shape}]`);
  }
  return this.assign(mask.where(this._written(v, this._node.shape), this));
};

// Each selected element's position in this tensor (+1, so that an index out of range, which
// selects 0, names no position), written by a scatter over the flattened elements.
P._setPositions = function _setPositions(idx, v) {
  const shape = this._node.shape;
  const pos = Tensor.arange(this.numel(), { dtype: dtypes.int32 }).add(1).reshape(shape).index(...idx).sub(1);
  const flat = this.reshape([-1]).scatter(0, pos.reshape([-1]), this._written(v, pos._node.shape).reshape([-1]));
  return this.assign(flat.reshape(shape));
};

// v as a tensor of this dtype broadcast to `shape`: what a setitem writes.
P._written = function _written(v, shape) {
  let t = v instanceof Tensor ? v : Tensor.from(v, { dtype: this.dtype });
  if (t.dtype !== this.dtype) t = t.cast(this.dtype);
  return t._broadcastTo(shape);
};

// Per-axis ranges, axes kept: t.slice([0, 2], null, [1, null, -1]) is t[0:2, :, 1::-1].
P.slice = function slice(...specs) {
  return this.index(...specs.map((s) => {
    if (s === null || s === undefined) return ':';
    return Array.isArray(s) ? { start: s[0] ?? null, stop: s[1] ?? null, step: s[2] ?? null } : s;
  }));
};

P._expandEllipsis = function _expandEllipsis(idx) {
  const nEll = idx.filter((i) => i === '...').length;
  if (nEll > 1) throw new RangeError('an index can only have a single ellipsis');
  const nReal = idx.filter((i) => i !== null && i !== '...').length;
  if (nReal > this.ndim) throw new RangeError(`too many indices for a tensor of ${this.ndim} dimensions`);
  if (nEll === 0) idx = [...idx, '...'];
  const pos = idx.indexOf('...');
  return [...idx.slice(0, pos), ...Array(this.ndim - nReal).fill(':'), ...idx.slice(pos + 1)];
};

// x[i] on axis; a Variable's SymInt i reads the row at a begin the daemon holds per run.
P._select = function _select(axis, i) {
  const size = this._node.shape[axis];
  if (!isSym(i) && (typeof i !== 'number' || !Number.isInteger(i))) throw new TypeError(`unsupported index ${String(i)}`);
  const v = current(i);
  if (v < -size || v >= size) throw new RangeError(`index ${v} is out of bounds for axis ${axis} with size ${size}`);
  if (v < 0) i = isSym(i) ? i.add(size) : i + size;
  const pairs = this._node.shape.map((s) => [0, s]);
  pairs[axis] = [i, isSym(i) ? i.add(1) : i + 1];
  const s = this._node.shape;
  return this.shrink(pairs).reshape([...s.slice(0, axis), ...s.slice(axis + 1)]);
};

P._sliceAxis = function _sliceAxis(axis, sl) {
  const size = this._node.shape[axis];
  if (isSym(sl.stop) && (sl.start === null || sl.start === 0 || isSym(sl.start)) && (sl.step === null || sl.step === 1)) {
    // x[:p + 1], x[p:p + 1]: shrink makes a symbolic dim, a begin held per run or takes the values.
    const pairs = this._node.shape.map((s) => [0, s]);
    pairs[axis] = [sl.start === null ? 0 : sl.start, sl.stop];
    const x = this.shrink(pairs);
    return [x, x._node.shape[axis]];
  }
  const num = (v) => (isSym(v) ? plain(v) : v);
  let [start, stop, step] = sliceIndices({ start: num(sl.start), stop: num(sl.stop), step: num(sl.step) }, size);
  let x = this;
  if (step < 0) {
    x = x.flip(axis);
    [start, stop, step] = [size - 1 - start, size - 1 - stop, -step];
  }
  const n = Math.max(0, Math.ceil((stop - start) / step));
  let pairs = x._node.shape.map((s) => [0, s]);
  if (n === 0) {
    pairs[axis] = [0, 0];
    return [x.shrink(pairs), 0];
  }
  if (step === 1) {
    pairs[axis] = [start, start + n];
    return [x.shrink(pairs), n];
  }
  const end = Math.min(size, start + n * step);
  pairs[axis] = [start, end];
  x = x.shrink(pairs);
  const pads = Array(x.ndim).fill([0, 0]);
  pads[axis] = [0, n * step - (end - start)];
  x = x.pad(pads);
  const s = x._node.shape;
  x = x.reshape([...s.slice(0, axis), n, step, ...s.slice(axis + 1)]);
  pairs = x._node.shape.map((v) => [0, v]);
  pairs[axis + 1] = [0, 1];
  x = x.shrink(pairs);
  const s2 = x._node.shape;
  return [x.reshape([...s2.slice(0, axis), n, ...s2.slice(axis + 2)]), n];
};

function indexTensor(i, size) {
  let index = i instanceof Tensor ? i : Tensor.from(i);
  if (index.dtype === dtypes.bool) {
    throw new RangeError('boolean mask indexing gives a data-dependent shape, which a lazy graph cannot have; use mask.where(x, 0)');
  }
  if (!(index.dtype.kind === 'i' || index.dtype.kind === 'u')) throw new TypeError(`tensor indices must be integers, got ${index.dtype.name}`);
  index = index.cast(dtypes.int32);
  return index.lt(0).where(index.add(size), index);
}

// Advanced indexing as torch does it: the daemon's GATHER of the rows of x with its indexed axes
// flattened, so it is differentiable and an inf or NaN elsewhere in x stays out of the result.
P._indexWithTensor = function _indexWithTensor(idx) {
  let x = this.dtype.kind === 'f' || this.dtype.kind === 'i' || this.dtype.kind === 'u' ? this : this.cast(dtypes.int32);
  let axis = 0;
  const adv = [];
  for (const i of idx) {
    if (i === null) x = x.unsqueeze(axis);
    else if (isSliceSpec(i)) [x] = x._sliceAxis(axis, parseSlice(i));
    else if (isAdvanced(i)) adv.push([axis, indexTensor(i, x._node.shape[axis])]);
    else { x = x._select(axis, i); continue; }
    axis += 1;
  }
  const axes = adv.map(([a]) => a);
  const sizes = axes.map((a) => x._node.shape[a]);
  const rest = [...Array(x.ndim).keys()].filter((d) => !axes.includes(d));
  const bShape = broadcastShape(...adv.map(([, t]) => t._node.shape));
  let flat = null;
  let valid = null;
  let stride = 1;
  for (let k = adv.length - 1; k >= 0; k--) {
    const t = adv[k][1];
    const n = sizes[k];
    const term = stride !== 1 ? t.mul(stride) : t;
    flat = flat === null ? term : flat.add(term);
    const ok = t.ge(0).bitwiseAnd(t.lt(n));
    valid = valid === null ? ok : valid.bitwiseAnd(ok);
    stride *= n;
  }
  const outRest = rest.map((d) => x._node.shape[d]);
  const adjacent = axes.every((a, k) => a === axes[0] + k);
  if (stride === 0) {
    const p = adjacent ? axes[0] : 0;
    return Tensor.zeros([...outRest.slice(0, p), ...bShape, ...outRest.slice(p)], { dtype: this.dtype });
  }
  flat = valid.where(flat, -1)._broadcastTo(bShape);
  const rows = x.permute([...axes, ...rest]).reshape([stride, -1]);
  const count = bShape.reduce((a, b) => a * b, 1);
  const picked = rows.gather(0, flat.reshape([count, 1]).expand([count, rows._node.shape[1]]));
  let out = picked.reshape([...bShape, ...outRest]);
  const nb = bShape.length;
  if (adjacent) {
    const p = axes[0];
    const range = (a, b) => [...Array(Math.max(0, b - a)).keys()].map((v) => v + a);
    out = out.permute([...range(nb, nb + p), ...range(0, nb), ...range(nb + p, out.ndim)]);
  }
  return out.cast(this.dtype);
};
