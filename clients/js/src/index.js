'use strict';
// polygrad: the JavaScript client of polygradd (CommonJS entry; index.mjs is the ES module one).
const { Tensor } = require('./tensor');
const { dtypes, DType } = require('./dtype');
const nn = require('./nn');
const { compileStep, CompiledStep } = require('./step');
const { jit, JitError } = require('./jit');
const { Variable, SymInt, BoundVariable } = require('./variable');
const errors = require('./errors');
const session = require('./session');
const { GRAPH } = require('./graph');

session.setOnClose(() => GRAPH.forgetSession());

// Connects to polygradd ({ address, token, tlsCa, connectTimeout }); without an address, to
// POLYGRAD_ADDRESS or a private embedded daemon. Resolves to the connection (.address, .info).
function connect(options = {}) {
  return session.connect(options);
}

// Closes this process's session (and stops an embedded daemon); tensors sent before become invalid.
// Waits until the daemon has run everything this process sent; rejects with the first error.
function synchronize() {
  return Tensor.synchronize();
}

function close() {
  return session.close();
}

module.exports = {
  Tensor, dtypes, DType, nn, compileStep, CompiledStep, jit, JitError, Variable, SymInt, BoundVariable, connect, close,
  synchronize, graphStats: () => GRAPH.stats(),
  flushReleases: () => GRAPH.flushReleases(),
  ...errors,
};
