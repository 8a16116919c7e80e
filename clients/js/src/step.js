'use strict';
// Compiled training steps: trace fn(...args) once, then run it with one RunStep message per step.
//
//   const step = await compileStep(trainStep, model, opt, x, y);
//   await step.run({ x: xb, y: yb });   // new data for the inputs, by argument position name
//   await step.lossValue();
//
// Tracing calls fn once with realizes (an optimizer step) deferred: the graph it builds becomes one
// CompileStep request. The tensors of every non-Tensor argument (models, optimizers) are the step's
// state: one that fn rebinds is an in-place assign, so after each run `model.weight` stands for the
// daemon buffer holding the trained values. Tensor arguments are the per-run inputs, named by the
// parameter names of fn (or arg0, arg1, ...). Optimizer scalars that change per step are fed as
// inputs each run.
const { OPS } = require('./ops');
const { GRAPH, AWAITED, checkedDecode } = require('./graph');
const { Tensor } = require('./tensor');
const { PolygradError } = require('./errors');
const { encode, bytesOf, elementReader, flatten } = require('./data');
const { prod } = require('./shape');
const session = require('./session');
const { getParameters } = require('./nn/state');
const { Optimizer, Scalar } = require('./nn/optim');

// fn's parameter names, so run({ x, y }) can name inputs; arg<i> where they cannot be read.
function paramNames(fn, count) {
  const src = Function.prototype.toString.call(fn);
  const m = src.match(/^[^(]*\(([^)]*)\)/) || src.match(/^\s*(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/);
  const names = m ? m[1].split(',').map((s) => s.replace(/=.*$/, '').trim()).filter(Boolean) : [];
  return [...Array(count).keys()].map((i) => (names[i] && /^[A-Za-z_$][\w$]*$/.test(names[i]) ? names[i] : `arg${i}`));
}

function optimizersIn(obj, seen = new Set()) {
  if (obj instanceof Optimizer) return [obj];
  if (obj === null || typeof obj !== 'object' || seen.has(obj) || obj instanceof Tensor) return [];
  seen.add(obj);
  const vals = Array.isArray(obj) ? obj : Object.values(obj);
  return vals.flatMap((v) => optimizersIn(v, seen));
}

// GRAPH.watch while fn is traced: the tensors fn rebinds (with the node each stood for first) and
// the optimizers it steps (with their step count before), whether reached as arguments or through
// closures.
class Tracing {
  constructor(optimizers, firstSteps) {
    this.assigned = new Map(); // tensor -> node before the trace
    this.optimizers = optimizers;
    this.firstSteps = firstSteps;
  }

  assigning(t) { if (!this.assigned.has(t)) this.assigned.set(t, t._node); }

  stepping(opt) {
    if (!this.firstSteps.has(opt)) {
      this.firstSteps.set(opt, opt.steps);
      this.optimizers.push(opt);
    }
  }

  restore() {
    for (const [t, old] of this.assigned) {
      t._node = old;
      old.cache = null;
    }
  }
}

// t is data made on the host that the daemon has not seen (a Tensor of a TypedArray).
const isHostData = (t) => t._node.op === OPS.BUFFER && !t._node.sent && ArrayBuffer.isView(t._node.arg);

// BUFFER nodes for the outputs `specs` of a run not answered yet, and the onAnswer(answer, error)
// that gives each its RunStep output: its bytes (also as the node's cache), or the handle of the
// copy the daemon made of a large one, released with the node. Until then a realize or read that
// needs one waits for the answer; after a failure they stay AWAITED, and a graph that uses one fails.
function awaitedOutputs(specs) {
  const nodes = specs.map((spec) => GRAPH.node(OPS.BUFFER, spec.dtype, spec.shape, [], AWAITED));
  GRAPH.awaited += nodes.length;
  const onAnswer = (resp, err) => {
    GRAPH.awaited -= nodes.length;
    if (err) throw err;
    specs.forEach((spec, i) => {
      const r = resp.outputs[i];
      if (r.has_data) {
        const arr = checkedDecode(spec, r.dtype, r.shape.map(Number), r.data);
        nodes[i].arg = arr;
        nodes[i].cache = arr; // whatever its size: reading it must not send it back and fetch it again
      } else {
        nodes[i].arg = r.handle;
        GRAPH.uploads.set(nodes[i].id, r.handle);
      }
    });
  };
  return { nodes, onAnswer };
}

class CompiledStep {
  constructor(conn, resp, inputs, outputs, targets, scalars, firstK, rebind = []) {
    this._conn = conn;
    this.stepId = resp.step_id;
    const st = resp.stats || {};
    this.nKernels = Number(st.kernels || 0);
    this.nIntermediates = Number(st.intermediates || 0);
    this.intermediateBytes = Number(st.intermediate_bytes || 0);
    this.compileSeconds = Number(st.seconds || 0);
    // The Variables the step has symbolic dims of: a run can set each (exchange's `variables`).
    this.variables = new Set(resp.variables || []);
    this._inputs = inputs; // name -> [tensor, node]
    // What decoding an output needs, not the traced nodes (they would hold the traced graph and
    // every node it read alive, see readNodes).
    this._outputs = outputs.map((n) => ({ id: n.id, dtype: n.dtype, shape: n.shape }));
    // [tensor or input name, output index]: a tensor fn rebound with no buffer to update in place
    // (or an input fn assigned to) stands for that output after every run.
    this._rebind = rebind;
    this.readNodes = []; // set by traceStep
    this._targets = targets; // the nodes the step assigns in place
    this._scalars = scalars; // [optimizer, field, node id]
    this._sentScalar = new Map();
    this._k = firstK;
    this._pending = new Map();
    this._values = null;
    this.runs = 0;
    // { seed, counter_base, count } of the random streams the trace drew (set by traceStep): the first
    // run draws those, every later run the next `count` counters, as eager calls would.
    this._random = null;
    this._gen = GRAPH.gen;
    this._released = false;
  }

  get inputNames() { return Object.keys(this._inputs); }

  // New data for an input (by argument name or tensor) for the next run: a TypedArray or nested
  // array of the input's shape, or a Tensor of its dtype and shape.
  async setInput(nameOrTensor, data) {
    let entry;
    if (typeof nameOrTensor === 'string') {
      entry = this._inputs[nameOrTensor];
      if (!entry) throw new RangeError(`compileStep: '${nameOrTensor}' is not an input of this step (inputs: ${this.inputNames.join(', ') || 'none'})`);
    } else {
      entry = Object.values(this._inputs).find(([t]) => t === nameOrTensor);
      if (!entry) throw new RangeError('compileStep: that tensor is not an input of this step');
    }
    const [, node] = entry;
    if (data instanceof Tensor) {
      if (data.dtype !== node.dtype || data.ndim !== node.shape.length || data.shape.some((s, i) => s !== node.shape[i])) {
        throw new RangeError(`input: got ${data.dtype.name}[${data.shape}], the step takes ${node.dtype.name}[${node.shape}]`);
      }
      if (!(data._node.handle && data._node.sent)) await data.realize();
      this._pending.set(node.id, data);
      return;
    }
    const flat = ArrayBuffer.isView(data) ? data : flatten(data).flat;
    if (flat.length !== prod(node.shape)) throw new RangeError(`input: got ${flat.length} elements, the step takes [${node.shape}]`);
    const typed = ArrayBuffer.isView(data) && data.constructor === node.dtype.ArrayType ? data : encode(flat, node.dtype);
    this._pending.set(node.id, Buffer.from(bytesOf(typed)));
  }

  // setInput(name, t) for a Tensor, sending the bytes of one made from host data (not yet on the
  // daemon) with the run instead of uploading it first.
  async feed(name, t) {
    const node = this._inputs[name][1];
    const n = t._node;
    if (isHostData(t) && n.dtype === node.dtype
        && n.shape.length === node.shape.length && n.shape.every((d, i) => d === node.shape[i])) {
      this._pending.set(node.id, Buffer.from(bytesOf(n.arg)));
    } else {
      await this.setInput(name, t);
    }
  }

  // Runs the step once after feeding `inputs` ({ name: data }). Resolves once the run is sent
  // (asynchronous dispatch): outputs(), lossValue() and the tensors fn returned wait for it. Bad
  // inputs throw before anything changes.
  async run(inputs = {}) {
    await this._accept(inputs);
    this._values = null;
    this._waiting = true;
    // The tensors fn returned stand for this run's outputs from now on: nodes whose data arrives
    // with the answer (a realize or read that needs one waits for it first).
    const bound = [];
    for (const [t, i] of this._rebind) {
      if (t instanceof Tensor) {
        t._node = GRAPH.node(OPS.BUFFER, this._outputs[i].dtype, this._outputs[i].shape, [], AWAITED);
        bound.push([t._node, i]);
      }
    }
    GRAPH.awaited += bound.length;
    await this.exchange({}, (resp, err) => this._take(bound, resp, err));
    return this;
  }

  // A run's answer: fn's outputs as TypedArrays, given to the nodes that stand for them.
  async _take(bound, resp, err) {
    GRAPH.awaited -= bound.length;
    if (err) throw err; // the bound nodes stay AWAITED: a graph that uses one fails
    const values = [];
    for (let i = 0; i < this._outputs.length; i++) {
      const n = this._outputs[i];
      const r = resp.outputs[i];
      let data = r.data;
      if (!r.has_data) {
        data = (await this._conn.downloadNow(r.handle)).data;
        await this._conn.submit({ release: { node_ids: [], handles: [r.handle] } }, 'Release', null);
      }
      values.push(checkedDecode(n, r.dtype, r.shape.map(Number), data));
    }
    this._values = values;
    this._waiting = false;
    for (const [node, i] of bound) node.arg = values[i].slice();
  }

  // One RunStep after feeding `inputs`: the daemon's answer, whose large outputs are handles the
  // caller owns. Optimizer scalars and node caches are brought up to date. With `onAnswer` the run
  // goes on the session's stream and this resolves once it is sent; onAnswer(answer, error) is
  // called when it is settled (at once where there is no stream).
  // A failure before the run is sent is onAnswer's too (so what it holds open, such as the graph's
  // count of AWAITED nodes, is undone), and is thrown. `variables`: [name, value] pairs of this
  // run's Variables (RunStep.variables); one not given keeps its last value.
  async exchange(inputs = {}, onAnswer = null, variables = []) {
    const run = { handedOver: false }; // set once onAnswer is the stream's to call, or called
    try {
      return await this._exchange(inputs, onAnswer, run, variables);
    } catch (e) {
      if (onAnswer && !run.handedOver) await onAnswer(null, e);
      throw e;
    }
  }

  // Feeds `inputs` for the next run (throwing on a bad one) and checks the step is usable.
  async _accept(inputs) {
    for (const [name, value] of Object.entries(inputs)) await this.setInput(name, value);
    if (GRAPH.gen !== this._gen || this._released) throw new PolygradError('compileStep: this step was released or belongs to a closed session');
  }

  async _exchange(inputs, onAnswer, run, variables) {
    await this._accept(inputs);
    // An input fed by handle whose realize is still outstanding: its handle comes with the answer.
    if ([...this._pending.values()].some((v) => v instanceof Tensor && v._node.handle === '-1')) await GRAPH.synchronize();
    const feeds = [];
    for (const [nid, v] of this._pending) feeds.push([nid, v instanceof Tensor ? v._node.handle : v]);
    for (const [opt, field, nid] of this._scalars) {
      const value = scalarsOf(opt, this._k)[field];
      if (value !== undefined && this._sentScalar.get(nid) !== value) {
        feeds.push([nid, Buffer.from(new Float32Array([value]).buffer)]);
        this._sentScalar.set(nid, value);
      }
    }
    // The first run draws what the trace drew; every later one the next counters, as eagerly.
    let random = null;
    if (this._random && this.runs > 0) {
      const generator = Tensor._randomState();
      random = { seed: (generator.seed ?? BigInt(this._random.seed)).toString(), counter_base: String(generator.counter) };
      generator.counter = (generator.counter + Number(this._random.count)) % 2 ** 32;
    }
    let resp = null;
    const sent = onAnswer && await this._conn.submitRunStep(this.stepId, feeds, true, (p, err) => onAnswer(p.answer, err),
      random, variables);
    run.handedOver = Boolean(sent);
    if (!sent) resp = await this._conn.runStep(this.stepId, feeds, true, random, variables);
    this._pending.clear();
    this.runs += 1;
    for (const opt of new Set(this._scalars.map(([o]) => o))) opt.steps = this._k;
    this._k += 1;
    // The daemon changed these buffers in place: results cached on their nodes are stale.
    for (const n of this._targets) n.cache = null;
    for (const [, n] of Object.values(this._inputs)) n.cache = null;
    if (resp && onAnswer) {
      run.handedOver = true;
      await onAnswer(resp, null);
    }
    return resp;
  }

  // What fn returned, as TypedArrays, from the last run.
  async outputs() {
    if (!this._values && this._waiting) await GRAPH.synchronize();
    if (!this._values) throw new Error('compileStep: run() the step before reading its outputs');
    return this._values.map((v) => v.slice());
  }

  // The first output of the last run (e.g. the loss) as a number.
  async lossValue() {
    if (!this._values && this._waiting) await GRAPH.synchronize();
    if (!this._values) throw new Error('compileStep: run() the step before reading lossValue()');
    if (!this._values.length) throw new Error('compileStep: fn returned no tensor');
    const v = this._values[0];
    if (v.length !== 1) throw new RangeError(`lossValue() needs a one-element output, fn returned ${v.length} elements`);
    return Number(elementReader(v, this._outputs[0].dtype)(0));
  }

  // Frees the step on the daemon now (it also goes with the session).
  async release() {
    if (this._released) return;
    this._released = true;
    if (this._gen === GRAPH.gen && this._conn.sessionId) await this._conn.releaseStep(this.stepId);
  }
}

function scalarsOf(opt, k) {
  return typeof opt.scalarsFor === 'function' ? opt.scalarsFor(k) : { _lr: opt.lr };
}

async function compileStep(fn, ...args) {
  const conn = await session.get();
  const names = paramNames(fn, args.length);
  const inputs = {};
  const others = [];
  args.forEach((a, i) => { if (a instanceof Tensor) inputs[names[i]] = a; else others.push(a); });
  const inputSet = new Set(Object.values(inputs));
  const state = getParameters(others).filter((t) => !inputSet.has(t));
  const optimizers = [...new Set(others.flatMap((o) => optimizersIn(o)))];
  const { step } = await traceStep(conn, () => fn(...args), inputs, state, optimizers, returnedTensors, false);
  return step;
}

function returnedTensors(result) {
  if (result === undefined || result === null) return [];
  if (result instanceof Tensor) return [result];
  if (Array.isArray(result) && result.every((r) => r instanceof Tensor)) return result;
  throw new TypeError('compileStep: fn must return a Tensor, an array of Tensors or nothing');
}

// Traces call() into a compiled step whose per-run inputs are `inputs` ({ name: tensor }) and whose
// state is `state`, the tensors of `optimizers` and whatever else call() rebinds or steps. Returns
// { step, result, rebind }; the step's first outputs are resultTensors(result). With inputAssigns,
// call() may assign to an input (its new value is an output the caller rebinds), else that throws.
async function traceStep(conn, call, inputs, state, optimizers, resultTensors, inputAssigns) {
  const everything = [...Object.values(inputs), ...state];
  if (everything.length) await Tensor.realize(...everything);
  const inputNodes = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, t._node]));
  const ids = Object.values(inputNodes).map((n) => n.id);
  if (new Set(ids).size !== ids.length) throw new RangeError('compileStep: two inputs are the same tensor; pass distinct tensors');
  const before = state.map((t) => [t, t._node]);
  const grads = state.map((t) => [t, t.grad]);
  const firstSteps = new Map(optimizers.map((o) => [o, o.steps]));
  const tracing = new Tracing(optimizers, firstSteps);
  let traced;
  try {
    traced = await traceAndCompile(conn, call, tracing, before, inputNodes, ids, resultTensors, inputAssigns);
  } catch (e) {
    for (const [t, g] of grads) t.grad = g; // a failed trace leaves the model as it was
    throw e;
  } finally {
    tracing.restore();
    for (const [t, old] of before) { // state tensors stand for their buffers, which every run updates
      t._node = old;
      old.cache = null;
    }
    for (const o of optimizers) o.steps = firstSteps.get(o);
  }
  const firstK = optimizers.length ? Math.min(...firstSteps.values()) + 1 : 1;
  const { resp, result, outs, assigns, scalars, rebind, read, random } = traced;
  const ins = Object.fromEntries(Object.keys(inputs).map((k) => [k, [inputs[k], inputNodes[k]]]));
  const step = new CompiledStep(conn, resp, ins, outs, assigns.map(([old]) => old), scalars, firstK, rebind);
  step.readNodes = read.map((n) => new WeakRef(n));
  step._random = random;
  step.state = before; // [tensor, the node it stands for] of every in-place target
  return { step, result, rebind };
}

