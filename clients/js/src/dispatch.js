'use strict';
// Asynchronous dispatch: one Execute stream per session (docs/PROTOCOL.md, "Asynchronous dispatch").
//
// Realizes and releases are written to the session's stream and `await t.realize()` resolves once
// the command is sent; the daemon runs a stream's commands in order, so a graph sent next may read
// the nodes of one still running (node ids are the client's). Reads (`await t.data()`, ...) and
// `await polygrad.synchronize()` wait. At most `maxInFlight` commands are outstanding: submit waits
// for an answer past that. A stream that breaks fails everything outstanding with its error and is
// not used again (the next command opens another). A stream with nothing outstanding for a moment
// is ended, so that it does not keep Node's event loop (and the process) alive; the next command
// opens another, sending its `open` ahead of the command instead of waiting for the answer.
const { PolygradConnectionError, PolygradError, fromGrpcError, fromStatus } = require('./errors');

const DEFAULT_MAX_IN_FLIGHT = 8;
// How long a stream with nothing outstanding stays open: long enough for the next command of a
// loop, short enough that a finished program exits at once.
const IDLE_END_MS = 50;
const ANSWER = { realize: 'realized', release: 'released', run_step: 'step_ran' };

// An outstanding command; `promise` resolves to the daemon's answer or rejects with its error.
class Pending {
  constructor(rid, what, kind, onSettle, label) {
    Object.assign(this, { rid, what, kind, onSettle, label, done: false, answer: null, error: null });
    this.promise = new Promise((resolve) => { this._resolve = resolve; });
  }

  finish(answer, error) {
    this.done = true;
    this.answer = answer;
    this.error = error;
    this._resolve();
  }
}

class ExecuteStream {
  // Resolves once the daemon opened the stream on `conn`'s session; rejects when it (or a proxy)
  // does not carry Execute.
  static open(conn, maxInFlight) {
    const s = new ExecuteStream(conn, maxInFlight);
    return s.opened.then(() => s);
  }

  // A stream whose `open` travels ahead of the first command (the daemon was seen to carry it).
  static reopen(conn, maxInFlight) {
    const s = new ExecuteStream(conn, maxInFlight);
    s.opened.catch(() => {}); // an open that fails fails the commands behind it too
    return s;
  }

  constructor(conn, maxInFlight) {
    this.conn = conn;
    this.maxInFlight = maxInFlight;
    this.pending = new Map(); // request id -> Pending
    this.waiters = []; // submits waiting for a free slot
    this.next = 1;
    this.broken = null;
    this.idle = false; // ended for having nothing outstanding: submit elsewhere
    this._idleTimer = null;
    this.call = conn.client.Execute(conn.metadata);
    this.opened = new Promise((resolve, reject) => {
      this._opened = { resolve, reject };
    });
    this.call.on('data', (msg) => this._answer(msg));
    this.call.on('error', (err) => this._break(fromGrpcError(err, 'Execute', conn.address)));
    this.call.on('end', () => this._break(new PolygradConnectionError(
      `the Execute stream to ${conn.address} ended while commands were outstanding`)));
    this.call.write({ request_id: '0', open: { attach_session_id: conn.sessionId } });
  }

  _answer(msg) {
    if (this._opened) {
      const o = this._opened;
      this._opened = null;
      if (msg.result === 'opened') o.resolve();
      else o.reject(fromStatus(msg.error ? msg.error.code : 2, msg.error ? msg.error.message : msg.result, 'Execute.open'));
      return;
    }
    const p = this.pending.get(String(msg.request_id));
    if (!p) return; // an answer to nothing outstanding: ignore rather than guess
    this.pending.delete(p.rid);
    if (msg.result === 'error') p.finish(null, fromStatus(msg.error.code, msg.error.message, p.what));
    else if (msg.result === ANSWER[p.kind]) p.finish(msg[msg.result], null);
    else p.finish(null, new PolygradError(`${p.what}: the daemon answered with ${msg.result}`));
    this._freeSlot();
    if (!this.pending.size && !this.waiters.length && !this.broken && !this._idleTimer) {
      // Ended a moment later if still idle: a loop's next command usually comes first.
      this._idleTimer = setTimeout(() => this._endIfIdle(), IDLE_END_MS);
      this._idleTimer.unref();
    }
  }

  _endIfIdle() {
    this._idleTimer = null;
    if (this.pending.size || this.waiters.length || this.broken) return;
    this.idle = true;
    this.broken = new PolygradConnectionError('the Execute stream was ended with nothing outstanding');
    this.call.end();
  }

  _freeSlot() {
    const w = this.waiters.shift();
    if (w) w();
  }

  _break(err) {
    if (this.broken) return;
    this.broken = err;
    if (this._opened) {
      this._opened.reject(err);
      this._opened = null;
    }
    for (const p of this.pending.values()) p.finish(null, err);
    this.pending.clear();
    for (const w of this.waiters.splice(0)) w();
  }

  // Writes one command ({ realize: {...} } and so on); resolves to its Pending once written,
  // after waiting for a slot when maxInFlight are outstanding; to null when the stream went idle
  // meanwhile (the caller sends it on a new one).
  async submit(command, what, onSettle, label = '') {
    while (!this.broken && this.pending.size >= this.maxInFlight) {
      await new Promise((resolve) => this.waiters.push(resolve));
    }
    if (this.idle) return null;
    if (this._idleTimer) {
      clearTimeout(this._idleTimer);
      this._idleTimer = null;
    }
    const rid = String(this.next++);
    const kind = Object.keys(command)[0];
    const p = new Pending(rid, what, kind, onSettle, label);
    if (this.broken) {
      p.finish(null, this.broken);
      return p;
    }
    this.pending.set(rid, p);
    this.call.write({ request_id: rid, ...command });
    return p;
  }

  get outstanding() {
    return this.pending.size;
  }

  close() {
    if (this._idleTimer) clearTimeout(this._idleTimer);
    if (!this.broken) this.broken = new PolygradConnectionError('the Execute stream was closed');
    this.call.end();
  }
}

module.exports = { ExecuteStream, Pending, DEFAULT_MAX_IN_FLIGHT };
