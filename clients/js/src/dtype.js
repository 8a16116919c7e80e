'use strict';
// Element types and tinygrad's promotion rules, as clients/python/polygrad/dtype.py has them (the
// conformance corpus checks that both clients derive the daemon's dtypes). Each dtype's facts (wire
// number, itemsize, kind, priority, promotion edges) are polygrad.v1.DType's schema options, from
// the op schema's generated table; the TypedArray constructors are this client's own.
const { DTYPE_TABLE } = require('./ops.gen');

class DType {
  constructor(priority, itemsize, name, kind, wire, ArrayType) {
    this.priority = priority;
    this.itemsize = itemsize;
    this.name = name;
    this.kind = kind; // 'b' bool, 'i' signed int, 'u' unsigned int, 'f' float
    this.wire = wire; // polygrad.v1.DType
    this.ArrayType = ArrayType; // what data() returns; 16-bit floats come back as their bits
    Object.freeze(this);
  }
  toString() { return this.name; }
  toJSON() { return this.name; }
}

// What data() returns per dtype; 16-bit floats come back as their bits.
const ARRAY_TYPES = {
  bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array,
  uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, float16: Uint16Array, bfloat16: Uint16Array,
  float32: Float32Array, float64: Float64Array,
};
const BY_NAME = new Map(DTYPE_TABLE.map((d) => {
  const name = d.name.toLowerCase();
  return [name, new DType(d.priority, d.itemsize, name, d.kind, d.number, ARRAY_TYPES[name])];
}));
const [bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, float32, float64] = [
  'bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float16', 'bfloat16', 'float32',
  'float64'].map((n) => BY_NAME.get(n));

// In tinygrad's priority order.
const ALL = [...BY_NAME.values()].sort((a, b) => a.priority - b.priority);

const dtypes = {
  bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
  // tinygrad's aliases
  char: int8, uchar: uint8, short: int16, ushort: uint16, int: int32, uint: uint32, long: int64,
  ulong: uint64, half: float16, float: float32, double: float64,
  defaultFloat: float32,
  defaultInt: int32,
  all: ALL,
  isFloat: (dt) => dt.kind === 'f',
  isInt: (dt) => dt.kind === 'i' || dt.kind === 'u',
  isUnsigned: (dt) => dt.kind === 'u',
  isBool: (dt) => dt.kind === 'b',
  fromWire(value) {
    const dt = ALL.find((d) => d.wire === value);
    if (!dt) throw new RangeError(`unknown wire dtype ${value}`);
    return dt;
  },
  min(dt) {
    if (dt.kind === 'b') return false;
    if (dt.kind === 'f') return -Infinity;
    if (dt.kind === 'u') return 0;
    const v = -(2n ** BigInt(8 * dt.itemsize - 1));
    return dt.itemsize === 8 ? v : Number(v);
  },
  max(dt) {
    if (dt.kind === 'b') return true;
    if (dt.kind === 'f') return Infinity;
    const bits = BigInt(8 * dt.itemsize - (dt.kind === 'i' ? 1 : 0));
    const v = 2n ** bits - 1n;
    return dt.itemsize === 8 ? v : Number(v);
  },
};
Object.freeze(dtypes);

// The dtype of a name ('float32'), a DType, or a TypedArray constructor.
function toDType(x) {
  if (x instanceof DType) return x;
  if (typeof x === 'string') {
    const dt = dtypes[x];
    if (dt instanceof DType) return dt;
    throw new TypeError(`unknown dtype '${x}'`);
  }
  throw new TypeError(`not a dtype: ${String(x)}`);
}

// The dtype a TypedArray's elements have (Uint16Array is uint16: pass { dtype: 'float16' } for bits).
function dtypeOfArray(a) {
  if (a instanceof Float32Array) return float32;
  if (a instanceof Float64Array) return float64;
  if (a instanceof Int32Array) return int32;
  if (a instanceof Uint32Array) return uint32;
  if (a instanceof Int16Array) return int16;
  if (a instanceof Uint16Array) return uint16;
  if (a instanceof Int8Array) return int8;
  if (a instanceof Uint8Array || a instanceof Uint8ClampedArray) return uint8;
  if (a instanceof BigInt64Array) return int64;
  if (a instanceof BigUint64Array) return uint64;
  throw new TypeError(`unsupported array type ${a && a.constructor && a.constructor.name}`);
}

// tinygrad's promotion lattice: each dtype and the types it promotes to directly.
const LATTICE = new Map(DTYPE_TABLE.map((d) => [BY_NAME.get(d.name.toLowerCase()),
  d.promotesTo.map((p) => BY_NAME.get(p.toLowerCase()))]));
const parentsMemo = new Map();
function parents(dt) {
  let out = parentsMemo.get(dt);
  if (out) return out;
  out = new Set([dt]);
  for (const p of LATTICE.get(dt) || []) for (const q of parents(p)) out.add(q);
  parentsMemo.set(dt, out);
  return out;
}

function leastUpperDType(...ds) {
  let common = null;
  for (const d of ds) {
    const p = parents(d);
    common = common === null ? new Set(p) : new Set([...common].filter((x) => p.has(x)));
  }
  return [...common].reduce((a, b) => (b.priority < a.priority ? b : a));
}

function leastUpperFloat(dt) {
  return dt.kind === 'f' ? dt : leastUpperDType(dt, float32);
}

// The dtype a sum accumulates in (tinygrad): ints widen to at least int32, floats to float32.
function sumAccDType(dt) {
  if (dt.kind === 'u') return leastUpperDType(dt, uint32);
  if (dt.kind === 'i' || dt.kind === 'b') return leastUpperDType(dt, int32);
  return leastUpperDType(dt, float32);
}

module.exports = { DType, dtypes, toDType, dtypeOfArray, leastUpperDType, leastUpperFloat, sumAccDType };
