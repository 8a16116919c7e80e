// 10,000 eager iterations of a small graph leave the daemon's live buffers and bytes flat: tensors
// the garbage collector takes are released with the next request.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Tensor, connect, close, graphStats, flushReleases } from '../index.mjs';
import { startDaemon, gauge } from './daemon.mjs';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

let daemon;
before(async () => {
  daemon = await startDaemon({ metrics: true });
  await connect({ address: daemon.address });
});
after(async () => {
  await close();
  await daemon.stop();
});

// Collects garbage until the client holds no more than `nodes` node objects (the finalizers run
// between turns of the event loop), sends the queued releases, and reads the daemon's gauges.
async function settle(nodes) {
  for (let i = 0; graphStats().liveNodes > nodes; i++) {
    if (i > 1000) throw new Error(`the client still holds ${graphStats().liveNodes} nodes`);
    gc();
    await new Promise((r) => setImmediate(r));
  }
  await flushReleases();
  return [await gauge(daemon.metricsUrl, 'polygradd_buffers'), await gauge(daemon.metricsUrl, 'polygradd_buffer_bytes')];
}

test('10,000 eager iterations run in flat daemon memory', async (t) => {
  const w = Tensor.from(new Float32Array(256).fill(0.5));
  await w.realize();
  const iteration = async (i) => {
    const x = Tensor.from(new Float32Array(256).fill(i % 7));
    const y = x.mul(w).add(1).relu().sum();
    return y.item();
  };
  for (let i = 0; i < 100; i++) await iteration(i);
  const base = await settle(1);
  assert.ok(base[0] >= 1, 'w holds a buffer');
  let sum = 0;
  let peak = 0;
  const firstId = graphStats().nextId;
  for (let i = 0; i < 10000; i++) {
    sum += await iteration(i);
    if (i % 100 === 99) peak = Math.max(peak, graphStats().sentLive);
  }
  const made = graphStats().nextId - firstId;
  assert.equal(sum, 10000 * 256 + 0.5 * 256 * [...Array(10000).keys()].reduce((a, i) => a + (i % 7), 0));
  t.diagnostic(`at most ${peak} of the loop's ${made} nodes alive on the daemon at once`);
  const end = await settle(1);
  assert.deepEqual(end, base, `live buffers and bytes at the start ${base}, after 10,000 iterations ${end}`);
  // Without a forced collection the garbage collector decides when nodes go; what it takes during
  // the loop must be released during the loop, not pile up until the end.
  assert.ok(peak < made / 2, `the daemon knew ${peak} of the loop's ${made} nodes at once: releases did not keep up`);
});
