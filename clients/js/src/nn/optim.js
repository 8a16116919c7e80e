'use strict';
// Optimizers (torch's update rules), the Python client's graph exactly: a step builds every
// parameter's and state tensor's new value lazily, realizes them all in one Realize with the
// gradients and the pending loss, and rebinds each parameter to its new node. Values that change
// per step (learning rate, Adam's bias corrections) travel as 0-d buffers, so every step runs the
// same kernels.
const { Tensor, untracked, takePendingLosses } = require('../tensor');
const { dtypes } = require('../dtype');
const { GRAPH } = require('../graph');

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
      this.t = Tensor.from(new Float32Array([this.value]), { shape: [], device: this.device === 'CPU' ? undefined : this.device });
    }
    return this.t;
  }
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

  _step() {
    const lr = this._lr.tensor();
    this.params.forEach((t, i) => {
      if (t.grad === null) return;
      let g = t.grad;
      if (this.wd) g = g.add(t.mul(this.wd));
      if (this.momentum) {
        this.b[i].assign(this.b[i].mul(this.momentum).add(g));
        g = this.nesterov ? g.add(this.b[i].mul(this.momentum)) : this.b[i];
      }
      t.assign(t.sub(g.mul(lr)).cast(t.dtype));
    });
    return [...this.b];
  }

  stateTensors() {
    return Object.fromEntries(this.b.map((b, i) => [`momentum_buffer.${i}`, b]));
  }
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
    this._stepSize = new Scalar(0, this.device);
    this._bc2Sqrt = new Scalar(0, this.device);
    this._decay = new Scalar(1, this.device);
  }

  get decoupled() { return false; }

  // The per-step scalars of step k (from 1), by Scalar field: what compileStep feeds each run.
  scalarsFor(k) {
    return { _lr: this.lr, _stepSize: this.lr / (1 - this.b1 ** k), _bc2Sqrt: Math.sqrt(1 - this.b2 ** k), _decay: 1 - this.lr * this.wd };
  }

  _step() {
    const s = this.scalarsFor(this.steps);
    this._stepSize.set(s._stepSize);
    this._bc2Sqrt.set(s._bc2Sqrt);
    this._decay.set(s._decay);
    const stepSize = this._stepSize.tensor();
    const bc2Sqrt = this._bc2Sqrt.tensor();
    this.params.forEach((t, i) => {
      if (t.grad === null) return;
      let g = t.grad;
      let p = t;
      if (this.wd && !this.decoupled) g = g.add(t.mul(this.wd));
      if (this.wd && this.decoupled) p = t.mul(this._decay.tensor());
      this.m[i].assign(this.m[i].mul(this.b1).add(g.mul(1 - this.b1)));
      this.v[i].assign(this.v[i].mul(this.b2).add(g.mul(1 - this.b2).mul(g))); // torch's addcmul order
      const denom = this.v[i].sqrt().div(bc2Sqrt).add(this.eps);
      t.assign(p.sub(stepSize.mul(this.m[i].div(denom))).cast(t.dtype));
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

module.exports = { Optimizer, SGD, Adam, AdamW, Scalar };
