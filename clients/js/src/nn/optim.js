'use strict';
// Optimizers: torch's SGD, Adam and AdamW and tinygrad's LAMB, LARS and Muon, each the daemon's update op
// (core/frontend/optimizers.h), the Python client's graph exactly: a step builds every
// parameter's and state tensor's new value lazily, realizes them all in one Realize with the
// gradients and the pending loss, and rebinds each parameter to its new node. Values that change
// per step (learning rate, Adam's bias corrections) travel as 0-d buffers, so every step runs the
// same kernels.
const { Tensor, untracked, takePendingLosses } = require('../tensor');
const { dtypes } = require('../dtype');
const { GRAPH } = require('../graph');
const { OPS } = require('../ops');
const { Composite } = require('../composite');

function dedup(xs) {
  return [...new Set(xs)];
}

// A float reaching the graph as a 0-d float32 buffer, re-sent only when it changes.
class Scalar {
  constructor(value, device = 'CPU') {
    this.value = Number(value);
    this.t = null;
    this.device = device;
  }

  set(value) {
    if (Number(value) !== this.value) {
      this.value = Number(value);
      this.t = null;
    }
  }

  tensor() {
    if (this.t === null || (this.t._node.sent && this.t._node.gen !== GRAPH.gen)) {
      const [data, options] = this._data();
      this.t = Tensor.from(data, { ...options, device: this.device === 'CPU' ? undefined : this.device });
    }
    return this.t;
  }

  _data() { return [new Float32Array([this.value]), { shape: [] }]; }
}

// Fixed float64 values an update reads (Muon's Newton-Schulz coefficients): one 1-D buffer sent
// once, like a Scalar, so a compiled step keeps it as an input it never has to feed.
class Constants extends Scalar {
  constructor(values, device = 'CPU') {
    super(0, device);
    this.value = [...values].map(Number);
  }

  _data() { return [new Float64Array(this.value), { dtype: dtypes.float64 }]; }
}

// One update rule of the daemon (core/frontend/optimizers.h) for one parameter: a node per value
// the step writes, each [tensor, output] rebound to its node once all are built from the old values.
function applyUpdate(op, rule, srcs, outputs) {
  const made = outputs.map(([t, mode]) => Tensor._make(op, t.dtype, t.shape, srcs, new Composite({ ...rule, mode })));
  outputs.forEach(([t], i) => t.assign(made[i]));
}

function stateDtype(t) {
  return t.dtype === dtypes.float16 || t.dtype === dtypes.bfloat16 ? dtypes.float32 : t.dtype;
}

class Optimizer {
  constructor(params, lr) {
    params = [...params];
    for (const x of params) if (x.requiresGrad === null && x.dtype.kind === 'f') x.requiresGrad = true;
    this.params = dedup(params.filter((x) => x.requiresGrad));
    this.buffers = dedup(params.filter((x) => !x.requiresGrad));
    if (!this.params.length) throw new RangeError('optimizer got no parameters that require grad');
    const devices = [...new Set(this.params.map((x) => x.device))].sort();
    if (devices.length > 1) throw new RangeError(`optimizer parameters live on ${devices.join(' and ')}: move them to one device first`);
    this.device = devices[0];
    this._lr = new Scalar(lr, this.device);
    this.steps = 0;
  }

  get lr() { return this._lr.value; }
  set lr(v) { this._lr.set(v); }

  zeroGrad() {
    for (const p of this.params) p.grad = null;
  }

  // Updates every parameter that has a gradient, in one Realize request.
  async step() {
    await Tensor.realize(...this.scheduleStep());
  }

  // Builds the update lazily and returns what the step realizes: parameters, buffers, state,
  // gradients, pending losses.
  scheduleStep() {
    if (GRAPH.watch) GRAPH.watch.stepping(this);
    this.steps += 1;
    const state = untracked(() => this._step());
    const grads = this.params.filter((p) => p.grad !== null).map((p) => p.grad);
    for (const g of grads) g._node.rg = false; // a consumed gradient keeps no history once realized
    return [...this.params, ...this.buffers, ...state, ...grads, ...takePendingLosses()];
  }

