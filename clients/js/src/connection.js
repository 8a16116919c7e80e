'use strict';
// The connection to polygradd: an address from connect({ address }) or POLYGRAD_ADDRESS
// (`host:port` or `unix:/path`; `http(s)://host:port` is the daemon's gRPC-Web port, web.js), else a
// private embedded daemon that stops when the process exits.
// POLYGRAD_TOKEN / { token } is sent as `authorization: Bearer <token>` on every call;
// POLYGRAD_TLS_CA / { tlsCa } (a PEM file or its contents) makes a TCP address use TLS.
const fs = require('fs');
const net = require('net');
const grpc = require('@grpc/grpc-js');
const { load } = require('./proto');
const { EmbeddedDaemon } = require('./daemon');
const { ExecuteStream, DEFAULT_MAX_IN_FLIGHT } = require('./dispatch');
const { PolygradConnectionError, PolygradError, fromGrpcError } = require('./errors');

const CHUNK_BYTES = 1 << 20;
const DEFAULT_MAX_INLINE_BYTES = 1 << 20;
const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
};

function envSeconds(name, dflt) {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && process.env[name] !== undefined && process.env[name] !== '' ? v : dflt;
}

// Why nothing listens at `address` (no socket file, refused, unknown host), or null when a plain
// connect succeeds: it names the cause that gRPC's own retrying hides.
function probeAddress(address, timeoutMs = 1000) {
  return new Promise((resolve) => {
    let opts;
    if (address.startsWith('unix:')) {
      let p = address.slice(5);
      if (p.startsWith('//')) p = p.slice(2);
      if (!fs.existsSync(p)) return resolve(`no socket file at ${p}`);
      opts = { path: p };
    } else {
      const target = address.includes('///') ? address.split('///')[1] : address;
      const at = target.lastIndexOf(':');
      const port = Number(target.slice(at + 1));
      if (at < 0 || !Number.isInteger(port)) return resolve(null);
      opts = { host: target.slice(0, at).replace(/^\[|\]$/g, '') || 'localhost', port };
    }
    const sock = net.connect(opts);
    const done = (why) => { sock.destroy(); resolve(why); };
    sock.setTimeout(timeoutMs, () => done(null)); // slow, not refused: the connect timeout decides
    sock.on('connect', () => done(null));
    sock.on('error', (e) => done(opts.path ? `cannot connect to ${opts.path}: ${e.code || e.message}`
      : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' ? `cannot resolve host ${opts.host}: ${e.code}`
        : `cannot connect to ${opts.host}:${opts.port}: ${e.code || e.message}`));
  });
}

function readPem(value, what) {
  if (!value) return null;
  if (value.includes('-----BEGIN')) return Buffer.from(value);
  try {
    return fs.readFileSync(value);
  } catch (e) {
    throw new PolygradConnectionError(`cannot read ${what}=${value}: ${e.message}`);
  }
}

class Connection {
  // Use Connection.open(); the constructor only records settings.
  constructor() {
    this.daemon = null;
    this.sessionId = '';
    this.client = null;
    this.keepalive = null;
    // Asynchronous dispatch (dispatch.js): POLYGRAD_ASYNC=0 keeps every call unary and waiting.
    this.asyncDispatch = process.env.POLYGRAD_ASYNC !== '0';
    this.maxInFlight = Math.max(1, Math.floor(envSeconds('POLYGRAD_MAX_IN_FLIGHT', DEFAULT_MAX_IN_FLIGHT)));
    this._stream = null;
    this._streamRefused = false;
    this._outstanding = []; // Pendings in the order sent, until settle() applies them
    this.syncHook = null; // settles outstanding answers (set by graph.js, which knows what they mean)
    this._settling = Promise.resolve();
  }

  // The session's Execute stream, opened on first use (again after one broke); null where
  // dispatch is synchronous or the stream is not carried (then every call is unary).
  async stream() {
    if (!this.asyncDispatch || this._streamRefused || !this.sessionId) return null;
    if (this._stream && !this._stream.broken) return this._stream;
    if (this._stream && this._stream.idle) {
      this._stream = ExecuteStream.reopen(this, this.maxInFlight);
      return this._stream;
    }
    try {
      this._stream = await ExecuteStream.open(this, this.maxInFlight);
    } catch (e) {
      if (e instanceof PolygradConnectionError) throw e;
      this._streamRefused = true; // e.g. UNIMPLEMENTED from a proxy that passes unary calls only
      this._stream = null;
    }
    return this._stream;
  }

