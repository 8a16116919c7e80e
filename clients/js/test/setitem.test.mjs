// x.setitem(...idx, v), Python's t[idx] = v: against a plain typed-array reference of numpy's
// (torch's) setitem on random data, gradients against hand-derived ones, and a jitted write.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor, dtypes, connect, close, jit } from '../index.mjs';
import { startDaemon } from './daemon.mjs';

let daemon;
before(async () => {
  daemon = await startDaemon();
  await connect({ address: daemon.address });
});
after(async () => {
  await close();
  await daemon.stop();
});

// mulberry32: repeatable random data without a dependency.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const prod = (s) => s.reduce((a, b) => a * b, 1);
const normal = (r, n) => Float32Array.from({ length: n }, () => (r() - 0.5) * 8);

// Python's slice(start, stop, step).indices(size) as the coordinates it selects.
function sliceCoords(spec, size) {
  const [a, b, c] = spec.split(':').map((p) => (p === '' ? null : Number(p)));
  const step = c ?? 1;
  const lo = step < 0 ? -1 : 0;
  const hi = step < 0 ? size - 1 : size;
  const clamp = (v, d) => (v === null ? d : v < 0 ? Math.max(v + size, lo) : Math.min(v, hi));
  const out = [];
  for (let i = clamp(a, step < 0 ? hi : lo); step > 0 ? i < clamp(b, hi) : i > clamp(b, lo); i += step) out.push(i);
  return out;
}

// An index array (nested) as { shape, values }.
function arrayIndex(a) {
  const shape = [];
  for (let x = a; Array.isArray(x); x = x[0]) shape.push(x.length);
  return { shape, values: a.flat(Infinity) };
}

// numpy's (torch's) selection of idx in a tensor of `shape`: the selection's shape and, in its
// row-major order, the flat position each element reads (-1: an index out of range). Ints drop
// their axis first; index arrays (all of one shape here) replace the indexed axes where those are
// adjacent, else come first.
function selection(shape, idx) {
  const real = idx.filter((i) => i !== null && i !== '...').length;
  const e = idx.indexOf('...') < 0 ? idx.length : idx.indexOf('...');
  const full = [...idx.slice(0, e).filter((i) => i !== '...'), ...Array(shape.length - real).fill(':'),
    ...idx.slice(e).filter((i) => i !== '...')];
  const strides = shape.map((_, d) => prod(shape.slice(d + 1)));
  let base = 0;
  const dims = []; // { size, pos(k) } per axis of the selection before the arrays are placed
  const adv = [];
  let axis = 0;
  for (const i of full) {
    if (i === null) { dims.push({ size: 1, pos: () => 0 }); continue; }
    const n = shape[axis];
    const stride = strides[axis];
    if (typeof i === 'number') base += (i < 0 ? i + n : i) * stride;
    else if (typeof i === 'string') {
      const c = sliceCoords(i, n);
      dims.push({ size: c.length, pos: (k) => c[k] * stride });
    } else {
      adv.push(dims.length);
      dims.push({ adv: true, n, stride, ...arrayIndex(i) });
    }
    axis += 1;
  }
  const advDims = adv.map((d) => dims[d]);
  const bShape = advDims.length ? advDims[0].shape : [];
  const adjacent = adv.every((d, k) => d === adv[0] + k);
  const rest = dims.filter((d) => !d.adv);
  const at = adv.length && adjacent ? adv[0] : 0;
  const order = adv.length ? [...rest.slice(0, at), 'B', ...rest.slice(at)] : rest;
  const outShape = order.flatMap((d) => (d === 'B' ? bShape : [d.size]));
  const positions = [];
  for (let f = 0; f < prod(outShape); f++) {
    let rem = f;
    const coord = outShape.map((_, k) => prod(outShape.slice(k + 1))).map((s) => { const c = Math.floor(rem / s); rem %= s; return c; });
    let p = base;
    let inRange = true;
    let k = 0;
    for (const d of order) {
      if (d !== 'B') { p += d.pos(coord[k++]); continue; }
      const b = coord.slice(k, k + bShape.length).reduce((acc, c, j) => acc * bShape[j] + c, 0);
      k += bShape.length;
      for (const a of advDims) {
        const v = a.values[b] < 0 ? a.values[b] + a.n : a.values[b];
        inRange = inRange && v >= 0 && v < a.n;
        p += v * a.stride;
      }
    }
    positions.push(inRange ? p : -1);
  }
  return { shape: outShape, positions };
}

