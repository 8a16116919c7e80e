// Test helper: a real nginx (a test dependency: scripts/install-deps --test installs nginx-light)
// in the foreground under `dir`, with the http block's server given, listening on a free port.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { WAIT_LIMIT_MS } from './daemon.mjs';

export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

async function accepting(proc, port) {
  const deadline = Date.now() + WAIT_LIMIT_MS;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    if (proc.exitCode !== null) throw new Error(`nginx exited with ${proc.exitCode}`);
    if (Date.now() > deadline) throw new Error('nginx did not accept connections');
    await new Promise((r) => setTimeout(r, 20));
  }
}

// server(port, prefix): the text of the http block's server { } (and anything else in http); the
// port is `port` when given (freePort(), for a caller that must know it first). Returns { port,
// accessLog, errorLog, quit(), stop() }; the access log lines are '$request_uri $status $server_protocol'.
export async function startNginx(dir, server, port = null) {
  const binary = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));
  assert.ok(binary, 'nginx is not installed (scripts/install-deps --test installs nginx-light)');
  const prefix = path.join(dir, 'nginx');
  fs.mkdirSync(prefix);
  port = port ?? await freePort();
  const accessLog = path.join(prefix, 'access.log');
  const errorLog = path.join(prefix, 'error.log');
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), `
${process.getuid && process.getuid() === 0 ? 'user root;' : ''}
daemon off;
master_process off;
pid ${prefix}/nginx.pid;
error_log ${errorLog};
events { worker_connections 64; }
http {
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  log_format calls '$request_uri $status $server_protocol';
  access_log ${accessLog} calls;
${server(port, prefix)}
}
`);
  const proc = spawn(binary, ['-p', prefix, '-c', path.join(prefix, 'nginx.conf')], { stdio: 'ignore' });
  await accepting(proc, port);
  const signal = async (name) => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill(name);
      await gone;
    }
  };
  return {
    port, accessLog, errorLog,
    // nginx writes a request's access-log line after its last byte has gone to the client, so a
    // client that has its answer may read the log before the line is there; quit() is the
    // graceful shutdown (SIGQUIT), which finishes and logs every request before nginx exits.
    quit: () => signal('SIGQUIT'),
    stop: () => signal('SIGKILL'),
  };
}
