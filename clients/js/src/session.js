'use strict';
// This process's connection and session: made by connect(), or on first use from the environment
// (POLYGRAD_ADDRESS, else an embedded daemon). It is closed when the process is about to exit.
const { Connection } = require('./connection');

let pending = null; // Promise<Connection>
let conn = null;
let hooked = false;
let onClose = () => {};

function hookExit() {
  if (hooked) return;
  hooked = true;
  // beforeExit: the event loop is empty, so CloseSession can still be sent; exit: only the
  // embedded daemon can be stopped (synchronously), e.g. after process.exit().
  process.on('beforeExit', () => {
    if (conn) close().catch(() => {});
  });
  process.on('exit', () => {
    if (conn) conn.closeNow();
  });
}

// Connects (closing an earlier connection first); resolves once the session exists.
async function connect(options = {}) {
  if (pending) await close();
  hookExit();
  const p = Connection.open(options);
  pending = p;
  try {
    const c = await p;
    if (pending === p) conn = c;
    return c;
  } catch (e) {
    if (pending === p) pending = null;
    throw e;
  }
}

function get() {
  if (conn) return Promise.resolve(conn);
  if (pending) return pending;
  return connect();
}

function current() {
  return conn;
}

// Closes the session (stopping an embedded daemon); tensors sent before become invalid.
async function close() {
  const p = pending;
  pending = null;
  conn = null;
  if (!p) return;
  let c;
  try { c = await p; } catch { return; }
  onClose();
  await c.close();
}

function setOnClose(fn) {
  onClose = fn;
}

module.exports = { connect, get, current, close, setOnClose };
