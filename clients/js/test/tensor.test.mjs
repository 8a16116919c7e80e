// Tensors against a daemon of this file's own: creation, reading, dtypes, broadcasting, reductions,
// movement, indexing, autograd and disposal.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor, dtypes, connect, close, graphStats, nn } from '../index.mjs';
import { startDaemon } from './daemon.mjs';
import { createRequire } from 'node:module';

let daemon;
before(async () => {
  daemon = await startDaemon();
  await connect({ address: daemon.address });
});
after(async () => {
  await close();
  await daemon.stop();
});

const close6 = (a, b) => assert.ok(Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b)), `${a} != ${b}`);

test('creation from numbers, nested arrays and TypedArrays, read back as the dtype\'s TypedArray', async () => {
  const a = Tensor.from([[1, 2, 3], [4, 5, 6]]);
  assert.equal(a.dtype, dtypes.int32);
  assert.deepEqual(a.shape, [2, 3]);
  assert.equal(a.ndim, 2);
  assert.equal(a.numel(), 6);
  assert.deepEqual(await a.data(), new Int32Array([1, 2, 3, 4, 5, 6]));
  assert.deepEqual(await a.array(), [[1, 2, 3], [4, 5, 6]]);
  const f = Tensor.from(new Float32Array([0.5, 1.5, 2.5, 3.5]), { shape: [2, 2] });
  assert.equal(f.dtype, dtypes.float32);
  assert.deepEqual(await f.data(), new Float32Array([0.5, 1.5, 2.5, 3.5]));
  assert.equal(await Tensor.from(2.5).item(), 2.5);
  assert.equal(Tensor.from(7).dtype, dtypes.int32);
  assert.equal(Tensor.from(true).dtype, dtypes.bool);
  assert.deepEqual(await Tensor.from([true, false]).data(), new Uint8Array([1, 0]));
  assert.deepEqual(await Tensor.from([1, -2], { dtype: 'int64' }).data(), new BigInt64Array([1n, -2n]));
  assert.equal(await Tensor.from([5n], { dtype: 'int64' }).sum().item(), 5n);
  // float16 comes back as its bits; array() decodes them
  const h = Tensor.from([1.5, -2, 65504], { dtype: dtypes.float16 });
  assert.deepEqual(await h.data(), new Uint16Array([0x3e00, 0xc000, 0x7bff]));
  assert.deepEqual(await h.array(), [1.5, -2, 65504]);
  assert.deepEqual(await Tensor.from([1, 3], { dtype: 'bfloat16' }).mul(1.5).array(), [1.5, 4.5]);
  assert.throws(() => Tensor.from([[1, 2], [3]]), /ragged/);
});

test('creation functions: zeros, ones, full, arange, linspace, eye, empty', async () => {
  assert.deepEqual(await Tensor.zeros(2, 2).data(), new Float32Array(4));
  assert.deepEqual(await Tensor.ones([3], { dtype: 'int32' }).data(), new Int32Array([1, 1, 1]));
  assert.deepEqual(await Tensor.full([2], 7).data(), new Int32Array([7, 7]));
  assert.deepEqual(await Tensor.arange(5).data(), new Int32Array([0, 1, 2, 3, 4]));
  assert.deepEqual(await Tensor.arange(1, 2, 0.25).data(), new Float32Array([1, 1.25, 1.5, 1.75]));
  assert.deepEqual(await Tensor.linspace(0, 1, 5).data(), new Float32Array([0, 0.25, 0.5, 0.75, 1]));
  assert.deepEqual(await Tensor.eye(2).array(), [[1, 0], [0, 1]]);
  assert.deepEqual(Tensor.empty(3, 4).shape, [3, 4]);
  // integer bounds past int32 default to int64; values past the dtype are refused, not wrapped
  assert.equal(Tensor.arange(2147483600, 2147483700, 25).dtype, dtypes.int64);
  assert.throws(() => Tensor.arange(0, 300, { dtype: 'int8' }), /does not fit int8/);
  assert.deepEqual(await Tensor.linspace(2.5, 9, 1).data(), new Float32Array([2.5]));
  assert.deepEqual(Tensor.eye(0, 3).shape, [0, 3]);
});

test('seeded random numbers repeat and stay in range', async () => {
  Tensor.manualSeed(42);
  const a = await Tensor.rand(100).data();
  const n = await Tensor.randn(1000).data();
  const r = await Tensor.randint(50, { low: 3, high: 6 }).data();
  Tensor.manualSeed(42);
  assert.deepEqual(await Tensor.rand(100).data(), a);
  assert.ok(a.every((v) => v >= 0 && v < 1));
  const mean = n.reduce((x, y) => x + y, 0) / n.length;
  assert.ok(Math.abs(mean) < 0.2, `randn mean ${mean}`);
  assert.ok(r.every((v) => v >= 3 && v < 6));
});

