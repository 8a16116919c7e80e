'use strict';
// The session-scoped node table: lazy nodes, what the daemon has seen, and what can be released
// (the Python client's graph.py, same wire messages).
//
// Each Tensor stands for one Node; a node names its sources by reference, so a source lives as
// long as a node built on it that the daemon has not been sent. When a Node is garbage collected,
// a FinalizationRegistry queues its id, and queued ids travel as `release_nodes` in the next
// Realize (or a Release of their own once many pile up), so a long loop runs in flat memory on both
// sides. A realized node drops its sources: the daemon has bound its id to the result buffer.
//
// Autograd bookkeeping (see Tensor.backward): a node computed from tensors that require grad is
// `rg`; when it is realized its sources move to `keep`, so a later GRADIENT can re-send the history
// behind it (relazy). A `stop` node (detach, noGrad) is realized on its own before a tracked node
// that uses it is sent, so the daemon sees a plain buffer there and no gradient flows through it.
const { OPS, COMPOSITE_ARG_OPS, SHAPE_ARG_OPS, AXES_ARG_OPS, PAIRS_ARG_OPS } = require('./ops');
const { dtypes } = require('./dtype');
const { bytesOf, decode } = require('./data');
const { prod } = require('./shape');
const { PolygradError, PolygradNotFound } = require('./errors');
const { symbolicWire } = require('./variable');
const session = require('./session');

const RELEASE_BATCH = 4096;
const CACHE_BYTES = 64 << 10; // realized results up to this size stay cached on their node
const REQUEST_INLINE_BUDGET = 3 << 20; // inline BUFFER bytes per Realize, well under gRPC's limit
// The data of a BUFFER node that a dispatched command's answer brings (a compiled step's output).
const AWAITED = Symbol('awaited');

class Node {
  constructor(id, op, dtype, shape, src, arg, rg, stop) {
    this.id = id;
    this.op = op;
    this.dtype = dtype;
    this.shape = shape;
    this.src = src;
    this.arg = arg; // shape/axes arrays, pairs, a constant, a Composite, or for BUFFER bytes/handle
    this.sent = false;
    this.handle = null; // the realized buffer's handle (a decimal string)
    this.gen = 0;
    this.cache = null;
    this.rg = rg;
    this.stop = stop;
    this.keep = [];
    this.disposed = false;
    // The daemon's placement rule: a COPY's target; a BUFFER on the CPU; a gradient where its
    // target lives; else its sources' device; null for nodes without sources (they take their
    // consumer's device).
    if (op === OPS.COPY) this.device = arg.device;
    else if (op === OPS.GRADIENT) this.device = src[1].device;
    else if (op === OPS.BUFFER) this.device = 'CPU';
    else this.device = (src.find((s) => s.device !== null) || { device: null }).device;
  }
}

class Graph {
  constructor() {
    this.nextId = 1;
    this.sent = new Set(); // ids the daemon knows whose Node objects are alive
    this.dead = []; // sent ids whose nodes died
    this.deadHandles = [];
    this.uploads = new Map(); // upload handles of BUFFER nodes not sent yet
    this.live = 0;
    this.gen = 1;
    this.requests = 0;
    this.lastStats = null;
    // What the daemon reported for every realize answered so far (RealizeStats, summed).
    this.realized = { kernels: 0, compiled: 0, cacheHits: 0, seconds: 0 };
    this.deferred = null; // a dispatched command's failure, for the next read or synchronize()
    this.awaited = 0; // AWAITED nodes whose answer is outstanding: a realize settles them first
    this.leaves = new Map(); // node-independent key -> WeakRef(Tensor) with requiresGrad = true
    // Float tensors made from data or random draws with requiresGrad left unset (null): tinygrad's
    // gradient targets when a loss depends on no requiresGrad = true tensor (WeakRefs, pruned as
    // the set grows).
    this.created = new Set();
    this.createdPruneAt = 1024;
    this.tracing = null; // compileStep's deferred realizes while it traces fn
    // While compileStep or jit traces fn: told of every tensor fn rebinds (assigning) and optimizer
    // it steps (stepping), so state fn reaches through closures is found too.
    this.watch = null;
    this.queue = Promise.resolve(); // realizes run one at a time: each one updates what was sent
    this.registry = new FinalizationRegistry((id) => this._died(id));
  }

