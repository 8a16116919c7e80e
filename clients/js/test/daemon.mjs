// Test helper: a polygradd of the test file's own on a Unix socket in a temporary directory, with
// /metrics on an ephemeral port (the daemon logs the URL it picked).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function daemonBinary() {
  return process.env.POLYGRAD_DAEMON || path.join(REPO, 'build', 'polygradd');
}

// The bound on waiting for what takes milliseconds (a socket, a log line): far past a loaded
// machine, so only a real fault reaches it (docs/TESTING.md); a condition that holds costs nothing.
export const WAIT_LIMIT_MS = 120000;

async function until(what, cond, ms = WAIT_LIMIT_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// tokens: { token: tenant } for a daemon that requires bearer tokens (--tokens-file).
export async function startDaemon({ args = [], metrics = false, listen = '', tokens = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-js-test-'));
  if (tokens) {
    const file = path.join(dir, 'tokens');
    fs.writeFileSync(file, Object.entries(tokens).map(([token, tenant]) => `${token} ${tenant}\n`).join(''));
    args = [...args, `--tokens-file=${file}`];
  }
  const socket = path.join(dir, 'd.sock');
  const logPath = path.join(dir, 'polygradd.log');
  const log = fs.openSync(logPath, 'w');
  const proc = spawn(daemonBinary(), [`--listen=${listen}`, `--metrics-listen=${metrics ? '127.0.0.1:0' : ''}`,
    `--unix-socket=${socket}`, `--cache-dir=${path.join(dir, 'cache')}`, ...args], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  let exited = null;
  proc.on('exit', (code, signal) => { exited = code ?? signal; });
  proc.on('error', (e) => { exited = `${e.code || e.message} (cannot start ${daemonBinary()})`; });
  const logText = () => fs.readFileSync(logPath, 'utf8');
  await until('the daemon socket', () => {
    if (exited !== null) throw new Error(`polygradd exited with ${exited}:\n${logText()}`);
    return fs.existsSync(socket);
  });
  let metricsUrl = null;
  if (metrics) {
    metricsUrl = await until('the /metrics URL in the log', () => {
      const m = logText().match(/metrics="?(http:\/\/[^"\s]+)/);
      return m && m[1];
    });
  }
  let tcp = null;
  if (listen) {
    tcp = await until('the gRPC address in the log', () => {
      const m = logText().match(/listening grpc=(\S+)/);
      return m && m[1];
    });
  }
  // The gRPC-Web address (--web-listen): logged once every listener is bound, after the socket.
  let web = null;
  if (args.some((a) => a.startsWith('--web-listen='))) {
    web = await until('the web address in the log', () => {
      const m = logText().match(/ web="?(https?:\/\/[^"\s]+)/);
      return m && m[1];
    });
  }
  return {
    address: `unix:${socket}`, tcp, web, dir, metricsUrl, logText,
    // SIGKILL: gone at once, whatever it was doing (the stop() below drains first).
    async kill() {
      if (exited === null) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGKILL');
        await gone;
      }
    },
    async stop() {
      if (exited === null) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await gone;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A gauge of the daemon's /metrics (e.g. polygradd_buffers).
export async function gauge(url, name) {
  const text = await (await fetch(url)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'));
  if (!m) throw new Error(`no ${name} in /metrics`);
  return Number(m[1]);
}
