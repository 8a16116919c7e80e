'use strict';
// npm pack's prepack step: a packed package carries its own copy of the wire contract, so an
// installed package is self-contained (src/proto.js looks there first).
const fs = require('fs');
const path = require('path');

const from = path.join(__dirname, '..', '..', '..', 'proto', 'polygrad', 'v1');
const to = path.join(__dirname, '..', 'proto', 'polygrad', 'v1');
if (!fs.existsSync(from)) {
  if (fs.existsSync(path.join(to, 'polygrad.proto'))) process.exit(0); // packing an unpacked package again
  throw new Error(`copy-proto: no ${from}`);
}
fs.mkdirSync(to, { recursive: true });
for (const f of fs.readdirSync(from).filter((n) => n.endsWith('.proto'))) fs.copyFileSync(path.join(from, f), path.join(to, f));