  _died(id) {
    this.live -= 1;
    if (this.sent.delete(id)) this.dead.push(id);
    const h = this.uploads.get(id);
    if (h !== undefined) {
      this.uploads.delete(id);
      this.deadHandles.push(h);
    }
  }

  node(op, dtype, shape, src = [], arg = null, rg = false, stop = false) {
    if (this.dead.length + this.deadHandles.length >= RELEASE_BATCH && session.current()) {
      this.flushReleases(false).catch(() => {}); // a failed release stays queued for the next request
    }
    const n = new Node(this.nextId++, op, dtype, shape, src, arg, rg, stop);
    this.registry.register(n, n.id, n);
    this.live += 1;
    return n;
  }

  stats() {
    return { liveNodes: this.live, sentLive: this.sent.size, pendingRelease: this.dead.length,
      pendingHandles: this.deadHandles.length, nextId: this.nextId, requests: this.requests, awaited: this.awaited,
      realized: { ...this.realized } };
  }

  _noteStats(stats) {
    this.lastStats = stats;
    if (!stats) return;
    this.realized.kernels += Number(stats.kernels) || 0;
    this.realized.compiled += Number(stats.compiled) || 0;
    this.realized.cacheHits += Number(stats.cache_hits) || 0;
    this.realized.seconds += Number(stats.seconds) || 0;
  }

  // Releases n now (Tensor.dispose): nothing built on it later can be sent.
  dispose(n) {
    if (n.disposed) return Promise.resolve();
    n.disposed = true;
    this.registry.unregister(n);
    this.live -= 1;
    if (this.sent.delete(n.id)) this.dead.push(n.id);
    const h = this.uploads.get(n.id);
    if (h !== undefined) {
      this.uploads.delete(n.id);
      this.deadHandles.push(h);
    }
    n.src = [];
    n.keep = [];
    n.cache = null;
    if (n.op === OPS.BUFFER && !n.sent) n.arg = null;
    return this.flushReleases();
  }

  // Sends queued releases in one Release call (nothing to do without a session); on the session's
  // stream, with `wait`, resolves once the daemon has done them and everything sent before.
  flushReleases(wait = true) {
    return this._serial(async () => {
      const conn = session.current();
      if (conn && await conn.stream()) {
        this._hook(conn);
        if (wait) await this.synchronize(); // settled answers let go of their nodes: those go too
        await this._releaseQueued(conn);
        if (wait) await this.synchronize();
        return;
      }
      if (!conn || (!this.dead.length && !this.deadHandles.length)) return;
      const ids = this.dead.splice(0);
      const handles = this.deadHandles.splice(0);
      try {
        await conn.release(ids, handles);
      } catch (e) {
        if (e instanceof PolygradNotFound) return; // all or nothing: a stale entry must not stay queued forever
        this.dead.push(...ids);
        this.deadHandles.push(...handles);
        throw e;
      }
    });
  }

  forgetSession() {
    this.gen += 1;
    this.deferred = null;
    this.sent.clear();
    this.dead.length = 0;
    this.deadHandles.length = 0;
    this.uploads.clear();
  }

  _serial(fn) {
    const run = this.queue.then(fn, fn);
    this.queue = run.then(() => {}, () => {});
    return run;
  }

  // --- autograd support ---------------------------------------------------------------------------

  static inputs(n) {
    return n.handle && n.keep.length ? n.keep : n.src;
  }

