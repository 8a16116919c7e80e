'use strict';
// Layers (tinygrad's nn with torch's parameter names and initialization). A layer is a plain object
// holding Tensors; forward(x) applies it, and nn.getParameters(model) finds its tensors.
const { Tensor, untracked } = require('../tensor');
const { dtypes } = require('../dtype');

function param(t) {
  t.requiresGrad = true;
  return t;
}

// y = x @ weight.T + bias; weight [out, in] and bias from U(-1/sqrt(in), 1/sqrt(in)).
class Linear {
  constructor(inFeatures, outFeatures, { bias = true } = {}) {
    const b = 1 / Math.sqrt(inFeatures);
    this.weight = param(Tensor.uniform([outFeatures, inFeatures], { low: -b, high: b }));
    this.bias = bias ? param(Tensor.uniform([outFeatures], { low: -b, high: b })) : null;
  }

  forward(x) {
    return x.linear(this.weight.transpose(), this.bias);
  }
}

// Normalizes over the last normalizedShape axes, then weight * x + bias (ones and zeros at start).
class LayerNorm {
  constructor(normalizedShape, { eps = 1e-5, elementwiseAffine = true } = {}) {
    this.normalizedShape = typeof normalizedShape === 'number' ? [normalizedShape] : [...normalizedShape];
    this.axis = this.normalizedShape.map((_, i) => -1 - i);
    this.eps = eps;
    this.weight = elementwiseAffine ? param(Tensor.ones(this.normalizedShape)) : null;
    this.bias = elementwiseAffine ? param(Tensor.zeros(this.normalizedShape)) : null;
  }

  forward(x) {
    const tail = x.shape.slice(-this.normalizedShape.length);
    if (tail.some((s, i) => s !== this.normalizedShape[i])) throw new RangeError(`LayerNorm[${this.normalizedShape}] got an input of shape [${x.shape}]`);
    return x.layernorm({ axis: this.axis, eps: this.eps, weight: this.weight, bias: this.bias });
  }
}

class RMSNorm {
  constructor(dim, { eps = 1e-5, elementwiseAffine = true } = {}) {
    this.eps = eps;
    this.weight = elementwiseAffine ? param(Tensor.ones([dim])) : null;
  }

  forward(x) {
    return x.rmsNorm(-1, this.eps, this.weight);
  }
}

// A lookup table, computed as oneHot(idx) @ weight (the gradient is one more matmul).
class Embedding {
  constructor(vocabSize, embedSize) {
    this.vocabSize = vocabSize;
    this.embedSize = embedSize;
    this.weight = param(Tensor.glorotUniform([vocabSize, embedSize]));
  }

  forward(idx) {
    if (!(idx instanceof Tensor)) idx = Tensor.from(idx, { dtype: dtypes.int32 });
    return idx.oneHot(this.vocabSize).cast(this.weight.dtype).matmul(this.weight);
  }
}

class Dropout {
  constructor(p = 0.5) { this.p = p; }
  forward(x) { return x.dropout(this.p); }
}

function kernelOf(inC, outC, kernelSize, groups) {
  if (groups < 1 || inC % groups || outC % groups) throw new RangeError(`inChannels ${inC} and outChannels ${outC} must be divisible by groups ${groups}`);
  const k = typeof kernelSize === 'number' ? [kernelSize, kernelSize] : [...kernelSize];
  if (k.length < 1 || k.length > 3) throw new RangeError(`kernelSize needs a number or 1 to 3 values, got ${kernelSize}`);
  return k;
}

