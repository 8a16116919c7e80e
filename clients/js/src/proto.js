'use strict';
// The wire contract, loaded at run time from proto/polygrad/v1: a packed package carries its own
// copy (clients/js/proto, made by `npm pack`), a source checkout uses the repository's.
const fs = require('fs');
const path = require('path');
const protoLoader = require('@grpc/proto-loader');
const grpc = require('@grpc/grpc-js');

const FILE = path.join('polygrad', 'v1', 'polygrad.proto');
const CANDIDATES = [path.join(__dirname, '..', 'proto'), path.join(__dirname, '..', '..', '..', 'proto')];

let loaded = null;

function protoRoot() {
  const root = CANDIDATES.find((dir) => fs.existsSync(path.join(dir, FILE)));
  if (!root) throw new Error(`polygrad: cannot find ${FILE} (looked in ${CANDIDATES.join(', ')})`);
  return root;
}

function load() {
  if (loaded) return loaded;
  const root = protoRoot();
  const def = protoLoader.loadSync(FILE, {
    includeDirs: [root],
    keepCase: true, // field names exactly as in the .proto (session_id, want_data)
    longs: String, // uint64 handles and seeds survive beyond 2^53
    enums: Number,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def).polygrad.v1;
  // methods: each method's path and (de)serializers, for transports other than grpc-js (web.js).
  loaded = { Polygrad: pkg.Polygrad, root, methods: def['polygrad.v1.Polygrad'] };
  return loaded;
}

module.exports = { load, protoRoot };