  // Nodes behind root (following inputs()), sources first; nodes where stopAt holds are listed but not entered.
  toposort(root, stopAt = () => false) {
    const order = [];
    const seen = new Set();
    const stack = [[root, false]];
    while (stack.length) {
      const [n, done] = stack.pop();
      if (done) { order.push(n); continue; }
      if (seen.has(n.id)) continue;
      seen.add(n.id);
      stack.push([n, true]);
      if (!stopAt(n)) for (const s of Graph.inputs(n)) if (!seen.has(s.id)) stack.push([s, false]);
    }
    return order;
  }

  // root's value as lazy graph down to the gradient targets: every realized rg node on the way is
  // replaced by a fresh node of its op over its kept sources, and so is everything above it.
  relazy(root, targets) {
    const memo = new Map();
    for (const n of this.toposort(root, (m) => targets.has(m.id) || m.stop)) {
      if (targets.has(n.id) || n.stop) { memo.set(n.id, n); continue; }
      const ins = Graph.inputs(n);
      const nw = ins.map((s) => memo.get(s.id));
      if ((n.handle && n.keep.length) || nw.some((a, i) => a !== ins[i])) {
        memo.set(n.id, this.node(n.op, n.dtype, n.shape, nw, n.arg, true));
      } else {
        memo.set(n.id, n);
      }
    }
    return memo.get(root.id);
  }

  // Remembers t (a float tensor with requiresGrad unset) as a possible gradient target.
  noteCreated(t) {
    this.created.add(new WeakRef(t));
    if (this.created.size < this.createdPruneAt) return;
    for (const ref of this.created) if (ref.deref() === undefined) this.created.delete(ref);
    this.createdPruneAt = Math.max(1024, 2 * this.created.size);
  }

  _leafIds() {
    const ids = new Set();
    for (const [key, ref] of this.leaves) {
      const t = ref.deref();
      if (t === undefined || !t.requiresGrad) this.leaves.delete(key);
      else ids.add(t._node.id);
    }
    return ids;
  }

  // Stop nodes used by a tracked node of this request whose value depends on something a gradient
  // could reach: they are realized first, in a request of their own.
  _stopsToRealize(todo) {
    const leafIds = this._leafIds();
    const memo = new Map();
    const depends = (n) => {
      for (const m of this.toposort(n)) {
        if (!memo.has(m.id)) memo.set(m.id, m.rg || leafIds.has(m.id) || Graph.inputs(m).some((s) => memo.get(s.id)));
      }
      return memo.get(n.id);
    };
    const out = new Map();
    for (const n of todo) {
      if (n.stop) continue;
      for (const s of n.src) if (s.stop && !s.handle && !out.has(s.id) && depends(s)) out.set(s.id, s);
    }
    return [...out.values()];
  }

  // --- realize ------------------------------------------------------------------------------------

  // Nodes reachable from `outputs` the daemon has not seen, sources first; a GRADIENT's loss is
  // re-lazied first, since values behind it may have been realized after it was made.
  unsent(outputs) {
    const order = [];
    const state = new Map();
    const stack = [...outputs].reverse().map((n) => [n, false]);
    while (stack.length) {
      const [n, done] = stack.pop();
      if (done) { state.set(n.id, true); order.push(n); continue; }
      if (n.disposed) throw new PolygradError(`tensor node ${n.id} was disposed; a graph still uses it`);
      if (n.sent) {
        if (n.gen !== this.gen) throw new PolygradError(`tensor node ${n.id} belongs to a closed polygrad session`);
        continue;
      }
      if (state.has(n.id)) continue;
      state.set(n.id, false);
      if (n.op === OPS.GRADIENT) {
        const [loss, target] = n.src;
        n.src = [this.relazy(loss, new Set([target.id])), target];
      }
      stack.push([n, true]);
      for (const s of [...n.src].reverse()) if (!state.has(s.id)) stack.push([s, false]);
    }
    return order;
  }

