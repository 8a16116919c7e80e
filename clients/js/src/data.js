'use strict';
// Host data to wire bytes (little-endian, row-major) and back. float16 and bfloat16 travel, and come
// back from data(), as the raw bits in a Uint16Array; they are rounded here as numpy rounds them.
const { dtypes, dtypeOfArray } = require('./dtype');

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function roundHalfEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

// IEEE half bits of a double, rounded to nearest even from the double itself (numpy's astype).
function toHalfBits(x) {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  let a = Math.abs(x);
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | roundHalfEven(a / 2 ** -24); // subnormal (may round up to the smallest normal)
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  let mant = roundHalfEven((a / 2 ** e - 1) * 1024);
  if (mant === 1024) { mant = 0; e += 1; }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | mant;
}

function fromHalfBits(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

// bfloat16 bits: float32 first, then round to nearest even on the bits (the Python client's rule).
function toBf16Bits(x) {
  f32[0] = x;
  if (Number.isNaN(f32[0])) return 0x7fc0;
  const u = u32[0];
  return Number((BigInt(u) + 0x7fffn + BigInt((u >>> 16) & 1)) >> 16n) & 0xffff;
}

function fromBf16Bits(h) {
  u32[0] = (h << 16) >>> 0;
  return f32[0];
}

function toNumber(v) {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'bigint') return Number(v);
  return v;
}

// A TypedArray of `dt`'s wire layout holding `values` (an array-like of numbers, bigints or booleans).
function encode(values, dt) {
  const n = values.length;
  const out = new dt.ArrayType(n);
  if (dt === dtypes.float16 || dt === dtypes.bfloat16) {
    const conv = dt === dtypes.float16 ? toHalfBits : toBf16Bits;
    for (let i = 0; i < n; i++) out[i] = conv(toNumber(values[i]));
  } else if (dt === dtypes.bool) {
    for (let i = 0; i < n; i++) out[i] = values[i] ? 1 : 0;
  } else if (dt.itemsize === 8 && dt.kind !== 'f') {
    const wrap = dt.kind === 'i' ? (b) => BigInt.asIntN(64, b) : (b) => BigInt.asUintN(64, b);
    for (let i = 0; i < n; i++) {
      const v = values[i];
      out[i] = wrap(typeof v === 'bigint' ? v : BigInt(Math.trunc(toNumber(v))));
    }
  } else if (dt.kind === 'f') {
    for (let i = 0; i < n; i++) out[i] = toNumber(values[i]);
  } else {
    // Float to integer truncates toward zero (C, numpy's astype); the typed array wraps.
    for (let i = 0; i < n; i++) {
      const v = toNumber(values[i]);
      out[i] = Number.isFinite(v) ? Math.trunc(v) : 0;
    }
  }
  return out;
}

// Wire bytes of a TypedArray given for dtype `dt`: its own bytes when it already is that layout
// (a Uint16Array for float16/bfloat16 holds bits), else converted element by element.
function encodeArray(arr, dt) {
  if (arr.constructor === dt.ArrayType && (dt !== dtypes.bool || arr.every((v) => v <= 1))) return arr.slice();
  if ((dt === dtypes.float16 || dt === dtypes.bfloat16) && arr instanceof Uint16Array) return arr.slice();
  return encode(arr, dt);
}

function bytesOf(typed) {
  return Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
}

// A TypedArray of dtype `dt` over a copy of wire bytes.
function decode(buf, dt) {
  const copy = new Uint8Array(buf.length);
  copy.set(buf);
  return new dt.ArrayType(copy.buffer, 0, buf.length / dt.itemsize);
}

// Nested arrays: the flat values and the shape; ragged lists are an error.
function flatten(data) {
  const shape = [];
  let probe = data;
  while (Array.isArray(probe)) {
    shape.push(probe.length);
    probe = probe[0];
  }
  const flat = [];
  const walk = (x, depth) => {
    if (depth === shape.length) {
      if (Array.isArray(x)) throw new RangeError('cannot make a Tensor from a ragged list');
      flat.push(x);
      return;
    }
    if (!Array.isArray(x) || x.length !== shape[depth]) throw new RangeError('cannot make a Tensor from a ragged list');
    for (const y of x) walk(y, depth + 1);
  };
  walk(data, 0);
  return { flat, shape };
}

// The Python client's default dtype for a list: bool, else int32 when every value is an integer,
// else float32. A JavaScript number has no int/float distinction, so 1.0 counts as an integer.
function inferDType(flat) {
  if (flat.length === 0) return dtypes.float32;
  if (flat.every((v) => typeof v === 'boolean')) return dtypes.bool;
  if (flat.every((v) => typeof v === 'bigint')) return dtypes.int64;
  for (const v of flat) {
    if (typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint') {
      throw new TypeError(`cannot make a Tensor from a list of ${typeof v} (nested arrays of numbers only)`);
    }
  }
  return flat.every((v) => typeof v !== 'number' || Number.isInteger(v)) ? dtypes.int32 : dtypes.float32;
}

// A value of `dt` as JavaScript sees it: numbers (16-bit floats decoded), bigints, booleans.
function elementReader(typed, dt) {
  if (dt === dtypes.float16) return (i) => fromHalfBits(typed[i]);
  if (dt === dtypes.bfloat16) return (i) => fromBf16Bits(typed[i]);
  if (dt === dtypes.bool) return (i) => typed[i] !== 0;
  return (i) => typed[i];
}

function nest(typed, dt, shape) {
  const read = elementReader(typed, dt);
  if (shape.length === 0) return read(0);
  let pos = 0;
  const build = (d) => {
    const out = new Array(shape[d]);
    for (let i = 0; i < shape[d]; i++) out[i] = d === shape.length - 1 ? read(pos++) : build(d + 1);
    return out;
  };
  return build(0);
}

module.exports = {
  toHalfBits, fromHalfBits, toBf16Bits, fromBf16Bits, encode, encodeArray, bytesOf, decode, flatten, inferDType,
  elementReader, nest, dtypeOfArray,
};
