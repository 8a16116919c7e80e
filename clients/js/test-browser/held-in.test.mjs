// The held-in JS test files, run inside headless Chromium against the browser build: each file is
// bundled as it is, with node:test, node:assert/strict and test/daemon.mjs replaced by their page
// forms (held-in/), '../index.mjs' by dist/polygrad.browser.mjs, and every other node: module by one
// that throws. The daemons are started here, in Node, with the file's own options and a gRPC-Web
// port that allows the page's origin. Each test is reported under its own name; the tests that need
// Node are listed with the reason in NEEDS_NODE below (not run in the page, said in the output),
// and every name there must still exist.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { startDaemon, gauge } from '../test/daemon.mjs';
import { buildBrowser, nodeOnlyPlugin } from '../scripts/build-browser.mjs';
import { launchChromium } from './chromium.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TESTS = path.join(HERE, '..', 'test');

// The files that run in the page, and in each the tests that need what only Node has.
const NEEDS_NODE = {
  'tensor.test.mjs': {
    'fromUrl reads the bytes of an http URL (gunzipped when asked) as uint8': 'serves its bytes with node:http and node:zlib',
    'a hand-written assign loop sends the same graph every step': 'reads the graph through src/ internals (createRequire)',
    'a gradient node lives where its target does, whatever the loss\'s device': 'reads the graph through src/ internals (createRequire)',
    'LayerNorm and RMSNorm send their weight and bias inside one LAYERNORM / RMS_NORM node': 'reads the graph through src/ internals (createRequire)',
    'batchnorm is tinygrad\'s, one BATCHNORM_INVSTD: statistics along an axis, invstd broadcasting': 'reads the graph through src/ internals (createRequire)',
  },
  'jit.test.mjs': {},
  'errors.test.mjs': {
    'an unreachable address is a PolygradConnectionError naming the cause, within seconds':
      'a Unix socket and a raw TCP port are addresses only Node can dial',
  },
};

let browser = null;
let whyNot = null;
let site;
let work;
const daemons = new Map();

// One origin for the pages: / loads /<file> (a bundled test file) and flags that it has loaded.
function serve(dir) {
  const server = http.createServer((req, res) => {
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname.slice(1));
    const file = path.join(dir, name);
    if (name && !name.includes('/') && fs.existsSync(file)) {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(fs.readFileSync(file));
    } else {
      const page = new URL(req.url, 'http://x').searchParams.get('file');
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><script type="module">import "/${page}"; window.__heldInLoaded = true;</script>`);
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    server, origin: `http://127.0.0.1:${server.address().port}`,
  })));
}

// A test file as a page's module: its imports resolved to their page forms.
async function bundle(file, outdir) {
  const pageForms = {
    name: 'held-in',
    setup(build) {
      build.onResolve({ filter: /^\.\.\/index\.mjs$/ }, () => ({ path: '/polygrad.browser.mjs', external: true }));
      build.onResolve({ filter: /^node:test$/ }, () => ({ path: path.join(HERE, 'held-in', 'node-test.mjs') }));
      build.onResolve({ filter: /^node:assert\/strict$/ }, () => ({ path: path.join(HERE, 'held-in', 'assert-strict.mjs') }));
      build.onResolve({ filter: /^\.\/daemon\.mjs$/ }, () => ({ path: path.join(HERE, 'held-in', 'daemon.mjs') }));
    },
  };
  await esbuild.build({
    entryPoints: [path.join(TESTS, file)], bundle: true, format: 'esm', platform: 'browser', target: ['es2020'],
    outfile: path.join(outdir, file), logLevel: 'warning', legalComments: 'none',
    define: { 'process.env.NODE_DEBUG': 'false' }, // read by the assert package's util
    plugins: [pageForms, nodeOnlyPlugin(/^node:/)],
  });
}

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-held-in-'));
  await buildBrowser(work);
  for (const file of Object.keys(NEEDS_NODE)) await bundle(file, work);
  site = await serve(work);
  ({ browser, whyNot } = await launchChromium());
});
after(async () => {
  if (browser) await browser.close();
  for (const d of daemons.values()) await d.stop();
  site.server.close();
  fs.rmSync(work, { recursive: true, force: true });
});

// Runs `file` in a fresh page; its outcomes, one per test, in order.
async function runInPage(file) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.exposeFunction('__pgHostStartDaemon', async (options = {}) => {
    const args = [...(options.args || []), '--web-listen=127.0.0.1:0', `--web-allow-origin=${site.origin}`];
    const d = await startDaemon({ ...options, args });
    const id = String(daemons.size + 1);
    daemons.set(id, d);
    return { id, web: d.web, metricsUrl: d.metricsUrl };
  });
  await page.exposeFunction('__pgHostStopDaemon', async (id) => {
    const d = daemons.get(id);
    daemons.delete(id);
    if (d) await d.stop();
  });
  await page.exposeFunction('__pgHostGauge', (url, name) => gauge(url, name));
  await page.goto(`${site.origin}/?file=${encodeURIComponent(file)}`);
  await page.waitForFunction('window.__heldInLoaded === true', { timeout: 60000 }).catch(() => {
    throw new Error(`${file} did not load in the page: ${errors.join('; ')}`);
  });
  const names = await page.evaluate(() => window.__heldIn.names());
  const results = await page.evaluate((skips) => window.__heldIn.run(skips), NEEDS_NODE[file]);
  await page.close();
  return { names, results };
}

for (const file of Object.keys(NEEDS_NODE)) {
  test(`${file} in Chromium`, async (t) => {
    if (!browser) return t.skip(whyNot);
    const { names, results } = await runInPage(file);
    for (const name of Object.keys(NEEDS_NODE[file])) {
      assert.ok(names.includes(name), `NEEDS_NODE names a test ${file} no longer has: ${name}`);
    }
    let passed = 0;
    for (const r of results) {
      // A test that needs Node is not run here (the js suite runs it): said, not counted as a skip.
      if (r.status === 'skip' && NEEDS_NODE[file][r.name]) {
        t.diagnostic(`in Node only (${NEEDS_NODE[file][r.name]}): ${r.name}`);
        continue;
      }
      await t.test(r.name, (st) => {
        for (const d of r.diagnostics || []) st.diagnostic(d);
        if (r.status === 'skip') return st.skip(r.reason);
        if (r.status === 'fail') throw new Error(`in Chromium: ${r.error}`);
        passed += 1;
      });
    }
    assert.ok(passed > 0, `no test of ${file} ran in the page`);
    t.diagnostic(`${passed} of ${names.length} tests passed in Chromium`);
  });
}
