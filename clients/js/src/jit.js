'use strict';
// jit(fn): tinygrad's TinyJit for JavaScript, as the Python client's polygrad.TinyJit.
//
//   const trainStep = jit(async (x, y) => {
//     opt.zeroGrad();
//     const loss = model.forward(x).sparseCategoricalCrossentropy(y).backward();
//     await opt.step();
//     return loss;
//   });
//   for (const [x, y] of batches) console.log(await (await trainStep(x, y)).item());
//
// The first call runs fn as it is; the second traces it into a compiled step (compileStep's tracer)
// and runs that; every later call is one RunStep. Inputs are the Tensor arguments (and Tensors
// directly inside array and plain-object arguments); state is whatever fn rebinds (assign) or steps
// (an optimizer), reached as arguments or through closures, updated in place on the daemon. What
// fn returns comes back as new realized Tensors in the same structure, each call's its own. Other
// shapes, dtypes or devices of the inputs, a function that computes nothing and a non-Tensor return
// value throw JitError; reset() forgets the capture. A tensor the step updates that was rebound
// since (another jit's eager call) makes the next call capture again; so does one it only reads
// (weights trained eagerly), once the garbage collector took the old value: reset() after such
// training to be sure.
//
// A bound Variable argument (variable.js) with another value replays with that value (RunStep's
// `variables`) when the capture used the Variable only in symbolic dims; one fn took as a plain
// number while capturing (Number(p), `p + 1`, `p < 3`, an index into a JS array), or that sized
// no symbolic dim, makes the call capture again (compiling nothing: the kernels are cached).
const { GRAPH } = require('./graph');
const { Tensor } = require('./tensor');
const { PolygradError } = require('./errors');
const session = require('./session');
const { traceStep, awaitedOutputs, isHostData } = require('./step');
const { getParameters } = require('./nn/state');
const { BoundVariable, watchingConcreteUses } = require('./variable');

class JitError extends PolygradError {}

// The Tensor arguments by name (args[i]), and the Tensors directly inside array and plain-object
// arguments (not deeper: a model's weights are state).
function jitInputs(args) {
  const names = [];
  const tensors = [];
  args.forEach((a, i) => { if (a instanceof Tensor) { names.push(`args[${i}]`); tensors.push(a); } });
  args.forEach((a, i) => {
    const entries = Array.isArray(a) ? a.map((v, k) => [k, v])
      : a && Object.getPrototypeOf(a) === Object.prototype ? Object.entries(a) : [];
    for (const [k, t] of entries) {
      if (t instanceof Tensor && !tensors.includes(t)) { names.push(`args[${i}][${JSON.stringify(k)}]`); tensors.push(t); }
    }
  });
  return { names, tensors };
}

// ret with every Tensor replaced by its index in `out` (where it is appended).
function flattenResult(ret, out) {
  if (ret instanceof Tensor) { out.push(ret); return out.length - 1; }
  if (Array.isArray(ret)) return ret.map((x) => flattenResult(x, out));
  if (ret && Object.getPrototypeOf(ret) === Object.prototype) {
    return { object: Object.fromEntries(Object.entries(ret).map(([k, v]) => [k, flattenResult(v, out)])) };
  }
  if (ret === undefined || ret === null) return null;
  throw new JitError(`jit: fn returned a ${typeof ret}; a jitted function returns Tensors (alone or in arrays and ` +
    'objects) or nothing, since a replay does not run its JavaScript');
}

function unflattenResult(template, tensors) {
  if (typeof template === 'number') return tensors[template];
  if (Array.isArray(template)) return template.map((x) => unflattenResult(x, tensors));
  if (template && template.object) {
    return Object.fromEntries(Object.entries(template.object).map(([k, v]) => [k, unflattenResult(v, tensors)]));
  }
  return undefined;
}

const describe = ([shape, dtype, device]) => `${dtype.name}[${shape}] on ${device}`;

// [argument, Variable name, value] of every bound Variable argument.
function boundValues(args) {
  const out = [];
  args.forEach((a, i) => { if (a instanceof BoundVariable) out.push([`args[${i}]`, a.variable.name, a.unbind()[1]]); });
  return out;
}