// Convolution over (N, C, *spatial), kernelSize's length (1 to 3; a number: 2-D) giving the
// spatial axes, as tinygrad's; weight and bias from U(-1/sqrt(fanIn), 1/sqrt(fanIn)).
// padding: a number, one value per axis, 'valid' or 'same' (stride 1).
class Conv2d {
  constructor(inChannels, outChannels, kernelSize, { stride = 1, padding = 0, dilation = 1, groups = 1, bias = true } = {}) {
    this.kernelSize = kernelOf(inChannels, outChannels, kernelSize, groups);
    Object.assign(this, { inChannels, outChannels, groups, stride, dilation });
    if (typeof padding === 'string') {
      const dil = typeof dilation === 'number' ? this.kernelSize.map(() => dilation) : dilation;
      if (padding === 'valid') padding = 0;
      else if (padding === 'same') {
        if (!(stride === 1 || (Array.isArray(stride) && stride.every((s) => s === 1)))) throw new RangeError("padding 'same' needs stride 1");
        const total = dil.map((d, i) => d * (this.kernelSize[i] - 1));
        // tinygrad's (before, after) pairs from the last axis back; the extra element goes after
        padding = [...total].reverse().flatMap((t) => [Math.floor(t / 2), t - Math.floor(t / 2)]);
      } else throw new RangeError(`padding must be a number, an array, 'valid' or 'same', got '${padding}'`);
    }
    this.padding = padding;
    const fanIn = (inChannels / groups) * this.kernelSize.reduce((a, v) => a * v, 1);
    const b = 1 / Math.sqrt(fanIn);
    this.weight = param(Tensor.uniform([outChannels, inChannels / groups, ...this.kernelSize], { low: -b, high: b }));
    this.bias = bias ? param(Tensor.uniform([outChannels], { low: -b, high: b })) : null;
  }

  forward(x) {
    return x.conv2d(this.weight, this.bias, { groups: this.groups, stride: this.stride, dilation: this.dilation, padding: this.padding });
  }
}

// Batch normalization over axis 1; while Tensor.training it uses batch statistics and updates the
// running ones (momentum, unbiased variance, as torch).
class BatchNorm {
  constructor(size, { eps = 1e-5, affine = true, trackRunningStats = true, momentum = 0.1 } = {}) {
    Object.assign(this, { eps, trackRunningStats, momentum });
    this.weight = affine ? param(Tensor.ones([size])) : null;
    this.bias = affine ? param(Tensor.zeros([size])) : null;
    this.numBatchesTracked = Tensor.zeros([1], { dtype: dtypes.int64 });
    this.numBatchesTracked.requiresGrad = false;
    if (trackRunningStats) {
      this.runningMean = Tensor.zeros([size]);
      this.runningMean.requiresGrad = false;
      this.runningVar = Tensor.ones([size]);
      this.runningVar.requiresGrad = false;
    }
  }

  forward(x) {
    if (x.ndim < 2) throw new RangeError(`BatchNorm needs an input with a channel axis (N, C, ...), got [${x.shape}]`);
    const training = Tensor.training || !this.trackRunningStats;
    if (this.trackRunningStats && Tensor.training) {
      const axes = [...Array(x.ndim).keys()].filter((i) => i !== 1);
      const mean = x.mean(axes);
      const v = x.var({ axis: axes, correction: 0 });
      const n = x.numel() / x.shape[1];
      untracked(() => {
        this.runningMean.assign(this.runningMean.mul(1 - this.momentum, true).add(mean.mul(this.momentum, true)));
        this.runningVar.assign(this.runningVar.mul(1 - this.momentum, true).add(v.mul(this.momentum * (n / Math.max(1, n - 1)), true)));
        this.numBatchesTracked.assign(this.numBatchesTracked.add(1));
      });
    }
    return x.batchNorm({ runningMean: training ? null : this.runningMean, runningVar: training ? null : this.runningVar,
      weight: this.weight, bias: this.bias, training, eps: this.eps });
  }
}

class GroupNorm {
  constructor(numGroups, numChannels, { eps = 1e-5, affine = true } = {}) {
    if (numChannels % numGroups) throw new RangeError(`numChannels ${numChannels} is not divisible by numGroups ${numGroups}`);
    Object.assign(this, { numGroups, numChannels, eps });
    this.weight = affine ? param(Tensor.ones([numChannels])) : null;
    this.bias = affine ? param(Tensor.zeros([numChannels])) : null;
  }

  forward(x) {
    return x.groupNorm(this.numGroups, this.weight, this.bias, this.eps);
  }
}

module.exports = { Linear, LayerNorm, RMSNorm, Embedding, Dropout, Conv2d, BatchNorm, BatchNorm2d: BatchNorm, GroupNorm };
