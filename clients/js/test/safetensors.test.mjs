// nn.safeLoad on damaged and hostile files: the cases of the Python client's
// tests/e2e/test_safetensors.py (most found by fuzz/fuzz_safetensors.py), each of which must throw
// an error naming the file. Before the reader checked them, some threw a SyntaxError or TypeError
// that named nothing, and offsets before the data read header bytes as a tensor. No daemon: the
// reader fails before any tensor exists.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nn } from '../index.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polygrad-safetensors-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

function withHeader(header, data = Buffer.alloc(0)) {
  const hb = Buffer.isBuffer(header) ? header : Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(hb.length));
  return Buffer.concat([len, hb, data]);
}

function oneF32(change = {}) {
  return withHeader({ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8], ...change } },
    Buffer.from(new Float32Array([1, 2]).buffer));
}

const huge = Buffer.alloc(8);
huge.writeBigUInt64LE(1n << 40n);

const DAMAGED = {
  short: Buffer.from([1, 2]),
  header_too_long: Buffer.concat([huge, Buffer.from('{}')]),
  offsets_do_not_fit: oneF32({ data_offsets: [0, 12] }),
  not_utf8: withHeader(Buffer.from([0x7b, 0x22, 0x78, 0xff, 0x22, 0x3a, 0x31, 0x7d])),
  not_json: withHeader(Buffer.from('{"x" 1}')),
  not_an_object: withHeader([1, 2]),
  entry_not_an_object: withHeader({ x: 3 }),
  no_dtype: withHeader({ x: { shape: [1], data_offsets: [0, 4] } }, Buffer.alloc(4)),
  dtype_not_a_string: oneF32({ dtype: ['F32'] }),
  shape_negative: oneF32({ shape: [-2, -1] }),
  shape_bool: oneF32({ shape: [true, 2] }),
  shape_not_a_list: oneF32({ shape: 'ab' }),
  huge_empty_dimension: withHeader({ x: { dtype: 'U8', shape: [0, 2 ** 64], data_offsets: [0, 0] } }),
  offsets_before_the_data: withHeader({ x: { dtype: 'U8', shape: [4], data_offsets: [-4, 0] } }),
  offsets_float: oneF32({ data_offsets: [0.5, 8.5] }),
  offsets_three: oneF32({ data_offsets: [0, 8, 8] }),
  overlap: withHeader({ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
    y: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, Buffer.alloc(8)),
  gap: withHeader({ x: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, Buffer.alloc(8)),
  trailing_bytes: withHeader({ x: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, Buffer.alloc(8)),
  metadata_not_strings: withHeader({ __metadata__: { epoch: 3 } }),
};

for (const [damage, bytes] of Object.entries(DAMAGED)) {
  test(`a damaged file (${damage}) throws naming it`, () => {
    const file = path.join(dir, `bad-${damage}.safetensors`);
    fs.writeFileSync(file, bytes);
    assert.throws(() => nn.safeLoad(file), (err) => err instanceof RangeError && err.message.includes(file));
  });
}

// 'toString' and '__proto__' are properties of every object: the dtype table must not find them.
for (const dtype of ['F8_E4M3', 'toString', '__proto__']) {
  test(`an unknown dtype (${dtype}) is a TypeError naming the tensor`, () => {
    const file = path.join(dir, 'f8.safetensors');
    fs.writeFileSync(file, oneF32({ dtype }));
    assert.throws(() => nn.safeLoad(file), { name: 'TypeError', message: `${file}: tensor "x" has unsupported dtype "${dtype}"` });
  });
}

test('a long tensor name is cut in the message', () => {
  const file = path.join(dir, 'long.safetensors');
  fs.writeFileSync(file, withHeader({ ['n'.repeat(100000)]: 3 }));
  assert.throws(() => nn.safeLoad(file), (err) => err instanceof RangeError && err.message.length < 400);
});

test('a file written from the spec loads: every tensor exactly its bytes', () => {
  const file = path.join(dir, 'good.safetensors');
  const a = Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6]).buffer);
  const b = Buffer.from(new Int32Array([7, -8]).buffer);
  fs.writeFileSync(file, withHeader({ __metadata__: { format: 'np' },
    b: { dtype: 'I32', shape: [2], data_offsets: [24, 32] },
    a: { dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] },
    e: { dtype: 'U8', shape: [0, 5], data_offsets: [32, 32] } }, Buffer.concat([a, b])));
  const sd = nn.safeLoad(file);
  assert.deepEqual(Object.keys(sd).sort(), ['a', 'b', 'e']);
  assert.deepEqual(sd.a.shape, [2, 3]);
  assert.equal(sd.b.dtype.name, 'int32');
  assert.deepEqual(sd.e.shape, [0, 5]);
});