  toWire(n) {
    if (n.arg === AWAITED) throw new PolygradError(`node ${n.id}: the compiled step run that computes it failed`);
    const msg = { id: n.id, op: n.op, dtype: n.dtype.wire, src: n.src.map((s) => s.id) };
    const a = n.arg;
    const O = OPS;
    // which ops carry which Node.arg is the op schema's (generated tables)
    if (SHAPE_ARG_OPS.has(n.op)) {
      const sym = symbolicWire(a, false);
      msg.shape = { dims: sym ? sym.arg : a };
      if (sym) msg.symbolic = sym.symbolic;
    } else if (AXES_ARG_OPS.has(n.op)) {
      msg.axes = { axes: a };
    } else if (PAIRS_ARG_OPS.has(n.op)) {
      const sym = symbolicWire(a, true);
      const pairs = sym ? sym.arg : a;
      msg.pairs = { begin: pairs.map((p) => p[0]), end: pairs.map((p) => p[1]) };
      if (sym) msg.symbolic = sym.symbolic;
    } else if (COMPOSITE_ARG_OPS.has(n.op)) {
      msg.composite = a.wire();
    } else if (n.op === O.CONST) {
      const c = { shape: n.shape };
      const k = n.dtype.kind;
      if (k === 'f') c.float_value = Number(a);
      else if (k === 'b') c.bool_value = Boolean(a);
      else if (k === 'u') c.uint_value = String(a);
      else c.int_value = String(a);
      msg.constant = c;
    } else if (n.op === O.BUFFER) {
      msg.buffer = ArrayBuffer.isView(a) ? { shape: n.shape, data: bytesOf(a) } : { shape: n.shape, handle: a };
    }
    return msg;
  }

  realize(outputs, wantData) {
    if (this.tracing) {
      if (wantData) {
        return Promise.reject(new PolygradError('compileStep: fn read a tensor\'s value (data()/array()/item()) while ' +
          'being traced; return the tensor from fn instead and read it from the step'));
      }
      this.tracing.push(...outputs);
      return Promise.resolve(outputs.map(() => null));
    }
    return this._serial(() => this._realize(outputs, wantData));
  }

  async _realize(outputs, wantData) {
    if (this.awaited) await this.synchronize();
    if (wantData && outputs.every((n) => n.cache)) return outputs.map((n) => n.cache.slice());
    const conn = await session.get();
    this._hook(conn);
    await this._settleArrived(conn);
    const uniq = [...new Map(outputs.map((n) => [n.id, n])).values()];
    let todo = this.unsent(uniq);
    if (todo.some((n) => n.src.some((s) => s.stop && !s.handle))) {
      const stops = this._stopsToRealize(todo);
      if (stops.length) {
        await this._realize(stops, false);
        todo = this.unsent(uniq);
      }
    }
    if (!todo.length && !wantData && uniq.every((n) => n.handle) && !this.dead.length) return outputs.map(() => null);
    // Big buffers (and inline bytes past the per-request budget) go through Upload.
    let budget = REQUEST_INLINE_BUDGET;
    for (const n of todo) {
      if (n.op === OPS.BUFFER && ArrayBuffer.isView(n.arg)) {
        const nbytes = n.arg.byteLength;
        if (nbytes > conn.maxInlineBytes || nbytes > budget) {
          const handle = await conn.upload(n.dtype.wire, n.shape, bytesOf(n.arg));
          n.arg = handle;
          this.uploads.set(n.id, handle);
        } else {
          budget -= nbytes;
        }
      }
    }
    if (await conn.stream()) return this._dispatch(conn, outputs, uniq, todo, wantData);
    const wire = todo.map((n) => this.toWire(n));
    let release = this.dead.splice(0);
    const handles = this.deadHandles.splice(0);
    const outIds = uniq.map((n) => n.id);
    const limit = conn.maxNodesPerRequest || wire.length || 1;
    let resp;
    let start = 0;
    try {
      while (wire.length - start > limit) { // node batches past the per-request limit go first
        await conn.realize(wire.slice(start, start + limit), [], false);
        for (const n of todo.slice(start, start + limit)) {
          this._markSent(n);
          this._dropData(n);
        }
        start += limit;
      }
      try {
        resp = await conn.realize(wire.slice(start), outIds, wantData, release);
      } catch (e) {
        if (!(e instanceof PolygradNotFound) || !e.details.includes('release_nodes')) throw e;
        release = []; // a release the daemon does not know would fail every later request
        resp = await conn.realize(wire.slice(start), outIds, wantData, []);
      }
      this.requests += 1;
    } catch (e) {
      this.dead.unshift(...release);
      this.deadHandles.push(...handles);
      throw e;
    }
    for (const n of todo.slice(start)) {
      this._markSent(n);
      this._dropData(n);
    }
    for (const n of todo) {
      const h = this.uploads.get(n.id);
      if (h !== undefined) { this.uploads.delete(n.id); handles.push(h); }
    }
    if (handles.length) {
      try { await conn.release([], handles); } catch (e) { if (!(e instanceof PolygradNotFound)) throw e; }
    }
    this._noteStats(resp.stats);
    this._bind(uniq, resp);
    return wantData ? this._arrays(conn, outputs, uniq, resp) : outputs.map(() => null);
  }

