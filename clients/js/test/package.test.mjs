// The package itself: both entries, every wire op reachable, and a packed package that carries its
// own copy of the wire contract and the generated op tables. No daemon is needed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as esm from '../index.mjs';
import { REPO } from './daemon.mjs';

const require = createRequire(import.meta.url);
const PKG = path.join(REPO, 'clients', 'js');

test('the ES module and CommonJS entries export the same objects', () => {
  const cjs = require('polygrad');
  for (const name of ['Tensor', 'nn', 'dtypes', 'connect', 'compileStep', 'PolygradError', 'PolygradConnectionError',
    'PolygradInvalidArgument', 'PolygradNotFound', 'PolygradResourceExhausted', 'PolygradUnauthenticated']) {
    assert.ok(esm[name], `ESM exports ${name}`);
    assert.equal(esm[name], cjs[name], `${name} is one object in both entries`);
  }
  assert.equal(typeof esm.nn.Linear, 'function');
  assert.equal(typeof esm.nn.safeSave, 'function');
});

test('every wire op has a Tensor method that builds it', async () => {
  const { OPS, METHODS } = require('../src/ops');
  const { Tensor } = esm;
  const x = Tensor.rand(2, 3, 4, 4);
  const f = Tensor.rand(4, 4);
  const i = Tensor.from([[1, 2], [3, 4]]);
  Tensor.training = true;
  const built = [
    x.neg(), x.exp2(), x.log2(), x.sqrt(), x.reciprocal(), x.sin(), x.cast('float16'), x.bitcast('int32'),
    x.add(x), x.sub(1), x.mul(2), x.div(3), x.maximum(0), x.lt(1), x.ne(1), x.eq(1), x.le(1), x.lt(0).where(x, 0), i.idiv(2),
    i.fmod(3), i.floorDivide(2), i.remainder(3), i.pow(2), x.any(1), x.all(1), i.lshift(1), i.rshift(1),
    i.bitwiseAnd(1), i.bitwiseOr(1), i.bitwiseXor(1), x.sum(1), x.max(1), x.reshape(-1), x.permute(3, 2, 1, 0),
    f.reshape(1, 4, 4).expand(2, 4, 4), f.pad([[1, 1], null]), f.shrink([[1, 2], null]), f.flip(0), Tensor.cat([f, f], { axis: 1 }),
    f.sum().gradient([f])[0], f.matmul(f), f.linear(f, f.sum(0)), f.softmax(-1), f.logSoftmax(-1), f.logsumexp(1), f.mean(0), f.var(0), f.std(0), Tensor.normal(2, { mean: 1, std: 2 }),
    f.layernorm(-1), f.exp(), f.log(), f.relu(), f.sigmoid(), f.tanh(), f.gelu(), f.gelu('none'), f.silu(), Tensor.arange(3),
    x.conv2d(Tensor.rand(2, 3, 3, 3)), x.maxPool2d(2), x.avgPool2d(2), f.cumsum(0), i.oneHot(5), f.argmax(0),
    f.argmin(0), f.min(1), f.minimum(f), f.tril(), f.triu(), f.gather(0, i), Tensor.linspace(0, 1, 3), Tensor.eye(2), f.newtonSchulz(2, [1.5, -0.5]), f.prod(0), f.pow(f), Tensor.randn(2), Tensor.randint(2),
    f.dropout(0.5), x.convTranspose2d(Tensor.rand(3, 2, 3, 3)), f.rmsNorm(), x.groupNorm(1),
    x.batchNorm({ training: true }), x.batchNorm({ runningMean: Tensor.zeros(3), runningVar: Tensor.ones(3) }),
    x.batchnorm(null, null, Tensor.zeros(2), Tensor.ones(2), 0),
    f.reshape(1, 4, 4).scaledDotProductAttention(f.reshape(1, 4, 4), f.reshape(1, 4, 4)),
    f.reshape(1, 4, 4).scaledDotProductAttention(f.reshape(1, 4, 4), f.reshape(1, 4, 4), { attnMask: f.gt(0) }),
    f.to('CUDA'), f.erf(), f.atan(), f.asin(), f.acos(), f.sinh(), f.cosh(), f.asinh(), f.acosh(), f.atanh(),
    f.log10(), f.log1p(), f.expm1(), f.logaddexp(f), f.copysign(f), f.lerp(f, 0.5), f.softsign(), f.celu(), f.selu(),
    f.isfinite(), f.isclose(f), f.sort(0).values, f.topk(2).indices, f.cummax(1)[0], f.cummin(1)[1], f.cumprod(0),
    f.logcumsumexp(1), f.softplus(), f.clip(0, 1), f.scatter(0, Tensor.from([[0, 1, 2, 3]]), f), f.nllLoss(Tensor.from([1, 0, 2, 3])),
    f.clone().setitem('1:3', '::2', 0),
    x.interpolate([5]), f.unfold(0, 2, 1), f.abs().add(1).multinomial(2), i.reshape(1, 2, 2).maxUnpool2d(i.reshape(1, 2, 2)),
    // with a fixed size, nothing is read from a daemon first (this file has none)
    await f.nonzero({ size: 2 }), await f.maskedSelect(f.gt(0), { size: 2 }),
    f.crossEntropy(Tensor.from([1, 0, 2, 3])), f.sparseCategoricalCrossentropy(Tensor.from([1, 0, 2, 3])),
    f.sigmoid().binaryCrossentropy(f), f.binaryCrossentropyLogits(f.sigmoid()), Tensor.einsum('ij,ij->', f, f), ...f.qr(), ...f.svd({ sweeps: 1 }),
    // an optimizer step of each update rule: the rebound parameter
    ...[(ps) => new esm.nn.SGD(ps, { momentum: 0.9 }), (ps) => new esm.nn.Adam(ps), (ps) => new esm.nn.LAMB(ps), (ps) => new esm.nn.LARS(ps),
      (ps) => new esm.nn.Muon(ps)].map((make) => {
      const p = Tensor.rand(3, 2);
      const opt = make([p]);
      p.grad = Tensor.rand(3, 2);
      opt.scheduleStep();
      return p;
    }),
    // every method generated from the op schema, its tensor operands f and its parameters' defaults
    ...METHODS.map((m) => f[m.name](...m.operands.map(() => f))),
  ];
  Tensor.training = false;
  const made = new Set(built.flatMap((t) => {
    const out = [];
    const stack = [t._node];
    const s = new Set();
    while (stack.length) {
      const n = stack.pop();
      if (s.has(n.id)) continue;
      s.add(n.id);
      out.push(n.op);
      stack.push(...n.src);
    }
    return out;
  }));
  const missing = Object.entries(OPS).filter(([k, v]) => !made.has(v)).map(([k]) => k);
  assert.deepEqual(missing, [], 'every wire op is reachable from the public API');
});

test('a packed package is self-contained: it carries the .proto files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-pack-'));
  try {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: PKG, encoding: 'utf8' });
    const files = JSON.parse(out)[0].files.map((f) => f.path);
    for (const f of ['index.mjs', 'index.d.ts', 'ops.gen.d.ts', 'src/index.js', 'src/ops.gen.js', 'proto/polygrad/v1/polygrad.proto',
      'proto/polygrad/v1/op_schema.proto', 'package.json']) {
      assert.ok(files.includes(f), `the packed package has ${f}`);
    }
    assert.ok(!files.some((f) => f.startsWith('test/')), 'tests stay out of the package');
    // The browser build, which the "browser" export condition names, is made by prepack.
    assert.ok(files.includes('dist/polygrad.browser.mjs'), 'the packed package has its browser build');
    const pkg = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
    assert.equal(pkg.exports['.'].browser, './dist/polygrad.browser.mjs');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(PKG, 'proto'), { recursive: true, force: true });
  }
});
