// The playground page (examples/browser) served by the daemon itself (--web-playground) and used in
// headless Chromium as a person would: pick an example, press Run, watch the loss plot. The MLP on
// two moons trains (its loss falls below half of where it started, point by point on the plot),
// the daemon's kernel counts for the run are shown, and the tensor example prints its tables. A
// screenshot after training is saved (the path is in the test's diagnostics; POLYGRAD_ARTIFACTS
// names the directory). Skips, saying why, only where Chromium cannot start.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, REPO } from '../test/daemon.mjs';
import { webAddress } from '../test/web_helpers.mjs';
import { buildBrowser } from '../scripts/build-browser.mjs';
import { launchChromium } from './chromium.mjs';

let browser = null;
let whyNot = null;
let daemon;
let url;

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-playground-'));
  for (const f of fs.readdirSync(path.join(REPO, 'examples', 'browser'))) {
    if (!f.startsWith('polygrad.browser')) fs.copyFileSync(path.join(REPO, 'examples', 'browser', f), path.join(dir, f));
  }
  await buildBrowser(dir);
  daemon = await startDaemon({ args: ['--web-listen=127.0.0.1:0', `--web-playground=${dir}`] });
  url = webAddress(daemon);
  ({ browser, whyNot } = await launchChromium());
});
after(async () => {
  if (browser) await browser.close();
  await daemon.stop();
});

async function runExample(page, name) {
  await page.select('#example', name);
  const runs = await page.evaluate(() => window.playground.runs);
  await page.click('#run');
  await page.waitForFunction((n) => window.playground.runs > n, { timeout: 300000 }, runs);
  return page.evaluate(() => ({ ...window.playground, status: document.getElementById('status').textContent,
    stats: Array.from(document.querySelectorAll('#stats tr')).map((tr) => tr.innerText),
    tables: document.querySelectorAll('#out table').length }));
}

test('the playground trains an MLP on two moons with a live loss plot, served by the daemon', async (t) => {
  if (!browser) return t.skip(whyNot);
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 720 });
  await page.goto(`${url}/`);
  await page.waitForFunction('window.playground !== undefined && window.polygrad !== undefined');
  assert.equal(await page.$eval('#address', (e) => e.value), url); // the daemon's own origin by default

  const moons = await runExample(page, 'MLP on two moons');
  assert.equal(moons.error, null, moons.status);
  assert.equal(moons.losses.length, 120);
  assert.ok(moons.losses[119] < moons.losses[0] / 2, `the loss fell: ${moons.losses[0]} -> ${moons.losses[119]}`);
  assert.ok(moons.stats.some((r) => /kernels launched\s+[1-9]/.test(r)), moons.stats.join('; '));
  assert.ok(moons.stats.some((r) => /kernel-cache hits/.test(r)), moons.stats.join('; '));
  const dir = process.env.POLYGRAD_ARTIFACTS || fs.mkdtempSync(path.join(os.tmpdir(), 'pg-artifacts-'));
  fs.mkdirSync(dir, { recursive: true });
  const shot = path.join(dir, 'playground.png');
  await page.screenshot({ path: shot });
  assert.ok(fs.statSync(shot).size > 10000);
  t.diagnostic(`loss ${moons.losses[0].toFixed(4)} -> ${moons.losses[119].toFixed(4)}; screenshot ${shot}`);

  const tensors = await runExample(page, 'matmul + softmax');
  assert.equal(tensors.error, null, tensors.status);
  assert.equal(tensors.tables, 2);
  await page.close();
});

// GET `p` exactly as written (fetch would normalize dot segments away).
function rawGet(p) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    http.get({ host: u.hostname, port: u.port, path: p }, (r) => { r.resume(); resolve(r.statusCode); }).on('error', reject);
  });
}

test('the daemon serves only the playground\'s own files', async () => {
  for (const [p, status] of [['/', 200], ['/playground.js', 200], ['/polygrad.browser.js', 200],
    ['/../../etc/passwd', 404], ['/index.html/..', 404], ['/%2e%2e/index.html', 404], ['/nope', 404]]) {
    assert.equal(await rawGet(p), status, p);
  }
});
