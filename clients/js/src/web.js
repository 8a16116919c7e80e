'use strict';
// A connection over gRPC-Web (polygradd --web-listen, docs/PROTOCOL.md "gRPC-Web"), chosen by an
// http:// or https:// address: HTTP/1.1 POSTs through fetch, each message framed (a flag byte, a
// 4-byte big-endian length), the status in a trailer frame at the end of the body. gRPC-Web has
// no client or bidirectional streams, so there is no Execute stream (asyncDispatch is off: every
// call is unary and waited for, as with POLYGRAD_ASYNC=0) and uploads go as OpenUpload and
// UploadPart calls. Sessions, close and limits are the base class's.
const { Connection, DownloadChunks } = require('./connection');
const { PolygradConnectionError, PolygradError, fromStatus } = require('./errors');

// Each method's path and (de)serializers: from proto-loader in Node (proto.js reads the .proto
// files), set by the browser build's entry (browser.js) from the bundled contract.
let methods = null;
function setMethods(m) {
  methods = m;
}

const CONTENT_TYPE = 'application/grpc-web+proto';

function frame(bytes) {
  const out = new Uint8Array(5 + bytes.length);
  new DataView(out.buffer).setUint32(1, bytes.length);
  out.set(bytes, 5);
  return out;
}

function concat(a, b) {
  if (!a.length) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

// "grpc-status:3\r\ngrpc-message:...\r\n" -> { code, message } (the message percent-decoded).
function parseTrailers(bytes) {
  const fields = {};
  for (const line of new TextDecoder().decode(bytes).split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  let message = fields['grpc-message'] || '';
  try { message = decodeURIComponent(message); } catch { /* not percent-encoded after all */ }
  return { code: Number(fields['grpc-status'] ?? 2), message };
}

// grpc-timeout for a deadline (ms since the epoch): whole milliseconds, at least 1.
function timeoutHeader(deadline) {
  return `${Math.max(1, Math.ceil(deadline - Date.now()))}m`;
}

class WebConnection extends Connection {
  static async open({ address, token, connectTimeout } = {}) {
    const c = new WebConnection();
    c.address = address.replace(/\/+$/, '');
    c.asyncDispatch = false;
    c.headers = { 'content-type': CONTENT_TYPE, 'x-grpc-web': '1' };
    token = token || process.env.POLYGRAD_TOKEN || null;
    if (token) c.headers.authorization = `Bearer ${token}`;
    c.methods = methods || require('./proto').load().methods;
    const timeout = connectTimeout !== undefined ? connectTimeout : 30;
    await c.begin({ deadline: Date.now() + timeout * 1000 });
    return c;
  }

  // The messages of one call, in order; throws the call's error status as a PolygradError.
  async* call(method, request, options = {}) {
    const m = this.methods[method];
    if (!m || m.requestStream) throw new PolygradError(`${method}: not a unary or server-streaming method`);
    const headers = { ...this.headers };
    if (options.deadline) headers['grpc-timeout'] = timeoutHeader(options.deadline);
    let resp;
    try {
      resp = await fetch(this.address + m.path, { method: 'POST', headers, body: frame(m.requestSerialize(request)) });
    } catch (e) {
      const why = (e.cause && (e.cause.code || e.cause.message)) || e.message;
      throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (${method}: ${why})`);
    }
    if (resp.status !== 200) {
      const text = (await resp.text()).slice(0, 500);
      throw new PolygradError(`${method} failed: HTTP ${resp.status} from ${this.address}: ${text}`, 'UNKNOWN', text);
    }
    const reader = resp.body.getReader();
    let buf = new Uint8Array(0);
    for (;;) {
      while (buf.length >= 5) {
        const n = new DataView(buf.buffer, buf.byteOffset, 5).getUint32(1);
        if (buf.length < 5 + n) break;
        const flag = buf[0];
        const payload = buf.subarray(5, 5 + n);
        buf = buf.subarray(5 + n);
        if (flag & 0x80) {
          const { code, message } = parseTrailers(payload);
          if (code !== 0) throw fromStatus(code, message, method, this.address);
          return;
        }
        yield m.responseDeserialize(Buffer.from(payload));
      }
      const { done, value } = await reader.read();
      if (done) throw new PolygradConnectionError(`cannot reach polygradd at ${this.address} (${method}: the answer ended without a status)`);
      buf = concat(buf, value);
    }
  }

  async unary(method, request, options = {}) {
    let answer = null;
    for await (const msg of this.call(method, request, options)) answer = msg;
    if (answer === null) throw new PolygradError(`${method} failed: no answer message`);
    return answer;
  }

  // OpenUpload, then the bytes in parts of chunkBytes; resolves to the new handle.
  async upload(wireDtype, shape, bytes) {
    const { upload_id: id } = await this.unary('OpenUpload', { session_id: this.sessionId, dtype: wireDtype, shape });
    let resp = null;
    let off = 0;
    do {
      const end = Math.min(bytes.length, off + this.chunkBytes);
      resp = await this.unary('UploadPart', {
        session_id: this.sessionId, upload_id: id, offset: off, data: bytes.subarray(off, end), last: end === bytes.length,
      });
      off = end;
    } while (off < bytes.length);
    if (Number(resp.bytes) !== bytes.length) {
      throw new PolygradError(`Upload: daemon stored ${resp.bytes} bytes, sent ${bytes.length}`);
    }
    return resp.handle;
  }

  async downloadNow(handle) {
    const chunks = new DownloadChunks();
    for await (const msg of this.call('Download', { session_id: this.sessionId, handle, chunk_bytes: 0 })) chunks.add(msg);
    return chunks.result();
  }
}

module.exports = { WebConnection, setMethods };
