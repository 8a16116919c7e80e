// The conformance corpus through the JavaScript client's public API (see README.md), run by
// `node --test tests/conformance/conformance.test.mjs` (tests/conformance/run.sh runs it after the
// Python runner, against the same daemon).
//
// Each case is built with polygrad's Tensor methods, realized on the daemon named by
// POLYGRAD_ADDRESS, and checked three ways: the client's local shape and dtype equal the ones the
// daemon reports for the realized buffer; the bytes read through the public API (await t.data())
// equal the buffer's bytes; and they are the bytes the Python client got for the same case
// (<out>/python.json, written by test_conformance_python.py). Results go to <out>/js.json.
//
// POLYGRAD_JS_CLIENT names another directory holding the package (default: clients/js).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const CASES_PATH = path.join(HERE, 'cases.json');
const CORPUS_TEXT = fs.readFileSync(CASES_PATH);
const CORPUS = JSON.parse(CORPUS_TEXT);
const CASES = CORPUS.cases;
const OUT = process.env.POLYGRAD_CONFORMANCE_OUT || path.join(HERE, 'out');
const HEX_LIMIT = 1024;
const ITEMSIZE = { bool: 1, int8: 1, uint8: 1, int16: 2, uint16: 2, int32: 4, uint32: 4, int64: 8, uint64: 8,
  float16: 2, bfloat16: 2, float32: 4, float64: 8 };

// The package through its own entry point (package.json's "exports"), as `import ... from 'polygrad'`
// resolves it for a user.
const CLIENT_DIR = path.resolve(process.env.POLYGRAD_JS_CLIENT || path.join(REPO, 'clients', 'js'));
async function loadClient() {
  const dir = CLIENT_DIR;
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const exp = pkg.exports && (pkg.exports['.'] || pkg.exports);
  const entry = (exp && (exp.import || exp.default)) || pkg.module || pkg.main;
  return import(pathToFileURL(path.join(dir, entry)).href);
}
const pg = await loadClient();
const { Tensor, connect, dtypes } = pg;
// The package's generated op table (scripts/gen-ops): which methods are one schema op.
const { METHODS } = await import(pathToFileURL(path.join(CLIENT_DIR, 'src', 'ops.gen.js')).href);

// ---- the corpus's generator (README.md): splitmix64, then integers exact in the dtype -------------

function* splitmix64(seed) {
  let s = BigInt.asUintN(64, BigInt(seed));
  for (;;) {
    s = BigInt.asUintN(64, s + 0x9e3779b97f4a7c15n);
    let z = s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    yield z ^ (z >> 31n);
  }
}

// An input's elements in row-major order: numbers, bigints (64-bit integer dtypes) or booleans.
function inputValues(spec) {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const gen = splitmix64(spec.seed);
  const dt = spec.dtype;
  const wide = ITEMSIZE[dt] === 8 && !dt.startsWith('float');
  const out = [];
  for (let i = 0; i < n; i++) {
    const z = gen.next().value;
    let v;
    if (spec.bits) {
      const bits = 8 * ITEMSIZE[dt];
      v = dt.startsWith('int') ? BigInt.asIntN(bits, z) : BigInt.asUintN(bits, z);
      out.push(wide ? v : Number(v));
      continue;
    }
    v = BigInt(spec.lo) + z % BigInt(spec.hi - spec.lo + 1);
    if (dt === 'bool') out.push(v !== 0n);
    else if (dt.startsWith('float') || dt === 'bfloat16') out.push(Number(v) / spec.div); // div: a power of two
    else out.push(wide ? v : Number(v));
  }
  return out;
}

const ARRAY = { float32: Float32Array, float64: Float64Array, int8: Int8Array, int16: Int16Array, int32: Int32Array,
  int64: BigInt64Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array };

function makeInput(spec) {
  const vals = inputValues(spec);
  let data;
  if (spec.dtype === 'bool') data = Uint8Array.from(vals, (v) => (v ? 1 : 0));
  // 16-bit floats: the values (exact in the dtype) as doubles, for the client to encode.
  else if (spec.dtype === 'float16' || spec.dtype === 'bfloat16') data = Float64Array.from(vals);
  else data = ARRAY[spec.dtype].from(vals);
  return Tensor.from(data, { dtype: spec.dtype, shape: spec.shape });
}

// ---- one builder per corpus op: (input tensors, args) -> the result, through public methods only ---

