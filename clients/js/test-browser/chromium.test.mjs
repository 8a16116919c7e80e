// The browser build in a real browser: Debian's Chromium, headless, driven by puppeteer-core (it
// downloads no browser). A page served from its own origin loads dist/polygrad.browser.mjs and talks
// to a daemon's gRPC-Web port: an MLP trains with the losses the Node client gets over gRPC, bit
// for bit; errors are PolygradErrors with the daemon's code; a token-protected daemon refuses a
// page without the token; a page from an origin the daemon does not allow is refused by CORS.
// Skips, saying why, only where Chromium cannot start.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import * as node from '../index.mjs';
import { webAddress, mlpLosses } from '../test/web_helpers.mjs';
import { startDaemon } from '../test/daemon.mjs';
import { buildBrowser } from '../scripts/build-browser.mjs';
import { launchChromium } from './chromium.mjs';

const TOKEN = '3f9c0a77d1e24b1b8f0e2f6a5c4d3b21';
let browser = null;
let whyNot = null;
let daemon;
let guarded;
let site;
let foreign;

// An HTTP server for the page: / loads the bundle as a module and exposes it as window.pg.
function serve(dist) {
  const server = http.createServer((req, res) => {
    if (req.url === '/polygrad.browser.mjs') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(fs.readFileSync(path.join(dist, 'polygrad.browser.mjs')));
    } else {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><script type="module">import * as pg from "/polygrad.browser.mjs"; window.pg = pg;</script>');
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    server, origin: `http://127.0.0.1:${server.address().port}`,
  })));
}


before(async () => {
  const dist = await buildBrowser(fs.mkdtempSync(path.join(process.env.TMPDIR || '/tmp', 'pg-dist-')));
  site = await serve(dist);
  foreign = await serve(dist);
  daemon = await startDaemon({ args: ['--web-listen=127.0.0.1:0', `--web-allow-origin=${site.origin}`] });
  guarded = await startDaemon({ args: ['--web-listen=127.0.0.1:0', `--web-allow-origin=${site.origin}`],
    tokens: { [TOKEN]: 'team-web' } });
  ({ browser, whyNot } = await launchChromium());
});
after(async () => {
  if (browser) await browser.close();
  await node.close();
  site.server.close();
  foreign.server.close();
  await daemon.stop();
  await guarded.stop();
});

// A tab at `origin` with window.pg loaded.
async function tab(t, origin = site.origin) {
  if (!browser) {
    t.skip(whyNot);
    return null;
  }
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${origin}/`);
  await page.waitForFunction('window.pg !== undefined', { timeout: 60000 }).catch(() => {
    throw new Error(`the bundle did not load: ${errors.join('; ')}`);
  });
  return page;
}


test('Chromium trains over gRPC-Web with the Node client\'s losses over gRPC, bit for bit', async (t) => {
  const page = await tab(t);
  if (!page) return;
  const inChromium = await page.evaluate(`(${mlpLosses.toString()})(window.pg, ${JSON.stringify(webAddress(daemon))})`);
  const inNode = await mlpLosses(node, daemon.address);
  assert.deepEqual(inChromium, inNode);
  assert.ok(inChromium[5] < inChromium[0], `the loss went down: ${inChromium}`);
  t.diagnostic(`loss ${inChromium[0]} -> ${inChromium[5]} in Chromium and in Node`);
  await page.close();
});

test('in Chromium, errors are PolygradErrors with the daemon\'s code; tokens are required', async (t) => {
  const page = await tab(t);
  if (!page) return;
  const out = await page.evaluate(async (web, guardedWeb, token) => {
    const { pg } = window;
    const describe = (e) => e && { name: e.name, code: e.code, details: e.details, polygrad: e instanceof pg.PolygradError };
    await pg.connect({ address: web });
    const shape = await pg.Tensor.ones(2, 3).matmul(pg.Tensor.ones(4, 5)).data().then(() => null, describe);
    const refused = await pg.connect({ address: guardedWeb }).then(() => null, describe);
    await pg.connect({ address: guardedWeb, token });
    const withToken = Array.from(await pg.Tensor.from([1, 2]).add(1).data());
    await pg.close();
    return { shape, refused, withToken };
  }, webAddress(daemon), webAddress(guarded), TOKEN);
  assert.equal(out.shape.name, 'PolygradInvalidArgument');
  assert.equal(out.shape.code, 'INVALID_ARGUMENT');
  assert.ok(out.shape.polygrad);
  assert.match(out.shape.details, /MATMUL/);
  assert.equal(out.refused.name, 'PolygradUnauthenticated');
  assert.deepEqual(out.withToken, [2, 3]);
  await page.close();
});

test('a page from an origin the daemon does not allow is refused by CORS', async (t) => {
  const page = await tab(t, foreign.origin);
  if (!page) return;
  const err = await page.evaluate(async (web) => window.pg.connect({ address: web }).then(() => null,
    (e) => ({ name: e.name, message: e.message })), webAddress(daemon));
  assert.equal(err.name, 'PolygradConnectionError');
  assert.match(err.message, /cannot reach polygradd/);
  await page.close();
});
