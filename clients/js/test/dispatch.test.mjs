// Asynchronous dispatch (src/dispatch.js): realize() resolves once sent while the daemon still works,
// reads and synchronize() wait and throw what failed, and outstanding commands are bounded. Work is
// held in flight by the held compiler (tests/tools/held-compiler): a realize that needs a new kernel
// waits at its gate, so nothing here depends on timing.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Tensor, connect, close, synchronize, jit, PolygradResourceExhausted, PolygradConnectionError } from '../index.mjs';
import { startDaemon, REPO, WAIT_LIMIT_MS } from './daemon.mjs';

let daemon;
let gate;
let watchdogFired = false;

function heldCompiler() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-js-gate-'));
  const cc = path.join(dir, 'cc');
  fs.symlinkSync(path.join(REPO, 'tests', 'tools', 'held-compiler'), cc);
  const open = path.join(dir, 'open');
  fs.writeFileSync(open, '');
  return {
    dir, cc,
    hold: () => fs.rmSync(open, { force: true }),
    release: () => fs.writeFileSync(open, ''),
    held: () => fs.readdirSync(dir).some((f) => f.startsWith('held.')),
  };
}

async function waitHeld() {
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (!gate.held()) {
    if (Date.now() > deadline) throw new Error('no compile reached the held compiler');
    await new Promise((r) => setTimeout(r, 10));
  }
}

// If realize() waited for the daemon, the test would hang at the gate: a watchdog opens it and the
// test fails instead.
function watchdog() {
  const t = setTimeout(() => { watchdogFired = true; gate.release(); }, 300000);
  t.unref();
  return t;
}

// Connects to `address`, puts x = [1, 2, 3, 4] on the daemon, then sends first(x), a new kernel whose
// compile the gate holds, and second(of it) behind it: { conn, z, dog } once the compile waits.
async function heldPair(address, first, second) {
  const conn = await connect({ address });
  const x = Tensor.from([1, 2, 3, 4]);
  await x.realize();
  await x.array();
  gate.hold();
  const dog = watchdog();
  const y = first(x);
  await y.realize();
  const z = second(y);
  await z.realize();
  await waitHeld();
  return { conn, z, dog };
}

before(async () => {
  gate = heldCompiler();
  daemon = await startDaemon({ args: [`--compiler=${gate.cc}`, '--quick-compile=off'] });
});
after(async () => {
  gate.release();
  await close();
  await daemon.stop();
  fs.rmSync(gate.dir, { recursive: true, force: true });
});

test('realize() resolves while the daemon computes; a read waits for it', async () => {
  // z reads y, still being computed
  const { conn, z, dog } = await heldPair(daemon.address, (x) => x.mul(3).add(1), (y) => y.sub(1));
  assert.equal(conn.outstanding, 2);
  gate.release();
  clearTimeout(dog);
  assert.equal(watchdogFired, false, 'realize() waited for the held daemon');
  assert.deepEqual(await z.array(), [3, 6, 9, 12]);
});

test('outstanding commands are bounded: the next realize waits for an answer', async () => {
  const conn = await connect({ address: daemon.address, maxInFlight: 2 });
  const x = Tensor.from([1, 1, 1, 1]);
  await x.realize();
  await x.array();
  gate.hold();
  const dog = watchdog();
  const a = x.mul(5);
  const b = x.mul(6);
  await a.realize();
  await b.realize();
  await waitHeld();
  let thirdSent = false;
  const third = x.mul(7).realize().then(() => { thirdSent = true; });
  // However long it is given, the third stays unsent while both answers are held.
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(thirdSent, false);
  assert.equal(conn.outstanding, 2);
  gate.release();
  await third;
  clearTimeout(dog);
  assert.deepEqual(await a.array(), [5, 5, 5, 5]);
  assert.deepEqual(await b.array(), [6, 6, 6, 6]);
});

test('a jit replay resolves while the daemon computes; its output waits for the answer', async () => {
  const conn = await connect({ address: daemon.address });
  const w = await Tensor.from([0, 1, 2, 3]).realize();
  const f = jit(async (x) => {
    w.assign(w.add(x));
    await w.realize();
    return w.mul(2).sum();
  });
  const x = await Tensor.from([1, 1, 1, 1]).realize();
  for (let i = 0; i < 3; i++) await (await f(x)).item(); // eager, capture, replay: w = arange + 3
  gate.hold();
  const dog = watchdog();
  await x.mul(7).sum().realize(); // a new kernel, held: what comes next waits behind it
  await waitHeld();
  const a = await f(x); // queued behind the held realize, and resolved
  const b = await f(x);
  assert.equal(conn.outstanding, 3);
  gate.release();
  clearTimeout(dog);
  assert.equal(watchdogFired, false, 'a replay waited for the held daemon');
  assert.equal(await a.item(), 2 * (4 + 5 + 6 + 7));
  assert.equal(await b.item(), 2 * (5 + 6 + 7 + 8));
  assert.deepEqual(await w.array(), [5, 6, 7, 8]);
});

test('a daemon error is thrown by the next synchronize, and the session goes on', async () => {
  await connect({ address: daemon.address });
  const v = Tensor.ones(5000);
  // 5000^3 products: refused by the daemon's work bound, which the client does not check.
  const bad = Tensor.einsum('i,j,k->', v, v, v);
  await bad.realize();
  await assert.rejects(synchronize(), (e) => e instanceof PolygradResourceExhausted && /EINSUM's product/.test(e.message));
  await synchronize(); // thrown once: nothing is outstanding any more
  assert.equal(await Tensor.from([1]).add(1).item(), 2);
});

test('a daemon that dies mid-flight fails the pending work at the next read, never silently', async () => {
  const doomed = await startDaemon({ args: [`--compiler=${gate.cc}`, '--quick-compile=off'] });
  try {
    const { conn, z, dog } = await heldPair(doomed.address, (x) => x.mul(7).sub(2), (y) => y.add(1));
    assert.equal(conn.outstanding, 2);
    await doomed.kill(); // the stream ends under the work
    await assert.rejects(z.array(), (e) => e instanceof PolygradConnectionError && /polygradd/.test(e.message));
    assert.equal(conn.outstanding, 0, 'everything pending was answered by the end');
    clearTimeout(dog);
    assert.equal(watchdogFired, false);
  } finally {
    gate.release();
    await close();
    await doomed.stop();
  }
});