const binary = (m) => (xs, a) => xs[0][m]('scalar' in a ? a.scalar : xs[1]);
const reduce = (m) => (xs, a) => {
  const o = { axis: a.axis ?? null, keepdim: a.keepdim ?? false };
  if ('correction' in a) o.correction = a.correction;
  return xs[0][m](o);
};
const seeded = (fn) => (xs, a) => {
  Tensor.manualSeed(a.seed);
  return fn(xs, a);
};
function indexEntry(e, xs) {
  if (e === null || e === '...' || typeof e === 'number') return e;
  if ('slice' in e) return { start: e.slice[0], stop: e.slice[1], step: e.slice[2] };
  return xs[e.tensor];
}

// The builder of a method generated from the op schema (a METHODS entry), by its JavaScript name:
// its operands from the inputs after the first, then from args by name; its parameters, in order,
// from args by name (undefined: the default). A new schema op needs only cases.
const camel = (n) => n.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const generated = (m) => (xs, a) => xs[0][m.name](
  ...xs.slice(1), ...m.operands.slice(xs.length - 1).map((n) => a[camel(n)]), ...m.params.map((p) => a[p.name]));

const BUILD = {
  ...Object.fromEntries(METHODS.map((m) => [m.name, generated(m)])),
  from: (xs) => xs[0],
  full: (xs, a) => Tensor.full(a.shape, a.value, { dtype: a.dtype }),
  zeros: (xs, a) => Tensor.zeros(a.shape, { dtype: a.dtype }),
  ones: (xs, a) => Tensor.ones(a.shape, { dtype: a.dtype }),
  arange: (xs, a) => Tensor.arange(a.start, a.stop, a.step ?? 1, { dtype: a.dtype }),
  linspace: (xs, a) => Tensor.linspace(a.start, a.stop, a.steps, { dtype: a.dtype }),
  eye: (xs, a) => Tensor.eye(a.n, a.m, { dtype: a.dtype }),
  rand: seeded((xs, a) => Tensor.rand(a.shape, { dtype: a.dtype })),
  randn: seeded((xs, a) => Tensor.randn(a.shape, { dtype: a.dtype })),
  randint: seeded((xs, a) => Tensor.randint(a.shape, { low: a.low, high: a.high, dtype: a.dtype })),
  dropout: seeded((xs, a) => {
    const was = Tensor.training;
    Tensor.training = true;
    try {
      return xs[0].dropout(a.p);
    } finally {
      Tensor.training = was;
    }
  }),
  ...Object.fromEntries(['neg', 'relu', 'bitwiseNot', 'logicalNot'].map((m) => [m, (xs) => xs[0][m]()])),
  gelu: (xs, a) => xs[0].gelu(a.approximate ?? 'tanh'),
  isclose: (xs, a) => xs[0].isclose(xs[1], { rtol: a.rtol, atol: a.atol, equalNan: a.equalNan ?? false }),
  any: reduce('any'),
  all: reduce('all'),
  lshift: (xs, a) => xs[0].lshift(a.n),
  rshift: (xs, a) => xs[0].rshift(a.n),
  ...Object.fromEntries(['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'lt', 'le', 'gt', 'ge', 'eq', 'ne',
    'idiv', 'fmod', 'remainder', 'floorDivide', 'bitwiseAnd', 'bitwiseOr', 'bitwiseXor'].map((m) => [m, binary(m)])),
  clamp: (xs, a) => xs[0].clamp(a.min, a.max),
  where: (xs, a) => ('x' in a ? xs[0].where(a.x, a.y) : xs[0].where(xs[1], xs[2])),
  cast: (xs, a) => xs[0].cast(a.dtype),
  bitcast: (xs, a) => xs[0].bitcast(a.dtype),
  ...Object.fromEntries(['sum', 'max', 'min', 'mean', 'prod', 'var', 'std', 'logsumexp'].map((m) => [m, reduce(m)])),
  argmax: (xs, a) => xs[0].argmax({ axis: a.axis ?? null, keepdim: a.keepdim ?? false }),
  argmin: (xs, a) => xs[0].argmin({ axis: a.axis ?? null, keepdim: a.keepdim ?? false }),
  cumsum: (xs, a) => xs[0].cumsum(a.axis),
  sort: (xs, a) => xs[0].sort(a.axis, Boolean(a.descending)).values,
  topk: (xs, a) => xs[0].topk(a.k, a.axis, a.largest ?? true).values,
  cummax: (xs, a) => xs[0].cummax(a.axis).values,
  cummin: (xs, a) => xs[0].cummin(a.axis).values,
  cumprod: (xs, a) => xs[0].cumprod(a.axis),
  logcumsumexp: (xs, a) => xs[0].logcumsumexp(a.axis),
  reshape: (xs, a) => xs[0].reshape(a.shape),
  permute: (xs, a) => xs[0].permute(a.order),
  transpose: (xs, a) => xs[0].transpose(a.dim0, a.dim1),
  expand: (xs, a) => xs[0].expand(a.shape),
  pad: (xs, a) => xs[0].pad(a.padding, { value: a.value ?? 0 }),
  shrink: (xs, a) => xs[0].shrink(a.arg),
  flip: (xs, a) => xs[0].flip(a.axis),
  squeeze: (xs, a) => xs[0].squeeze(a.dim),
  unsqueeze: (xs, a) => xs[0].unsqueeze(a.dim),
  flatten: (xs, a) => xs[0].flatten(a.start ?? 0, a.end ?? -1),
  repeat: (xs, a) => xs[0].repeat(a.repeats),
  unflatten: (xs, a) => xs[0].unflatten(a.dim, a.sizes),
  split: (xs, a) => xs[0].split(a.sizes, { axis: a.dim })[a.piece],
  chunk: (xs, a) => xs[0].chunk(a.chunks, { axis: a.dim })[a.piece],
  cat: (xs, a) => Tensor.cat(xs, { dim: a.dim }),
  einsum: (xs, a) => Tensor.einsum(a.equation, ...xs),
  rearrange: (xs, a) => xs[0].rearrange(a.formula, a.sizes),
  qr: (xs, a) => xs[0].qr()[['q', 'r'].indexOf(a.factor)],
  svd: (xs, a) => xs[0].svd({ fullMatrices: a.full, sweeps: a.sweeps })[['u', 's', 'vh'].indexOf(a.factor)],
  stack: (xs, a) => Tensor.stack(xs, { dim: a.dim }),
  index: (xs, a) => xs[0].index(...a.index.map((e) => indexEntry(e, xs))),
  setitem: (xs, a) => xs[0].setitem(...a.index.map((e) => indexEntry(e, xs)), 'value' in a ? a.value : xs[1]),
  matmul: (xs) => xs[0].matmul(xs[1]),
  softmax: (xs, a) => xs[0].softmax(a.axis),
  logSoftmax: (xs, a) => xs[0].logSoftmax(a.axis),
  layernorm: (xs, a) => xs[0].layernorm({ axis: a.axis, eps: a.eps, weight: xs[1] ?? null, bias: xs[2] ?? null }),
  rmsNorm: (xs, a) => xs[0].rmsNorm(a.axis, a.eps, xs[1] ?? null),
  groupNorm: (xs, a) => xs[0].groupNorm(a.groups, xs[1] ?? null, xs[2] ?? null, a.eps),
  batchnorm: (xs, a) => xs[0].batchnorm(a.weight === null ? null : xs[a.weight], a.bias === null ? null : xs[a.bias], xs[1], xs[2], a.axis),
  batchNorm: (xs, a) => xs[0].batchNorm({ runningMean: xs[1] ?? null, runningVar: xs[2] ?? null, weight: xs[3] ?? null,
    bias: xs[4] ?? null, training: a.training, eps: a.eps }),
  crossEntropy: (xs, a) => xs[0].crossEntropy(xs[1], { reduction: a.reduction ?? 'mean', labelSmoothing: a.labelSmoothing ?? 0 }),
  sparseCategoricalCrossentropy: (xs, a) => xs[0].sparseCategoricalCrossentropy(xs[1], { ignoreIndex: a.ignoreIndex ?? -1,
    labelSmoothing: a.labelSmoothing ?? 0, reduction: a.reduction ?? 'mean' }),
  binaryCrossentropy: (xs, a) => xs[0].binaryCrossentropy(xs[1], { reduction: a.reduction ?? 'mean' }),
  binaryCrossentropyLogits: (xs, a) => xs[0].binaryCrossentropyLogits(xs[1], { reduction: a.reduction ?? 'mean', posWeight: xs[2] }),
  linear: (xs) => xs[0].linear(xs[1], xs[2] ?? null),
  oneHot: (xs, a) => xs[0].oneHot(a.n),
  tril: (xs, a) => xs[0].tril(a.diagonal ?? 0),
  triu: (xs, a) => xs[0].triu(a.diagonal ?? 0),
  gather: (xs, a) => xs[0].gather(a.dim, xs[1]),
  scatter: (xs, a) => xs[0].scatter(a.dim, xs[1], xs.length > 2 ? xs[2] : a.value),
  scatterReduce: (xs, a) => xs[0].scatterReduce(a.dim, xs[1], xs[2], a.reduce, { includeSelf: a.includeSelf }),
  nllLoss: (xs, a) => xs[0].nllLoss(xs[1], { weight: xs[2], ignoreIndex: a.ignoreIndex, reduction: a.reduction ?? 'mean' }),
  interpolate: (xs, a) => xs[0].interpolate(a.size, { mode: a.mode ?? 'linear', alignCorners: Boolean(a.alignCorners) }),
  unfold: (xs, a) => xs[0].unfold(a.dim, a.size, a.step),
  nonzero: (xs) => xs[0].nonzero(),
  maskedSelect: (xs) => xs[0].maskedSelect(xs[1]),
  multinomial: seeded((xs, a) => xs[0].multinomial(a.n, Boolean(a.replacement))),
  randperm: seeded((xs, a) => Tensor.randperm(a.n)),
  normal: seeded((xs, a) => Tensor.normal(a.shape, { mean: a.mean, std: a.std })),
  maxUnpool2d: (xs, a) => xs[0].maxUnpool2d(xs[1], { kernelSize: a.kernel ?? 2, stride: a.stride ?? null,
    padding: a.padding ?? 0, outputSize: a.outputSize }),
  conv2d: (xs, a) => xs[0].conv2d(xs[1], xs[2] ?? null, { groups: a.groups ?? 1, stride: a.stride ?? 1,
    dilation: a.dilation ?? 1, padding: a.padding ?? 0 }),
  convTranspose2d: (xs, a) => xs[0].convTranspose2d(xs[1], xs[2] ?? null, { groups: a.groups ?? 1, stride: a.stride ?? 1,
    dilation: a.dilation ?? 1, padding: a.padding ?? 0, outputPadding: a.outputPadding ?? 0 }),
  maxPool2d: (xs, a) => xs[0].maxPool2d(a.kernel ?? 2, { stride: a.stride ?? null, dilation: a.dilation ?? 1,
    padding: a.padding ?? 0, ceilMode: a.ceilMode ?? false }),
  maxPool2dIndices: (xs, a) => xs[0].maxPool2d(a.kernel ?? 2, { stride: a.stride ?? null, dilation: a.dilation ?? 1,
    padding: a.padding ?? 0, ceilMode: a.ceilMode ?? false, returnIndices: true }).indices,
  avgPool2d: (xs, a) => xs[0].avgPool2d(a.kernel ?? 2, { stride: a.stride ?? null, dilation: a.dilation ?? 1,
    padding: a.padding ?? 0, ceilMode: a.ceilMode ?? false, countIncludePad: a.countIncludePad ?? true }),
  newtonSchulz: (xs, a) => xs[0].newtonSchulz(a.steps, a.params, { eps: a.eps ?? 1e-7 }),
  // with p, dropout on the weights: seeded, while training
  scaledDotProductAttention: (xs, a) => {
    if (a.p === undefined) return xs[0].scaledDotProductAttention(xs[1], xs[2], { attnMask: xs[3] ?? null, isCausal: a.causal ?? false });
    Tensor.manualSeed(a.seed);
    const was = Tensor.training;
    Tensor.training = true;
    try {
      return xs[0].scaledDotProductAttention(xs[1], xs[2], { attnMask: xs[3] ?? null, isCausal: a.causal ?? false, dropoutP: a.p });
    } finally {
      Tensor.training = was;
    }
  },
  // One optimizer step on parameter xs[0] with gradient xs[1], built lazily: the new parameter.
  optimizerStep: (xs, a) => {
    const [p, o] = [xs[0], a.options ?? {}];
    p.requiresGrad = true;
    const make = {
      sgd: () => new pg.nn.SGD([p], { lr: a.lr, momentum: o.momentum ?? 0, weightDecay: o.weightDecay ?? 0, nesterov: o.nesterov ?? false }),
      adam: () => new pg.nn.Adam([p], { lr: a.lr, weightDecay: o.weightDecay ?? 0 }),
      adamw: () => new pg.nn.AdamW([p], { lr: a.lr, weightDecay: o.weightDecay ?? 0.01 }),
      lamb: () => new pg.nn.LAMB([p], { lr: a.lr, weightDecay: o.weightDecay ?? 0 }),
      lars: () => new pg.nn.LARS([p], { lr: a.lr, momentum: o.momentum ?? 0.9, weightDecay: o.weightDecay ?? 1e-4,
        nesterov: o.nesterov ?? false, classic: o.classic ?? true, tcoef: o.tcoef ?? 0.001 }),
      muon: () => new pg.nn.Muon([p], { lr: a.lr, momentum: o.momentum ?? 0.95, weightDecay: o.weightDecay ?? 0.1,
        nsSteps: o.nsSteps ?? 5, nsCoefficients: o.nsCoefficients ?? [3.4445, -4.775, 2.0315], nesterov: o.nesterov ?? true }),
    };
    const opt = make[a.optimizer]();
    p.grad = xs[1];
    opt.scheduleStep();
    return p;
  },
  grad: (xs, a) => {
    const target = xs[a.wrt];
    target.requiresGrad = true;
    BUILD[a.of](xs, a.args).sum().backward();
    return target.grad;
  },
  to: (xs, a) => {
    const y = xs[0].to(a.device);
    return a.back ? y.to('CPU') : y;
  },
};