async function traceAndCompile(conn, call, tracing, before, inputNodes, ids, resultTensors, inputAssigns) {
  const firstNewId = GRAPH.nextId;
  const deferred = [];
  GRAPH.tracing = deferred;
  GRAPH.watch = tracing;
  const generator = Tensor._randomState();
  const [seedBefore, counterBefore] = [generator.seed, generator.counter];
  let result;
  try {
    result = await call();
  } finally {
    GRAPH.tracing = null;
    GRAPH.watch = null;
  }
  // The random streams the trace drew, which every later run draws anew (as eager calls would). A
  // manualSeed inside fn restarts the counter: the step then keeps the trace's numbers.
  const drawn = (generator.counter - counterBefore + 2 ** 32) % 2 ** 32;
  const random = drawn && generator.seed !== null && (seedBefore === null || seedBefore === generator.seed)
    ? { seed: generator.seed.toString(), counter_base: String(counterBefore), count: String(drawn) } : null;
  const outs = resultTensors(result).map((t) => t._node);
  const optimizers = tracing.optimizers;

  // Tensors rebound through closures join the state when their old value has a buffer to update in
  // place; an input, or a tensor whose old value was never realized, gets its new value back as an
  // extra output after every run.
  const inputNames = new Map(Object.entries(inputNodes).map(([k, n]) => [n.id, k]));
  const known = new Set(before.map(([t]) => t));
  const rebindNodes = [];
  for (const [t, old] of tracing.assigned) {
    if (known.has(t) || t._node === old) continue;
    if (inputNames.has(old.id)) {
      if (!inputAssigns) throw new RangeError('compileStep: fn assigns to an input tensor');
      rebindNodes.push([inputNames.get(old.id), t._node]);
    } else if (old.sent && old.handle && old.gen === GRAPH.gen) {
      before.push([t, old]);
      known.add(t);
    } else {
      rebindNodes.push([t, t._node]);
    }
  }
  const rebind = rebindNodes.map(([who], i) => [who, outs.length + i]);
  outs.push(...rebindNodes.map(([, n]) => n));

  const assigns = before.filter(([t, old]) => t._node !== old).map(([t, old]) => [old, t._node]);
  for (const [old, nw] of assigns) {
    if (old.dtype !== nw.dtype || old.shape.some((s, i) => s !== nw.shape[i])) {
      throw new RangeError(`compileStep: fn changed a state tensor from ${old.dtype.name}[${old.shape}] to ${nw.dtype.name}[${nw.shape}]`);
    }
    if (Object.values(inputNodes).includes(old)) throw new RangeError('compileStep: fn assigns to an input tensor');
  }
  const roots = [...outs, ...assigns.map(([, v]) => v)];
  return GRAPH._serial(async () => {
    const todo = roots.length ? GRAPH.unsent(roots) : [];
    // A stop node matters only to a gradient (eager realizes cut it first); a step without one has none.
    if (todo.some((n) => n.op === OPS.GRADIENT) && todo.some((n) => n.src.some((s) => s.stop && !s.handle))) {
      throw new PolygradError('compileStep: detach() / Tensor.noGrad values inside a compiled step are not supported yet');
    }
    // Optimizer scalars that change per step become inputs of the step.
    const todoIds = new Set(todo.map((n) => n.id));
    const scalars = [];
    for (const opt of optimizers) {
      for (const [field, value] of Object.entries(opt)) {
        if (!(value instanceof Scalar) || !value.t) continue;
        let node = value.t._node;
        if (node.op === OPS.COPY && node.src[0] && node.src[0].op === OPS.BUFFER) node = node.src[0];
        if (node.op === OPS.BUFFER && (node.sent || todoIds.has(node.id))) scalars.push([opt, field, node.id]);
      }
    }
    const scalarIds = new Set(scalars.map(([, , id]) => id));
    // Random numbers drawn while traced are drawn anew every run (CompileStep's `random`), unless
    // fn reseeded: then they are as good as data baked in.
    const baked = todo.filter((n) => n.id >= firstNewId && ((n.op === OPS.BUFFER && !scalarIds.has(n.id))
      || (!random && [OPS.RAND, OPS.RANDN, OPS.RANDINT, OPS.DROPOUT].includes(n.op))));
    if (baked.length) {
      process.emitWarning(`compileStep: fn made ${baked.length} tensor(s) from data (or random numbers after ` +
        'reseeding) while traced; their values are baked into the step and are the same in every run');
    }
    for (const n of todo) {
      if (n.op === OPS.BUFFER && ArrayBuffer.isView(n.arg) && n.arg.byteLength > conn.maxInlineBytes) {
        const h = await conn.upload(n.dtype.wire, n.shape, bytesOf(n.arg));
        n.arg = h;
        GRAPH.uploads.set(n.id, h);
      }
    }
    // The nodes from before the trace that the step reads (weights fn reached through closures): one
    // that dies was rebound outside the step, which then reads a stale value.
    const fed = new Set([...ids, ...scalarIds]);
    const read = new Map(todo.filter((n) => n.id < firstNewId).map((n) => [n.id, n]));
    for (const n of todo) for (const s of n.src) if (s.sent && !fed.has(s.id)) read.set(s.id, s);
    for (const n of outs) if (n.sent && !fed.has(n.id)) read.set(n.id, n);
    const wire = todo.map((n) => GRAPH.toWire(n));
    const limit = conn.maxNodesPerRequest || wire.length || 1;
    let start = 0;
    while (wire.length - start > limit) {
      await conn.realize(wire.slice(start, start + limit), [], false);
      for (const n of todo.slice(start, start + limit)) GRAPH._markSent(n);
      start += limit;
    }
    // What fn realized (an optimizer step: gradients, new state) gets its own kernels, as eagerly.
    const sentOrTodo = new Set([...todoIds, ...deferred.filter((n) => n.sent).map((n) => n.id)]);
    const materialize = [...new Set(deferred.filter((n) => sentOrTodo.has(n.id)).map((n) => n.id))];
    const resp = await conn.compileStep(wire.slice(start), [...ids, ...[...scalarIds].sort((a, b) => a - b)],
      outs.map((n) => n.id), assigns.map(([old, nw]) => [old.id, nw.id]), materialize, random);
    for (const n of todo.slice(start)) GRAPH._markSent(n);
    const handles = [];
    for (const n of todo) {
      const h = GRAPH.uploads.get(n.id);
      if (h !== undefined) { GRAPH.uploads.delete(n.id); handles.push(h); }
    }
    if (handles.length) await conn.release([], handles);
    return { resp, result, outs, assigns, scalars, rebind, read: [...read.values()], random };
  });
}

module.exports = { compileStep, CompiledStep, traceStep, awaitedOutputs, isHostData };