  stateTensors() { return {}; }
}

// torch.optim.SGD: weight decay, momentum (b = m*b + g), nesterov.
class SGD extends Optimizer {
  constructor(params, { lr = 0.01, momentum = 0, weightDecay = 0, nesterov = false } = {}) {
    super(params, lr);
    if (nesterov && momentum <= 0) throw new RangeError('nesterov momentum needs momentum > 0');
    Object.assign(this, { momentum, wd: weightDecay, nesterov });
    this.b = momentum ? this.params.map((t) => Tensor.zeros(t.shape, { dtype: stateDtype(t) })) : [];
  }

  get _updateOp() { return OPS.SGD_UPDATE; }

  _rule() { return { momentum: this.momentum, weight_decay: this.wd, nesterov: Boolean(this.nesterov) }; }

  // Sources of the update op between the learning rate and the momentum buffer.
  _operands() { return []; }

  _step() {
    const lr = this._lr.tensor();
    const rule = this._rule();
    const operands = this._operands();
    this.params.forEach((t, i) => {
      if (t.grad === null) return;
      const state = this.momentum ? [this.b[i]] : [];
      applyUpdate(this._updateOp, rule, [t, t.grad, lr, ...operands, ...state], [[t, 'param'], ...state.map((b) => [b, 'm'])]);
    });
    return [...this.b];
  }

  stateTensors() {
    return Object.fromEntries(this.b.map((b, i) => [`momentum_buffer.${i}`, b]));
  }
}

// tinygrad's LARS: the gradient plus weightDecay * p, scaled per parameter by the trust ratio
// tcoef ||p|| / (||g|| + weightDecay ||p||) and lr before the momentum (classic) or after it (the
// daemon's LARS_UPDATE); tcoef 0 is plain SGD.
class LARS extends SGD {
  constructor(params, { lr = 0.001, momentum = 0.9, weightDecay = 1e-4, nesterov = false, classic = true, tcoef = 0.001 } = {}) {
    if (momentum < 0 || weightDecay < 0) throw new RangeError(`LARS: momentum ${momentum} and weightDecay ${weightDecay} must be >= 0`);
    super(params, { lr, momentum, weightDecay, nesterov });
    Object.assign(this, { classic: Boolean(classic), tcoef });
  }

  get _updateOp() { return OPS.LARS_UPDATE; }

  _rule() { return { ...super._rule(), trust_coefficient: this.tcoef, classic_momentum: this.classic }; }
}

// Muon (Jordan et al. 2024; tinygrad's): nesterov momentum of the raw gradient, each parameter's
// direction as a (rows, rest) matrix orthogonalized by nsSteps Newton-Schulz iterations, then
// p * (1 - lr * weightDecay) - lr * it (the daemon's MUON_STEP). Parameters need rank >= 2.
class Muon extends SGD {
  constructor(params, { lr = 0.001, momentum = 0.95, weightDecay = 0.1, nsSteps = 5, nsCoefficients = [3.4445, -4.775, 2.0315],
    nesterov = true } = {}) {
    if (momentum < 0 || weightDecay < 0) throw new RangeError(`Muon: momentum ${momentum} and weightDecay ${weightDecay} must be >= 0`);
    super(params, { lr, momentum, weightDecay, nesterov });
    if (!Number.isInteger(nsSteps) || nsSteps < 1 || nsSteps > 64) throw new RangeError(`Muon: nsSteps must be 1 to 64, got ${nsSteps}`);
    const coefficients = [...nsCoefficients].map(Number);
    if (coefficients.length < 1 || coefficients.length > 16) throw new RangeError(`Muon takes 1 to 16 nsCoefficients, got ${coefficients.length}`);
    for (const t of this.params) {
      if (t.ndim < 2) {
        throw new RangeError(`Muon orthogonalizes matrices: a parameter of shape [${t.shape}] needs another optimizer `
          + '(e.g. AdamW for biases and norms)');
      }
    }
    Object.assign(this, { nsSteps, nsCoefficients: coefficients, _coefficients: new Constants(coefficients, this.device) });
  }

