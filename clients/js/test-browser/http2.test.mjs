// The web port behind nginx as docs/OPERATIONS.md sets it up (TLS, HTTP/2 to the browser,
// proxy_buffering off for Download's stream): Chromium loads a page from nginx's origin and trains
// over HTTP/2 with the Node client's losses over gRPC, bit for bit, and downloads a tensor larger
// than one message. The daemon's own web port speaks HTTP/1.1 (libmicrohttpd); this is how a
// browser gets HTTP/2. Skips, saying why, only where Chromium cannot start; nginx and openssl are
// test dependencies (scripts/install-deps --test), missing they fail.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as node from '../index.mjs';
import { mlpLosses } from '../test/web_helpers.mjs';
import { startDaemon } from '../test/daemon.mjs';
import { startNginx, freePort } from '../test/nginx.mjs';
import { buildBrowser } from '../scripts/build-browser.mjs';
import { launchChromium } from './chromium.mjs';

let browser = null;
let whyNot = null;
let daemon;
let nginx;
let origin;
let dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(process.env.TMPDIR || '/tmp', 'pg-h2-'));
  const site = path.join(dir, 'site');
  await buildBrowser(site);
  fs.writeFileSync(path.join(site, 'index.html'),
    '<!doctype html><script type="module">import * as pg from "/polygrad.browser.mjs"; window.pg = pg;</script>');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'tls.key'), '-out', path.join(dir, 'tls.pem'), '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  // The page's origin is nginx's, which the daemon must allow: nginx's port is picked first.
  const port = await freePort();
  origin = `https://127.0.0.1:${port}`;
  daemon = await startDaemon({ args: ['--web-listen=127.0.0.1:0', `--web-allow-origin=${origin}`] });
  const upstream = new URL(daemon.web).host;
  nginx = await startNginx(dir, (p) => `
  server {
    listen 127.0.0.1:${p} ssl http2;
    ssl_certificate     ${dir}/tls.pem;
    ssl_certificate_key ${dir}/tls.key;
    client_max_body_size 64m;
    location = / { root ${site}; try_files /index.html =404; }
    location = /polygrad.browser.mjs { root ${site}; default_type text/javascript; }
    location / {
      proxy_pass http://${upstream};
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }
  }`, port);
  ({ browser, whyNot } = await launchChromium(['--ignore-certificate-errors']));
});
after(async () => {
  if (browser) await browser.close();
  await node.close();
  if (nginx) await nginx.stop();
  await daemon.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('Chromium trains over HTTP/2 through nginx with the Node client\'s losses, and streams a download', async (t) => {
  if (!browser) return t.skip(whyNot);
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  await page.waitForFunction('window.pg !== undefined', { timeout: 60000 });
  const inChromium = await page.evaluate(`(${mlpLosses.toString()})(window.pg, ${JSON.stringify(origin)})`);
  const inNode = await mlpLosses(node, daemon.address);
  assert.deepEqual(inChromium, inNode);
  // 8 MiB: past max_inline_bytes, so data() is a Download stream of several chunks.
  const big = await page.evaluate(async () => {
    const d = await window.pg.Tensor.arange(1 << 21).cast('float32').data();
    return { n: d.length, first: d[0], last: d[d.length - 1] };
  });
  assert.deepEqual(big, { n: 1 << 21, first: 0, last: (1 << 21) - 1 });
  const protocols = await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/polygrad.v1.Polygrad/')).map((e) => e.nextHopProtocol));
  assert.ok(protocols.length > 5 && protocols.every((p) => p === 'h2'), `protocols: ${protocols}`);
  await page.close();
  await nginx.quit();
  const log = fs.readFileSync(nginx.accessLog, 'utf8').split('\n').filter(Boolean);
  assert.ok(log.some((l) => l.startsWith('/polygrad.v1.Polygrad/Download 200 HTTP/2.0')), log.join('\n'));
  t.diagnostic(`${protocols.length} calls over h2; loss ${inChromium[0]} -> ${inChromium[5]}`);
});