test('kaimingNormal draws N(0, gain^2 / fan_in) repeatably; train and test set Tensor.training around fn', async () => {
  Tensor.manualSeed(7);
  const a = await Tensor.kaimingNormal(400, 50, { a: 1 }).data();
  Tensor.manualSeed(7);
  assert.deepEqual(await Tensor.kaimingNormal(400, 50, { a: 1 }).data(), a);
  const mean = a.reduce((s, x) => s + x, 0) / a.length;
  const sd = Math.sqrt(a.reduce((s, x) => s + (x - mean) ** 2, 0) / (a.length - 1));
  assert.ok(Math.abs(sd * Math.sqrt(50) - 1) < 0.05, `sd ${sd}`);
  assert.ok(Math.abs(mean) < 0.01, `mean ${mean}`);

  assert.equal(Tensor.training, false);
  assert.equal(Tensor.train(() => Tensor.training), true);
  assert.equal(Tensor.training, false);
  Tensor.training = true;
  assert.equal(Tensor.test(() => Tensor.training), false);
  assert.throws(() => Tensor.test(() => { throw new Error('inside'); }), /inside/);
  assert.equal(Tensor.training, true, 'restored after an error');
  Tensor.training = false;
  let release;
  const pending = Tensor.train(() => new Promise((resolve) => { release = resolve; }));
  assert.equal(Tensor.training, true, 'kept while the promise is pending');
  release();
  await pending;
  assert.equal(Tensor.training, false);
});

test('einsum is one EINSUM node with its shape known locally; bad equations are refused here', async () => {
  const a = Tensor.from([[1, 2, 3], [4, 5, 6]]);
  const b = Tensor.from([[1, 0], [0, 1], [1, 1]], { dtype: 'float32' });
  const y = Tensor.einsum('ij,jk->ik', a, b);
  assert.deepEqual(y.shape, [2, 2]);
  assert.equal(y.dtype, dtypes.float32);
  assert.deepEqual(await y.array(), [[4, 5], [10, 11]]);
  assert.deepEqual(Tensor.einsum('ii', Tensor.eye(3)).shape, []);
  assert.deepEqual(Tensor.einsum('...j,kj', Tensor.zeros(5, 2, 3), Tensor.zeros(4, 3)).shape, [5, 2, 4]);
  assert.equal(await Tensor.einsum('ii', Tensor.eye(3)).item(), 3);
  assert.throws(() => Tensor.einsum('ij,jk->ik', a, a), /label 'j' has sizes 3 and 2/);
  assert.throws(() => Tensor.einsum('ij->k', a), /output label 'k' is not in any input/);
  assert.throws(() => Tensor.einsum('ijk', a), /operand 0 names 3 axes but has 2/);
  assert.throws(() => Tensor.einsum('i'.repeat(600), a), /more than 512/);
});

test('qr and svd are the daemon\'s QR and SVD: factors shaped locally that reconstruct the matrix', async () => {
  const a = Tensor.from([[2, -1, 0], [1, 3, 1], [0, 1, 4], [1, 0, 1]], { dtype: 'float32' });
  const [q, r] = a.qr();
  assert.deepEqual([q.shape, r.shape], [[4, 3], [3, 3]]);
  const back = await q.matmul(r).array();
  (await a.array()).forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(back[i][j] - v) < 1e-4)));
  const [u, s, vh] = a.svd({ fullMatrices: false });
  assert.deepEqual([u.shape, s.shape, vh.shape], [[4, 3], [3], [3, 3]]);
  const sv = await s.data();
  assert.ok(sv[0] >= sv[1] && sv[1] >= sv[2] && sv[2] > 0);
  const recon = await u.mul(s.unsqueeze(0)).matmul(vh).array();
  (await a.array()).forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(recon[i][j] - v) < 1e-3)));
  assert.throws(() => a.svd(), /non-square 4x3 matrix/);
  assert.throws(() => Tensor.zeros(3).qr(), /qr needs a matrix/);
});

test('rearrange names movement ops as einops does; errors name the pattern\'s problem', async () => {
  const a = Tensor.arange(24).reshape(2, 6, 2);
  const y = a.rearrange('b (h w) c -> b h w c', { h: 2 });
  assert.deepEqual(y.shape, [2, 2, 3, 2]);
  assert.deepEqual(await y.data(), await a.data());
  const t = a.rearrange('b x c -> c b x');
  assert.deepEqual(t.shape, [2, 2, 6]);
  assert.deepEqual(await t.array(), await a.permute(2, 0, 1).array());
  assert.deepEqual(a.rearrange('b x c -> (b x) () c').shape, [12, 1, 2]);
  assert.throws(() => a.rearrange('b (h w) c -> b h w c'), /cannot infer both h,w from size 6/);
  assert.throws(() => a.rearrange('b (h w) c -> b h w c', { h: 4 }), /size 6 does not split by 4/);
  assert.throws(() => a.rearrange('b x c -> b x'), /same axes once each/);
  assert.throws(() => a.rearrange('b x c'), /has no '->'/);
});