// v (values of vShape, broadcast numpy's way) written at the selection's positions, in order.
function referenceSetitem(data, shape, idx, values, vShape) {
  const out = data.slice();
  const sel = selection(shape, idx);
  const lead = sel.shape.length - vShape.length;
  sel.positions.forEach((p, f) => {
    let rem = f;
    let vi = 0;
    sel.shape.forEach((n, k) => {
      const s = prod(sel.shape.slice(k + 1));
      const c = Math.floor(rem / s);
      rem %= s;
      if (k >= lead) vi = vi * vShape[k - lead] + (vShape[k - lead] === 1 ? 0 : c);
    });
    if (p >= 0) out[p] = values[vi];
  });
  return out;
}

const SHAPE = [4, 5, 6];
const INDEXES = {
  'int': [1],
  'negative int': [-1, 2],
  'slice': ['1:3'],
  'slice with step': [':', '0:5:2'],
  'negative step': ['::-2', ':', 3],
  'ellipsis': ['...', '2:5'],
  'null': [null, 2, '1:4'],
  'empty slice': ['3:3'],
  'whole': ['...'],
  'scalar element': [3, 4, 5],
  'list': [[0, 3, 2]],
  'list, slice, list': [[0, 2], '1:4', [5, 1]],
  'int and list': [1, [4, 0, 2]],
  'negative and out-of-range list': [':', [-1, 7, 2]],
  '2-D index': [':', [[0, 4], [3, 1]]],
  'index tensor': [':', ':', [5, 0, -2, 0]],
};
// Cases whose index arrays go to setitem as tensors.
const AS_TENSORS = new Set(['index tensor', '2-D index']);

for (const [name, idx] of Object.entries(INDEXES)) {
  for (const asNumber of [false, true]) {
    test(`setitem matches the reference: ${name}, ${asNumber ? 'a number' : 'a tensor'}`, async () => {
      const r = rng(name.length * 31 + (asNumber ? 7 : 0));
      const data = normal(r, prod(SHAPE));
      const selShape = selection(SHAPE, idx).shape;
      const values = asNumber ? Float32Array.of(2.5) : normal(r, prod(selShape));
      const vShape = asNumber ? [] : selShape;
      const x = Tensor.from(data, { shape: SHAPE });
      const v = asNumber ? 2.5 : Tensor.from(values, { shape: selShape });
      const entries = AS_TENSORS.has(name) ? idx.map((i) => (Array.isArray(i) ? Tensor.from(i) : i)) : idx;
      assert.equal(x.setitem(...entries, v), x, 'setitem returns the tensor itself');
      assert.deepEqual(x.shape, SHAPE);
      assert.deepEqual(await x.data(), referenceSetitem(data, SHAPE, idx, values, vShape));
    });
  }
}

test('setitem casts to the tensor dtype, broadcasts, and writes a realized tensor twice', async () => {
  const r = rng(5);
  const data = Int32Array.from({ length: prod(SHAPE) }, () => Math.floor(r() * 9));
  const row = Float32Array.from({ length: 6 }, () => r() * 10 - 5);
  const x = await Tensor.from(data, { shape: SHAPE }).realize();
  x.setitem(':', 1, Tensor.from(row)); // float into int32 truncates; broadcast over axis 0
  assert.equal(x.dtype, dtypes.int32);
  let want = referenceSetitem(data, SHAPE, [':', 1], Int32Array.from(row, Math.trunc), [6]);
  assert.deepEqual(await x.data(), want);
  x.setitem(2, ':', '::-3', [[7], [8], [9], [10], [11]]); // nested arrays broadcast as a tensor does
  want = referenceSetitem(want, SHAPE, [2, ':', '::-3'], Int32Array.of(7, 8, 9, 10, 11), [5, 1]);
  assert.deepEqual(await x.data(), want);
});

