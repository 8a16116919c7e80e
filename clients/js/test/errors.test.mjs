// Each failure gives its PolygradError subclass with the gRPC status name and the daemon's message.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  Tensor, connect, close, PolygradError, PolygradInvalidArgument, PolygradNotFound, PolygradUnauthenticated,
  PolygradConnectionError,
} from '../index.mjs';
import { startDaemon } from './daemon.mjs';

let daemon;
let guarded;
const TOKEN = '3f9c0a77d1e24b1b8f0e2f6a5c4d3b21';
before(async () => {
  daemon = await startDaemon();
  guarded = await startDaemon({ tokens: { [TOKEN]: 'team-js' } });
});
after(async () => {
  await close();
  await daemon.stop();
  await guarded.stop();
});

test('a matmul shape mismatch is INVALID_ARGUMENT with the daemon\'s message naming the node', async () => {
  await connect({ address: daemon.address });
  const a = Tensor.ones(2, 3);
  const b = Tensor.ones(4, 5);
  const err = await a.matmul(b).data().then(() => null, (e) => e);
  assert.ok(err instanceof PolygradInvalidArgument, String(err));
  assert.ok(err instanceof PolygradError);
  assert.equal(err.code, 'INVALID_ARGUMENT');
  assert.match(err.details, /MATMUL/);
  assert.match(err.message, /^Realize failed: INVALID_ARGUMENT: /);
  // the session stays usable
  assert.equal(await Tensor.ones(2).sum().item(), 2);
});

test('an unknown handle is NOT_FOUND with the daemon\'s message', async () => {
  const conn = await connect({ address: daemon.address });
  const err = await conn.download('987654321').then(() => null, (e) => e);
  assert.ok(err instanceof PolygradNotFound, String(err));
  assert.equal(err.code, 'NOT_FOUND');
  assert.match(err.details, /987654321/);
});

test('a wrong token is UNAUTHENTICATED; the right one works', async () => {
  const err = await connect({ address: guarded.address, token: 'not-a-token' }).then(() => null, (e) => e);
  assert.ok(err instanceof PolygradUnauthenticated, String(err));
  assert.equal(err.code, 'UNAUTHENTICATED');
  assert.ok(err.details.length > 0);
  await connect({ address: guarded.address, token: TOKEN });
  assert.deepEqual(await Tensor.from([1, 2]).add(1).data(), new Int32Array([2, 3]));
});

test('an unreachable address is a PolygradConnectionError naming the cause, within seconds', async () => {
  const missing = path.join(daemon.dir, 'nobody-listens.sock');
  const err = await connect({ address: `unix:${missing}`, connectTimeout: 60 }).then(() => null, (e) => e);
  assert.ok(err instanceof PolygradConnectionError, String(err));
  assert.match(err.message, /no socket file/);
  const refused = await connect({ address: '127.0.0.1:1', connectTimeout: 60 }).then(() => null, (e) => e);
  assert.ok(refused instanceof PolygradConnectionError, String(refused));
  assert.match(refused.message, /ECONNREFUSED/);
});
