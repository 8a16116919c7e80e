'use strict';
// The wire's op numbers, OP_NAMES and which ops carry which Node.arg (COMPOSITE_ARG_OPS,
// SHAPE_ARG_OPS, AXES_ARG_OPS, PAIRS_ARG_OPS) and the most sources a variadic op takes (MAX_ARITY),
// generated from the op schema by scripts/gen-ops
// (ops.gen.js; the cmake build runs it).
const { OPS, OP_NAMES, COMPOSITE_ARG_OPS, SHAPE_ARG_OPS, AXES_ARG_OPS, PAIRS_ARG_OPS, MAX_ARITY, DTYPES, METHODS } = require('./ops.gen');

module.exports = { OPS, OP_NAMES, COMPOSITE_ARG_OPS, SHAPE_ARG_OPS, AXES_ARG_OPS, PAIRS_ARG_OPS, MAX_ARITY, DTYPES, METHODS };