// The [name, value] pairs a replay sends for `bound` (this call's bound Variables), or null when
// the step cannot take them per run: another argument list, or a changed Variable that fn took as
// a plain number while capturing or that sized no symbolic dim of the step.
function variablesFor(bound, st) {
  const key = (b) => b.map(([a, n]) => `${a}=${n}`).join('|');
  if (key(bound) !== key(st.bound)) return null;
  const changed = new Map();
  bound.forEach(([, n, v], i) => { if (v !== st.bound[i][2]) changed.set(n, v); });
  // One Variable bound in two arguments: only a call that changes neither replays.
  if (new Set(bound.map(([, n]) => n)).size !== bound.length) return changed.size ? null : [];
  if ([...changed.keys()].some((n) => st.concrete.has(n) || !st.captured.variables.has(n))) return null;
  return [...changed].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function jit(fn) {
  if (typeof fn !== 'function') throw new TypeError('jit takes a function');
  const st = { cnt: 0, captured: null, names: [], info: [], template: null, rebind: [], nRet: 0, bound: [],
    concrete: new Set() };

  async function eager(args) {
    const assigned = new Set();
    const watch = { assigning: (t) => assigned.add(t), stepping: () => {} };
    GRAPH.watch = watch;
    let ret;
    try {
      ret = await fn(...args);
    } finally {
      if (GRAPH.watch === watch) GRAPH.watch = null;
    }
    const todo = [...getParameters(ret), ...assigned];
    if (todo.length) await Tensor.realize(...todo);
    return ret;
  }

  async function replay(tensors, variables = []) {
    const step = st.captured;
    for (let i = 0; i < tensors.length; i++) await step.feed(st.names[i], tensors[i]);
    // Dispatched like compileStep's run(): the outputs are filled in when the answer is settled.
    const { nodes, onAnswer } = awaitedOutputs(step._outputs);
    await step.exchange({}, onAnswer, variables);
    for (const [who, i] of st.rebind) {
      const t = typeof who === 'string' ? tensors[st.names.indexOf(who)] : who;
      t._node = nodes[i];
    }
    return unflattenResult(st.template, nodes.slice(0, st.nRet).map((n) => new Tensor(n)));
  }

  async function capture(args, names, tensors, info) {
    if (GRAPH.watch) throw new Error('jit: a jitted function cannot be captured inside another jit or compileStep');
    const flat = [];
    const resultTensors = (ret) => { st.template = flattenResult(ret, flat); return flat; };
    const conn = await session.get();
    const [{ step, rebind }, concrete] = await watchingConcreteUses(() => traceStep(conn, () => fn(...args),
      Object.fromEntries(names.map((n, i) => [n, tensors[i]])), [], [], resultTensors, true));
    if (step.nKernels === 0 && !step._targets.length && !rebind.length && !flat.length) {
      await step.release();
      throw new JitError("didn't JIT anything! fn computed no tensor and assigned to none");
    }
    Object.assign(st, { captured: step, names, info, rebind, nRet: flat.length, bound: boundValues(args), concrete });
    return replay(tensors);
  }

  const call = async (...args) => {
    const { names, tensors } = jitInputs(args);
    let ret;
    if (st.cnt === 0 || process.env.JIT === '0') {
      ret = await eager(args);
    } else {
      const unrealized = tensors.filter((t) => !(t._node.handle && t._node.sent) && (st.cnt === 1 || !isHostData(t)));
      if (unrealized.length) await Tensor.realize(...unrealized);
      if (new Set(tensors.map((t) => t._node.id)).size !== tensors.length) {
        throw new JitError('duplicate inputs to jit: two Tensor arguments are the same tensor');
      }
      const info = tensors.map((t) => [t.shape, t.dtype, t.device]);
      if (st.cnt === 1) {
        ret = await capture(args, names, tensors, info);
      } else {
        if (names.join('|') !== st.names.join('|')) {
          throw new JitError(`args mismatch in jit: the capture took Tensor arguments ${st.names.join(', ')}, this call ${names.join(', ')}`);
        }
        const bad = info.findIndex(([s, d, dev], i) => {
          const [es, ed, edev] = st.info[i];
          return d !== ed || dev !== edev || s.length !== es.length || s.some((x, k) => x !== es[k]);
        });
        if (bad >= 0) throw new JitError(`args mismatch in jit: ${names[bad]} is ${describe(info[bad])}, the capture took ${describe(st.info[bad])}`);
        // A tensor the step updates in place that was rebound since (another jit's eager call), a
        // node it reads that died (weights trained outside it; found once collected), or a bound
        // Variable changed that the step cannot take per run: capture again.
        const bound = boundValues(args);
        const variables = variablesFor(bound, st);
        if (variables === null || st.captured.state.some(([t, old]) => t._node !== old)
            || st.captured.readNodes.some((r) => r.deref() === undefined)) {
          await st.captured.release();
          ret = await capture(args, names, tensors, info);
        } else {
          st.bound = bound;
          ret = await replay(tensors, variables);
        }
      }
    }
    st.cnt += 1;
    return ret;
  };
  // Forgets the capture: the next call runs eagerly and the one after captures again.
  call.reset = async () => {
    if (st.captured) await st.captured.release();
    st.captured = null;
    st.cnt = 0;
  };
  Object.defineProperty(call, 'captured', { get: () => st.captured });
  return call;
}

module.exports = { jit, JitError };
