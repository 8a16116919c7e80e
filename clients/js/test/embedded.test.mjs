// With no address the client starts a private daemon on a Unix socket, found as the Python client
// finds it (POLYGRAD_DAEMON here), and the daemon goes when the process ends: at a normal exit, and
// (through setpriv's parent-death signal, where setpriv exists) when the process is killed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { WAIT_LIMIT_MS, daemonBinary } from './daemon.mjs';

const ENTRY = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'index.mjs');

// A node process that computes on an embedded daemon, prints the daemon's pid, then waits for
// stdin to close when `hold` (so the test can kill it while the daemon runs).
function child(hold) {
  const script = `
    import { Tensor, connect } from ${JSON.stringify(ENTRY)};
    const conn = await connect();
    const sum = await Tensor.arange(10).sum().item();
    console.log(JSON.stringify({ pid: conn.daemon.proc.pid, address: conn.address, sum }));
    ${hold ? "process.stdin.resume(); process.stdin.on('end', () => {});" : ''}
  `;
  const env = { ...process.env, POLYGRAD_DAEMON: daemonBinary() };
  delete env.POLYGRAD_ADDRESS;
  return spawn(process.execPath, ['--input-type=module', '-e', script], { env, stdio: ['pipe', 'pipe', 'inherit'] });
}

function firstLine(proc) {
  return new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(JSON.parse(buf.split('\n')[0]));
    });
    proc.on('exit', (code) => { if (!buf.includes('\n')) reject(new Error(`the child exited with ${code} before answering`)); });
  });
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function gone(pid) {
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

test('the embedded daemon serves, and stops when the process exits', async () => {
  const proc = child(false);
  const out = await firstLine(proc);
  assert.equal(out.sum, 45);
  assert.match(out.address, /^unix:.*polygradd\.sock$/);
  const code = await new Promise((r) => proc.on('exit', r));
  assert.equal(code, 0);
  assert.ok(await gone(out.pid), `the embedded daemon ${out.pid} outlived its process`);
});

const hasSetpriv = spawnSync('sh', ['-c', 'command -v setpriv']).status === 0;

test('the embedded daemon dies with a killed process', { skip: !hasSetpriv && 'no setpriv on this machine' }, async () => {
  const proc = child(true);
  const out = await firstLine(proc);
  assert.ok(alive(out.pid));
  proc.kill('SIGKILL');
  assert.ok(await gone(out.pid), `the embedded daemon ${out.pid} outlived its killed process`);
});
