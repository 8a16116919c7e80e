// jit(fn), tinygrad's TinyJit: eager first call, capture, one RunStep per replay; closure state
// (an optimizer's model, an assign to an input); a jitted Adam loop against the eager one; errors.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor, nn, connect, close, jit, JitError, graphStats } from '../index.mjs';
import { startDaemon } from './daemon.mjs';

let daemon;
before(async () => {
  daemon = await startDaemon();
  await connect({ address: daemon.address });
});
after(async () => {
  await close();
  await daemon.stop();
});

const close6 = (a, b) => a.every((v, i) => Math.abs(v - b[i]) <= 1e-5 * Math.max(1, Math.abs(b[i])));

test('jit: every call right, eager then captured, replays send no graph', async () => {
  const add = jit((a, b) => a.add(b).mul(2));
  for (let i = 0; i < 5; i++) {
    const a = Tensor.rand(4, 4);
    const b = Tensor.rand(4, 4);
    const out = await add(a, b);
    const [av, bv, ov] = [await a.data(), await b.data(), await out.data()];
    assert.ok(close6(ov, av.map((v, k) => 2 * (v + bv[k]))));
    assert.equal(add.captured === null, i === 0, 'the first call is eager, the second captures');
  }
  const a = await Tensor.rand(4, 4).realize();
  const b = await Tensor.rand(4, 4).realize();
  await add(a, b);
  const before = graphStats().requests;
  for (let i = 0; i < 3; i++) await add(a, b);
  assert.equal(graphStats().requests, before, 'a replay sends no Realize');
  assert.equal(add.captured.runs, 8);
  // A replay that cannot be sent (its step was released) throws and leaves no output awaited,
  // which would make every later realize wait first.
  await add.captured.release();
  await assert.rejects(add(a, b), /released/);
  assert.equal(graphStats().awaited, 0);
});

test('jit: an assign to an input and to closure state is kept', async () => {
  const inc = jit(async (a) => { a.assign(a.add(1)); await a.realize(); });
  const a = await Tensor.zeros(1).realize();
  for (let i = 0; i < 5; i++) await inc(a);
  assert.equal(await a.item(), 5);

  const counter = await Tensor.from([0, 0], { dtype: 'int32' }).realize();
  const bump = jit((step) => { counter.assign(counter.add(step)); return counter.mul(2); });
  const outs = [];
  for (let i = 0; i < 4; i++) outs.push(Array.from(await (await bump(Tensor.from([1, 2], { dtype: 'int32' }))).data()));
  assert.deepEqual(Array.from(await counter.data()), [4, 8]);
  assert.deepEqual(outs, [[2, 4], [4, 8], [6, 12], [8, 16]]);
});

test('jit: structures come back; mismatched calls throw JitError', async () => {
  const f = jit((x, y) => ({ sum: x.add(y), pair: [x.mul(y)] }));
  for (let i = 0; i < 3; i++) {
    const r = await f(Tensor.from([1, 2]), Tensor.from([3, 5]));
    assert.deepEqual(Array.from(await r.sum.data()), [4, 7]);
    assert.deepEqual(Array.from(await r.pair[0].data()), [3, 10]);
  }
  await assert.rejects(f(Tensor.from([1, 2, 3]), Tensor.from([3, 5, 6])), (e) => e instanceof JitError && /int32\[3\].*int32\[2\]/.test(e.message));
  const x = Tensor.from([1, 2]);
  await assert.rejects(f(x, x), JitError);
  const nothing = jit(() => null);
  await assert.rejects(async () => { for (let i = 0; i < 3; i++) await nothing(Tensor.from([1])); }, /didn't JIT anything/);
  const notTensor = jit((a) => [a.add(1), 3]);
  await assert.rejects(async () => { for (let i = 0; i < 3; i++) await notTensor(Tensor.from([1])); }, JitError);
  await f.reset();
  assert.equal(f.captured, null);
});

test('jit: a training loop through closures matches the eager one', async () => {
  Tensor.manualSeed(5);
  const make = () => {
    const l1 = new nn.Linear(6, 16);
    const l2 = new nn.Linear(16, 3);
    return [l1, l2];
  };
  const [a1, a2] = make();
  const [b1, b2] = make();
  await nn.loadStateDict({ a: b1, b: b2 }, { 'a.weight': a1.weight, 'a.bias': a1.bias, 'b.weight': a2.weight, 'b.bias': a2.bias });
  const optJ = new nn.Adam(nn.getParameters([a1, a2]), { lr: 0.01 });
  const optE = new nn.Adam(nn.getParameters([b1, b2]), { lr: 0.01 });
  const step = jit(async (x, y) => {
    optJ.zeroGrad();
    const loss = a2.forward(a1.forward(x).tanh()).crossEntropy(y);
    loss.backward();
    await optJ.step();
    return loss;
  });
  const jitted = [];
  const eager = [];
  for (let i = 0; i < 12; i++) {
    const xs = Tensor.rand(16, 6);
    const ys = Tensor.randint(16, { low: 0, high: 3 });
    const xd = await xs.data();
    const yd = await ys.data();
    jitted.push(await (await step(Tensor.from(xd, { shape: [16, 6] }), Tensor.from(yd))).item());
    optE.zeroGrad();
    const le = b2.forward(b1.forward(Tensor.from(xd, { shape: [16, 6] })).tanh()).crossEntropy(Tensor.from(yd));
    le.backward();
    await optE.step();
    eager.push(await le.item());
  }
  for (let i = 0; i < 12; i++) assert.ok(Math.abs(jitted[i] - eager[i]) < 1e-4, `step ${i}: ${jitted[i]} vs ${eager[i]}`);
  assert.equal(optJ.steps, 12);
  assert.equal(step.captured.runs, 11);
});

test('jit: two jits updating one tensor see each other', async () => {
  const acc = await Tensor.from([0], { dtype: 'float32' }).realize();
  const add1 = jit(() => { acc.assign(acc.add(1)); return acc.mul(1); });
  const add10 = jit(() => { acc.assign(acc.add(10)); return acc.mul(1); });
  const got = [];
  for (const f of [add1, add1, add10, add1, add10, add10, add1, add1]) {
    got.push(await (await f()).item());
  }
  assert.deepEqual(got, [1, 2, 12, 13, 23, 33, 34, 35]);
});

test('jit: random numbers are drawn anew every replay, the numbers eager calls draw', async () => {
  const x = await Tensor.ones(4, 8).add(0).realize();
  const calls = async (f) => {
    Tensor.manualSeed(3);
    const before = Tensor.rand(4, 8); // drawn outside fn: the same in every call
    const out = [];
    for (let i = 0; i < 5; i++) {
      out.push(Array.from(await (await f(x, before)).data()));
    }
    return out;
  };
  const g = jit((a, b) => a.dropout(0.5).add(Tensor.rand(4, 8).mul(b)));
  const jitted = await Tensor.train(() => calls(g));
  assert.equal(g.captured.runs, 4);
  const eager = await Tensor.train(() => calls(async (a, b) => a.dropout(0.5).add(Tensor.rand(4, 8).mul(b))));
  assert.deepEqual(jitted, eager);
  assert.equal(new Set(jitted.map((v) => v.join())).size, 5, 'every call drew new numbers');
});
