'use strict';
// Shape rules computed locally, so `t.shape` never asks the daemon and shape errors are raised
// before any round trip; they mirror clients/python/polygrad/shape.py.

function prod(xs) {
  let out = 1;
  for (const x of xs) out *= x;
  return out;
}

function isInt(x) {
  return typeof x === 'number' && Number.isInteger(x);
}

// Accept f(2, 3), f([2, 3]); every entry must be an integer.
function asShape(args) {
  const list = args.length === 1 && Array.isArray(args[0]) ? args[0] : args;
  return list.map((a) => {
    if (!isInt(a)) throw new TypeError(`shape entries must be integers, got ${String(a)}`);
    return a;
  });
}

function checkShape(shape) {
  for (const s of shape) if (s < 0) throw new RangeError(`negative dimension in shape [${shape}]`);
  return shape;
}

function sameShape(a, b) {
  return a.length === b.length && a.every((s, i) => s === b[i]);
}

// numpy broadcasting: align right, sizes must match or be 1.
function broadcastShape(...shapes) {
  const nd = Math.max(0, ...shapes.map((s) => s.length));
  const out = [];
  for (let i = 0; i < nd; i++) {
    const sizes = new Set();
    for (const s of shapes) {
      const v = i - (nd - s.length) >= 0 ? s[i - (nd - s.length)] : 1;
      if (v !== 1) sizes.add(v);
    }
    if (sizes.size > 1) {
      throw new RangeError(`shapes ${shapes.map((s) => `[${s}]`).join(' and ')} cannot be broadcast together ` +
        `(axis ${i - nd}: sizes ${[...sizes].sort((a, b) => a - b).join(', ')})`);
    }
    out.push(sizes.size ? [...sizes][0] : 1);
  }
  return out;
}

function normalizeAxis(axis, ndim) {
  if (!isInt(axis)) throw new TypeError(`axis must be an integer, got ${String(axis)}`);
  const n = Math.max(ndim, 1);
  if (axis < -n || axis > n - 1) throw new RangeError(`axis ${axis} is out of range for a tensor of ${ndim} dimensions`);
  return axis < 0 ? axis + ndim : axis;
}

// null/undefined → every axis; an integer or an array → sorted, unique, non-negative axes.
function normalizeAxes(axis, ndim) {
  if (axis === null || axis === undefined) return [...Array(ndim).keys()];
  const list = Array.isArray(axis) ? axis : [axis];
  const axes = list.map((a) => normalizeAxis(a, ndim));
  if (new Set(axes).size !== axes.length) throw new RangeError(`repeated axis in [${list}]`);
  if (ndim === 0) return [];
  return axes.sort((a, b) => a - b);
}

// One -1 resolved (and null = keep that axis), element count checked.
function resolveReshape(old, shape) {
  const nw = shape.map((s, i) => {
    if (s === null || s === undefined) {
      if (i >= old.length) throw new RangeError(`reshape: null at axis ${i} has no matching axis in [${old}]`);
      return old[i];
    }
    if (!isInt(s)) throw new TypeError(`reshape: sizes must be integers, got ${String(s)}`);
    return s;
  });
  if (nw.filter((s) => s === -1).length > 1) throw new RangeError(`reshape: at most one -1 allowed, got [${nw}]`);
  if (nw.some((s) => s < -1)) throw new RangeError(`reshape: invalid size in [${nw}]`);
  const total = prod(old);
  const at = nw.indexOf(-1);
  if (at >= 0) {
    const rest = prod(nw.filter((s) => s !== -1));
    if (rest === 0 || total % rest !== 0) throw new RangeError(`reshape: cannot reshape [${old}] (${total} elements) into [${nw}]`);
    nw[at] = total / rest;
  }
  if (prod(nw) !== total) throw new RangeError(`reshape: cannot reshape [${old}] (${total} elements) into [${nw}]`);
  return nw;
}

function checkPermutation(order, ndim) {
  const o = ndim ? order.map((a) => normalizeAxis(a, ndim)) : [...order];
  const sorted = [...o].sort((a, b) => a - b);
  if (sorted.length !== ndim || sorted.some((a, i) => a !== i)) {
    throw new RangeError(`permute: [${order}] is not a permutation of ${ndim} axes`);
  }
  return o;
}

// tinygrad/torch expand: -1 keeps a size, new leading axes may be added, size-1 axes grow.
function resolveExpand(old, shape) {
  if (shape.length < old.length) throw new RangeError(`expand: target [${shape}] has fewer axes than [${old}]`);
  const lead = shape.length - old.length;
  return shape.map((s, i) => {
    const o = i >= lead ? old[i - lead] : undefined;
    if (s === -1 || s === null || s === undefined) {
      if (o === undefined) throw new RangeError(`expand: -1 not allowed for a new leading axis in [${shape}]`);
      s = o;
    }
    if (!isInt(s) || s < 0) throw new RangeError(`expand: invalid size ${s} in [${shape}]`);
    if (o !== undefined && o !== s && o !== 1) throw new RangeError(`expand: cannot expand [${old}] to [${shape}] (axis ${i}: ${o} → ${s})`);
    return s;
  });
}

// One [a, b] pair (or null) per axis; null becomes dflt(size).
function normalizePairs(arg, shape, what, dflt) {
  if (arg.length !== shape.length) throw new RangeError(`${what}: need one pair per axis (${shape.length}), got ${arg.length}`);
  return arg.map((p, i) => {
    if (p === null || p === undefined) p = dflt(shape[i]);
    if (!Array.isArray(p) || p.length !== 2) throw new RangeError(`${what}: each entry must be a [begin, end] pair, got ${String(p)}`);
    return [Number(p[0]), Number(p[1])];
  });
}

module.exports = {
  prod, isInt, asShape, checkShape, sameShape, broadcastShape, normalizeAxis, normalizeAxes, resolveReshape,
  checkPermutation, resolveExpand, normalizePairs,
};