test('fromUrl reads the bytes of an http URL (gunzipped when asked) as uint8', async () => {
  const http = await import('node:http');
  const zlib = await import('node:zlib');
  const payload = Buffer.from(Array.from({ length: 768 }, (_, i) => i % 256));
  const server = http.createServer((req, res) => {
    const body = req.url.endsWith('.gz') ? zlib.gzipSync(payload) : req.url === '/missing' ? null : payload;
    if (body === null) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Length': body.length });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const base = `http://127.0.0.1:${server.address().port}`;
    const t = await Tensor.fromUrl(`${base}/data`);
    assert.equal(t.dtype, dtypes.uint8);
    assert.deepEqual(t.shape, [768]);
    assert.deepEqual(Buffer.from(await t.data()), payload);
    assert.deepEqual(Buffer.from(await (await Tensor.fromUrl(`${base}/data.gz`, { gunzip: true })).data()), payload);
    await assert.rejects(Tensor.fromUrl(`${base}/missing`), /answered HTTP 404/);
  } finally {
    server.close();
  }
  await assert.rejects(Tensor.fromUrl('file:///etc/passwd'), /http:\/\/ and https:\/\//);
});

test('broadcasting and dtype promotion follow the Python client', async () => {
  const i = Tensor.from([1, 2, 3]);
  const f = Tensor.from([[0.5], [1.5]]);
  const s = i.add(f);
  assert.equal(s.dtype, dtypes.float32);
  assert.deepEqual(s.shape, [2, 3]);
  assert.deepEqual(await s.array(), [[1.5, 2.5, 3.5], [2.5, 3.5, 4.5]]);
  assert.equal(i.add(2).dtype, dtypes.int32);
  assert.equal(i.add(2.5).dtype, dtypes.float32);
  assert.equal(i.div(2).dtype, dtypes.float32);
  assert.equal(Tensor.from([1], { dtype: 'uint8' }).add(Tensor.from([1], { dtype: 'int8' })).dtype, dtypes.int16);
  assert.equal(Tensor.from([1], { dtype: 'float16' }).mul(Tensor.from([1], { dtype: 'int64' })).dtype, dtypes.float16);
  assert.deepEqual(await i.lt(2).data(), new Uint8Array([1, 0, 0]));
  assert.equal(i.lt(2).dtype, dtypes.bool);
  assert.deepEqual(await i.eq(2).array(), [false, true, false]);
  assert.deepEqual(await i.ge(2).where(i, -1).data(), new Int32Array([-1, 2, 3]));
  assert.deepEqual(await Tensor.from([-7, 7]).floorDivide(2).data(), new Int32Array([-4, 3]));
  assert.deepEqual(await Tensor.from([-7, 7]).remainder(3).data(), new Int32Array([2, 1]));
  assert.deepEqual(await Tensor.from([-1.5, 0.5]).relu().data(), new Float32Array([0, 0.5]));
  assert.deepEqual(await Tensor.from([1, 5, 9]).clamp(2, 6).data(), new Int32Array([2, 5, 6]));
  assert.deepEqual(await Tensor.from([2, 3], { dtype: 'float32' }).pow(2).data(), new Float32Array([4, 9]));
  close6(await Tensor.from(1.0).exp().item(), Math.E);
});

test('sort, topk and running extremes: the daemon SORT, TOPK, CUMMAX, CUMMIN, CUMPROD, LOGCUMSUMEXP', async () => {
  const x = Tensor.from([[3, 1, NaN, 1], [0, -2, 5, 4]], { dtype: 'float32' });
  const [values, indices] = x.sort(1);
  assert.deepEqual(await values.data(), new Float32Array([1, 1, 3, NaN, -2, 0, 4, 5]));
  assert.deepEqual(await indices.data(), new Int32Array([1, 3, 0, 2, 1, 0, 3, 2]));  // ties keep their order
  assert.deepEqual(await x.sort({ dim: 1, descending: true }).values.data(), new Float32Array([NaN, 3, 1, 1, 5, 4, 0, -2]));
  assert.deepEqual(await x.argsort(0).data(), new Int32Array([1, 1, 1, 0, 0, 0, 0, 1]));  // NaN after 5
  const top = x.topk(2, { dim: 1, largest: false });
  assert.deepEqual(top.values.shape, [2, 2]);
  assert.deepEqual(await top.indices.data(), new Int32Array([1, 3, 1, 0]));
  const y = Tensor.from([1, 3, 2, 3, 0], { dtype: 'float32' });
  assert.deepEqual(await y.cummax().values.data(), new Float32Array([1, 3, 3, 3, 3]));
  assert.deepEqual(await y.cummax().indices.data(), new Int32Array([0, 1, 1, 3, 3]));  // the last occurrence, as torch
  assert.deepEqual(await y.cummin()[0].data(), new Float32Array([1, 1, 1, 1, 0]));
  assert.deepEqual(await y.cumprod().data(), new Float32Array([1, 3, 6, 18, 0]));
  const l = await y.logcumsumexp().data();
  close6(l[1], Math.log(Math.exp(1) + Math.exp(3)));
  assert.throws(() => y.topk(6), /topk: k must be an integer from 0 to 5/);
});

test('scatter, nllLoss, interpolate, unfold, nonzero, multinomial: the daemon SCATTER_REDUCE, NLL_LOSS, INTERPOLATE, UNFOLD, NONZERO, MULTINOMIAL', async () => {
  // Expected values worked out by hand from torch's definitions.
  const x = Tensor.from([[1, 2, 3], [4, 5, 6]], { dtype: 'float32' });
  const idx = Tensor.from([[2, 0], [1, 1]]);
  const src = Tensor.from([[10, 20], [30, 40]], { dtype: 'float32' });
  assert.deepEqual(await x.scatter(1, idx, src).data(), new Float32Array([20, 2, 10, 4, 40, 6]));  // the last collision wins
  assert.deepEqual(await x.scatter(1, idx, 9).data(), new Float32Array([9, 2, 9, 4, 9, 6]));
  assert.deepEqual(await x.scatter(1, idx, src, 'multiply').data(), new Float32Array([20, 2, 30, 4, 6000, 6]));
  assert.deepEqual(await x.scatterReduce(1, idx, src, 'mean').data(), new Float32Array([10.5, 2, 6.5, 4, 25, 6]));
  assert.deepEqual(await x.scatterReduce(1, idx, src, 'amin', { includeSelf: false }).data(),
    new Float32Array([20, 2, 10, 4, 30, 6]));
  assert.throws(() => x.scatter(1, Tensor.from([[0.5]]), src), /index must be an integer tensor/);
  // nll_loss: -(w[y] * logp[y]) averaged by the summed weights of the counted targets.
  const logp = Tensor.from([[-1, -2, -3], [-0.5, -1.5, -2.5], [-4, -5, -6]], { dtype: 'float32' });
  const y = Tensor.from([2, 0, 1]);
  close6(await logp.nllLoss(y).item(), (3 + 0.5 + 5) / 3);
  close6(await logp.nllLoss(y, { weight: [1, 2, 4], ignoreIndex: 1 }).item(), (4 * 3 + 1 * 0.5) / 5);
  assert.deepEqual(await logp.nllLoss(y, { reduction: 'none' }).data(), new Float32Array([3, 0.5, 5]));
  // linear: positions (j + 0.5) * 2/4 - 0.5 clamped at 0 -> 0, 0.25, 0.75, 1.25 ... on [0, 4]
  const line = Tensor.from([[[0, 4]]], { dtype: 'float32' });
  assert.deepEqual(await line.interpolate([4]).data(), new Float32Array([0, 1, 3, 4]));
  assert.deepEqual(await line.interpolate([3], { alignCorners: true }).data(), new Float32Array([0, 2, 4]));
  assert.deepEqual(await Tensor.from([1, 2, 3]).interpolate([5], { mode: 'nearest' }).data(), new Int32Array([1, 1, 2, 2, 3]));
  const w = Tensor.arange(7).unfold(0, 3, 2);
  assert.deepEqual(w.shape, [3, 3]);
  assert.deepEqual(await w.array(), [[0, 1, 2], [2, 3, 4], [4, 5, 6]]);
  const nz = await Tensor.from([[0, 1.5, 0], [2, 0, -1]]).nonzero();
  assert.deepEqual(await nz.array(), [[0, 1], [1, 0], [1, 2]]);
  assert.deepEqual(await (await Tensor.from([1, 2, 3, 4]).maskedSelect([true, false, false, true])).data(), new Int32Array([1, 4]));
  // tinygrad's size=: a fixed row count, the rest filled
  const nzSized = await Tensor.from([[0, 1.5, 0], [2, 0, -1]]).nonzero({ size: 5, fillValue: -1 });
  assert.deepEqual(await nzSized.array(), [[0, 1], [1, 0], [1, 2], [-1, -1], [-1, -1]]);
  assert.deepEqual(await (await Tensor.from([1, 2, 3, 4]).maskedSelect([true, false, false, true], { size: 3, fillValue: 9 })).data(),
    new Int32Array([1, 4, 9]));
  Tensor.manualSeed(3);
  const draws = await Tensor.from([[0, 1, 0], [2, 0, 0]], { dtype: 'float32' }).multinomial(20, true).data();
  assert.ok(draws.slice(0, 20).every((v) => v === 1) && draws.slice(20).every((v) => v === 0));
  const perm = await Tensor.randperm(8).data();
  assert.deepEqual([...perm].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(Tensor.normal(2, 3, { mean: 1, std: 2 }).shape, [2, 3]);
  const pooled = Tensor.from([[[[5, 7]]]], { dtype: 'float32' });
  assert.deepEqual(await pooled.maxUnpool2d(Tensor.from([[[[1, 2]]]])).array(), [[[[0, 5, 7, 0], [0, 0, 0, 0]]]]);
  const r = Tensor.zeros(2);
  assert.equal(r.replace(Tensor.ones(2, { dtype: 'int32' })).dtype, dtypes.int32);
  assert.equal(r.contiguousBackward(), r);
});

test('reductions with { axis, keepdim }', async () => {
  const x = Tensor.from([[1, 2, 3], [4, 5, 6]], { dtype: 'float32' });
  assert.deepEqual(await x.sum().data(), new Float32Array([21]));
  assert.deepEqual(await x.sum({ axis: 1 }).data(), new Float32Array([6, 15]));
  assert.deepEqual(x.sum({ axis: 0, keepdim: true }).shape, [1, 3]);
  assert.deepEqual(await x.max({ axis: 0 }).data(), new Float32Array([4, 5, 6]));
  assert.deepEqual(await x.min(1).data(), new Float32Array([1, 4]));
  assert.deepEqual(await x.mean({ axis: 1 }).data(), new Float32Array([2, 5]));
  assert.deepEqual(await x.var({ axis: 1 }).data(), new Float32Array([1, 1]));
  assert.deepEqual(await x.argmax({ axis: 1 }).data(), new Int32Array([2, 2]));
  assert.equal(x.argmax().dtype, dtypes.int32);
  close6((await x.logsumexp({ axis: 1 }).data())[0], Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3)));
  const sm = await x.softmax(-1).sum({ axis: 1 }).data();
  close6(sm[0], 1);
  assert.equal(Tensor.from([1, 2], { dtype: 'int8' }).sum().dtype, dtypes.int32);
});

test('the daemon\'s math: values against Math.*, domain edges, any/all and isclose', async () => {
  const xs = [-3, -1, -0.5, 0, 0.25, 1, 2.5];
  const x = Tensor.from(xs, { dtype: 'float64' });
  for (const [m, f] of [['atan', Math.atan], ['sinh', Math.sinh], ['cosh', Math.cosh], ['asinh', Math.asinh],
    ['expm1', Math.expm1]]) {
    const got = await x[m]().data();
    xs.forEach((v, i) => close6(got[i], f(v)));
  }
  const u = Tensor.from([-1, -0.5, 0.75, 1, 2], { dtype: 'float32' });
  assert.deepEqual([...await u.atanh().data()].map((v) => (Number.isFinite(v) ? Math.sign(v) : v)), [-Infinity, -1, 1, Infinity, NaN]);
  assert.ok(Number.isNaN((await u.asin().data())[4]) && Number.isNaN((await u.acos().data())[4]));
  assert.ok(Number.isNaN((await Tensor.from([0.5]).acosh().data())[0]));
  assert.deepEqual(await Tensor.from([-Infinity, -Infinity, 0]).logaddexp(Tensor.from([-Infinity, 0, -Infinity])).data(),
    new Float32Array([-Infinity, 0, 0]));
  const f32 = { dtype: 'float32' };
  assert.ok(Object.is((await Tensor.from([0], f32).copysign(Tensor.from([-0], f32)).data())[0], -0));
  assert.deepEqual(await Tensor.from([1, 2]).lerp(Tensor.from([3, 4]), 1).data(), new Float32Array([3, 4]));
  close6((await Tensor.from([0.5]).erf().data())[0], 0.5204998778130465);
  close6((await Tensor.from([-1]).celu(0.5).data())[0], 0.5 * Math.expm1(-2));
  assert.deepEqual(await Tensor.from([1, Infinity, NaN]).isfinite().data(), new Uint8Array([1, 0, 0]));
  assert.equal(await Tensor.from([1, NaN]).allclose(Tensor.from([1 + 1e-7, NaN]), { equalNan: true }), true);
  assert.equal(await Tensor.from([1, NaN]).allclose(Tensor.from([1, NaN])), false);
  const b = Tensor.from([[0, 1, 0], [0, 0, 0]], { dtype: 'int32' });
  assert.deepEqual(await b.any({ axis: 0 }).data(), new Uint8Array([0, 1, 0]));
  assert.deepEqual(await b.all({ axis: 1, keepdim: true }).data(), new Uint8Array([0, 0]));
  assert.equal(b.any().dtype, dtypes.bool);
  const [s, m] = Tensor.from([1, 2, 3, 4]).stdMean();
  close6((await s.data())[0], Math.sqrt(5 / 3));
  close6((await m.data())[0], 2.5);
  assert.equal(b.long().dtype, dtypes.int64);
  assert.equal(b.isFloatingPoint(), false);
});

test('roll, diag, diagonal, meshgrid, repeatInterleave and maskedFill', async () => {
  const x = Tensor.from([[1, 2, 3], [4, 5, 6]], { dtype: 'float32' });
  assert.deepEqual(await x.roll(1, 1).data(), new Float32Array([3, 1, 2, 6, 4, 5]));
  assert.deepEqual(await x.roll(-1).data(), new Float32Array([2, 3, 4, 5, 6, 1]));
  assert.deepEqual(await x.diagonal({ offset: 1 }).data(), new Float32Array([2, 6]));
  assert.deepEqual(await x.diag().data(), new Float32Array([1, 5]));
  const d = Tensor.from([7, 8], { dtype: 'float32' }).diag(-1);
  assert.deepEqual(d.shape, [3, 3]);
  assert.deepEqual(await d.data(), new Float32Array([0, 0, 0, 7, 0, 0, 0, 8, 0]));
  const [gx, gy] = Tensor.from([1, 2, 3]).meshgrid(Tensor.from([4, 5]), { indexing: 'xy' });
  assert.deepEqual(gx.shape, [2, 3]);
  assert.deepEqual(await gx.data(), new Int32Array([1, 2, 3, 1, 2, 3]));
  assert.deepEqual(await gy.data(), new Int32Array([4, 4, 4, 5, 5, 5]));
  assert.deepEqual(await x.repeatInterleave(2, { axis: 0 }).data(), new Float32Array([1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]));
  assert.deepEqual(await x.maskedFill(Tensor.from([true, false, true]), 0).data(), new Float32Array([0, 2, 0, 0, 5, 0]));
});

test('movement, concatenation and indexing', async () => {
  const x = Tensor.arange(6).reshape(2, 3);
  assert.deepEqual(await x.transpose().array(), [[0, 3], [1, 4], [2, 5]]);
  assert.deepEqual(await x.permute(1, 0).reshape([-1]).data(), new Int32Array([0, 3, 1, 4, 2, 5]));
  assert.deepEqual(await x.flip(1).array(), [[2, 1, 0], [5, 4, 3]]);
  assert.deepEqual(await x.pad([[0, 0], [1, 0]]).array(), [[0, 0, 1, 2], [0, 3, 4, 5]]);
  assert.deepEqual(await x.shrink([null, [1, 3]]).array(), [[1, 2], [4, 5]]);
  assert.deepEqual(x.unsqueeze(0).shape, [1, 2, 3]);
  assert.deepEqual(x.unsqueeze(0).squeeze().shape, [2, 3]);
  assert.deepEqual(x.reshape(1, 2, 3).flatten().shape, [6]);
  assert.deepEqual(await x.expand(2, 2, 3).sum().item(), 30);
  assert.deepEqual(await Tensor.cat([x, x], { axis: 0 }).shape, [4, 3]);
  // more pieces than one CAT takes (4096) are joined in groups
  const many = Array.from({ length: 2 * 4096 + 5 }, (_, i) => Tensor.from([i], { dtype: 'int32' }));
  const joined = await Tensor.cat(many).data();
  assert.equal(joined.length, 8197);
  assert.ok(joined.every((v, i) => v === i));
  assert.deepEqual(await Tensor.stack([x, x], { axis: 1 }).array(), [[[0, 1, 2], [0, 1, 2]], [[3, 4, 5], [3, 4, 5]]]);
  assert.deepEqual(await x.index(1).data(), new Int32Array([3, 4, 5]));
  assert.deepEqual(await x.index('...', '::-1').array(), [[2, 1, 0], [5, 4, 3]]);
  assert.deepEqual(await x.index(null, 0, '1:').array(), [[1, 2]]);
  assert.deepEqual(await x.slice([0, 1], [0, 3, 2]).array(), [[0, 2]]);
  assert.deepEqual(await x.index([1, 0]).array(), [[3, 4, 5], [0, 1, 2]]);
  assert.deepEqual(await x.index(':', Tensor.from([2, -3])).array(), [[2, 0], [5, 3]]);
  assert.throws(() => x.reshape(4, 2), /cannot reshape/);
});

test('matmul, conv2d, pooling and cross entropy shapes are local and match the daemon', async () => {
  const a = Tensor.ones(2, 3);
  const b = Tensor.ones(3, 4);
  assert.deepEqual(await a.matmul(b).array(), [[3, 3, 3, 3], [3, 3, 3, 3]]);
  const img = Tensor.ones(1, 1, 4, 4);
  const w = Tensor.ones(2, 1, 3, 3);
  const y = img.conv2d(w, null, { padding: 1 });
  assert.deepEqual(y.shape, [1, 2, 4, 4]);
  assert.equal((await y.data())[5], 9);
  assert.deepEqual(img.maxPool2d(2).shape, [1, 1, 2, 2]);
  assert.deepEqual(await img.avgPool2d([2, 2]).data(), new Float32Array([1, 1, 1, 1]));
  const loss = Tensor.zeros(4, 3).crossEntropy(Tensor.from([0, 1, 2, 0]));
  close6(await loss.item(), Math.log(3));
  assert.deepEqual(await Tensor.from([0, 2]).oneHot(3).array(), [[1, 0, 0], [0, 0, 1]]);
});

test('autograd: backward, grad, detach and noGrad', async () => {
  const x = Tensor.from([1, 2, 3], { dtype: 'float32', requiresGrad: true });
  assert.equal(x.requiresGrad, true);
  const y = x.mul(x).sum();
  y.backward();
  assert.deepEqual(await x.grad.data(), new Float32Array([2, 4, 6]));
  const z = Tensor.from([1, 2], { dtype: 'float32', requiresGrad: true });
  const l = z.mul(z.detach()).sum();
  l.backward();
  assert.deepEqual(await z.grad.data(), new Float32Array([1, 2]));
  // softplus past its threshold and clip at its bounds, as torch: x itself, and the whole gradient
  const s = Tensor.from([-1, 0, 1, 100], { dtype: 'float32', requiresGrad: true });
  const sp = s.softplus();
  sp.sum().backward();
  assert.equal((await sp.data())[3], 100);
  assert.equal((await s.grad.data())[3], 1);
  const c = Tensor.from([-1, 0.5, 1, 2, NaN], { dtype: 'float32', requiresGrad: true });
  const cl = c.clip(-1, 1);
  cl.sum().backward();
  assert.ok(Number.isNaN((await cl.data())[4]));
  assert.deepEqual(await c.grad.data(), new Float32Array([1, 1, 1, 0, 0]));
  const n = Tensor.noGrad(() => z.mul(2));
  assert.equal(n.requiresGrad, null);
  assert.throws(() => Tensor.from([1, 2]).requiresGrad = true, /only float tensors/);
});

test('tinygrad\'s tri-state requiresGrad: with no requiresGrad = true tensor, backward fills the unset float data', async () => {
  const x = Tensor.from([0.5, -1.0]); // requiresGrad left unset (null)
  const r = Tensor.rand(2); // a random draw, unset too
  const frozen = Tensor.from([2.0, 3.0], { requiresGrad: false });
  assert.equal(x.requiresGrad, null);
  // a comparison inside the differentiated graph is allowed: where(x < 0, x, 2x)
  x.lt(0).where(x, x.mul(2)).mul(frozen).add(r.mul(Tensor.ones(2))).sum().backward();
  assert.deepEqual(await x.grad.data(), new Float32Array([4, 3]));
  assert.deepEqual(await r.grad.data(), new Float32Array([1, 1]));
  assert.equal(frozen.grad, null);
  // a tensor with requiresGrad = true takes precedence: the unset ones get nothing then
  const w = Tensor.from([1.5], { requiresGrad: true });
  const u = Tensor.from([4.0]);
  w.mul(u).sum().backward();
  assert.deepEqual(await w.grad.data(), new Float32Array([4]));
  assert.equal(u.grad, null);
  // false and constants are never targets
  assert.throws(() => frozen.mul(Tensor.ones(2)).sum().backward(), /depends on no tensor with requiresGrad = true/);
});

test('dispose releases the node at once; later use names the disposal', async () => {
  const t = Tensor.from([1, 2, 3]).add(1);
  await t.realize();
  const sent = graphStats().sentLive;
  await t.dispose();
  assert.equal(graphStats().sentLive, sent - 1);
  await assert.rejects(t.add(1).data(), /disposed/);
});

test('tensors past the inline limit travel by the chunked Upload and Download streams', async () => {
  const n = 3 * (1 << 20); // 12 MiB of float32: several chunks each way
  const host = new Float32Array(n);
  for (let i = 0; i < n; i++) host[i] = (i % 1000) / 8;
  const t = Tensor.from(host);
  const out = await t.add(1).data();
  assert.equal(out.length, n);
  for (const i of [0, 1, 999, 1000, 1 << 20, n - 1]) assert.equal(out[i], host[i] + 1);
  assert.deepEqual(await t.index('0:4').data(), host.slice(0, 4));
});

test('a hand-written assign loop sends the same graph every step', async () => {
  // w.assign(w.detach() - lr * w.grad): a realized parameter must not carry earlier steps into
  // the next gradient (before assign detached what it gives a gradient leaf, each step sent more
  // nodes than the one before). Counted in nodes sent, not time.
  const { Connection } = createRequire(import.meta.url)('../src/connection.js');
  const real = Connection.prototype.realize;
  const sent = [];
  Connection.prototype.realize = function counting(nodes, ...rest) {
    sent[sent.length - 1] += nodes.length;
    return real.call(this, nodes, ...rest);
  };
  try {
    Tensor.manualSeed(3);
    const x = Tensor.rand(8, 16);
    const y = Tensor.randint(8, { low: 0, high: 4 }).oneHot(4).float();
    const w1 = Tensor.randn(16, 8).mul(0.1).detach();
    const w2 = Tensor.randn(8, 4).mul(0.1).detach();
    w1.requiresGrad = true;
    w2.requiresGrad = true;
    const losses = [];
    for (let step = 0; step < 20; step++) {
      sent.push(0);
      const lo = x.matmul(w1).relu().matmul(w2);
      const loss = lo.logSoftmax(-1).mul(y).sum(-1).mean().neg();
      loss.backward();
      for (const w of [w1, w2]) w.assign(w.detach().sub(w.grad.mul(0.5)));
      for (const w of [w1, w2]) w.grad = null;
      losses.push(await loss.item());
      await Tensor.realize(w1, w2);
    }
    assert.equal(sent[19], sent[4], `nodes sent per step: ${sent}`);
    assert.ok(losses[19] < losses[0], `the loss did not fall: ${losses}`);
  } finally {
    Connection.prototype.realize = real;
  }
});

test('a gradient node lives where its target does, whatever the loss\'s device', () => {
  // The daemon copies a gradient back to its target's device (a CPU tensor moved to a GPU).
  const { Node } = createRequire(import.meta.url)('../src/graph.js');
  const { OPS } = createRequire(import.meta.url)('../src/ops.js');
  const target = new Node(-1, OPS.BUFFER, dtypes.float32, [3], [], null);
  const moved = new Node(-2, OPS.COPY, dtypes.float32, [3], [target], { device: 'CUDA' });
  assert.deepEqual([target.device, moved.device], ['CPU', 'CUDA']);
  assert.equal(new Node(-3, OPS.GRADIENT, dtypes.float32, [3], [moved, target], null).device, 'CPU');
  assert.equal(new Node(-4, OPS.GRADIENT, dtypes.float32, [3], [target, moved], null).device, 'CUDA');
});

test('LayerNorm and RMSNorm send their weight and bias inside one LAYERNORM / RMS_NORM node', async () => {
  const { OPS } = createRequire(import.meta.url)('../src/ops.js');
  const x = Tensor.from([[1, -2, 0.5, 3], [0.25, 4, -1, 2]]);
  const ln = new nn.LayerNorm(4);
  ln.weight = Tensor.from([2, -1, 0.5, 1]);
  ln.bias = Tensor.from([0, 1, -1, 0.5]);
  const y = ln.forward(x);
  assert.equal(y._node.op, OPS.LAYERNORM);
  assert.ok(y._node.src.every((s) => !s.src.length), 'the sources are x, weight and bias themselves');
  const rows = await x.array();
  const got = await y.array();
  const w = [2, -1, 0.5, 1], b = [0, 1, -1, 0.5];
  rows.forEach((r, i) => {
    const m = r.reduce((s, v) => s + v, 0) / 4;
    const v = r.reduce((s, u) => s + (u - m) ** 2, 0) / 4;
    r.forEach((u, j) => close6(got[i][j], ((u - m) / Math.sqrt(v + 1e-5)) * w[j] + b[j]));
  });
  const rms = new nn.RMSNorm(4);
  assert.equal(rms.forward(x)._node.op, OPS.RMS_NORM);
  assert.throws(() => x.layernorm({ weight: Tensor.from([1, 2]) }), /weight must have shape \[4\], got \[2\]/);
});

test('batchnorm is tinygrad\'s, one BATCHNORM_INVSTD: statistics along an axis, invstd broadcasting', async () => {
  const { OPS } = createRequire(import.meta.url)('../src/ops.js');
  const x = Tensor.from([[1, 2, -1], [0.5, 3, -2]]);
  const m = [0.5, -1, 2], s = [2, 0.5, 1], w = [1, -1, 3], b = [0, 0.5, -2];
  const y = x.batchnorm(Tensor.from(w), Tensor.from(b), Tensor.from(m), Tensor.from(s), -1);
  assert.equal(y._node.op, OPS.BATCHNORM_INVSTD);
  const rows = await x.array();
  const got = await y.array();
  rows.forEach((r, i) => r.forEach((u, j) => close6(got[i][j], (u - m[j]) * s[j] * w[j] + b[j])));
  const byRow = await x.batchnorm(null, null, Tensor.from(m), Tensor.from([[2], [4]]), 1).array();
  rows.forEach((r, i) => r.forEach((u, j) => close6(byRow[i][j], (u - m[j]) * [2, 4][i])));
  assert.throws(() => x.batchnorm(null, null, Tensor.from(m), Tensor.from([1, 2, 3, 4]), [0, 1]), /cannot be broadcast/);
});

test('avgPool2d with countIncludePad false divides by the elements inside the input', async () => {
  const vals = [1, 2, 3, 4, 5, 6, 7, 8, 9];
  const x = Tensor.from(vals, { shape: [1, 1, 3, 3] });
  const got = await x.avgPool2d(2, { stride: 2, padding: 1, countIncludePad: false }).data();
  // windows: {1}, {2, 3}, {4, 7}, {5, 6, 8, 9}
  assert.deepEqual([...got], [1, 2.5, 5.5, 7]);
  const counted = await x.avgPool2d(2, { stride: 2, padding: 1 }).data();
  assert.deepEqual([...counted], [0.25, 1.25, 2.75, 7]);
});

test('ceilMode keeps the last partial windows, whose padding never counts in a mean', async () => {
  const x = Tensor.from([1, 2, 3, 4, 5, 6, 7, 8, 9], { shape: [1, 1, 3, 3] });
  // windows: {1, 2, 4, 5}, {3, 6}, {7, 8}, {9}
  assert.deepEqual([...await x.avgPool2d(2, { ceilMode: true }).data()], [3, 4.5, 7.5, 9]);
  assert.deepEqual([...await x.maxPool2d(2, { ceilMode: true }).data()], [5, 6, 8, 9]);
  assert.deepEqual(x.maxPool2d(2).shape, [1, 1, 1, 1]);
  // a last window that would start in the after-padding is dropped: 3 windows, not 4
  assert.deepEqual(Tensor.zeros(1, 6).maxPool2d([2], { stride: 2, padding: 1, ceilMode: true }).shape, [1, 4]);
  assert.deepEqual(Tensor.zeros(1, 5).maxPool2d([2], { stride: 2, padding: 1, ceilMode: true }).shape, [1, 3]);
  // returnIndices: torch's flat positions, which maxUnpool2d takes back
  const { values, indices } = x.maxPool2d(2, { ceilMode: true, returnIndices: true });
  assert.deepEqual([...await indices.data()], [4, 5, 7, 8]);
  assert.deepEqual(await values.maxUnpool2d(indices, { outputSize: [3, 3] }).array(), [[[[0, 0, 0], [0, 5, 6], [0, 8, 9]]]]);
});

test('a loss left pending by a closed session is not sent by the next session\'s step', async () => {
  const w = Tensor.from([1, 2], { dtype: 'float32', requiresGrad: true });
  const loss = w.mul(w).sum();
  loss.backward(); // pending: the next optimizer step would realize it with the parameters
  await loss.mul(2).realize(); // sends the loss's node without realizing it
  const lazy = w.mul(3).sum(); // unsent, reading w, which was sent
  lazy.backward();
  await close();
  await connect({ address: daemon.address }); // a new session: the old one's nodes are gone
  const v = Tensor.from([3, 4], { dtype: 'float32', requiresGrad: true });
  const opt = new nn.SGD([v], { lr: 0.5 });
  v.mul(v).sum().backward();
  await opt.step();
  assert.deepEqual(await v.data(), new Float32Array([0, 0]));
  assert.ok(loss && lazy);
});
