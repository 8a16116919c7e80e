'use strict';
// The lazy Tensor (tinygrad's names and semantics, camelCase). Building a graph is synchronous and
// local: shapes and dtypes are computed here, without a round trip. Reading data is asynchronous:
// realize()/data()/array()/item() send the graph to polygradd and bring results back.
// The operator methods live in ./ops/*.js, one file per family, installed on the prototype.
const { OPS } = require('./ops');
const { GRAPH } = require('./graph');
const { Composite } = require('./composite');
const { dtypes, toDType, dtypeOfArray, DType } = require('./dtype');
const { encode, encodeArray, flatten, inferDType, nest, elementReader } = require('./data');
const { prod, asShape, checkShape, normalizeAxis } = require('./shape');

// Process-wide autograd switches (nesting counters).
const gradMode = { noGrad: 0, untracked: 0 };

function isScalar(x) {
  return typeof x === 'number' || typeof x === 'boolean' || typeof x === 'bigint';
}

function isOptions(x) {
  return x !== null && typeof x === 'object' && !Array.isArray(x) && !ArrayBuffer.isView(x) && !(x instanceof Tensor)
    && !(x instanceof DType);
}

// (args, options) from `f(2, 3, { dtype })`, `f([2, 3], { dtype })`.
function splitOptions(args) {
  const last = args[args.length - 1];
  return isOptions(last) ? [args.slice(0, -1), last] : [args, {}];
}

function dtypeFromPy(x) {
  if (typeof x === 'boolean') return dtypes.bool;
  if (typeof x === 'bigint') return dtypes.int64;
  return Number.isInteger(x) ? dtypes.int32 : dtypes.float32;
}

// An int constant wrapped into an integer dtype's range (two's complement, as numpy does).
function wrapInt(value, dt) {
  const bits = 8 * dt.itemsize;
  const b = typeof value === 'bigint' ? value : BigInt(value);
  const w = dt.kind === 'i' ? BigInt.asIntN(bits, b) : BigInt.asUintN(bits, b);
  return dt.itemsize === 8 ? w : Number(w);
}

function constValue(value, dt) {
  if (typeof value === 'boolean' && dt.kind !== 'b') value = value ? 1 : 0;
  if (dt.kind === 'i' || dt.kind === 'u') {
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new RangeError(`cannot make an ${dt.name} constant from ${value}`);
      value = Math.trunc(value);
    }
    return wrapInt(value, dt);
  }
  if (dt.kind === 'b') return Boolean(value);
  return Number(value);
}

// fn(), then restore(): at once, or when the promise fn returns settles.
function settle(fn, restore) {
  let out;
  try {
    out = fn();
  } catch (e) {
    restore();
    throw e;
  }
  if (out && typeof out.then === 'function') return out.finally(restore);
  restore();
  return out;
}

let tensorIds = 0;

// A seeded generator for the initializers (uniform, kaiming, glorot): splitmix64 over BigInt, so
// Tensor.manualSeed makes model initialization repeatable within JavaScript.
const rng = { state: null };
function nextUniform() {
  if (rng.state === null) rng.state = BigInt(Date.now());
  rng.state = BigInt.asUintN(64, rng.state + 0x9e3779b97f4a7c15n);
  let z = rng.state;
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  z ^= z >> 31n;
  return Number(z >> 11n) / 2 ** 53;
}

const random = { seed: null, counter: 0 };

class Tensor {
  constructor(node) {
    if (!node || typeof node.op !== 'number') throw new TypeError('use Tensor.from(data) to make a tensor');
    this._node = node;
    this._rg = null;
    this.grad = null;
  }

  // --- creation ---------------------------------------------------------------------------------