  // A Realize's answer: each output's id now stands for its buffer, so the graph behind it goes
  // (kept for a later gradient when it is tracked).
  _bind(uniq, resp) {
    if (resp.results.length !== uniq.length) {
      throw new PolygradError(`Realize returned ${resp.results.length} results for ${uniq.length} outputs`);
    }
    for (let i = 0; i < uniq.length; i++) {
      const n = uniq[i];
      const r = resp.results[i];
      if (Number(r.node_id) && Number(r.node_id) !== n.id) {
        throw new PolygradError(`Realize returned node ${r.node_id} where node ${n.id} was asked for`);
      }
      n.handle = (r.handle !== '0' && r.handle) || (n.handle && n.handle !== '-1' ? n.handle : '-1');
      if (n.rg && n.src.length) n.keep = n.src; // for a later gradient through this value (relazy)
      n.src = [];
    }
  }

  async _arrays(conn, outputs, uniq, resp) {
    const arrays = new Map();
    for (let i = 0; i < uniq.length; i++) {
      const n = uniq[i];
      const r = resp.results[i];
      let res = r;
      if (!r.has_data) res = await conn.download(r.handle);
      const arr = checkedDecode(n, res.dtype, res.shape.map(Number), res.data);
      if (arr.byteLength <= CACHE_BYTES) n.cache = arr;
      arrays.set(n.id, arr.slice());
    }
    return outputs.map((n) => (arrays.has(n.id) ? arrays.get(n.id) : null));
  }

  // --- asynchronous dispatch (dispatch.js) --------------------------------------------------------

  _hook(conn) {
    if (!conn.syncHook) conn.syncHook = () => this.synchronize();
  }

  // realize() on the session's Execute stream. Until its answer is settled the outputs count as
  // realized (handle '-1') and the sent nodes as sent; both are undone if it fails. Queued node
  // releases ride along as release_nodes (the daemon accepts the ids of failed requests there).
  async _dispatch(conn, outputs, uniq, todo, wantData) {
    if (this.deadHandles.length) {
      await conn.submit({ release: { node_ids: [], handles: this.deadHandles.splice(0) } }, 'Release', releaseSettled);
    }
    const limit = conn.maxNodesPerRequest || todo.length || 1;
    let start = 0;
    while (todo.length - start > limit) { // node batches past the per-request limit go first
      const batch = todo.slice(start, start + limit);
      const flight = { send: batch, outputs: [], release: [], saved: [], response: null };
      await conn.submit({ realize: { nodes: batch.map((n) => this.toWire(n)), outputs: [], want_data: false } },
        'Realize', (p, err) => this._settled(flight, p, err));
      for (const n of batch) this._markSent(n);
      start += limit;
    }
    const send = todo.slice(start);
    const release = this.dead.splice(0);
    const flight = { send, outputs: uniq, release, saved: [], response: null };
    const req = { nodes: send.map((n) => this.toWire(n)), outputs: uniq.map((n) => n.id), want_data: wantData,
      release_nodes: release };
    for (const n of send) this._markSent(n);
    for (const n of uniq) {
      flight.saved.push([n, n.src, n.keep, n.handle]);
      if (n.src.length) {
        if (n.rg) n.keep = n.src;
        n.src = [];
      }
      n.handle = n.handle || '-1';
    }
    await conn.submit({ realize: req }, 'Realize', (p, err) => this._settled(flight, p, err),
      `realizing ${send.length} nodes`);
    this.requests += 1;
    if (!wantData) return outputs.map(() => null);
    await this.synchronize();
    return this._arrays(conn, outputs, uniq, flight.response);
  }