// The case's op on its inputs, then each `then` step on the previous result.
async function build(c, xs) {
  let t = await BUILD[c.op](xs, c.args);
  for (const step of c.then ?? []) t = await BUILD[step.op]([t], step.args);
  return t;
}

// ---- the wire op enum, from the proto text (the same check as the Python runner's) ----------------

function wireOps() {
  const text = fs.readFileSync(path.join(REPO, 'proto', 'polygrad', 'v1', 'polygrad.proto'), 'utf8');
  const body = /enum Op \{([\s\S]*?)\n\}/.exec(text)[1];
  const ops = new Map();
  for (const m of body.matchAll(/^\s*([A-Z0-9_]+)\s*=\s*(\d+)\s*[;[]/gm)) if (m[1] !== 'OP_UNSPECIFIED') ops.set(Number(m[2]), m[1]);
  return ops;
}
const WIRE = wireOps();
// Values kept for older clients only: no current client sends them, so no case needs them.
const DEPRECATED = new Set([...fs.readFileSync(path.join(REPO, 'proto', 'polygrad', 'v1', 'polygrad.proto'), 'utf8')
  .matchAll(/^\s*([A-Z0-9_]+)\s*=\s*\d+\s*\[deprecated = true/gm)].map((m) => m[1]));

// The ops of the nodes the client will send for t, walked before realizing drops the sources. This
// (and the handle below) is the only place the runner looks inside a Tensor: the public API has no
// graph walk, and the daemon's own dtype and shape come from a Download of the realized buffer.
function wireOpsIn(t) {
  const seen = new Set();
  const ops = new Set();
  const stack = [t._node];
  while (stack.length) {
    const n = stack.pop();
    if (seen.has(n.id)) continue;
    seen.add(n.id);
    ops.add(WIRE.get(n.op));
    stack.push(...n.src);
  }
  return ops;
}

function dtypeName(wire) {
  if (typeof wire === 'string') return wire.toLowerCase();
  for (const dt of Object.values(dtypes)) if (dt && dt.wire === wire) return dt.name;
  return `wire dtype ${wire}`;
}

// Whether GetInfo (the connection's info) lists the device, by its kind ('CUDA') or full name ('CUDA:0').
function deviceAvailable(conn, name) {
  const want = name.toUpperCase();
  return (conn.info.devices || []).some((d) => d.available
    && [d.name.toUpperCase(), d.name.toUpperCase().split(':')[0]].includes(want));
}

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// ---- checks that need no daemon ---------------------------------------------------------------------

test('the generator matches the README test vectors', () => {
  const g = splitmix64(0);
  assert.deepEqual([g.next().value, g.next().value, g.next().value], [0xe220a8397b1dcdafn, 0x6e789e6aa1b965f4n, 0x06c45d188009454fn]);
  assert.deepEqual(inputValues({ dtype: 'int8', shape: [6], seed: 5, bits: true }), [90, -8, 71, 69, -59, 68]);
  assert.deepEqual(inputValues({ dtype: 'float32', shape: [2, 3], seed: 1, lo: -16, hi: 16, div: 4 }), [1.0, 0.75, -4.0, 3.25, 0.5, 1.75]);
});

test('every wire op has a case, and every corpus op a JavaScript builder', () => {
  const covered = new Set(CASES.flatMap((c) => c.wire));
  const missing = [...WIRE.values()].filter((op) => !covered.has(op) && !DEPRECATED.has(op));
  assert.deepEqual(missing, [], `wire ops without a conformance case: ${missing}`);
  const ops = new Set(CASES.flatMap((c) => [c.op, ...(c.then ?? []).map((s) => s.op)]));
  const unbuilt = [...ops].filter((op) => !(op in BUILD));
  assert.deepEqual(unbuilt, [], `corpus ops without a builder in conformance.test.mjs: ${unbuilt}`);
  assert.ok(CASES.length >= 150, `${CASES.length} cases`);
});

// ---- the cases ----------------------------------------------------------------------------------------

const pyPath = path.join(OUT, 'python.json');
const python = fs.existsSync(pyPath) ? JSON.parse(fs.readFileSync(pyPath, 'utf8')) : null;
const results = {};

test('the Python results to compare with exist and are of this corpus', () => {
  assert.ok(python, `${pyPath} does not exist: run tests/conformance/run.sh (Python first, then this)`);
  assert.equal(python.corpus_sha256, sha256(CORPUS_TEXT), `${pyPath} is from another version of cases.json`);
});

describe('cases', () => {
  let conn;
  before(async () => { conn = await connect(); });
  after(() => {
    fs.mkdirSync(OUT, { recursive: true });
    const doc = { client: 'js', corpus_sha256: sha256(CORPUS_TEXT), cases: results };
    fs.writeFileSync(path.join(OUT, 'js.json'), `${JSON.stringify(doc, null, 1)}\n`);
  });

  for (const c of CASES) {
    test(c.id, async (t) => {
      const py = python && python.cases[c.id];
      if (c.requires && !deviceAvailable(conn, c.requires)) {
        results[c.id] = { status: 'skipped', reason: `the daemon has no available ${c.requires} device` };
        t.skip(results[c.id].reason);
        return;
      }
      results[c.id] = { status: 'error', error: 'did not finish' };
      let x;
      let sent;
      let down;
      let bytes;
      try {
        const xs = c.inputs.map(makeInput);
        x = await build(c, xs);  // nonzero and maskedSelect read their count first
        sent = wireOpsIn(x);
        await x.realize();
        await Tensor.synchronize(); // the handle comes with the realize's answer (asynchronous dispatch)
        down = await conn.download(x._node.handle);
        const arr = await x.data();
        bytes = Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength);
      } catch (e) {
        results[c.id] = { status: 'error', error: `${e.name}: ${e.message}` };
        throw e;
      }
      const entry = { status: 'ok', dtype: x.dtype.name, shape: x.shape, daemon_dtype: dtypeName(down.dtype),
        daemon_shape: down.shape.map(Number), nbytes: bytes.length, sha256: sha256(bytes) };
      if (bytes.length <= HEX_LIMIT) entry.hex = bytes.toString('hex');
      results[c.id] = entry;

      const missing = c.wire.filter((op) => !sent.has(op));
      assert.deepEqual(missing, [], `the graph does not contain ${missing} (it has ${[...sent].sort()})`);
      assert.deepEqual([entry.dtype, entry.shape], [entry.daemon_dtype, entry.daemon_shape],
        'local shape/dtype differ from the daemon\'s');
      assert.ok(bytes.equals(down.data), 'data() bytes differ from the downloaded buffer');
      if (python) {
        assert.ok(py, 'the Python run has no result for this case');
        assert.equal(py.status, 'ok', `the Python run did not pass this case: ${py.error ?? py.reason}`);
        assert.deepEqual([entry.dtype, entry.shape], [py.dtype, py.shape], 'shape/dtype differ from the Python client\'s');
        assert.equal(entry.sha256, py.sha256, `bytes differ from the Python client's\n  js:     ${entry.hex ?? '(long)'}\n  python: ${py.hex ?? '(long)'}`);
      }
    });
  }
});
