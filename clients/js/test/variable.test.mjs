// Variables in shapes (tinygrad's symbolic dims), as tests/e2e/test_symbolic_dims.py for Python:
// attention over the first startPos + 1 rows of a cache matches a plain JS reference at every
// position; jit replays every position from one capture (RunStep's `variables`); a KV cache written
// and read at a symbolic begin is captured once; bad Variables throw; a symbolic dim is not read
// back; the wire bytes are the Python client's; and the daemon's buffers stay flat over a loop.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createRequire } from 'node:module';
import { Tensor, Variable, SymInt, connect, close, jit, graphStats, flushReleases, PolygradInvalidArgument } from '../index.mjs';
import { startDaemon, gauge, REPO } from './daemon.mjs';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
const require = createRequire(import.meta.url);
const { load } = require('../src/proto.js');
const { GRAPH } = require('../src/graph.js');

let daemon;
before(async () => {
  daemon = await startDaemon({ metrics: true });
  await connect({ address: daemon.address });
});
after(async () => {
  await close();
  await daemon.stop();
});

const W = 16;
const D = 8;

// Deterministic data without a seedable generator: a rows x cols matrix as nested arrays.
const matrix = (rows, cols, seed) => Array.from({ length: rows }, (_, r) => Array.from({ length: cols },
  (_, c) => Math.sin(seed * 7.3 + r * 1.9 + c * 0.7) * 1.5));

// softmax(q k[:n]^T) v[:n], row by row, in float64.
function attention(q, k, v, n) {
  return q.map((qr) => {
    const s = k.slice(0, n).map((kr) => kr.reduce((a, x, i) => a + x * qr[i], 0));
    const m = Math.max(...s);
    const e = s.map((x) => Math.exp(x - m));
    const z = e.reduce((a, x) => a + x, 0);
    return v[0].map((_, c) => e.reduce((a, w, r) => a + (w / z) * v[r][c], 0));
  });
}

function assertClose(got, want, what, tol = 1e-5) {
  const flat = want.flat(Infinity);
  assert.equal(got.length, flat.length, `${what}: ${got.length} values, want ${flat.length}`);
  flat.forEach((w, i) => assert.ok(Math.abs(got[i] - w) <= tol * Math.max(1, Math.abs(w)), `${what}[${i}]: ${got[i]} vs ${w}`));
}

const columns = (rows, f) => rows[0].map((_, c) => f(rows.map((r) => r[c])));

test('attention over a symbolic prefix matches a JS reference at every position', async () => {
  const [k, v, q] = [matrix(W, D, 1), matrix(W, D, 2), matrix(2, D, 3)];
  const [K, V, Q] = await Promise.all([k, v, q].map((a) => Tensor.from(a).realize()));
  const startPos = new Variable('start_pos', 0, W - 1);
  for (const pos of [0, 4, 15, 7]) {
    const sp = startPos.bind(pos);
    const keys = K.shrink([[0, sp.add(1)], null]);
    const vals = V.slice([0, sp.add(1)]);
    assert.deepEqual(keys.shape, [W, D], 'a symbolic axis reports its largest size');
    const got = await Q.matmul(keys.T).softmax(-1).matmul(vals).data();
    assertClose(got, attention(q, k, v, pos + 1), `position ${pos}`);
    // Reductions of every kind see only the valid rows.
    const valid = k.slice(0, pos + 1);
    assertClose(await keys.sum(0).data(), columns(valid, (c) => c.reduce((a, x) => a + x, 0)), `sum at ${pos}`);
    assertClose(await keys.max(0).data(), columns(valid, (c) => Math.max(...c)), `max at ${pos}`);
    assertClose(await keys.min(0).data(), columns(valid, (c) => Math.min(...c)), `min at ${pos}`);
    // x[p] and x[p:p+1] read the row at a begin held per run.
    assertClose(await K.index(sp).data(), k[pos], `row ${pos}`);
    assertClose(await K.slice([sp, sp.add(1)]).sum(0).data(), k[pos], `rows ${pos}:${pos + 1}`);
  }
});

test('symbolic reshapes and expands, and bounds that take the value', async () => {
  const a = matrix(W, D, 4);
  const A = await Tensor.from(a).realize();
  const n = new Variable('n', 1, W).bind(5);
  const part = A.shrink([[0, n], null]);
  const total = a.slice(0, 5).flat().reduce((s, x) => s + x, 0);
  const flat = part.reshape([n.mul(D)]); // the symbolic axis merged with the one inside it
  assert.deepEqual(flat.shape, [W * D]);
  assert.ok(Math.abs(await flat.sum().item() - total) < 1e-4);
  const col = Tensor.ones([1, D]).expand([n, D]); // a symbolic expand
  assert.ok(Math.abs(await col.mul(part).sum().item() - total) < 1e-4);
  // A symbolic begin whose end is no begin + k, or an end past the axis at the largest value,
  // takes the value: a plain shrink.
  const b = A.shrink([[new Variable('b', 0, 3).bind(1), 4], null]);
  assert.deepEqual(b.shape, [3, D]);
  const big = A.shrink([[0, new Variable('big', 1, W + 4).bind(2)], null]);
  assert.deepEqual(big.shape, [2, D]);
  assertClose(await big.data(), a.slice(0, 2), 'big');
});

