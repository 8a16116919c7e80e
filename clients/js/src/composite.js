'use strict';
// The argument of composite ops (polygrad.v1.CompositeArg); each op reads its own fields.
const FIELDS = {
  axes: [], keepdim: false, eps: 0, correction: 0, normalized_axes: 0, kernel: [], stride: [], padding: [],
  dilation: [], groups: 0, n: 0, diagonal: 0, seed: '0', counter: '0', shape: [], low: 0, high: 0, p: 0,
  output_padding: [], causal: false, device: '', alpha: 0, rtol: 0, atol: 0, equal_nan: false, descending: false,
  indices: false, beta: 0, threshold: 0, neg_slope: 0, min_val: 0, max_val: 0,
  mode: '', include_self: false, align_corners: false, ignore_index: 0, step: 0, replacement: false,
};

class Composite {
  constructor(fields = {}) {
    for (const k of Object.keys(fields)) if (!(k in FIELDS)) throw new TypeError(`unknown composite field ${k}`);
    Object.assign(this, FIELDS, fields);
    Object.freeze(this);
  }

  wire() {
    const out = {};
    for (const k of Object.keys(FIELDS)) {
      const v = this[k];
      out[k] = typeof v === 'bigint' ? v.toString() : (k === 'low' || k === 'high' || k === 'ignore_index' || k === 'step') ? String(v) : v;
    }
    return out;
  }
}

module.exports = { Composite };
