'use strict';
// The wire's op numbers, OP_NAMES and COMPOSITE_ARG_OPS (the ops whose node carries a CompositeArg),
// generated from the op schema by scripts/gen-ops (ops.gen.js; the cmake build runs it).
const { OPS, OP_NAMES, COMPOSITE_ARG_OPS, DTYPES, METHODS } = require('./ops.gen');

module.exports = { OPS, OP_NAMES, COMPOSITE_ARG_OPS, DTYPES, METHODS };
