'use strict';
// tinygrad's Variable for JavaScript, as the Python client's polygrad.variable:
//
//   const startPos = new Variable('start_pos', 0, 1023);
//   const p = startPos.bind(k);
//   const keys = cache.shrink([[0, p.add(1)], null]);   // x[:p + 1]
//   const row = cache.slice([p, p.add(1)]);               // x[p:p + 1]
//
// A bound value is a SymInt: `variable * mul + add` at the variable's bound value. p.add(k),
// p.sub(k) and p.mul(k) (k a positive integer) give SymInts of the same variable. In a reshape or
// expand shape, or the end of a shrink from 0, a SymInt makes a symbolic dim: the daemon keeps the
// axis at its largest size (`.max`) and takes the value as data, so one set of kernels serves
// every value and reductions over the axis read only the part below the value. A shrink's SymInt
// begin with end = begin + k (a fixed count) is a begin the daemon holds per run
// (docs/PROTOCOL.md, "Variables and symbolic dims"). A tensor's `shape` reports the largest size
// for a symbolic axis (what the daemon holds); such a tensor can be computed on but not read back.
//
// Any other use takes the value as a plain number: Number(p), `p + 1`, `p < 3`, p.value. While jit
// captures, such a use is noted, so a replay never reuses a number computed from an old value:
// a new value of a Variable fn took as a number captures again (compiling nothing).

const MAX_NAME = 64;

// While jit captures: the names of the Variables whose value fn took as a plain number.
let concreteUses = null;
// Whether any SymInt was made: until then no node can carry a symbolic dim (the wire skips the look).
let made = false;

const checkInt = (what, v) => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new TypeError(`${what} must be an integer, got ${String(v)}`);
  return v;
};

class Variable {
  constructor(name, min, max) {
    if (typeof name !== 'string' || !name.length || [...name].length > MAX_NAME) {
      throw new RangeError(`a Variable's name is a non-empty string of at most ${MAX_NAME} characters`);
    }
    checkInt(`Variable '${name}': min`, min);
    checkInt(`Variable '${name}': max`, max);
    if (min > max) throw new RangeError(`Variable '${name}': min ${min} exceeds max ${max}`);
    this.name = name;
    this.min = min;
    this.max = max;
  }

  // This variable at `value`; a RangeError outside [min, max].
  bind(value) {
    checkInt(`Variable '${this.name}': the bound value`, value);
    if (value < this.min || value > this.max) {
      throw new RangeError(`Variable '${this.name}': ${value} is outside [${this.min}, ${this.max}]`);
    }
    return new BoundVariable(this, value);
  }

  toString() { return `Variable('${this.name}', ${this.min}, ${this.max})`; }
}

class SymInt {
  // factor, offset: the wire's SymbolicDim mul and add (add() and mul() are the methods).
  constructor(variable, bound, factor = 1, offset = 0) {
    made = true;
    this.variable = variable;
    this.factor = factor;
    this.offset = offset;
    this._bound = bound; // the variable's bound value
    Object.freeze(this);
  }

  // The value without noting a use: for shape checks and the wire, which follow the variable.
  get _current() { return this._bound * this.factor + this.offset; }

  // The largest value: the axis' size on the daemon.
  get max() { return this.variable.max * this.factor + this.offset; }

  // The smallest value (the variable's min).
  get min() { return this.variable.min * this.factor + this.offset; }

  // The value as a plain number (a use jit notes).
  get value() { return this.valueOf(); }

  valueOf() {
    if (concreteUses) concreteUses.add(this.variable.name);
    return this._current;
  }

  toString() { return String(this.valueOf()); }

  toJSON() { return this.valueOf(); }

  // `this + k`, still symbolic (k an integer).
  add(k) { return new SymInt(this.variable, this._bound, this.factor, this.offset + checkInt('SymInt.add: k', k)); }

  sub(k) { return new SymInt(this.variable, this._bound, this.factor, this.offset - checkInt('SymInt.sub: k', k)); }

  // `this * k`, still symbolic for a positive integer k (take Number(v) * k for anything else).
  mul(k) {
    if (checkInt('SymInt.mul: k', k) < 1) throw new RangeError(`SymInt.mul takes a positive integer, got ${k}`);
    return new SymInt(this.variable, this._bound, this.factor * k, this.offset * k);
  }
}

// A Variable's bound value: a SymInt with factor 1, offset 0 that knows its Variable.
class BoundVariable extends SymInt {
  unbind() { return [this.variable, this._bound]; }
}

const isSym = (x) => x instanceof SymInt;

// A size or bound as a plain number: a SymInt's value (a use jit notes), else Number(x).
const plain = (x) => (x instanceof SymInt ? x.valueOf() : Number(x));

// The size a shape entry has on the daemon: a SymInt's largest value.
const daemonSize = (x) => (x instanceof SymInt ? x.max : x);

// A shape entry's value now, without noting a use (shape checks).
const current = (x) => (x instanceof SymInt ? x._current : x);

const hasSym = (xs) => made && xs.some((x) => x instanceof SymInt);

// Runs fn (sync or async) noting the Variables whose value it takes as a number: [result, names].
async function watchingConcreteUses(fn) {
  const before = concreteUses;
  const seen = new Set();
  concreteUses = seen;
  try {
    return [await fn(), seen];
  } finally {
    concreteUses = before;
  }
}

// A shrink's [begin, end] on an axis of (daemon) `size` as the daemon takes it, as the Python
// client's _symbolic_pair: a SymInt end from 0 within the axis at its largest is a symbolic dim; a
// SymInt begin with end = begin + k inside the axis for every value of its variable is a begin
// held per run (the end becomes a plain number); any other SymInt takes its value.
function symbolicPair(b, e, size) {
  if (isSym(b)) {
    if (isSym(e) && e.variable === b.variable && e.factor === b.factor && e.offset >= b.offset && b.min >= 0 && e.max <= size) {
      return [b, b._current + (e.offset - b.offset)];
    }
    return [plain(b), plain(e)];
  }
  if (b === 0 && (!isSym(e) || e.max <= size)) return [b, e];
  return [b, plain(e)];
}

// A SymbolicDim with its zero fields left out: the bytes Python's protobuf writes for the same dim.
function symbolicEntry(axis, s, begin = false) {
  const d = { axis, extent: s._current, variable: s.variable.name, mul: s.factor, add: s.offset, begin };
  for (const k of ['axis', 'extent', 'add', 'begin']) if (!d[k]) delete d[k];
  return d;
}

// The Node.symbolic entries of a RESHAPE/EXPAND shape (`pairs` false) or a SHRINK's pairs, with the
// arg as the wire takes it: a symbolic dim at its largest size, a symbolic begin at its value.
// Null when the arg has no SymInt.
function symbolicWire(arg, pairs) {
  if (!made) return null;
  const symbolic = [];
  if (!pairs) {
    arg.forEach((s, i) => { if (isSym(s)) symbolic.push(symbolicEntry(i, s)); });
    return symbolic.length ? { symbolic, arg: arg.map(daemonSize) } : null;
  }
  arg.forEach(([b, e], i) => {
    if (isSym(e)) symbolic.push(symbolicEntry(i, e));
    else if (isSym(b)) symbolic.push(symbolicEntry(i, b, true));
  });
  if (!symbolic.length) return null;
  return { symbolic, arg: arg.map(([b, e]) => [current(b), daemonSize(e)]) };
}

module.exports = {
  Variable, SymInt, BoundVariable, isSym, plain, daemonSize, current, hasSym, watchingConcreteUses, symbolicPair,
  symbolicWire,
};