  get _updateOp() { return OPS.MUON_STEP; }

  _rule() { return { ...super._rule(), n: this.nsSteps, eps: 1e-7 }; }

  _operands() { return [this._coefficients.tensor()]; }
}

// torch.optim.Adam (weightDecay is L2, added to the gradient).
class Adam extends Optimizer {
  constructor(params, { lr = 0.001, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 0 } = {}) {
    super(params, lr);
    [this.b1, this.b2] = betas;
    this.eps = eps;
    this.wd = weightDecay;
    this.m = this.params.map((t) => Tensor.zeros(t.shape, { dtype: stateDtype(t) }));
    this.v = this.params.map((t) => Tensor.zeros(t.shape, { dtype: stateDtype(t) }));
    this._count = new Scalar(0, this.device); // the step number, from which the daemon computes the bias corrections
  }

  get decoupled() { return false; }

  // The per-step scalars of step k (from 1), by Scalar field: what compileStep feeds each run.
  scalarsFor(k) {
    return { _lr: this.lr, _count: k };
  }

  _step() {
    this._count.set(this.steps);
    const scalars = [this._lr.tensor(), this._count.tensor()];
    const rule = { beta1: this.b1, beta2: this.b2, eps: this.eps, weight_decay: this.wd, decoupled: this.decoupled };
    this.params.forEach((t, i) => {
      if (t.grad === null) return;
      applyUpdate(OPS.ADAM_STEP, rule, [t, t.grad, this.m[i], this.v[i], ...scalars],
        [[t, 'param'], [this.m[i], 'm'], [this.v[i], 'v']]);
    });
    return [...this.m, ...this.v];
  }

  stateTensors() {
    return { ...Object.fromEntries(this.m.map((m, i) => [`exp_avg.${i}`, m])), ...Object.fromEntries(this.v.map((v, i) => [`exp_avg_sq.${i}`, v])) };
  }
}

// torch.optim.AdamW: decoupled weight decay, p *= 1 - lr*wd before the Adam update.
class AdamW extends Adam {
  constructor(params, { lr = 0.001, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 0.01 } = {}) {
    super(params, { lr, betas, eps, weightDecay });
  }

  get decoupled() { return true; }
}

// tinygrad's LAMB: the Adam direction plus weightDecay * p, scaled per parameter by the trust ratio
// ||p|| / ||update|| (1 where either norm is 0).
class LAMB extends Optimizer {
  constructor(params, { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-6, weightDecay = 0 } = {}) {
    super(params, lr);
    Object.assign(this, { b1, b2, eps, wd: weightDecay });
    this.m = this.params.map((t) => Tensor.zeros(t.shape, { dtype: stateDtype(t) }));
    this.v = this.params.map((t) => Tensor.zeros(t.shape, { dtype: stateDtype(t) }));
    this._count = new Scalar(0, this.device); // the step number, from which the daemon computes the bias corrections
  }

  // The per-step scalars of step k (from 1), by Scalar field: what compileStep feeds each run.
  scalarsFor(k) {
    return { _lr: this.lr, _count: k };
  }

  _step() {
    this._count.set(this.steps);
    const scalars = [this._lr.tensor(), this._count.tensor()];
    const rule = { beta1: this.b1, beta2: this.b2, eps: this.eps, weight_decay: this.wd };
    this.params.forEach((t, i) => {
      if (t.grad === null) return;
      applyUpdate(OPS.LAMB_STEP, rule, [t, t.grad, this.m[i], this.v[i], ...scalars],
        [[t, 'param'], [this.m[i], 'm'], [this.v[i], 'v']]);
    });
    return [...this.m, ...this.v];
  }

  stateTensors() {
    return { ...Object.fromEntries(this.m.map((m, i) => [`m.${i}`, m])), ...Object.fromEntries(this.v.map((v, i) => [`v.${i}`, v])) };
  }
}

module.exports = { Optimizer, SGD, LARS, Muon, Adam, AdamW, LAMB, Scalar };
