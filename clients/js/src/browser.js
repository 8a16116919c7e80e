'use strict';
// The browser build's entry (scripts/build-browser.mjs bundles it; package.json's "browser"
// condition names the bundle): the package's API over gRPC-Web only. The wire contract comes
// bundled as protobufjs JSON (__POLYGRAD_PROTO__, made from proto/ at build time), so nothing
// reads files; Node's modules are left out of the bundle.
const protobuf = require('protobufjs/light');
const Long = require('long');
const { Connection } = require('./connection');
const { setMethods } = require('./web');

protobuf.util.Long = Long; // uint64 handles and seeds as exact strings, as in Node
protobuf.configure();

// What proto-loader gives in Node, with its options: field names as in the .proto, 64-bit
// integers as strings, enums as numbers, defaults and oneof names filled in.
function methodsFrom(json) {
  const root = protobuf.Root.fromJSON(json);
  const service = root.lookupService('polygrad.v1.Polygrad');
  const out = {};
  for (const m of service.methodsArray) {
    m.resolve();
    const req = m.resolvedRequestType;
    const res = m.resolvedResponseType;
    out[m.name] = {
      path: `/polygrad.v1.Polygrad/${m.name}`,
      requestStream: Boolean(m.requestStream),
      responseStream: Boolean(m.responseStream),
      requestSerialize: (obj) => req.encode(req.fromObject(obj)).finish(),
      responseDeserialize: (bytes) => res.toObject(res.decode(bytes),
        { longs: String, enums: Number, defaults: true, oneofs: true }),
    };
  }
  return out;
}

// eslint-disable-next-line no-undef
setMethods(methodsFrom(__POLYGRAD_PROTO__));
Connection.webOnly = true;

module.exports = require('./index');