test('a bool mask of the tensor shape writes where it is true; another shape is refused', async () => {
  const data = normal(rng(11), prod(SHAPE));
  const x = Tensor.from(data, { shape: SHAPE });
  x.setitem(x.gt(0.5), -1);
  assert.deepEqual(await x.data(), data.map((v) => (v > 0.5 ? -1 : v)));
  const v = normal(rng(12), prod(SHAPE));
  x.setitem(x.lt(0), Tensor.from(v, { shape: SHAPE }));
  const masked = data.map((d) => (d > 0.5 ? -1 : d));
  assert.deepEqual(await x.data(), masked.map((d, i) => (d < 0 ? v[i] : d)));
  assert.throws(() => x.setitem(Tensor.from([true, false]), 0), /bool mask index must have the tensor's shape/);
  assert.throws(() => x.setitem(0), /setitem takes the index entries, then the value/);
  assert.throws(() => x.setitem(0, Tensor.ones(3, 2)), /cannot expand/);
});

test('where an index repeats, the last write wins', async () => {
  const values = normal(rng(13), 4);
  const x = Tensor.from(new Float32Array(5));
  x.setitem([1, 3, 1, -4], Tensor.from(values));
  assert.deepEqual(await x.data(), referenceSetitem(new Float32Array(5), [5], [[1, 3, 1, -4]], values, [4]));
});

// y = 1.5 x with y[1:3, ::2] = w * w, loss sum(y^2): d/dx is 2 y 1.5 where nothing was written
// and 0 where it was; d/dw is 2 (w^2) 2 w.
test('gradients through a setitem: zero where written, the selected upstream gradient for v', async () => {
  const r = rng(21);
  const x0 = normal(r, 20);
  const w0 = normal(r, 4);
  const x = Tensor.from(x0, { shape: [5, 4], requiresGrad: true });
  const w = Tensor.from(w0, { shape: [2, 2], requiresGrad: true });
  const y = x.mul(1.5);
  y.setitem('1:3', '::2', w.mul(w));
  y.mul(y).sum().backward();
  const written = new Map(selection([5, 4], ['1:3', '::2']).positions.map((p, k) => [p, k]));
  const wantX = Array.from(x0, (v, i) => (written.has(i) ? 0 : 2 * 1.5 * v * 1.5));
  const wantW = Array.from(w0, (v) => 4 * v ** 3);
  const near = (got, want) => got.every((g, i) => Math.abs(g - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i])));
  assert.ok(near(await x.grad.data(), wantX), 'd/dx');
  assert.ok(near(await w.grad.data(), wantW), 'd/dw');
  const yv = await y.data();
  assert.ok(near(yv, Array.from(x0, (v, i) => (written.has(i) ? w0[written.get(i)] ** 2 : 1.5 * v))), 'y');
});

test('a setitem inside jit is captured as an assign of the tensor', async () => {
  const acc = await Tensor.from(new Float32Array(6)).realize();
  const add = jit((v) => { acc.setitem('::2', acc.index('::2').add(v)); return acc.sum(); });
  const want = new Float32Array(6);
  for (let i = 0; i < 4; i++) {
    const v = Float32Array.of(i + 1, -i, 0.5);
    const total = await (await add(Tensor.from(v))).item();
    v.forEach((d, k) => { want[2 * k] += d; });
    assert.equal(total, want.reduce((a, b) => a + b, 0));
  }
  assert.notEqual(add.captured, null, 'the later calls replay a captured step');
  assert.deepEqual(await acc.data(), want);
});