  // Sends one command on the stream without waiting for its answer; null without a stream.
  // onSettle(pending, error) is called by settle(), in order, once the answer is in.
  async submit(command, what, onSettle = null, label = '') {
    for (;;) {
      const s = await this.stream();
      if (!s) return null;
      const p = await s.submit(command, what, onSettle, label);
      if (!p) continue; // that stream went idle and ended meanwhile
      this._outstanding.push(p);
      return p;
    }
  }

  get outstanding() {
    return this._outstanding.length;
  }

  // Applies the answers that are in (with `wait`, waits for all), oldest first; returns the first
  // error of a command without onSettle, or that its onSettle threw.
  settle(wait) {
    // One settle at a time: two concurrent reads must not both take the oldest answer.
    const run = this._settling.then(() => this._settle(wait));
    this._settling = run.then(() => {}, () => {});
    return run;
  }

  async _settle(wait) {
    let first = null;
    while (this._outstanding.length) {
      const p = this._outstanding[0];
      if (!wait && !p.done) break;
      await p.promise;
      this._outstanding.shift();
      try {
        if (p.onSettle) await p.onSettle(p, p.error);
        else if (p.error) throw p.error;
      } catch (e) {
        if (!(e instanceof PolygradError)) throw e;
        first = first || e;
      }
    }
    return first;
  }

  // Waits for everything outstanding; throws the first error among it.
  async synchronize() {
    if (this.syncHook) return this.syncHook();
    const e = await this.settle(true);
    if (e) throw e;
    return undefined;
  }

  // Before a unary call that names nodes, handles or steps: nothing outstanding may come after it.
  async _quiet() {
    if (this._outstanding.length) await this.synchronize();
  }

  static async open({ address, token, tlsCa, tlsCert, tlsKey, connectTimeout, maxInFlight } = {}) {
    address = address || process.env.POLYGRAD_ADDRESS || null;
    if (Connection.webOnly && !(address && /^https?:\/\//.test(address))) {
      throw new PolygradConnectionError('in a browser, connect({ address: \'https://host:port\' }) names the daemon\'s '
        + `gRPC-Web port (polygradd --web-listen)${address ? `, not ${address}` : ''}`);
    }
    if (address && /^https?:\/\//.test(address)) {
      // The daemon's gRPC-Web port (web.js): what a browser reaches; required here, not at the
      // top, because web.js extends this class.
      return require('./web').WebConnection.open({ address, token, connectTimeout });
    }
    const c = new Connection();
    if (maxInFlight !== undefined) c.maxInFlight = Math.max(1, Math.floor(maxInFlight));
    const timeout = connectTimeout !== undefined ? connectTimeout : envSeconds('POLYGRAD_CONNECT_TIMEOUT', 30);
    const deadline = Date.now() + timeout * 1000;
    if (!address) {
      c.daemon = new EmbeddedDaemon();
      address = c.daemon.address;
    }
    c.address = address;
    token = token || process.env.POLYGRAD_TOKEN || null;
    c.metadata = new grpc.Metadata();
    if (token) c.metadata.set('authorization', `Bearer ${token}`);
    const options = { ...CHANNEL_OPTIONS };
    let creds = grpc.credentials.createInsecure();
    const ca = address.startsWith('unix:') ? null : readPem(tlsCa || process.env.POLYGRAD_TLS_CA, 'POLYGRAD_TLS_CA');
    if (ca) {
      creds = grpc.credentials.createSsl(ca, readPem(tlsKey || process.env.POLYGRAD_TLS_KEY, 'POLYGRAD_TLS_KEY'),
        readPem(tlsCert || process.env.POLYGRAD_TLS_CERT, 'POLYGRAD_TLS_CERT'));
      if (process.env.POLYGRAD_TLS_SERVER_NAME) options['grpc.ssl_target_name_override'] = process.env.POLYGRAD_TLS_SERVER_NAME;
    }
    const { Polygrad } = load();
    try {
      if (c.daemon) await c.daemon.waitForSocket(deadline);
      c.client = new Polygrad(address, creds, options);
      await c._waitReady(deadline);
      await c.begin();
    } catch (e) {
      if (c.client) c.client.close();
      if (c.daemon) c.daemon.stopNow();
      throw e;
    }
    return c;
  }

  // The daemon's limits (GetInfo), a new session, and its keepalive: the daemon expires idle
  // sessions, so a live process keeps its lease with an empty Release. For either transport.
  async begin(getInfoOptions = {}) {
    this.info = await this.unary('GetInfo', {}, getInfoOptions);
    this.maxInlineBytes = Number(this.info.max_inline_bytes) || DEFAULT_MAX_INLINE_BYTES;
    this.maxNodesPerRequest = Number(this.info.max_nodes_per_request) || 0;
    this.chunkBytes = Number(this.info.chunk_bytes) || CHUNK_BYTES;
    this.sessionId = (await this.unary('CreateSession', {})).session_id;
    const interval = envSeconds('POLYGRAD_KEEPALIVE', 60);
    if (interval > 0) {
      this.keepalive = setInterval(() => {
        this.unary('Release', { session_id: this.sessionId }).catch(() => {});
      }, interval * 1000);
      if (this.keepalive.unref) this.keepalive.unref();
    }
  }

  async _waitReady(deadline) {
    const grace = envSeconds('POLYGRAD_CONNECT_GRACE', 2) * 1000;
    let firstFailure = null;
    for (;;) {
      const step = Math.min(Date.now() + 250, deadline);
      const err = await new Promise((resolve) => this.client.waitForReady(step, resolve));
      if (!err) return;
      if (this.daemon && this.daemon.exited()) {
        throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (${this.daemon.exitReason()})`);
      }
      const reason = this.daemon ? null : await probeAddress(this.address);
      const now = Date.now();
      firstFailure = reason ? (firstFailure || now) : null;
      if (reason && now - firstFailure >= grace) {
        const e = new PolygradConnectionError(`cannot reach polygradd at ${this.address} (${reason})`);
        e.cause = reason;
        throw e;
      }
      if (now >= deadline) {
        const why = reason || (this.daemon ? `log: ${this.daemon.logTail()}`
          : 'a connection opens but no gRPC answer came: TLS, or not a polygradd?');
        throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (not ready within the connect timeout; ${why})`);
      }
    }
  }

