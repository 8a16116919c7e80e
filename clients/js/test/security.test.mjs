// Tokens and TLS as the Python client does them: a TCP daemon with a TLS certificate and a tokens
// file, reached with connect({ tlsCa, token }) and with POLYGRAD_TLS_CA / POLYGRAD_TOKEN.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Tensor, connect, close, PolygradConnectionError, PolygradUnauthenticated } from '../index.mjs';
import { startDaemon } from './daemon.mjs';

const TOKEN = '9a1d6e0c2b3f4a5e8d7c6b5a4f3e2d1c';
let daemon;
let pki;

function openssl(...args) {
  execFileSync('openssl', args, { cwd: pki, stdio: 'ignore' });
}

before(async () => {
  pki = fs.mkdtempSync(path.join((await import('node:os')).tmpdir(), 'pg-js-pki-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  fs.writeFileSync(path.join(pki, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=ca');
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=server');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem',
    '-days', '1', '-extfile', 'san.ext');
  fs.writeFileSync(path.join(pki, 'tokens'), `${TOKEN} team-js\n`);
  daemon = await startDaemon({ listen: '127.0.0.1:0', args: [`--tls-cert=${path.join(pki, 'server.pem')}`,
    `--tls-key=${path.join(pki, 'server.key')}`, `--tokens-file=${path.join(pki, 'tokens')}`] });
});
after(async () => {
  await close();
  await daemon.stop();
  fs.rmSync(pki, { recursive: true, force: true });
});

test('TLS with the daemon\'s CA and a token, given to connect()', async () => {
  const conn = await connect({ address: daemon.tcp, token: TOKEN, tlsCa: path.join(pki, 'ca.pem'), connectTimeout: 20 });
  assert.equal(conn.address, daemon.tcp);
  assert.deepEqual(await Tensor.from([1, 2, 3]).mul(2).data(), new Int32Array([2, 4, 6]));
});

test('POLYGRAD_TLS_CA and POLYGRAD_TOKEN from the environment', async () => {
  process.env.POLYGRAD_TLS_CA = path.join(pki, 'ca.pem');
  process.env.POLYGRAD_TOKEN = TOKEN;
  try {
    await connect({ address: daemon.tcp, connectTimeout: 20 });
    assert.equal(await Tensor.ones(3).sum().item(), 3);
    delete process.env.POLYGRAD_TOKEN;
    const err = await connect({ address: daemon.tcp, connectTimeout: 20 }).then(() => null, (e) => e);
    assert.ok(err instanceof PolygradUnauthenticated, String(err));
  } finally {
    delete process.env.POLYGRAD_TLS_CA;
    delete process.env.POLYGRAD_TOKEN;
  }
});

test('plaintext against the TLS port does not connect', async () => {
  const err = await connect({ address: daemon.tcp, token: TOKEN, connectTimeout: 3 }).then(() => null, (e) => e);
  assert.ok(err instanceof PolygradConnectionError, String(err));
});
