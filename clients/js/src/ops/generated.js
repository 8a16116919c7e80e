'use strict';
// The one-op methods the op schema names (METHODS, written by scripts/gen-ops into ../ops.gen.js):
// exp, log, sqrt, sigmoid, erf, logaddexp, lerp, softplus, ... Each is built here by the one
// implementation of its shape rule; scripts/gen-ops refuses a method whose rule has none.
const { METHODS, COMPOSITE_ARG_OPS } = require('../ops');
const { Composite } = require('../composite');
const { dtypes } = require('../dtype');
const { normalizeAxis } = require('../shape');
const { Tensor } = require('../tensor');

const P = Tensor.prototype;
const CONVERT = { float: Number, int: Number, bool: Boolean, str: String };

function composite(params, values, ndim) {
  const fields = {};
  params.forEach((p, i) => {
    const v = values[i] === undefined ? p.default : values[i];
    // One axis into axes; a 0-d tensor's axis (0 or -1) is 0: the daemon's composites take rank 0.
    fields[p.field] = p.kind === 'axis' ? [normalizeAxis(v, Math.max(ndim, 1))] : CONVERT[p.kind](v);
  });
  return new Composite(fields);
}

// self and the operands (tensors or numbers) broadcast to one shape and promoted to one dtype, as a
// binary op does: each operand against self, then the earlier ones again against the final dtype
// and shape.
function broadcastSources(self, operands) {
  let x = self;
  const srcs = [];
  for (const o of operands) {
    let t;
    [x, t] = x._broadcasted(o);
    srcs.push(t);
  }
  for (let i = 0; i < srcs.length - 1; i++) [x, srcs[i]] = x._broadcasted(srcs[i]);
  return [x, ...srcs];
}

// SHAPE_ELEMENTWISE: this and the operands broadcast and promoted (broadcastSources); DT_FLOAT
// casts every source to float, DT_BOOL gives bool, DT_SAME the dtype they share.
function elementwise(m, self, operands, values) {
  let srcs = broadcastSources(self, operands);
  const x = srcs[0];
  if (m.dtype === 'DT_FLOAT') srcs = srcs.map((s) => s._float());
  const dtype = m.dtype === 'DT_BOOL' ? dtypes.bool : srcs[0].dtype;
  const arg = COMPOSITE_ARG_OPS.has(m.number) ? composite(m.params, values, x.ndim) : null;
  return Tensor._make(m.number, dtype, srcs[0]._node.shape, srcs, arg);
}

const SHAPE_RULES = { SHAPE_ELEMENTWISE: elementwise };

for (const m of METHODS) {
  const build = SHAPE_RULES[m.shape];
  if (!build) throw new Error(`Tensor.${m.name}: the client has no implementation of ${m.shape} (regenerate ops.gen.js)`);
  if (Object.prototype.hasOwnProperty.call(P, m.name)) throw new Error(`Tensor.${m.name} is defined twice`);
  const n = m.operands.length;
  // A named function (stack traces say Tensor.exp2); operands first, then the optional params.
  P[m.name] = { [m.name](...args) { return build(m, this, args.slice(0, n), args.slice(n)); } }[m.name];
}

module.exports = { broadcastSources };