  // A dispatched realize's answer, applied in order by Connection.settle.
  _settled(flight, p, err) {
    if (!err) {
      try {
        this._bind(flight.outputs, p.answer);
        flight.response = p.answer;
        this._noteStats(p.answer.stats);
        for (const n of flight.send) {
          this._dropData(n);
          const h = this.uploads.get(n.id);
          if (h !== undefined) {
            this.uploads.delete(n.id);
            this.deadHandles.push(h); // the daemon's node holds the buffer now
          }
        }
        return;
      } catch (e) {
        err = e;
      }
    }
    // The daemon added none of the request's nodes: they are unsent again, the outputs unrealized,
    // and its releases still to do (unless one of them is what it refused).
    if (!(err instanceof PolygradNotFound && err.details.includes('release_nodes'))) this.dead.unshift(...flight.release);
    for (const n of flight.send) {
      n.sent = false;
      this.sent.delete(n.id);
    }
    for (const [n, src, keep, handle] of flight.saved) {
      if (!handle) { // an output realized (or dispatched) before keeps that state
        n.src = src;
        n.keep = keep;
        n.handle = handle;
      }
    }
    throw err;
  }

  // Applies the answers already in; an error waits for the next read or synchronize().
  async _settleArrived(conn) {
    if (!conn.outstanding) return;
    const err = await conn.settle(false);
    if (err && !this.deferred) this.deferred = err;
  }

  // Waits for everything dispatched and throws the first error among it.
  async synchronize() {
    const conn = session.current();
    const err = conn ? await conn.settle(true) : null;
    const first = this.deferred || err;
    this.deferred = null;
    if (first) throw first;
  }

  async _releaseQueued(conn) {
    if (!this.dead.length && !this.deadHandles.length) return;
    await conn.submit({ release: { node_ids: this.dead.splice(0), handles: this.deadHandles.splice(0) } }, 'Release',
      releaseSettled);
  }

  _markSent(n) {
    n.sent = true;
    n.gen = this.gen;
    this.sent.add(n.id);
  }

  // The daemon holds the bytes now (kept until then: a failed request sends them again).
  _dropData(n) {
    if (n.op === OPS.BUFFER && ArrayBuffer.isView(n.arg)) n.arg = null;
  }
}

// All or nothing on the daemon: an id it does not know must not fail the batch for good.
function releaseSettled(p, err) {
  if (err && !(err instanceof PolygradNotFound)) throw err;
}

// A result's bytes as a TypedArray, checked against the node's local dtype and shape.
function checkedDecode(n, wireDtype, shape, data) {
  const dt = wireDtype ? dtypes.fromWire(wireDtype) : n.dtype;
  if (dt !== n.dtype) throw new PolygradError(`daemon returned dtype ${dt.name} for node ${n.id}, expected ${n.dtype.name}`);
  if (shape.length !== n.shape.length || shape.some((s, i) => s !== n.shape[i])) {
    throw new PolygradError(`daemon returned shape [${shape}] for node ${n.id}, expected [${n.shape}]`);
  }
  const need = prod(shape) * dt.itemsize;
  if (data.length !== need) {
    throw new PolygradError(`daemon returned ${data.length} bytes for node ${n.id} (${dt.name}[${shape}] needs ${need})`);
  }
  return decode(data, dt);
}

const GRAPH = new Graph();

module.exports = { Node, Graph, GRAPH, AWAITED, checkedDecode, RELEASE_BATCH };
