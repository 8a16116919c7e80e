'use strict';
// State dicts and safetensors files (an 8-byte little-endian header length, the JSON header, then
// the raw little-endian data), the same layout the Python client reads and writes.
const fs = require('fs');
const { Tensor } = require('../tensor');
const { dtypes } = require('../dtype');
const { bytesOf, decode } = require('../data');

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

// The reference implementation's limit: a header this large is a damaged or hostile file.
const MAX_HEADER_BYTES = 100000000;

// A file-supplied name as it may appear in an error message: quoted and bounded.
function short(v) {
  let text;
  try {
    text = JSON.stringify(v) ?? String(v);
  } catch {
    text = String(v);
  }
  return text.length <= 80 ? text : `${text.slice(0, 77)}...`;
}

const isPlainObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;

// The header of a safetensors file, checked as the Python client's reader checks it: UTF-8 JSON
// object, known dtypes, non-negative dimensions, and offsets that tile the data exactly (no
// overlaps, gaps or bytes past the file). Returns [{ name, dt, shape, begin, end }] and where
// the data starts.
function readHeader(path, buf) {
  if (buf.length < 8) throw new RangeError(`${path}: not a safetensors file (shorter than 8 bytes)`);
  const n = buf.readBigUInt64LE(0);
  if (n > BigInt(buf.length - 8)) throw new RangeError(`${path}: header length ${n} exceeds the file`);
  if (n > BigInt(MAX_HEADER_BYTES)) {
    throw new RangeError(`${path}: header length ${n} is over the limit of ${MAX_HEADER_BYTES} bytes`);
  }
  const start = 8 + Number(n);
  let header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(8, start)));
  } catch (err) {
    throw new RangeError(`${path}: the header is not valid JSON: ${String(err.message).slice(0, 200)}`);
  }
  if (!isPlainObject(header)) throw new RangeError(`${path}: the header is not a JSON object`);
  const meta = header.__metadata__;
  if (meta !== undefined && !(isPlainObject(meta) && Object.values(meta).every((v) => typeof v === 'string'))) {
    throw new RangeError(`${path}: __metadata__ is not an object of strings`);
  }
  const entries = [];
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const what = `${path}: tensor ${short(name)}`;
    if (!isPlainObject(info) || !['dtype', 'shape', 'data_offsets'].every((k) => Object.hasOwn(info, k))) {
      throw new RangeError(`${what} is not an object with dtype, shape and data_offsets`);
    }
    if (typeof info.dtype !== 'string') throw new RangeError(`${what} has dtype ${short(info.dtype)}, not a string`);
    if (!Object.hasOwn(SAFE_DTYPES, info.dtype)) throw new TypeError(`${what} has unsupported dtype ${short(info.dtype)}`);
    const dt = SAFE_DTYPES[info.dtype];
    const { shape, data_offsets: offsets } = info;
    if (!Array.isArray(shape) || !shape.every(isCount)) {
      throw new RangeError(`${what} has shape ${short(shape)}, not a list of non-negative integers`);
    }
    if (!(Array.isArray(offsets) && offsets.length === 2 && offsets.every(isCount) && offsets[0] <= offsets[1])) {
      throw new RangeError(`${what} has data_offsets ${short(offsets)}, not [begin, end] with 0 <= begin <= end`);
    }
    const [begin, end] = offsets;
    // BigInt: a product of dimensions past 2^53 must not round to the offsets' difference.
    const bytes = shape.reduce((acc, d) => acc * BigInt(d), BigInt(dt.itemsize));
    if (BigInt(end - begin) !== bytes) {
      throw new RangeError(`${what} data_offsets ${begin}..${end} do not fit ${info.dtype}[${shape}]`);
    }
    entries.push({ name, dt, shape, begin, end });
  }
  let covered = 0;
  for (const t of [...entries].sort((x, y) => x.begin - y.begin || x.end - y.end)) {
    if (t.begin !== covered) {
      const why = t.begin < covered ? 'overlaps the tensor before it' : `leaves bytes ${covered}..${t.begin} unused`;
      throw new RangeError(`${path}: tensor ${short(t.name)} at ${t.begin}..${t.end} ${why}`);
    }
    covered = t.end;
  }
  if (covered !== buf.length - start) {
    throw new RangeError(`${path}: the tensors cover ${covered} bytes of data, the file holds ${buf.length - start}`);
  }
  return { entries, start };
}

// Tensors from a safetensors file, as BUFFER nodes in the file's dtypes. A damaged or hostile file
// throws RangeError naming the file and what is wrong (TypeError for a dtype polygrad does not
// have); nothing outside a tensor's own bytes is read.
function safeLoad(path) {
  const buf = fs.readFileSync(path);
  const { entries, start } = readHeader(path, buf);
  const out = {};
  for (const { name, dt, shape, begin, end } of entries) {
    out[name] = Tensor.from(decode(buf.subarray(start + begin, start + end), dt), { dtype: dt, shape });
  }
  return out;
}

module.exports = { getStateDict, getParameters, loadStateDict, safeSave, safeLoad };
