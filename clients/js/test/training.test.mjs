// An MLP 784-128-10 trained 50 Adam steps from the same initial weights and data gives the same
// losses from JS as from the Python client (relative difference <= 1e-6), eager and compiled. The
// JS client writes the weights and data with nn.safeSave; the Python client reads them.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { Tensor, nn, connect, close, compileStep } from '../index.mjs';
import { startDaemon, REPO } from './daemon.mjs';

const STEPS = 50;
const BATCH = 64;
const N = 4 * BATCH;

let daemon;
let state;
let file;
before(async () => {
  daemon = await startDaemon();
  await connect({ address: daemon.address });
  Tensor.manualSeed(1234);
  const init = new MLP();
  const x = Tensor.rand(N, 784);
  const y = Tensor.randint(N, { low: 0, high: 10 });
  file = path.join(daemon.dir, 'mlp.safetensors');
  await nn.safeSave({ ...nn.getStateDict(init), 'data.x': x, 'data.y': y }, file);
  state = nn.safeLoad(file);
});
after(async () => {
  await close();
  await daemon.stop();
});

class MLP {
  constructor() {
    this.l1 = new nn.Linear(784, 128);
    this.l2 = new nn.Linear(128, 10);
  }

  forward(x) {
    return this.l2.forward(this.l1.forward(x).relu());
  }
}

async function fresh() {
  const model = new MLP();
  const sd = Object.fromEntries(Object.entries(state).filter(([k]) => k.startsWith('l')));
  await nn.loadStateDict(model, sd);
  return [model, new nn.Adam(nn.getParameters(model), { lr: 1e-3 })];
}

async function batches() {
  const X = await state['data.x'].data();
  const Y = await state['data.y'].data();
  return (i) => {
    const b = i % (N / BATCH);
    return [X.subarray(b * BATCH * 784, (b + 1) * BATCH * 784), Y.subarray(b * BATCH, (b + 1) * BATCH)];
  };
}

function pythonLosses() {
  const env = { ...process.env, POLYGRAD_ADDRESS: daemon.address, PYTHONPATH: path.join(REPO, 'clients', 'python') };
  const script = path.join(REPO, 'clients', 'js', 'test', 'fixtures', 'mlp_python.py');
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/python3', [script, file], { env, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the Python client failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

function assertSame(t, js, py, what) {
  assert.equal(js.length, STEPS);
  assert.equal(py.length, STEPS);
  let worst = 0;
  for (let i = 0; i < STEPS; i++) {
    const rel = Math.abs(js[i] - py[i]) / Math.max(Math.abs(py[i]), 1e-30);
    worst = Math.max(worst, rel);
    assert.ok(rel <= 1e-6, `${what} step ${i}: JS ${js[i]} vs Python ${py[i]} (relative ${rel})`);
  }
  t.diagnostic(`${what}: largest relative difference ${worst}, loss ${js[0]} -> ${js[STEPS - 1]}`);
  assert.ok(js[STEPS - 1] < js[0], `${what}: the loss went down (${js[0]} → ${js[STEPS - 1]})`);
}

test('MLP losses from JS equal the Python client\'s, eager and with compileStep', async (t) => {
  const py = pythonLosses();
  const batch = await batches();

  let [model, opt] = await fresh();
  const eager = [];
  for (let i = 0; i < STEPS; i++) {
    const [xb, yb] = batch(i);
    const loss = model.forward(Tensor.from(xb, { shape: [BATCH, 784] })).crossEntropy(Tensor.from(yb));
    opt.zeroGrad();
    loss.backward();
    await opt.step();
    eager.push(await loss.item());
  }

  [model, opt] = await fresh();
  const trainStep = async (model, opt, x, y) => {
    const loss = model.forward(x).crossEntropy(y);
    opt.zeroGrad();
    loss.backward();
    await opt.step();
    return loss;
  };
  const [x0, y0] = batch(0);
  const step = await compileStep(trainStep, model, opt, Tensor.from(x0, { shape: [BATCH, 784] }), Tensor.from(y0));
  assert.ok(step.nKernels > 0);
  assert.deepEqual(step.inputNames, ['x', 'y']);
  const compiled = [];
  for (let i = 0; i < STEPS; i++) {
    const [xb, yb] = batch(i);
    await step.run({ x: xb, y: yb });
    compiled.push(await step.lossValue());
  }
  // the model's tensors stand for the trained buffers
  const w = await model.l2.weight.data();
  assert.equal(w.length, 1280);
  // A refused run changes nothing: the last loss stays readable.
  await assert.rejects(step.run({ x: new Float32Array(3) }), /shape|size|elements/);
  assert.equal(await step.lossValue(), compiled[STEPS - 1]);
  await step.release();

  const ref = await py;
  assertSame(t, eager, ref.eager, 'eager');
  assertSame(t, compiled, ref.compiled, 'compiled');
  assertSame(t, compiled, eager, 'compiled vs eager');
});