test('Variable checks its name, bounds and values', () => {
  assert.throws(() => new Variable('', 0, 3), RangeError);
  assert.throws(() => new Variable('x'.repeat(65), 0, 3), RangeError);
  assert.ok(new Variable('x'.repeat(64), 0, 3));
  assert.throws(() => new Variable('v', 0.5, 3), TypeError);
  assert.throws(() => new Variable('v', 4, 3), RangeError);
  const v = new Variable('v', 1, 8);
  assert.throws(() => v.bind(0), /outside \[1, 8\]/);
  assert.throws(() => v.bind(9), /outside \[1, 8\]/);
  assert.throws(() => v.bind(2.5), TypeError);
  const p = v.bind(3);
  assert.ok(p instanceof SymInt);
  assert.equal(Number(p), 3);
  assert.equal(p.value, 3);
  assert.equal(p.max, 8);
  const s = p.mul(2).add(1).sub(3);
  assert.deepEqual([s.value, s.max, s.factor, s.offset], [4, 14, 2, -2]);
  assert.throws(() => p.mul(0), RangeError);
  assert.throws(() => p.add(0.5), TypeError);
});

test('a symbolic dim is not read back; the daemon says so and the session goes on', async () => {
  const A = await Tensor.ones([W, D]).realize();
  const part = A.shrink([[0, new Variable('n', 1, W - 1).bind(3).add(1)], null]);
  await assert.rejects(part.data(), (e) => e instanceof PolygradInvalidArgument && /output \d+ has a symbolic dim \(axis 0\)/.test(e.message));
  await assert.rejects(part.mean(0).data(), (e) => e instanceof PolygradInvalidArgument && /symbolic dim/.test(e.message));
  assert.equal(await A.sum().item(), W * D);
});