  // data: a number/boolean/bigint, nested arrays, or a TypedArray (with `shape`; Uint16Array holds
  // float16/bfloat16 bits when that is the dtype).
  // The bytes at an http(s) URL as a uint8 tensor (tinygrad's from_url), read with fetch; gunzip
  // decompresses them first. Async: the bytes are read before the tensor exists.
  static async fromUrl(url, { gunzip = false, timeout = 60000, ...options } = {}) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new RangeError(`fromUrl reads http:// and https:// URLs, got '${String(url).slice(0, 100)}'`);
    }
    const response = await fetch(u, { signal: AbortSignal.timeout(timeout) });
    if (!response.ok) throw new Error(`fromUrl: ${u.origin}${u.pathname.slice(0, 100)} answered HTTP ${response.status}`);
    let bytes = new Uint8Array(await response.arrayBuffer());
    if (gunzip) bytes = new Uint8Array(require('node:zlib').gunzipSync(bytes));
    return Tensor.from(bytes, { ...options, dtype: dtypes.uint8 });
  }

  static from(data, { dtype, shape, device, requiresGrad } = {}) {
    let dt = dtype !== undefined && dtype !== null ? toDType(dtype) : null;
    let t;
    if (data instanceof Tensor) {
      t = dt ? data.cast(dt) : data;
      if (shape) t = t.reshape(shape);
    } else if (isScalar(data) && !shape) {
      dt = dt || dtypeFromPy(data);
      t = new Tensor(GRAPH.node(OPS.CONST, dt, [], [], constValue(data, dt)));
    } else {
      let typed;
      let sh;
      if (ArrayBuffer.isView(data)) {
        dt = dt || dtypeOfArray(data);
        typed = encodeArray(data, dt);
        sh = shape ? asShape([shape]) : [data.length];
      } else {
        const { flat, shape: fs } = isScalar(data) ? { flat: [data], shape: [] } : flatten(data);
        dt = dt || inferDType(flat);
        typed = encode(flat, dt);
        sh = shape ? asShape([shape]) : fs;
      }
      checkShape(sh);
      if (prod(sh) !== typed.length) throw new RangeError(`shape [${sh}] needs ${prod(sh)} elements, the data has ${typed.length}`);
      t = new Tensor(GRAPH.node(OPS.BUFFER, dt, sh, [], typed));
    }
    if (device !== undefined && device !== null) t = t.to(device);
    if (requiresGrad !== undefined) t.requiresGrad = requiresGrad;
    else if (!(data instanceof Tensor) && t.dtype.kind === 'f') GRAPH.noteCreated(t);
    return t;
  }

  static _make(op, dtype, shape, src = [], arg = null) {
    const track = !gradMode.noGrad && !gradMode.untracked && src.some((t) => t._rg || t._node.rg);
    const t = new Tensor(GRAPH.node(op, dtype, [...shape], src.map((s) => s._node), arg, track, gradMode.noGrad > 0));
    if (track) t._rg = true;
    return t;
  }

  static _const(value, dtype, shape = []) {
    return new Tensor(GRAPH.node(OPS.CONST, dtype, [...shape], [], constValue(value, dtype)));
  }

  static full(shape, fillValue, { dtype, requiresGrad, device } = {}) {
    const sh = checkShape(asShape(Array.isArray(shape) ? [shape] : [shape]));
    const dt = dtype ? toDType(dtype) : dtypeFromPy(fillValue);
    let t = Tensor._const(fillValue, dt, sh);
    if (device) t = t.to(device);
    if (requiresGrad !== undefined) t.requiresGrad = requiresGrad;
    return t;
  }

  static zeros(...args) {
    const [shape, o] = splitOptions(args);
    return Tensor.full(asShape(shape), 0, { ...o, dtype: o.dtype || dtypes.float32 });
  }

  static ones(...args) {
    const [shape, o] = splitOptions(args);
    return Tensor.full(asShape(shape), 1, { ...o, dtype: o.dtype || dtypes.float32 });
  }

  static empty(...args) {
    return Tensor.zeros(...args);
  }

  fullLike(value, o = {}) { return Tensor.full(this.shape, value, { ...o, dtype: o.dtype || this.dtype }); }
  zerosLike(o = {}) { return this.fullLike(0, o); }
  onesLike(o = {}) { return this.fullLike(1, o); }

  // start, start + step, ... below stop: the daemon's ARANGE from start by step.
  static arange(...args) {
    const [nums, o] = splitOptions(args);
    let [start, stop, step = 1] = nums;
    if (stop === undefined) { stop = start; start = 0; }
    for (const v of [start, stop, step]) {
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new RangeError(`arange takes finite number bounds, got ${v}`);
    }
    if (step === 0) throw new RangeError('arange: step must not be zero');
    const allInt = [start, stop, step].every(Number.isInteger);
    const fits = (dtype, vs) => vs.every((v) => v >= dtypes.min(dtype) && v <= dtypes.max(dtype));
    // Integer bounds past int32 need int64 (torch's default, as Python's); int32 would wrap.
    const intDefault = fits(dtypes.int32, [start, stop - step, step]) ? dtypes.int32 : dtypes.int64;
    const dt = o.dtype ? toDType(o.dtype) : (allInt ? intDefault : dtypes.float32);
    if (dt === dtypes.bool) throw new TypeError('arange cannot make a bool tensor');
    const n = Math.max(0, Math.ceil((stop - start) / step));
    if (n && (dt.kind === 'i' || dt.kind === 'u') && !fits(dt, [start, start + (n - 1) * step])) {
      throw new RangeError(`arange(${start}, ${stop}, ${step}) does not fit ${dt.name}`);
    }
    if (n === 0) return Tensor.from(new Float64Array(0), { dtype: dt });
    const calc = dt.kind === 'f' || allInt ? dt : dtypes.float32;
    const progression = start === 0 && step === 1 ? [] : [Tensor._const(start, calc), Tensor._const(step, calc)];
    return Tensor._make(OPS.ARANGE, calc, [n], progression, [n]).cast(dt);
  }

  // numpy's linspace: steps values from start to stop, the last exactly stop (the daemon's
  // LINSPACE, computed in float64 and cast to the dtype).
  static linspace(start, stop, steps, o = {}) {
    if (!Number.isInteger(steps) || steps < 0) throw new RangeError(`linspace: steps must be an integer >= 0, got ${steps}`);
    if (!Number.isFinite(start) || !Number.isFinite(stop)) throw new RangeError(`linspace bounds must be finite, got ${start} and ${stop}`);
    const dt = o.dtype ? toDType(o.dtype) : dtypes.float32;
    if (steps === 0) return Tensor.from(new Float64Array(0), { dtype: dt, device: o.device });
    const t = Tensor._make(OPS.LINSPACE, dt, [steps], [], new Composite({ shape: [steps], start, stop }));
    return o.device ? t.to(o.device) : t;
  }

  // The (n, m) identity (m defaults to n): the daemon's EYE.
  static eye(n, m, o = {}) {
    if (isOptions(m)) { o = m; m = undefined; }
    const shape = [n, m === undefined ? n : m];
    if (!shape.every((v) => Number.isInteger(v) && v >= 0)) throw new RangeError(`eye takes sizes >= 0, got [${shape}]`);
    const dt = o.dtype ? toDType(o.dtype) : dtypes.float32;
    if (shape.includes(0)) return Tensor.from(new Float64Array(0), { shape, dtype: dt, device: o.device });
    const t = Tensor._make(OPS.EYE, dt, shape, [], shape);
    return o.device ? t.to(o.device) : t;
  }

  // Seeds rand/randn/randint/dropout (computed on the device from (seed, call counter): the same
  // seed gives the same numbers as the Python client) and the initializers' generator.
  static manualSeed(seed = 0) {
    random.seed = BigInt.asUintN(64, BigInt(seed));
    random.counter = 0;
    rng.state = random.seed;
  }

  // The device generator's state ({ seed: BigInt | null, counter }), which a compiled step that
  // draws anew per run advances as its eager calls would.
  static _randomState() {
    return random;
  }

  static _randomKey() {
    if (random.seed === null) random.seed = BigInt(Math.floor(Date.now() / 1000)); // unseeded runs differ, as in tinygrad
    const counter = random.counter;
    random.counter = (counter + 1) % 2 ** 32;
    return [random.seed.toString(), String(counter)];
  }

  static _random(op, shape, dtype, fields = {}) {
    const [seed, counter] = Tensor._randomKey();
    const sh = checkShape(asShape(shape));
    return new Tensor(GRAPH.node(op, dtype, sh, [], new Composite({ shape: sh, seed, counter, ...fields })));
  }

  static _randomFloat(op, name, args, fields = {}) {
    const [shape, o] = splitOptions(args);
    const dt = o.dtype ? toDType(o.dtype) : dtypes.float32;
    if (dt.kind !== 'f') throw new TypeError(`${name} makes float tensors, got ${dt.name}`);
    let t = Tensor._random(op, shape, dt, fields);
    if (o.device) t = t.to(o.device);
    if (o.requiresGrad !== undefined) t.requiresGrad = o.requiresGrad;
    else GRAPH.noteCreated(t);
    return t;
  }

  static rand(...args) { return Tensor._randomFloat(OPS.RAND, 'rand', args); }

  static randn(...args) { return Tensor._randomFloat(OPS.RANDN, 'randn', args); }

  // Integers uniform in [low, high) (options; default [0, 10)), computed on the device.
  static randint(...args) {
    const [shape, o] = splitOptions(args);
    const dt = o.dtype ? toDType(o.dtype) : dtypes.int32;
    if (!dtypes.isInt(dt)) throw new TypeError(`randint makes integer tensors, got ${dt.name}`);
    const low = o.low === undefined ? 0 : Number(o.low);
    const high = o.high === undefined ? 10 : Number(o.high);
    if (!(high > low)) throw new RangeError(`randint needs low < high, got [${low}, ${high})`);
    if (high - low > 2 ** 32 || low < Number(dtypes.min(dt)) || high - 1 > Number(dtypes.max(dt))) {
      throw new RangeError(`randint range [${low}, ${high}) does not fit ${dt.name} (or spans more than 2^32)`);
    }
    return Tensor._random(OPS.RANDINT, shape, dt, { low, high });
  }

  randLike(o = {}) { return Tensor.rand(this.shape, { ...o, dtype: o.dtype || this.dtype }); }
  randnLike(o = {}) { return Tensor.randn(this.shape, { ...o, dtype: o.dtype || this.dtype }); }

  // Uniform in [low, high) from the client's seeded generator, as data (for initializers).
  static uniform(...args) {
    const [shape, o] = splitOptions(args);
    const sh = asShape(shape);
    const low = o.low === undefined ? 0 : o.low;
    const high = o.high === undefined ? 1 : o.high;
    const vals = new Float32Array(prod(sh));
    for (let i = 0; i < vals.length; i++) vals[i] = low + (high - low) * nextUniform();
    return Tensor.from(vals, { shape: sh, dtype: o.dtype || dtypes.float32, requiresGrad: o.requiresGrad });
  }

  static scaledUniform(...args) {
    const [shape, o] = splitOptions(args);
    const b = prod(asShape(shape)) ** -0.5;
    return Tensor.uniform(asShape(shape), { ...o, low: -b, high: b });
  }

  static glorotUniform(...args) {
    const [shape, o] = splitOptions(args);
    const sh = asShape(shape);
    const b = Math.sqrt(6 / (sh[0] + prod(sh.slice(1))));
    return Tensor.uniform(sh, { ...o, low: -b, high: b });
  }

  static kaimingUniform(...args) {
    const [shape, o] = splitOptions(args);
    const sh = asShape(shape);
    const a = o.a === undefined ? 0.01 : o.a;
    const b = Math.sqrt(3) * Math.sqrt(2 / (1 + a * a)) / Math.sqrt(prod(sh.slice(1)));
    return Tensor.uniform(sh, { ...o, low: -b, high: b });
  }

  // Kaiming normal (tinygrad's kaiming_normal): N(0, std^2), std = sqrt(2 / (1 + a^2)) /
  // sqrt(prod(shape[1:])), from the client's seeded generator (Box-Muller), as data.
  static kaimingNormal(...args) {
    const [shape, o] = splitOptions(args);
    const sh = asShape(shape);
    const a = o.a === undefined ? 0.01 : o.a;
    const std = Math.sqrt(2 / (1 + a * a)) / Math.sqrt(prod(sh.slice(1)));
    const vals = new Float32Array(prod(sh));
    for (let i = 0; i < vals.length; i++) {
      vals[i] = std * Math.sqrt(-2 * Math.log(1 - nextUniform())) * Math.cos(2 * Math.PI * nextUniform());
    }
    return Tensor.from(vals, { shape: sh, dtype: o.dtype || dtypes.float32, requiresGrad: o.requiresGrad });
  }

  // --- properties -------------------------------------------------------------------------------

  get shape() { return [...this._node.shape]; }
  get dtype() { return this._node.dtype; }
  get ndim() { return this._node.shape.length; }
  get nodeId() { return this._node.id; }
  get isRealized() { return Boolean(this._node.handle); }
  numel() { return prod(this._node.shape); }
  elementSize() { return this.dtype.itemsize; }
  nbytes() { return this.numel() * this.dtype.itemsize; }

  // Where the tensor lives ('CPU', 'CUDA', 'CUDA:1'); constants follow their consumer (the CPU here).
  get device() { return this._node.device !== null ? this._node.device : 'CPU'; }

  size(dim) { return dim === undefined ? this.shape : this._node.shape[normalizeAxis(dim, this.ndim)]; }

  toString() {
    return `Tensor(shape=[${this._node.shape}], dtype=${this.dtype.name}, device=${this.device}, ${this.isRealized ? 'realized' : 'lazy'})`;
  }

  // --- reading (each one request) ---------------------------------------------------------------

  // Computes this tensor (and `others`) on the daemon; the result stays there.
  async realize(...others) {
    await GRAPH.realize([this._node, ...others.map((t) => t._node)], false);
    return this;
  }

  // Waits until the daemon has run everything this process sent; throws the first error among it
  // (realize(), optimizer steps and releases return once sent).
  static async synchronize() {
    await GRAPH.synchronize();
  }

  static async realize(...tensors) {
    if (tensors.length) await GRAPH.realize(tensors.map((t) => t._node), false);
  }

  // A TypedArray of the dtype: Float32Array, Int32Array, BigInt64Array (int64), Uint8Array (bool),
  // Uint16Array holding the bits of float16/bfloat16.
  async data() {
    if (this.numel() === 0) return new this.dtype.ArrayType(0);
    const [arr] = await GRAPH.realize([this._node], true);
    return arr;
  }

  // Nested arrays of numbers (16-bit floats decoded), bigints (64-bit integers) or booleans.
  async array() {
    return nest(await this.data(), this.dtype, this._node.shape);
  }

  async item() {
    if (this.numel() !== 1) throw new RangeError(`item() needs a tensor of one element, shape is [${this._node.shape}]`);
    const d = await this.data();
    return elementReader(d, this.dtype)(0);
  }

  // Releases the daemon's node (and buffer) now rather than when this object is collected.
  dispose() {
    const n = this._node;
    if (!n) return Promise.resolve();
    if (this._leafKey !== undefined) GRAPH.leaves.delete(this._leafKey);
    return GRAPH.dispose(n);
  }

  // --- autograd ---------------------------------------------------------------------------------

  get requiresGrad() { return this._rg; }

  set requiresGrad(value) {
    if (value && this.dtype.kind !== 'f') throw new TypeError(`only float tensors can require gradients, this one is ${this.dtype.name}`);
    this._rg = value;
    if (value) {
      const n = this._node;
      if (n.op === OPS.CONST && !n.sent) {
        // The daemon hash-conses constants: an equal constant elsewhere would share this leaf's gradient.
        const vals = new Float64Array(prod(n.shape)).fill(Number(n.arg));
        this._node = GRAPH.node(OPS.BUFFER, n.dtype, n.shape, [], encode(vals, n.dtype));
      }
      if (this._leafKey === undefined) this._leafKey = ++tensorIds;
      GRAPH.leaves.set(this._leafKey, new WeakRef(this));
    } else if (this._leafKey !== undefined) {
      GRAPH.leaves.delete(this._leafKey);
    }
  }

  requiresGrad_(value = true) {
    this.requiresGrad = value;
    return this;
  }

  // Tensors with requiresGrad = true this depends on (not through stop nodes), in node order; where
  // there are none, tinygrad's rule: the live float tensors made from data or random draws whose
  // requiresGrad is unset (null, not false). Constants are left out: the daemon merges equal ones.
  _gradTargets() {
    const ids = new Set(GRAPH.toposort(this._node, (n) => n.stop).map((n) => n.id));
    const found = [];
    for (const ref of GRAPH.leaves.values()) {
      const t = ref.deref();
      if (t && t.requiresGrad && ids.has(t._node.id)) found.push(t);
    }
    if (!found.length) {
      for (const ref of GRAPH.created) {
        const t = ref.deref();
        if (t && t._rg === null && ids.has(t._node.id) && t._node.op !== OPS.CONST && t.dtype.kind === 'f') found.push(t);
      }
    }
    return found.sort((a, b) => a._node.id - b._node.id);
  }

  // d(this)/d(target) for each target, as lazy tensors.
  gradient(targets, { gradient } = {}) {
    const loss = this._lossFor(gradient);
    for (const t of targets) {
      if (!(t instanceof Tensor)) throw new TypeError('gradient targets must be Tensors');
      if (t.dtype.kind !== 'f') throw new TypeError(`cannot take a gradient with respect to a ${t.dtype.name} tensor`);
    }
    const track = !gradMode.noGrad && !gradMode.untracked;
    return targets.map((t) => {
      const g = new Tensor(GRAPH.node(OPS.GRADIENT, t.dtype, t._node.shape, [loss._node, t._node], null, track));
      g._rg = track ? true : null;
      return g;
    });
  }

  _lossFor(gradient) {
    if (this.dtype.kind !== 'f') throw new TypeError(`cannot differentiate a ${this.dtype.name} tensor`);
    if (gradient === undefined || gradient === null) {
      if (this.numel() !== 1) throw new RangeError(`backward()/gradient() without a gradient needs a one-element loss, got shape [${this._node.shape}]`);
      return this;
    }
    if (!(gradient instanceof Tensor)) gradient = Tensor.from(gradient, { dtype: this.dtype });
    return this.mul(gradient);
  }

  // Lazily adds d(this)/d(leaf) to .grad of every tensor with requiresGrad that this depends on.
  backward({ gradient } = {}) {
    const targets = this._gradTargets();
    if (!targets.length) {
      throw new Error('backward(): the loss depends on no tensor with requiresGrad = true, nor on a float tensor made '
        + 'from data or a random draw with requiresGrad left unset');
    }
    const grads = this.gradient(targets, { gradient });
    const done = new Map();
    targets.forEach((t, i) => {
      if (!done.has(t._node.id)) done.set(t._node.id, grads[i]); // tensors sharing one node share its gradient
      const g = done.get(t._node.id);
      t.grad = t.grad === null ? g : t.grad.add(g);
    });
    if (pendingLosses.length >= 64) pendingLosses.splice(0, pendingLosses.length - 32);
    pendingLosses.push([new WeakRef(this), GRAPH.gen]);
    return this;
  }

  // The same values with no gradient flowing back through them (realized on their own first).
  detach() {
    if (this.dtype.kind !== 'f') return new Tensor(this._node);
    const zero = GRAPH.node(OPS.CONST, this.dtype, this._node.shape, [], 0);
    return new Tensor(GRAPH.node(OPS.ADD, this.dtype, this._node.shape, [this._node, zero], null, false, true));
  }

  clone() {
    const t = new Tensor(this._node);
    t._rg = this._rg;
    return t;
  }

  // Runs fn with gradient tracking off; results are cut from the graph for gradients. An async fn
  // keeps it off until its promise settles.
  static noGrad(fn) {
    gradMode.noGrad += 1;
    return settle(fn, () => { gradMode.noGrad -= 1; });
  }

  // Runs fn with Tensor.training = mode (tinygrad's Tensor.train()), restoring the old flag after;
  // an async fn keeps it until its promise settles.
  static train(fn, mode = true) {
    const before = Tensor.training;
    Tensor.training = Boolean(mode);
    return settle(fn, () => { Tensor.training = before; });
  }

  // Runs fn with Tensor.training = false (tinygrad's Tensor.test()).
  static test(fn) { return Tensor.train(fn, false); }

  static get isNoGrad() { return gradMode.noGrad > 0; }

  // Makes this tensor stand for x's values (lazily): the object, requiresGrad and grad stay.
  assign(x) {
    if (!(x instanceof Tensor)) x = Tensor.from(x, { dtype: this.dtype });
    if (x.ndim !== this.ndim || x._node.shape.some((s, i) => s !== this._node.shape[i])) {
      throw new RangeError(`assign: shape [${x._node.shape}] differs from [${this._node.shape}]`);
    }
    if (x.dtype !== this.dtype) x = x.cast(this.dtype);
    if (x !== this && x._leafKey !== undefined && x.requiresGrad) {
      untracked(() => { x = x.add(0); }); // another leaf: a copy, so the two do not become one gradient target
    } else if (this._leafKey !== undefined && this.requiresGrad && x._node.rg) {
      // A gradient leaf takes x's value, not its history (as the Python client): a realized tracked
      // value keeps the graph behind it, so `w.assign(w.detach().sub(w.grad.mul(lr)))` in a loop
      // would otherwise carry every earlier step.
      x = x.detach();
    }
    if (GRAPH.watch) GRAPH.watch.assigning(this);
    this._node = x._node;
    return this;
  }
}

