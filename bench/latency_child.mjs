// The JavaScript client's side of bench/latency_bench.py (--client js): the same three workloads
// against POLYGRAD_ADDRESS, one JSON line of ms per step (and the client's cost of one dispatched
// realize, in us). POLYGRAD_ASYNC and POLYGRAD_MAX_IN_FLIGHT come from the parent.
import { Tensor, nn, compileStep, synchronize } from '../clients/js/index.mjs';

const steps = Number(process.argv[2] || 60);
const rounds = Number(process.argv[3] || 5);
Tensor.manualSeed(0);
const x = Tensor.rand(128, 784);
const hot = new Float32Array(128 * 10);
for (let i = 0; i < 128; i++) hot[i * 10 + ((i * 7) % 10)] = 1;
const y = Tensor.from(hot, { dtype: 'float32' }).reshape(128, 10);
await Tensor.realize(x, y);

const model = { l1: new nn.Linear(784, 256), l2: new nn.Linear(256, 10) };
const opt = new nn.SGD(nn.getParameters(model), { lr: 0.01 });
const lossOf = (m, a, b) => m.l2.forward(m.l1.forward(a).relu()).logSoftmax(-1).mul(b).sum(1).mean().neg();

// ms per step over n steps, reads included: a dispatched step is paid for where a read waits.
async function timed(step, n, warm, every = 0, read = null) {
  for (let i = 0; i < warm; i++) await step();
  if (read) await read();
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    await step();
    if (every && i % every === every - 1) await read();
  }
  if (read) await read();
  return (performance.now() - start) / n;
}

const out = {};
let loss;
out.eager = await timed(async () => {
  opt.zeroGrad();
  loss = lossOf(model, x, y);
  loss.backward();
  await opt.step();
}, steps, 5, 10, () => loss.item());

const train = async (m, o, a, b) => {
  o.zeroGrad();
  const l = lossOf(m, a, b);
  l.backward();
  await o.step();
  return l;
};
const step = await compileStep(train, model, opt, x, y);
out.compiled = await timed(async () => { await step.run(); }, steps, 3, 0, () => step.lossValue());

let t = Tensor.from([1], { dtype: 'float32' });
await t.realize();
const tiny = async () => { t = t.add(1); await t.realize(); };
out.tiny = await timed(tiny, 4 * steps, 5, 0, () => t.item());

// The median of `rounds` rounds (latency_bench.py's ROUNDS): V8 compiles the hot path during the first.
const n = 4 * steps;
const us = [];
for (let r = 0; r < rounds; r++) {
  const start = performance.now();
  for (let i = 0; i < n; i++) await tiny();
  const sent = performance.now();
  await synchronize();
  us.push((1000 * (sent - start)) / n);
}
out.dispatch_us = us.sort((a, b) => a - b)[Math.floor(rounds / 2)];
console.log(JSON.stringify(out));
process.exit(0);
