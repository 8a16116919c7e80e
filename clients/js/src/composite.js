'use strict';
// The argument of composite ops (polygrad.v1.CompositeArg); each op reads its own fields. The
// fields come from the table scripts/gen-ops writes from the proto, so a new field needs no edit
// here.
const { COMPOSITE_FIELDS } = require('./ops.gen');

const DEFAULTS = { repeated: [], float: 0, int: 0, bool: false, str: '' };
const FIELDS = Object.fromEntries(COMPOSITE_FIELDS.map(([name, kind]) => [name, DEFAULTS[kind]]));

class Composite {
  constructor(fields = {}) {
    for (const k of Object.keys(fields)) if (!(k in FIELDS)) throw new TypeError(`unknown composite field ${k}`);
    Object.assign(this, FIELDS, fields);
    Object.freeze(this);
  }

  // The fields as proto-loader takes them: 64-bit integers as decimal strings, so that a seed
  // past 2^53 (a BigInt) keeps every bit.
  wire() {
    const out = {};
    for (const [k, kind] of COMPOSITE_FIELDS) {
      const v = this[k] === undefined ? DEFAULTS[kind] : this[k];
      out[k] = kind === 'int' ? (typeof v === 'bigint' ? v.toString() : String(v)) : v;
    }
    return out;
  }
}

module.exports = { Composite };
