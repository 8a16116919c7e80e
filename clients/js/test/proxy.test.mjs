// Behind a real gRPC proxy (nginx's grpc_pass) that answers the Execute stream with UNIMPLEMENTED,
// as proxies that pass only unary calls do, the client asks for the stream once, then sends every
// realize and step run as a unary call, with the numbers of blocking dispatch straight to the
// daemon. nginx is a test dependency (scripts/install-deps --test): missing, this fails.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Tensor, nn, connect, close, compileStep } from '../index.mjs';
import { startDaemon } from './daemon.mjs';
import { startNginx } from './nginx.mjs';

let daemon;
let nginx;
let port;
let accessLog;

before(async () => {
  daemon = await startDaemon();
  const socket = daemon.address.slice('unix:'.length);
  nginx = await startNginx(daemon.dir, (p) => `
  server {
    listen 127.0.0.1:${p} http2;
    location = /polygrad.v1.Polygrad/Execute {
      default_type application/grpc;
      add_header grpc-status 12 always;
      add_header grpc-message "this proxy passes unary calls only" always;
      return 200;
    }
    location / {
      grpc_pass unix:${socket};
      grpc_read_timeout 600s;
      grpc_send_timeout 600s;
      client_max_body_size 0;
    }
  }`);
  ({ port, accessLog } = nginx);
});
after(async () => {
  await close();
  if (nginx) await nginx.stop();
  await daemon.stop();
});

// Losses of a small MLP: 6 eager Adam steps (read every other one), 4 compiled ones, then the sum
// of the first layer's weights; and the connection it ran on.
async function trainOn(address) {
  const conn = await connect({ address });
  Tensor.manualSeed(3);
  const l1 = new nn.Linear(20, 16);
  const l2 = new nn.Linear(16, 4);
  const model = { l1, l2, forward: (x) => l2.forward(l1.forward(x).relu()) };
  const opt = new nn.Adam(nn.getParameters(model), { lr: 0.01 });
  const x = Tensor.randn(32, 20);
  const y = Tensor.randint(32, { low: 0, high: 4 });
  const fn = async (m, o, xb, yb) => {
    const loss = m.forward(xb).crossEntropy(yb);
    o.zeroGrad();
    loss.backward();
    await o.step();
    return loss;
  };
  const losses = [];
  for (let i = 0; i < 6; i++) {
    const loss = await fn(model, opt, x, y);
    if (i % 2 === 1) losses.push(await loss.item());
  }
  const step = await compileStep(fn, model, opt, x, y);
  for (let i = 0; i < 4; i++) await step.run();
  losses.push(await step.lossValue());
  losses.push(await l1.weight.sum().item());
  return { losses, conn };
}

test('a proxy that refuses the Execute stream gets every call unary, with the same numbers', async () => {
  const through = await trainOn(`127.0.0.1:${port}`);
  assert.equal(through.conn._streamRefused, true);
  assert.equal(through.conn.outstanding, 0);
  await close();
  process.env.POLYGRAD_ASYNC = '0';
  let direct;
  try {
    direct = await trainOn(daemon.address);
  } finally {
    delete process.env.POLYGRAD_ASYNC;
  }
  assert.deepEqual(through.losses, direct.losses);
  await nginx.quit();
  const calls = fs.readFileSync(accessLog, 'utf8').split('\n').filter(Boolean);
  assert.equal(calls.filter((c) => c.startsWith('/polygrad.v1.Polygrad/Execute')).length, 1, calls.join('\n'));
  assert.ok(calls.some((c) => c.startsWith('/polygrad.v1.Polygrad/Execute 200 ')), calls.join('\n'));
  assert.equal(calls.filter((c) => c.startsWith('/polygrad.v1.Polygrad/RunStep')).length, 4, calls.join('\n'));
  assert.ok(calls.filter((c) => c.startsWith('/polygrad.v1.Polygrad/Realize')).length >= 6, calls.join('\n'));
});