test('the wire carries symbolic dims byte for byte as the Python client', async () => {
  const env = { ...process.env, PYTHONPATH: path.join(REPO, 'clients', 'python') };
  delete env.POLYGRAD_ADDRESS;
  const script = path.join(REPO, 'clients', 'js', 'test', 'fixtures', 'symbolic_wire.py');
  const py = await new Promise((resolve, reject) => {
    execFile('/usr/bin/python3', [script], { env }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the Python client failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
  // The same graphs as the fixture's, lazily (nothing is sent).
  const p = new Variable('start_pos', 0, 15).bind(4);
  const n = new Variable('n', 1, 16).bind(5);
  const x = Tensor.zeros([16, 8]);
  const ones = Tensor.zeros([1, 8]);
  const cases = {
    end: x.shrink([[0, p.add(1)], null])._node,
    begin: x.shrink([[p, p.add(1)], null])._node,
    'begin past the axis': x.shrink([[p, p.add(2)], null])._node,
    select: x.index(p)._node.src[0],
    slice: x.index(':', 0).slice([p, p.add(1)])._node,
    mul: x.reshape([128]).shrink([[0, p.mul(8).add(8)]])._node,
    expand: ones.expand([n, 8])._node,
    reshape: x.shrink([[0, n], null]).reshape([n.mul(8)])._node,
  };
  const realize = load().methods.Realize;
  assert.deepEqual(Object.keys(cases), Object.keys(py));
  for (const [name, node] of Object.entries(cases)) {
    const m = { ...GRAPH.toWire(node), id: 7, src: [3] };
    assert.equal(realize.requestSerialize({ nodes: [m] }).toString('hex'), py[name], name);
  }
});

test('jit replays a new Variable value from one capture; a value taken as a number captures again', async () => {
  const [k, q] = [matrix(W, D, 5), matrix(1, D, 6)];
  const K = await Tensor.from(k).realize();
  const startPos = new Variable('start_pos', 0, W - 1);
  const attend = jit((x, pos) => {
    const keys = K.shrink([[0, pos.add(1)], null]);
    return x.matmul(keys.T).softmax(-1).matmul(keys);
  });
  const positions = [2, 3, 5, 9, 15, 0, 5];
  const captures = new Set();
  let requests = null;
  for (const [i, pos] of positions.entries()) {
    const got = await (await attend(Tensor.from(q), startPos.bind(pos))).data();
    assertClose(got, attention(q, k, k, pos + 1), `position ${pos}`);
    if (attend.captured) captures.add(attend.captured);
    if (i === 1) requests = graphStats().requests;
  }
  assert.equal(captures.size, 1, 'one capture for every position');
  assert.equal(attend.captured.runs, positions.length - 1);
  assert.deepEqual([...attend.captured.variables], ['start_pos']);
  assert.equal(graphStats().requests, requests, 'a replay sends no Realize');

  const indexed = jit((x, pos) => x.mul(K.index(pos)).sum()); // a row read from a begin held per run
  for (const pos of [1, 2, 3, 4]) {
    const want = q[0].reduce((a, x, c) => a + x * k[pos][c], 0);
    assert.ok(Math.abs(await (await indexed(Tensor.from(q), startPos.bind(pos))).item() - want) < 1e-4, `row ${pos}`);
  }
  assert.equal(indexed.captured.runs, 3, 'one capture for every value');

  const weighted = jit((x, pos) => x.mul(K.index(0)).mul(Number(pos)).sum()); // Number(pos): a plain number
  const captured = new Set();
  for (const pos of [1, 2, 3]) {
    const want = q[0].reduce((a, x, c) => a + x * k[0][c], 0) * pos;
    assert.ok(Math.abs(await (await weighted(Tensor.from(q), startPos.bind(pos))).item() - want) < 1e-4, `weighted ${pos}`);
    if (weighted.captured) captured.add(weighted.captured);
  }
  assert.equal(captured.size, 2, 'each new value captured again');
  assert.equal(weighted.captured.runs, 1);
  await Promise.all([attend.reset(), indexed.reset(), weighted.reset()]);
});

test('a KV cache written and read at a symbolic begin is captured once', async () => {
  const rows = matrix(W, D, 7);
  const cache = await Tensor.zeros([2, W, D]).realize();
  const allpos = await Tensor.from(rows).realize();
  const startPos = new Variable('start_pos', 0, W - 1);
  const step = jit((x, pos) => {
    cache.setitem(':', { start: pos, stop: pos.add(1) }, ':', Tensor.stack([x, x.neg()]));
    const keys = cache.index(0).slice([0, pos.add(1)]);
    return keys.sum(0).add(allpos.shrink([[pos, pos.add(1)], null]).reshape([D]));
  });
  const want = [0, 1].map(() => Array.from({ length: W }, () => new Array(D).fill(0)));
  for (let pos = 0; pos < 8; pos++) {
    const x = matrix(1, D, 10 + pos);
    const got = await (await step(Tensor.from(x), startPos.bind(pos))).data();
    want[0][pos] = x[0];
    want[1][pos] = x[0].map((e) => -e);
    const sums = columns(want[0].slice(0, pos + 1), (c) => c.reduce((a, e) => a + e, 0));
    assertClose(got, sums.map((s, c) => s + rows[pos][c]), `position ${pos}`);
  }
  assertClose(await cache.data(), want, 'the cache');
  assert.equal(step.captured.runs, 7);
  assert.deepEqual([...step.captured.variables], ['start_pos']);
  await step.reset();
});

// Collects garbage and sends the queued releases until the daemon holds at most `buffers` live
// buffers (the finalizers run between turns of the event loop, in no fixed number of turns), and
// returns the daemon's live buffer count: more than `buffers` only when the client never let go.
async function settledBuffers(buffers) {
  let now = Infinity;
  for (let i = 0; i < 500 && now > buffers; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
    await flushReleases();
    now = await gauge(daemon.metricsUrl, 'polygradd_buffers');
  }
  return now;
}

test('symbolic dims leave no daemon buffer behind, in realizes and in a jit', async () => {
  const K = await Tensor.ones([32, D]).realize();
  const v = new Variable('n', 1, 32);
  const at = new Variable('at', 0, 30);
  // Every tensor of the earlier tests is garbage: K's is the one buffer left.
  const base = await settledBuffers(1);
  assert.equal(base, 1, 'K holds a buffer');
  for (let n = 1; n <= 20; n++) {
    assert.equal(await K.slice([0, v.bind(n)]).sum().item(), D * n);
    const b = at.bind(n);
    assert.equal(await K.slice([b, b.add(2)]).sum().item(), 2 * D); // a begin held per run
  }
  const f = jit((x, n) => K.slice([0, n]).sum(0).add(x));
  for (let n = 1; n <= 10; n++) assert.deepEqual(Array.from(await (await f(Tensor.zeros([D]), v.bind(n))).data()), new Array(D).fill(n));
  assert.equal(f.captured.runs, 9);
  await f.reset();
  assert.equal(await settledBuffers(base), base);
});