if (typeof Symbol.dispose === 'symbol') {
  Tensor.prototype[Symbol.dispose] = function dispose() { this.dispose(); };
}

// Losses whose backward() ran and that nobody realized yet: an optimizer step realizes them in the
// same request as the new parameters.
const pendingLosses = [];
function takePendingLosses() {
  // A loss from an earlier session's backward() is not taken: its graph reads that session's nodes.
  const out = pendingLosses.filter(([, gen]) => gen === GRAPH.gen).map(([r]) => r.deref())
    .filter((t) => t && !t.isRealized);
  pendingLosses.length = 0;
  return out;
}

// Builds graph that requires no grad (optimizer updates, running statistics).
function untracked(fn) {
  gradMode.untracked += 1;
  try {
    return fn();
  } finally {
    gradMode.untracked -= 1;
  }
}

Tensor.training = false;

module.exports = { Tensor, gradMode, untracked, takePendingLosses, splitOptions, isOptions, isScalar, dtypeFromPy, constValue };

// The operator families (they need the class above); first the one-op methods generated from the op
// schema, which the hand-written families alias (swish = silu) and compose.
require('./ops/generated');
require('./ops/elementwise');
require('./ops/movement');
require('./ops/reduce');
require('./ops/sorting');
require('./ops/nnops');
require('./ops/scatter');
