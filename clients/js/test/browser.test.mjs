// The browser build (scripts/build-browser.mjs, package.json's "browser" condition) run where only
// a browser's globals exist: a Node vm context with fetch, TextEncoder/TextDecoder, timers and
// console, and no require, process or Buffer. Against a daemon's gRPC-Web port it trains as the
// Node client does over gRPC, bit for bit; errors are its PolygradErrors with the daemon's code;
// a token-protected daemon refuses it without the token; only http(s) addresses are accepted.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import * as node from '../index.mjs';
import { webAddress, mlpLosses } from './web_helpers.mjs';
import { startDaemon } from './daemon.mjs';
import { buildBrowser } from '../scripts/build-browser.mjs';

const TOKEN = '3f9c0a77d1e24b1b8f0e2f6a5c4d3b21';
let daemon;
let guarded;
let bundle;


// A fresh page: the bundle evaluated in a context holding only what a browser offers.
function page() {
  const context = vm.createContext({
    fetch, TextEncoder, TextDecoder, URL, AbortController, console, queueMicrotask,
    setTimeout, clearTimeout, setInterval, clearInterval,
  });
  vm.runInContext(bundle, context, { filename: 'polygrad.browser.js' });
  return context;
}

before(async () => {
  daemon = await startDaemon({ args: ['--web-listen=127.0.0.1:0'] });
  guarded = await startDaemon({ args: ['--web-listen=127.0.0.1:0'], tokens: { [TOKEN]: 'team-web' } });
  const out = await buildBrowser(fs.mkdtempSync(path.join(daemon.dir, 'dist-')));
  bundle = fs.readFileSync(path.join(out, 'polygrad.browser.js'), 'utf8');
});
after(async () => {
  await node.close();
  await daemon.stop();
  await guarded.stop();
});

test('the bundle needs none of Node: no require, process or Buffer reaches it', () => {
  assert.doesNotMatch(bundle, /\brequire\(/);
  const ctx = page();
  assert.equal(typeof ctx.polygrad.Tensor, 'function');
  assert.equal(typeof ctx.require, 'undefined');
  assert.equal(typeof ctx.process, 'undefined');
  assert.equal(typeof ctx.Buffer, 'undefined');
});


test('a page trains over gRPC-Web with the Node client\'s numbers over gRPC', async () => {
  const ctx = page();
  // Compiled in the page's realm, so its typed arrays are the page's own (as in one browser tab).
  const inPage = vm.runInContext(`(${mlpLosses.toString()})`, ctx);
  const viaWeb = await inPage(ctx.polygrad, webAddress(daemon));
  const viaGrpc = await mlpLosses(node, daemon.address);
  assert.deepEqual(Array.from(viaWeb), viaGrpc); // bit for bit (Array.from: the page's arrays are another realm's)
  assert.ok(viaWeb[5] < viaWeb[0], `the loss went down: ${viaWeb}`);
});

test('errors are the bundle\'s PolygradErrors with the daemon\'s code', async () => {
  const { polygrad: pg } = page();
  await pg.connect({ address: webAddress(daemon) });
  const err = await pg.Tensor.ones(2, 3).matmul(pg.Tensor.ones(4, 5)).data().then(() => null, (e) => e);
  assert.ok(err instanceof pg.PolygradInvalidArgument, String(err));
  assert.equal(err.code, 'INVALID_ARGUMENT');
  assert.match(err.details, /MATMUL/);
  const wrong = await pg.connect({ address: 'unix:/tmp/d.sock' }).then(() => null, (e) => e);
  assert.ok(wrong instanceof pg.PolygradConnectionError, String(wrong));
  assert.match(wrong.message, /gRPC-Web port/);
  const refused = await pg.connect({ address: webAddress(guarded) }).then(() => null, (e) => e);
  assert.ok(refused instanceof pg.PolygradUnauthenticated, String(refused));
  await pg.connect({ address: webAddress(guarded), token: TOKEN });
  assert.deepEqual(Array.from(await pg.Tensor.from([1, 2]).add(1).data()), [2, 3]);
  await pg.close();
});
