'use strict';
// Shape rules computed locally, so `t.shape` never asks the daemon and shape errors are raised
// before any round trip; they mirror clients/python/polygrad/shape.py.
const { isSym } = require('./variable');

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

// A pair's entry as a number; a Variable's SymInt stays one (shrink decides what it makes).
const bound = (x) => (isSym(x) ? x : Number(x));

// One [a, b] pair (or null) per axis; null becomes dflt(size).
function normalizePairs(arg, shape, what, dflt) {
  if (arg.length !== shape.length) throw new RangeError(`${what}: need one pair per axis (${shape.length}), got ${arg.length}`);
  return arg.map((p, i) => {
    if (p === null || p === undefined) p = dflt(shape[i]);
    if (!Array.isArray(p) || p.length !== 2) throw new RangeError(`${what}: each entry must be a [begin, end] pair, got ${String(p)}`);
    return [bound(p[0]), bound(p[1])];
  });
}

// numpy's einsum result shape (SHAPE_EINSUM, core/frontend/einsum.h): explicit or implicit output,
// "...", diagonals of labels repeated within an operand, size-1 broadcasting of shared labels.
const MAX_EQUATION = 512; // core's kMaxEinsumEquation

function einsumSpec(s, what) {
  if (s.split('...').length > 2) throw new RangeError(`einsum: ${what} has more than one '...'`);
  const letters = s.replace('...', '');
  for (const c of letters) {
    if (!/^[A-Za-z]$/.test(c)) throw new RangeError(`einsum: ${what}: '${c}' is not a letter or '...'`);
  }
  const at = s.indexOf('...');
  return { letters: [...letters], at };
}

// Labels with "..." standing for `covered` axes, right-aligned among `ell` ('.0', '.1', ...).
function einsumLabels({ letters, at }, covered, ell) {
  if (at < 0) return letters;
  const standIns = [];
  for (let j = ell - covered; j < ell; j++) standIns.push(`.${j}`);
  return [...letters.slice(0, at), ...standIns, ...letters.slice(at)];
}

function einsumShape(formula, shapes) {
  if (formula.length > MAX_EQUATION) throw new RangeError(`einsum: the equation has ${formula.length} characters, more than ${MAX_EQUATION}`);
  const eq = formula.replace(/ /g, '');
  const arrow = eq.indexOf('->');
  const lhs = arrow < 0 ? eq : eq.slice(0, arrow);
  const rhs = arrow < 0 ? '' : eq.slice(arrow + 2);
  if (rhs.includes('->')) throw new RangeError("einsum: the equation has more than one '->'");
  const specs = lhs.split(',');
  if (specs.length !== shapes.length) throw new RangeError(`einsum: the equation has ${specs.length} operands, ${shapes.length} tensors given`);
  const parsed = specs.map((spec, i) => {
    const p = einsumSpec(spec, `operand ${i}`);
    const covered = shapes[i].length - p.letters.length;
    if (covered < 0 || (p.at < 0 && covered !== 0)) throw new RangeError(`einsum: operand ${i} names ${p.letters.length} axes but has ${shapes[i].length}`);
    return { ...p, covered };
  });
  const ell = Math.max(...parsed.map((p) => p.covered));
  const sizes = new Map();
  const uses = new Map();
  parsed.forEach((p, i) => {
    const mine = new Map();
    einsumLabels(p, p.covered, ell).forEach((label, k) => {
      const n = shapes[i][k];
      uses.set(label, (uses.get(label) || 0) + 1);
      if (mine.has(label) && mine.get(label) !== n) {
        throw new RangeError(`einsum: label '${label}' repeats in operand ${i} over axes of sizes ${mine.get(label)} and ${n}`);
      }
      mine.set(label, n);
    });
    for (const [label, n] of mine) {
      if (!sizes.has(label) || sizes.get(label) === 1) sizes.set(label, n);
      else if (n !== 1 && n !== sizes.get(label)) throw new RangeError(`einsum: label '${label}' has sizes ${sizes.get(label)} and ${n}`);
    }
  });
  let out;
  if (arrow >= 0) {
    out = einsumLabels(einsumSpec(rhs, 'the output'), ell, ell);
    out.forEach((label, i) => {
      if (!sizes.has(label)) throw new RangeError(`einsum: output label '${label}' is not in any input`);
      if (out.indexOf(label, i + 1) >= 0) throw new RangeError(`einsum: output label '${label}' repeats`);
    });
  } else {
    out = [];
    for (let j = 0; j < ell; j++) out.push(`.${j}`);
    out.push(...[...uses].filter(([label, n]) => n === 1 && !label.startsWith('.')).map(([label]) => label).sort());
  }
  return out.map((label) => sizes.get(label));
}

// One factor of a factorization of the last two axes (SHAPE_FACTOR): k = min(m, n); QR's q (m, k)
// and r (k, n), SVD's u (m, k), s (k) and vh (k, n).
function factorShape(shape, factor) {
  const lead = shape.slice(0, -2);
  const [m, n] = shape.slice(-2);
  const k = Math.min(m, n);
  return [...lead, ...{ q: [m, k], r: [k, n], u: [m, k], s: [k], vh: [k, n] }[factor]];
}

module.exports = {
  einsumShape, factorShape,
  prod, isInt, asShape, checkShape, sameShape, broadcastShape, normalizeAxis, normalizeAxes, resolveReshape,
  checkPermutation, resolveExpand, normalizePairs,
};
