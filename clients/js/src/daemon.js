'use strict';
// A private polygradd on a Unix socket in a temporary directory (the embedded default), found as
// the Python client finds it: POLYGRAD_DAEMON, then build/polygradd of this source tree, then PATH.
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn, spawnSync } = require('child_process');
const { PolygradConnectionError } = require('./errors');

function isExecutable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function findDaemonBinary() {
  if (process.env.POLYGRAD_DAEMON) return process.env.POLYGRAD_DAEMON;
  const repoBuild = path.resolve(__dirname, '..', '..', '..', 'build', 'polygradd');
  if (isExecutable(repoBuild)) return repoBuild;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, 'polygradd'))) return path.join(dir, 'polygradd');
  }
  throw new PolygradConnectionError('cannot reach polygradd at <embedded> (no daemon binary: set POLYGRAD_ADDRESS ' +
    `to a running daemon, or POLYGRAD_DAEMON to a polygradd binary; looked for ${repoBuild} and PATH)`);
}

function defaultCacheDir() {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'polygrad');
}

// setpriv --pdeathsig makes the daemon die with this process even when it is killed outright,
// which no exit handler can cover (Python's client uses prctl for the same).
let setprivPath;
function setpriv() {
  if (setprivPath === undefined) {
    const r = spawnSync('sh', ['-c', 'command -v setpriv'], { encoding: 'utf8' });
    setprivPath = r.status === 0 && r.stdout.trim() ? r.stdout.trim() : null;
    if (setprivPath && spawnSync(setprivPath, ['--pdeathsig', 'TERM', 'true']).status !== 0) setprivPath = null;
  }
  return setprivPath;
}

class EmbeddedDaemon {
  constructor({ binary, cacheDir, extraArgs = [] } = {}) {
    this.binary = binary || findDaemonBinary();
    this.cacheDir = cacheDir || defaultCacheDir();
    this.tmpdir = fs.mkdtempSync(path.join(os.tmpdir(), 'polygrad-'));
    this.socket = path.join(this.tmpdir, 'polygradd.sock');
    this.address = `unix:${this.socket}`;
    this.logPath = path.join(this.tmpdir, 'polygradd.log');
    const args = ['--listen=', '--metrics-listen=', `--unix-socket=${this.socket}`, `--cache-dir=${this.cacheDir}`,
      ...extraArgs];
    const log = fs.openSync(this.logPath, 'w');
    const wrap = setpriv();
    const [cmd, argv] = wrap ? [wrap, ['--pdeathsig', 'TERM', '--', this.binary, ...args]] : [this.binary, args];
    try {
      this.proc = spawn(cmd, argv, { stdio: ['ignore', log, log] });
    } finally {
      fs.closeSync(log);
    }
    this.exitCode = null;
    this.spawnError = null;
    this.proc.on('error', (e) => { this.spawnError = e; });
    this.proc.on('exit', (code, signal) => { this.exitCode = code === null ? signal : code; });
    this.proc.unref(); // a script that is done exits; the exit hook stops the daemon
  }

  logTail(n = 2000) {
    try {
      return fs.readFileSync(this.logPath, 'utf8').slice(-n).trim();
    } catch {
      return '';
    }
  }

  exited() {
    return this.spawnError !== null || this.exitCode !== null;
  }

  exitReason() {
    if (this.spawnError) return `cannot start ${this.binary}: ${this.spawnError.message}`;
    return `${this.binary} exited with status ${this.exitCode}; log: ${this.logTail() || '<empty>'}`;
  }

  // Polls for the socket file (the daemon creates it once it listens), failing early if it exits.
  async waitForSocket(deadline) {
    while (!fs.existsSync(this.socket)) {
      if (this.exited()) throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (${this.exitReason()})`);
      if (Date.now() > deadline) {
        throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (socket did not appear; log: ` +
          `${this.logTail() || '<empty>'})`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  // Synchronous, so it also works from process.on('exit').
  stopNow() {
    if (!this.exited()) {
      try { this.proc.kill('SIGTERM'); } catch { /* already gone */ }
    }
    try { fs.rmSync(this.tmpdir, { recursive: true, force: true }); } catch { /* best effort */ }
  }

  async stop(timeoutMs = 10000) {
    if (!this.exited()) {
      const gone = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => { try { this.proc.kill('SIGKILL'); } catch { /* gone */ } }, timeoutMs);
      await gone;
      clearTimeout(timer);
    }
    try { fs.rmSync(this.tmpdir, { recursive: true, force: true }); } catch { /* best effort */ }
  }
}

module.exports = { EmbeddedDaemon, findDaemonBinary, defaultCacheDir };