  get device() {
    const d = (this.info.devices || []).find((x) => x.available);
    return d ? d.name : 'CPU';
  }

  unary(method, request, options = {}) {
    return new Promise((resolve, reject) => {
      this.client[method](request, this.metadata, options, (err, resp) => {
        if (err) reject(fromGrpcError(err, method, this.address));
        else resolve(resp);
      });
    });
  }

  async realize(nodes, outputs, wantData, releaseNodes = []) {
    await this._quiet();
    return this.unary('Realize', {
      session_id: this.sessionId, nodes, outputs, want_data: wantData, release_nodes: releaseNodes,
    });
  }

  async release(nodeIds = [], handles = []) {
    if (nodeIds.length || handles.length) await this._quiet();
    return this.unary('Release', { session_id: this.sessionId, node_ids: nodeIds, handles });
  }

  // Sends `bytes` in chunks (the header in the first); resolves to the new handle.
  upload(wireDtype, shape, bytes) {
    return new Promise((resolve, reject) => {
      const call = this.client.Upload(this.metadata, (err, resp) => {
        if (err) return reject(fromGrpcError(err, 'Upload', this.address));
        if (Number(resp.bytes) && Number(resp.bytes) !== bytes.length) {
          return reject(new PolygradError(`Upload: daemon stored ${resp.bytes} bytes, sent ${bytes.length}`));
        }
        resolve(resp.handle);
      });
      const header = { session_id: this.sessionId, dtype: wireDtype, shape };
      if (bytes.length === 0) call.write({ header, data: Buffer.alloc(0), last: true });
      for (let off = 0; off < bytes.length; off += this.chunkBytes) {
        const end = Math.min(bytes.length, off + this.chunkBytes);
        const msg = { data: bytes.subarray(off, end), last: end === bytes.length };
        if (off === 0) msg.header = header;
        call.write(msg);
      }
      call.end();
    });
  }

  // Resolves to { dtype, shape, data } of a buffer, fetched in chunks.
  async download(handle) {
    await this._quiet();
    return this.downloadNow(handle);
  }

