// The client over the daemon's gRPC-Web port (connect({ address: 'http://host:port' }), src/web.js):
// the transport a browser has, through fetch. The same training gives the same losses bit for bit
// as over gRPC; tensors larger than one message go up in parts (OpenUpload, UploadPart) and come
// back as a stream; errors are PolygradErrors with the daemon's code; tokens are required.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  Tensor, nn, connect, close, compileStep, PolygradInvalidArgument, PolygradNotFound, PolygradUnauthenticated,
  PolygradConnectionError,
} from '../index.mjs';
import { webAddress } from './web_helpers.mjs';
import { startDaemon } from './daemon.mjs';

const TOKEN = '3f9c0a77d1e24b1b8f0e2f6a5c4d3b21';
const STEPS = 8;
const BATCH = 32;

let daemon;
let guarded;


before(async () => {
  daemon = await startDaemon({ args: ['--web-listen=127.0.0.1:0'] });
  const dir = fs.mkdtempSync(path.join(daemon.dir, 'tok-'));
  fs.writeFileSync(path.join(dir, 'tokens'), `${TOKEN} team-web\n`);
  guarded = await startDaemon({ args: ['--web-listen=127.0.0.1:0', `--tokens-file=${path.join(dir, 'tokens')}`] });
});
after(async () => {
  await close();
  await daemon.stop();
  await guarded.stop();
});

// Losses of STEPS SGD steps of a 784-64-10 MLP from the given weights and data, eager then
// compiled, on the connection `address` names.
async function train(address, init, X, Y) {
  await connect({ address });
  const run = async (compiled) => {
    const l1 = new nn.Linear(784, 64);
    const l2 = new nn.Linear(64, 10);
    const model = { l1, l2, forward: (x) => l2.forward(l1.forward(x).relu()) };
    await nn.loadStateDict(model, Object.fromEntries(Object.entries(init).map(([k, v]) => [k, Tensor.from(v.data, { shape: v.shape })])));
    const opt = new nn.SGD(nn.getParameters(model), { lr: 0.05 });
    const batch = (i) => [X.subarray(i * BATCH * 784, (i + 1) * BATCH * 784), Y.subarray(i * BATCH, (i + 1) * BATCH)];
    const stepFn = async (m, o, x, y) => {
      const loss = m.forward(x).crossEntropy(y);
      o.zeroGrad();
      loss.backward();
      await o.step();
      return loss;
    };
    const losses = [];
    if (compiled) {
      const [x0, y0] = batch(0);
      const step = await compileStep(stepFn, model, opt, Tensor.from(x0, { shape: [BATCH, 784] }), Tensor.from(y0));
      for (let i = 0; i < STEPS; i++) {
        const [xb, yb] = batch(i);
        await step.run({ x: xb, y: yb });
        losses.push(await step.lossValue());
      }
      await step.release();
    } else {
      for (let i = 0; i < STEPS; i++) {
        const [xb, yb] = batch(i);
        const loss = await stepFn(model, opt, Tensor.from(xb, { shape: [BATCH, 784] }), Tensor.from(yb));
        losses.push(await loss.item());
      }
    }
    return losses;
  };
  return { eager: await run(false), compiled: await run(true) };
}

test('training over gRPC-Web gives the losses of gRPC, bit for bit', async (t) => {
  await connect({ address: daemon.address });
  Tensor.manualSeed(7);
  const init = {};
  for (const [k, shape] of [['l1.weight', [64, 784]], ['l1.bias', [64]], ['l2.weight', [10, 64]], ['l2.bias', [10]]]) {
    init[k] = { shape, data: await Tensor.randn(...shape).mul(0.05).data() };
  }
  const X = await Tensor.rand(STEPS * BATCH, 784).data();
  const Y = await Tensor.randint(STEPS * BATCH, { low: 0, high: 10 }).data();
  const grpc = await train(daemon.address, init, X, Y);
  const web = await train(webAddress(daemon), init, X, Y);
  assert.deepEqual(web.eager, grpc.eager);
  assert.deepEqual(web.compiled, grpc.compiled);
  assert.ok(web.eager[STEPS - 1] < web.eager[0], `the loss went down: ${web.eager}`);
  t.diagnostic(`loss ${web.eager[0]} -> ${web.eager[STEPS - 1]} on both transports`);
});

test('a tensor larger than one message goes up in parts and comes back as a stream', async () => {
  const conn = await connect({ address: webAddress(daemon) });
  const n = (conn.maxInlineBytes / 4) * 3 + 17; // three inline limits and then some
  const values = new Float32Array(n).map((_, i) => (i % 1000) - 500.25);
  const t = Tensor.from(values);
  assert.deepEqual(await t.data(), values);
  const ref = values.reduce((a, b) => a + b, 0); // in float64
  const sum = await t.sum().item();
  assert.ok(Math.abs(sum - ref) <= 1e-5 * Math.abs(ref), `sum ${sum} vs ${ref}`);
  const doubled = await t.mul(2).data();
  assert.equal(doubled[12345], values[12345] * 2);
});

test('errors are PolygradErrors with the daemon\'s code and message', async () => {
  const conn = await connect({ address: webAddress(daemon) });
  const err = await Tensor.ones(2, 3).matmul(Tensor.ones(4, 5)).data().then(() => null, (e) => e);
  assert.ok(err instanceof PolygradInvalidArgument, String(err));
  assert.equal(err.code, 'INVALID_ARGUMENT');
  assert.match(err.details, /MATMUL/);
  const missing = await conn.download('987654321').then(() => null, (e) => e);
  assert.ok(missing instanceof PolygradNotFound, String(missing));
  assert.match(missing.details, /987654321/);
  assert.equal(await Tensor.ones(3).sum().item(), 3); // the session stays usable
});

test('a token-protected daemon refuses the web port without the token', async () => {
  const err = await connect({ address: webAddress(guarded) }).then(() => null, (e) => e);
  assert.ok(err instanceof PolygradUnauthenticated, String(err));
  await connect({ address: webAddress(guarded), token: TOKEN });
  assert.deepEqual(await Tensor.from([1, 2]).add(1).data(), new Int32Array([2, 3]));
});

test('nothing listening is a PolygradConnectionError naming the address', async () => {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const err = await connect({ address: `http://127.0.0.1:${port}`, connectTimeout: 5 }).then(() => null, (e) => e);
  assert.ok(err instanceof PolygradConnectionError, String(err));
  assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
});
