'use strict';
// State dicts and safetensors files (an 8-byte little-endian header length, the JSON header, then
// the raw little-endian data), the same layout the Python client reads and writes.
const fs = require('fs');
const { Tensor } = require('../tensor');
const { dtypes } = require('../dtype');
const { bytesOf, decode } = require('../data');
const { prod } = require('../shape');

const SAFE_DTYPES = {
  BOOL: dtypes.bool, I8: dtypes.int8, U8: dtypes.uint8, I16: dtypes.int16, U16: dtypes.uint16, I32: dtypes.int32,
  U32: dtypes.uint32, I64: dtypes.int64, U64: dtypes.uint64, F16: dtypes.float16, BF16: dtypes.bfloat16,
  F32: dtypes.float32, F64: dtypes.float64,
};
const SAFE_NAMES = new Map(Object.entries(SAFE_DTYPES).map(([k, v]) => [v, k]));

// Every Tensor reachable through obj's properties, arrays and Maps, named by path ("layers.0.weight").
function getStateDict(obj, prefix = '', seen = new Set()) {
  if (obj instanceof Tensor) return { [prefix.replace(/\.$/, '')]: obj };
  const out = {};
  if (obj === null || typeof obj !== 'object' || seen.has(obj) || ArrayBuffer.isView(obj)) return out;
  seen.add(obj);
  const entries = obj instanceof Map ? [...obj.entries()] : Array.isArray(obj) ? obj.map((v, i) => [i, v]) : Object.entries(obj);
  for (const [k, v] of entries) Object.assign(out, getStateDict(v, `${prefix}${k}.`, seen));
  return out;
}

// The tensors of getStateDict(obj), in order, each once.
function getParameters(obj) {
  return [...new Set(Object.values(getStateDict(obj)))];
}

// Points each of the model's tensors at the value of the same name (Tensors, TypedArrays or nested
// arrays; cast to the model tensor's dtype), then realizes them in one request. Returns the names the
// model lacks.
async function loadStateDict(model, stateDict, { strict = true, realize = true } = {}) {
  const modelSd = getStateDict(model);
  for (const [name, t] of Object.entries(modelSd)) {
    if (!(name in stateDict)) {
      if (strict) throw new RangeError(`loadStateDict: '${name}' is missing from the state dict`);
      continue;
    }
    let v = stateDict[name];
    if (!(v instanceof Tensor)) v = Tensor.from(v, ArrayBuffer.isView(v) ? { shape: t.shape } : {});
    if (v.ndim !== t.ndim || v.shape.some((s, i) => s !== t.shape[i])) {
      throw new RangeError(`loadStateDict: '${name}' has shape [${v.shape}], the model expects [${t.shape}]`);
    }
    t.assign(v.cast(t.dtype));
  }
  const all = Object.values(modelSd);
  if (realize && all.length) await Tensor.realize(...all);
  return Object.keys(stateDict).filter((k) => !(k in modelSd));
}

// Writes tensors (realized together first) to a safetensors file.
async function safeSave(tensors, path, { metadata } = {}) {
  const names = Object.keys(tensors);
  const live = names.map((n) => tensors[n]);
  await Tensor.realize(...live);
  const items = [];
  for (const name of names) {
    const t = tensors[name];
    const dt = SAFE_NAMES.get(t.dtype);
    const data = bytesOf(await t.data());
    items.push({ name, dt, shape: t.shape, data });
  }
  const header = {};
  if (metadata) header.__metadata__ = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [String(k), String(v)]));
  let off = 0;
  for (const it of items) {
    header[it.name] = { dtype: it.dt, shape: it.shape, data_offsets: [off, off + it.data.length] };
    off += it.data.length;
  }
  let hb = Buffer.from(JSON.stringify(header));
  if (hb.length % 8) hb = Buffer.concat([hb, Buffer.alloc(8 - (hb.length % 8), ' ')]); // data 8-byte aligned, as the reference writer
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(hb.length));
  fs.writeFileSync(path, Buffer.concat([len, hb, ...items.map((it) => it.data)]));
  return [path];
}

// Tensors from a safetensors file, as BUFFER nodes in the file's dtypes.
function safeLoad(path) {
  const buf = fs.readFileSync(path);
  if (buf.length < 8) throw new RangeError(`${path}: not a safetensors file (shorter than 8 bytes)`);
  const n = Number(buf.readBigUInt64LE(0));
  if (n > buf.length - 8) throw new RangeError(`${path}: header length ${n} exceeds the file`);
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  delete header.__metadata__;
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    const dt = SAFE_DTYPES[info.dtype];
    if (!dt) throw new TypeError(`${path}: tensor '${name}' has unsupported dtype ${info.dtype}`);
    const [b, e] = info.data_offsets;
    const shape = info.shape.map(Number);
    if (e - b !== prod(shape) * dt.itemsize || 8 + n + e > buf.length) {
      throw new RangeError(`${path}: tensor '${name}' data_offsets ${b}..${e} do not fit ${info.dtype}[${shape}]`);
    }
    out[name] = Tensor.from(decode(buf.subarray(8 + n + b, 8 + n + e), dt), { dtype: dt, shape });
  }
  return out;
}

module.exports = { getStateDict, getParameters, loadStateDict, safeSave, safeLoad };