  // download() without waiting for what is outstanding (from a settle, which is that wait).
  downloadNow(handle) {
    return new Promise((resolve, reject) => {
      const call = this.client.Download({ session_id: this.sessionId, handle, chunk_bytes: 0 }, this.metadata);
      const chunks = new DownloadChunks();
      call.on('data', (msg) => {
        try {
          chunks.add(msg);
        } catch (e) {
          call.cancel();
          reject(e);
        }
      });
      call.on('error', (err) => reject(fromGrpcError(err, 'Download', this.address)));
      call.on('end', () => resolve(chunks.result()));
    });
  }

  // `random`: the traced random streams ({ seed, counter_base, count } as strings), or null.
  async compileStep(nodes, inputs, outputs, assigns, materialize, random = null) {
    await this._quiet();
    return this.unary('CompileStep', {
      session_id: this.sessionId, nodes, inputs, outputs,
      assigns: assigns.map(([t, v]) => ({ target_node: t, value: v })), materialize, ...(random ? { random } : {}),
    });
  }

  // RunStep on the session's stream without waiting; null without a stream.
  submitRunStep(stepId, inputs, wantData, onSettle, random = null, variables = []) {
    return this.submit({ run_step: runStepRequest(stepId, inputs, wantData, random, variables) }, 'RunStep', onSettle);
  }

  // `inputs`: [nodeId, Buffer | handle string] pairs; `random`: this run's { seed, counter_base }
  // for the step's traced random nodes, or null; `variables`: [name, value] pairs that set the
  // step's symbolic dims of those Variables. On the stream when there is one (one message behind
  // what is outstanding), waiting for the answer.
  async runStep(stepId, inputs, wantData = true, random = null, variables = []) {
    const req = runStepRequest(stepId, inputs, wantData, random, variables);
    let own = null;
    const p = await this.submit({ run_step: req }, 'RunStep', (q, err) => { own = err; });
    if (p) {
      await this.synchronize();
      if (own) throw own;
      return p.answer;
    }
    await this._quiet();
    return this.unary('RunStep', { session_id: this.sessionId, ...req });
  }

  async releaseStep(stepId) {
    await this._quiet();
    return this.unary('ReleaseStep', { session_id: this.sessionId, step_id: stepId });
  }

  async close() {
    if (this.keepalive) clearInterval(this.keepalive);
    this.keepalive = null;
    if (this._stream) this._stream.close();
    this._stream = null;
    try {
      if (this.sessionId) await this.unary('CloseSession', { session_id: this.sessionId }, { deadline: Date.now() + 5000 });
    } catch { /* the session goes with the daemon or expires */ }
    this.sessionId = '';
    if (this.client) this.client.close();
    if (this.daemon) await this.daemon.stop();
    this.daemon = null;
  }

  // For process.on('exit'): no I/O can complete there, so only the embedded daemon is stopped.
  closeNow() {
    if (this.keepalive) clearInterval(this.keepalive);
    if (this._stream) this._stream.close();
    this._stream = null;
    this.sessionId = '';
    if (this.daemon) this.daemon.stopNow();
    this.daemon = null;
  }
}

// A Download's chunks put together, checked to arrive in order: { dtype, shape, data }.
class DownloadChunks {
  constructor() {
    this.parts = [];
    this.got = 0;
    this.head = null;
  }

  add(msg) {
    if (!this.head) this.head = { dtype: msg.dtype, shape: msg.shape.map(Number) };
    if (Number(msg.offset) !== this.got) throw new PolygradError(`Download: chunk at offset ${msg.offset}, expected ${this.got}`);
    this.parts.push(msg.data);
    this.got += msg.data.length;
  }

  result() {
    return { dtype: this.head ? this.head.dtype : 0, shape: this.head ? this.head.shape : [], data: Buffer.concat(this.parts) };
  }
}

// `inputs`: [nodeId, Buffer | handle string] pairs; `variables`: [name, value] pairs.
function runStepRequest(stepId, inputs, wantData, random = null, variables = []) {
  return {
    step_id: stepId, want_data: wantData,
    inputs: inputs.map(([n, v]) => (Buffer.isBuffer(v) ? { node_id: n, data: v } : { node_id: n, handle: v })),
    ...(random ? { random } : {}),
    ...(variables.length ? { variables: variables.map(([name, value]) => ({ name, value })) } : {}),
  };
}

// Set by the browser build (browser.js): only gRPC-Web addresses, no embedded daemon.
Connection.webOnly = false;

module.exports = { Connection, DownloadChunks, probeAddress };
