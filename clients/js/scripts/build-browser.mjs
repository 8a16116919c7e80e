// Bundles the browser build (package.json's "browser" condition): src/browser.js and what it
// reaches, with the wire contract embedded as protobufjs JSON and Node's modules left out.
//
//   node scripts/build-browser.mjs      writes dist/polygrad.browser.mjs (ES module) and
//                                       dist/polygrad.browser.js (a script defining `polygrad`)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import * as esbuild from 'esbuild';

const require = createRequire(import.meta.url);
const protobuf = require('protobufjs');
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.join(HERE, '..');
const { protoRoot } = require('../src/proto.js');

// The contract as JSON: polygrad.proto with its imports (google's descriptor.proto from protobufjs).
function contract() {
  const dirs = [protoRoot(), path.dirname(require.resolve('protobufjs/package.json'))];
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => {
    for (const d of dirs) {
      const p = path.join(d, target);
      if (fs.existsSync(p)) return p;
    }
    return target;
  };
  root.loadSync(path.join('polygrad', 'v1', 'polygrad.proto'), { keepCase: true });
  return root.toJSON();
}

// Node's modules, grpc-js and the files that use them at run time only in Node: a module whose
// every function says so, if a browser page ever reaches one. The held-in tests' bundles
// (test-browser/held-in.test.mjs) use the same plugin over every node: module.
const NODE_ONLY = /^(node:)?(fs|net|os|path|child_process|zlib|http2|tls)$|^@grpc\/|^\.\/(daemon|proto)$/;
export function nodeOnlyPlugin(filter = NODE_ONLY) {
  return {
    name: 'node-only',
    setup(build) {
      build.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'node-only' }));
      build.onLoad({ filter: /.*/, namespace: 'node-only' }, (args) => ({
        contents: `module.exports = new Proxy({}, { get: (t, k) => (k === '__esModule' || typeof k === 'symbol') ? undefined
          : () => { throw new Error('polygrad: ${args.path}.' + String(k) + ' is not available in a browser'); } });`,
        loader: 'js',
      }));
    },
  };
}

export async function buildBrowser(outdir = path.join(PKG, 'dist')) {
  const common = {
    entryPoints: [path.join(PKG, 'src', 'browser.js')],
    bundle: true,
    platform: 'browser',
    target: ['es2020'],
    define: { __POLYGRAD_PROTO__: JSON.stringify(contract()) },
    inject: [path.join(HERE, 'browser-shims.js')],
    plugins: [nodeOnlyPlugin()],
    logLevel: 'warning',
    legalComments: 'none',
    keepNames: true, // error classes name themselves after their constructor
  };
  // The ES module: index.mjs's named exports (one list for both builds) over the browser entry.
  const esm = fs.readFileSync(path.join(PKG, 'index.mjs'), 'utf8').replace("'./src/index.js'", "'./src/browser.js'");
  if (!esm.includes("'./src/browser.js'")) throw new Error('build-browser: index.mjs no longer imports ./src/index.js');
  const { entryPoints, ...rest } = common;
  await esbuild.build({
    ...rest, stdin: { contents: esm, resolveDir: PKG, sourcefile: 'browser.mjs', loader: 'js' },
    format: 'esm', outfile: path.join(outdir, 'polygrad.browser.mjs'),
  });
  await esbuild.build({ ...common, format: 'iife', globalName: 'polygrad', outfile: path.join(outdir, 'polygrad.browser.js') });
  return outdir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = await buildBrowser(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
  process.stderr.write(`browser build in ${out}\n`); // stderr: npm pack --json owns stdout
}
