"""Compiled training steps: trace `fn(*args)` once, run it many times with one small message each.

    step = compile_step(train_step, model, opt, x, y)
    for xb, yb in batches:
      step.run(x=xb, y=yb)          # new data for the inputs named x and y
      print(step.loss_value())

Tracing calls fn once with the realizes it asks for (an optimizer step) deferred: the graph it
builds becomes a CompileStep request. The tensors of every non-Tensor argument (models,
optimizers, lists of tensors) are the step's state: one that fn re-binds (Tensor.assign, an
optimizer update) is an in-place assign of the step, so after each run the Python object
(`model.weight`) stands for the daemon buffer holding the trained values. Tensor arguments are
the per-run inputs, fed by argument name (`run(x=arr)`) or tensor (`set_input(x, arr)`); an
input not fed keeps its last data. What fn returns (a tensor or a tuple of tensors) comes back
from every run; `loss_value()` is the first of them as a float.

After compile the daemon does no scheduling: RunStep copies the inputs, launches the compiled
kernels and updates the state buffers. Random numbers fn draws (Tensor.rand, dropout) are drawn
anew every run from the client's seed and counter, as eager calls would draw them. Optimizer scalars that change from step to step (the
learning rate set by a scheduler, the step number of Adam and LAMB) are fed as inputs.
"""
from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import graph as g
from . import wire
from .connection import get_connection
from .errors import PolygradError
from .nn.optim import LAMB, Adam, Optimizer, _Scalar
from .nn.state import get_parameters
from .tensor import Tensor, _to_wire_array
from .variable import daemon_shape

__all__ = ["compile_step", "CompiledTrainingStep"]


class _Tracing:
  """What Graph.tracing calls while fn is traced (in this thread only). Realizes are deferred (their
  nodes become part of the step); reading a value is impossible, since nothing runs until the step
  does. As the trace's watcher it also records every tensor fn rebinds (with the node it stood for
  first) and every optimizer fn steps (with its step count before), so state that fn reaches through
  closures is found as well as state passed as arguments."""

  def __init__(self, optimizers: List[Any], first_steps: Dict[int, int]) -> None:
    self.deferred: List[g.Node] = []
    self.assigned: Dict[int, Tuple[Tensor, g.Node]] = {}  # id(tensor) -> (tensor, node before the trace)
    self._optimizers, self._first_steps = optimizers, first_steps

  def realize(self, outputs, want_data: bool):
    if want_data:
      raise PolygradError("compile_step: fn read a tensor's value (numpy()/item()/tolist()) while being "
                          "traced; return the tensor from fn instead and read it from the step")
    self.deferred.extend(outputs)
    return [None] * len(outputs)

  def assigning(self, t: Tensor) -> None:
    self.assigned.setdefault(id(t), (t, t._node))

  def stepping(self, opt) -> None:
    if id(opt) not in self._first_steps:
      self._first_steps[id(opt)] = opt.steps
      self._optimizers.append(opt)

  def restore(self) -> None:
    """Every tensor fn rebound stands for its node from before the trace again."""
    for t, old in self.assigned.values():
      t._node = old
      old.cache = None


def _optimizers_in(obj: Any) -> List[Any]:
  """The optimizers among obj (and in lists/tuples/dicts of it)."""
  if isinstance(obj, Optimizer):
    return [obj]
  if isinstance(obj, (list, tuple)):
    return [o for x in obj for o in _optimizers_in(x)]
  if isinstance(obj, dict):
    return [o for x in obj.values() for o in _optimizers_in(x)]
  return []


def _optimizer_scalars(opt, k: int) -> Dict[str, float]:
  """The per-step scalars an optimizer's step k uses (k counts from 1), by _Scalar attribute
  name: the values nn.optim computes on the host before building its update."""
  out = {"_lr": opt.lr}
  if isinstance(opt, (Adam, LAMB)):
    out["_count"] = k  # the daemon computes the bias corrections from it
  return out


# Steps whose objects were collected: released by the next compile_step or run, not from the
# garbage collector (which may run inside another call).
_DEAD_STEPS: List[Tuple[int, int]] = []  # (session generation, step id)


def _step_died(gen: int, step_id: int) -> None:
  _DEAD_STEPS.append((gen, step_id))


def _answered(on_answer: Callable[[Any], None]):
  """A stream command's on_settle that hands a successful answer to on_answer."""
  def settle(pending, err):
    if err is not None:
      raise err
    on_answer(pending.wait())
  return settle


def _flush_dead_steps(conn) -> None:
  while True:
    try:
      gen, step_id = _DEAD_STEPS.pop()
    except IndexError:  # empty, or another thread took the last one
      return
    if gen != g.GRAPH.gen or not conn.session_id:
      continue  # that session is gone, and its steps with it
    try:
      conn.release_step(step_id)
    except PolygradError:
      pass  # already gone (session expired)


g.GRAPH.release_hooks.append(_flush_dead_steps)


def host_data(t: Tensor) -> bool:
  """t is data made on the host that the daemon has not seen (a Tensor of a numpy array)."""
  n = t._node
  return n.op == g.BUFFER and not n.sent and isinstance(n.arg, np.ndarray)


class _OutputSpec(NamedTuple):
  id: int
  dtype: Any
  shape: Tuple[int, ...]


def awaited_outputs(specs: List[_OutputSpec]) -> Tuple[List[g.Node], Callable[[Any], None]]:
  """BUFFER nodes for the outputs `specs` of a run not answered yet, and the on_answer that gives
  each its RunStep output: its bytes (also as the node's cache), or the handle of the copy the
  daemon made of a large one, released with the node. Until then a graph or read that needs one
  waits for the answer."""
  nodes = [g.GRAPH.node(g.BUFFER, n.dtype, n.shape, (), g.AWAITED) for n in specs]

  def answer(resp) -> None:
    for n, node, r in zip(specs, nodes, resp.outputs):
      if r.has_data:
        arr = g.decode(n, r.dtype, tuple(r.shape), r.data)
        node.arg = _to_wire_array(arr, n.dtype)
        node.cache = arr  # whatever its size: reading it must not send it back and fetch it again
      else:
        node.arg = int(r.handle)
        g.GRAPH._uploads[node.id] = int(r.handle)
  return nodes, answer


class CompiledTrainingStep:
  """A step compiled by compile_step. run() executes it; outputs stay readable until the next."""

  def __init__(self, conn, resp, inputs: Dict[str, Tuple[Tensor, g.Node]], outputs: List[g.Node],
               targets: List[g.Node], scalars: List[Tuple[Any, str, Any, int]], first_k: int,
               rebind: List[Tuple[Any, int]]):
    self._conn = conn
    self.step_id = int(resp.step_id)
    # The Variables whose symbolic dims the step computes with: a run may give them new values.
    self.variables = frozenset(resp.variables)
    stats = resp.stats
    self.n_kernels = int(stats.kernels)
    self.n_intermediates = int(stats.intermediates)
    self.intermediate_bytes = int(stats.intermediate_bytes)
    self.n_box_assigns = int(stats.box_assigns)  # assigns written as a box (a write through a shrink view)
    self.compile_seconds = float(stats.seconds)
    self._inputs = inputs  # argument name -> (tensor, input node)
    self._by_node = {n.id: (name, t, n) for name, (t, n) in inputs.items()}
    # What decoding an output needs, not the traced nodes: holding those would hold the whole
    # traced graph and every node it read (see read_nodes).
    self._outputs = [_OutputSpec(n.id, n.dtype, n.shape) for n in outputs]
    self._targets = targets  # the nodes the step assigns in place
    self._scalars = scalars  # (optimizer, attribute, _Scalar, input node id)
    # (tensor, output index): a tensor fn rebound whose old value had no buffer to update in place
    # (or, by input name, an input fn assigned to): it stands for that output after every run.
    self._rebind = rebind
    self._sent_scalar: Dict[int, float] = {}
    self._k = first_k  # the optimizer step number of the next run
    self._pending: Dict[int, Any] = {}
    self._values: Optional[List[np.ndarray]] = None
    self._waiting = False  # a run is outstanding whose answer sets _values
    self.runs = 0
    # (seed, first counter, count) of the random streams the trace drew (set by trace_step): the
    # first run draws those, every later run the next `count` counters, as eager calls would.
    self._random: Optional[Tuple[int, int, int]] = None
    self.read_nodes: List[weakref.ref] = []  # set by trace_step
    self.state: List[Tuple[Tensor, g.Node]] = []  # (tensor, the node it stands for) of every in-place target
    self._gen = g.GRAPH.gen
    self._finalizer = weakref.finalize(self, _step_died, self._gen, self.step_id)
    self._finalizer.atexit = False

  # --- inputs -----------------------------------------------------------------------------------

  @property
  def input_names(self) -> List[str]:
    return list(self._inputs)

  def set_input(self, tensor_or_name, data) -> None:
    """New data for an input (a Tensor argument of fn, or its argument name) for the next run:
    a numpy array / list of the input's shape, or a realized Tensor of its dtype and shape."""
    if isinstance(tensor_or_name, str):
      if tensor_or_name not in self._inputs:
        raise KeyError(f"compile_step: {tensor_or_name!r} is not an input of this step "
                       f"(inputs: {', '.join(self._inputs) or 'none'})")
      t, node = self._inputs[tensor_or_name]
    else:
      found = [(t, n) for t, n in self._inputs.values() if t is tensor_or_name]
      if not found:
        raise KeyError("compile_step: that tensor is not an input of this step")
      t, node = found[0]
    if isinstance(data, Tensor):
      if data.shape != node.shape or data.dtype != node.dtype:
        raise ValueError(f"input {self._by_node[node.id][0]!r}: got {data.dtype.name}{list(data.shape)}, "
                         f"the step takes {node.dtype.name}{list(node.shape)}")
      if not (data._node.handle and data._node.sent):
        data.realize()
      self._pending[node.id] = data  # kept alive until sent
      return
    arr = np.asarray(data)
    if tuple(arr.shape) != tuple(node.shape):
      raise ValueError(f"input {self._by_node[node.id][0]!r}: got shape {tuple(arr.shape)}, the step takes "
                       f"{tuple(node.shape)}")
    self._pending[node.id] = _to_wire_array(arr, node.dtype).tobytes()

  def feed(self, name: str, t: Tensor) -> None:
    """set_input(name, t) for a Tensor, sending the bytes of one made from host data (not yet on
    the daemon) with the run instead of uploading it first: one message per run."""
    node = self._inputs[name][1]
    n = t._node
    if host_data(t) and n.shape == node.shape and n.dtype == node.dtype:
      self._pending[node.id] = n.arg.tobytes()
    else:
      self.set_input(name, t)

  # --- running ----------------------------------------------------------------------------------

  def run(self, **inputs) -> "CompiledTrainingStep":
    """Run the step once, after feeding `inputs` (by argument name, see set_input). Returns once
    the run is sent (asynchronous dispatch): outputs(), loss_value() and the tensors fn returned
    wait for it, and raise its error. Bad inputs raise before anything changes."""
    self._accept(inputs)
    self._values = None
    self._waiting = True
    # The tensors fn returned stand for this run's outputs from now on: nodes whose data arrives
    # with the answer (a graph or a read that needs one first waits for it).
    bound = []
    for t, i in self._rebind:
      if isinstance(t, Tensor):
        out = self._outputs[i]
        t._node = g.GRAPH.node(g.BUFFER, out.dtype, out.shape, (), g.AWAITED)
        bound.append((t._node, i))
    self.exchange({}, on_answer=functools.partial(self._take, bound))
    return self

  def _take(self, bound, resp) -> None:
    """A run's answer: fn's outputs as arrays, given to the nodes that stand for them."""
    values = []
    for n, r in zip(self._outputs, resp.outputs):
      if r.has_data:
        data = r.data
      else:
        _, _, data = self._conn.download(int(r.handle))
        self._conn.release((), [int(r.handle)])
      values.append(g.decode(n, r.dtype, tuple(r.shape), data))
    self._values = values
    self._waiting = False
    for n, i in bound:
      n.arg = Tensor(values[i], dtype=self._outputs[i].dtype)._node.arg
      if values[i].nbytes <= g.CACHE_BYTES:
        n.cache = values[i].copy()

  def _accept(self, inputs: Dict[str, Any]) -> None:
    """Feeds `inputs` for the next run (raising on a bad one) and checks the step's session."""
    for name, value in inputs.items():
      self.set_input(name, value)
    if g.GRAPH.gen != self._gen:
      raise PolygradError("compile_step: this step belongs to a closed polygrad session")

  def exchange(self, inputs: Dict[str, Any], on_answer: Optional[Callable[[Any], None]] = None,
               variables: Sequence[Tuple[str, int]] = ()):
    """One RunStep after feeding `inputs`: the daemon's answer, whose large outputs are handles
    the caller owns. Optimizer scalars and node caches are brought up to date. With `on_answer`
    the run goes on the session's stream and returns at once; on_answer(answer) is called when
    it is settled (at once where there is no stream). `variables`: (name, value) of Variables
    whose symbolic dims (self.variables) take a new value from this run on."""
    self._accept(inputs)
    if any(isinstance(v, Tensor) and v._node.handle < 0 for v in self._pending.values()):
      g.GRAPH.synchronize()  # an input fed by handle whose realize is still outstanding
    feeds: List[Tuple[int, Any]] = []
    for nid, v in self._pending.items():
      feeds.append((nid, int(v._node.handle) if isinstance(v, Tensor) else v))
    for opt, attr, _, nid in self._scalars:
      value = _optimizer_scalars(opt, self._k).get(attr)
      if value is not None and self._sent_scalar.get(nid) != value:
        feeds.append((nid, np.float32(value).tobytes()))
        self._sent_scalar[nid] = value
    if _DEAD_STEPS:
      _flush_dead_steps(self._conn)
    random = None
    if self._random is not None and self.runs > 0:
      random = (self._random[0] if Tensor._seed is None else Tensor._seed, Tensor._counter)
      Tensor._counter = (Tensor._counter + self._random[2]) % (1 << 32)
    resp = None
    if (on_answer is None or
        self._conn.run_step_async(self.step_id, feeds, True, _answered(on_answer), random, variables) is None):
      resp = self._conn.run_step(self.step_id, feeds, want_data=True, random=random, variables=variables)
    self._pending.clear()
    self.runs += 1
    for opt in {id(o): o for o, _, _, _ in self._scalars}.values():
      opt.steps = self._k
    self._k += 1
    # The daemon changes these buffers in place: results cached on their nodes are stale.
    for n in self._targets:
      n.cache = None
    for _, n in self._inputs.values():
      n.cache = None
    if resp is not None and on_answer is not None:
      on_answer(resp)
    return resp

  def __call__(self, **inputs) -> "CompiledTrainingStep":
    return self.run(**inputs)

  def _wait(self) -> None:
    if self._values is None and self._waiting:
      g.GRAPH.synchronize()

  def outputs(self) -> List[np.ndarray]:
    """What fn returned, as arrays, from the last run."""
    self._wait()
    if self._values is None:
      raise RuntimeError("compile_step: run() the step before reading its outputs")
    return [v.copy() for v in self._values]

  def loss_value(self) -> float:
    """The first output of the last run (fn's return value, e.g. the loss) as a float."""
    self._wait()
    if self._values is None:
      raise RuntimeError("compile_step: run() the step before reading loss_value()")
    if not self._values:
      raise RuntimeError("compile_step: fn returned no tensor")
    v = self._values[0]
    if v.size != 1:
      raise ValueError(f"loss_value() needs a one-element output, fn returned shape {v.shape}")
    return float(v.reshape(()))

  def release(self) -> None:
    """Free the step on the daemon now (it is also freed some time after this object is
    collected, and with the session)."""
    if self._finalizer.detach() is not None and self._gen == g.GRAPH.gen and self._conn.session_id:
      self._conn.release_step(self.step_id)

  def __repr__(self) -> str:
    return (f"<CompiledTrainingStep {self.n_kernels} kernels, {self.n_intermediates} intermediates, "
            f"inputs {self.input_names}, {self.runs} runs>")


def compile_step(fn: Callable, *args, **kwargs) -> CompiledTrainingStep:
  """Trace `fn(*args, **kwargs)` once into a step compiled by the daemon (see the module doc)."""
  conn = get_connection()
  _flush_dead_steps(conn)
  try:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    named = list(bound.arguments.items())
  except (TypeError, ValueError):
    named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())

  inputs: Dict[str, Tensor] = {name: a for name, a in named if isinstance(a, Tensor)}
  others = [a for _, a in named if not isinstance(a, Tensor)]
  state: List[Tensor] = []
  seen = set()
  for t in get_parameters(others):
    if id(t) not in seen and not any(t is i for i in inputs.values()):
      seen.add(id(t))
      state.append(t)
  optimizers = list({id(o): o for o in _optimizers_in(others)}.values())
  step, _, _ = trace_step(conn, lambda: fn(*args, **kwargs), inputs, state, optimizers, _returned_tensors,
                          input_assigns=False)
  return step


def _returned_tensors(result) -> List[Tensor]:
  if result is None:
    return []
  if isinstance(result, Tensor):
    return [result]
  if isinstance(result, (list, tuple)) and all(isinstance(r, Tensor) for r in result):
    return list(result)
  raise TypeError(f"compile_step: fn must return a Tensor, a tuple of Tensors or None, got {type(result).__name__}")


def trace_step(conn, call: Callable[[], Any], inputs: Dict[str, Tensor], state: List[Tensor], optimizers: List[Any],
               result_tensors: Callable[[Any], List[Tensor]], input_assigns: bool):
  """Trace call() into a compiled step whose per-run inputs are `inputs` (by name) and whose state
  is `state`, the tensors of `optimizers` and whatever else call() rebinds or steps. Returns
  (step, call's result, [(tensor or input name, output index)] of the step's rebinds); the
  step's first outputs are result_tensors(result). With input_assigns, call() may assign to an
  input (the new value is an output; the caller rebinds the tensor it fed), else that raises."""
  everything = [*inputs.values(), *state]
  if everything:
    Tensor.realize(*everything)  # every input and state tensor gets a buffer before the trace
  input_nodes = {name: t._node for name, t in inputs.items()}
  ids = [n.id for n in input_nodes.values()]
  if len(set(ids)) != len(ids):
    raise ValueError("compile_step: two inputs are the same tensor; pass distinct tensors")
  before = [(t, t._node) for t in state]
  grads = [(t, t.grad) for t in state]
  first_steps = {id(o): o.steps for o in optimizers}
  tracing = _Tracing(optimizers, first_steps)
  try:
    resp, result, outs, assigns, scalars, rebind, read, random = _trace_and_compile(
        conn, call, tracing, before, input_nodes, ids, result_tensors, input_assigns)
  except BaseException:
    for t, gr in grads:  # a failed trace leaves the model as it was
      t.grad = gr
    raise
  finally:
    # The state tensors stand for their buffers again, which every run updates in place.
    tracing.restore()
    for t, old in before:
      t._node = old
      old.cache = None
    for o in optimizers:
      o.steps = first_steps[id(o)]
  first_k = min(first_steps.values()) + 1 if first_steps else 1
  step = CompiledTrainingStep(conn, resp, {name: (inputs[name], input_nodes[name]) for name in inputs}, outs,
                              [old for old, _ in assigns], scalars, first_k, rebind)
  step.read_nodes = [weakref.ref(n) for n in read]
  step.state = list(before)
  step._random = random
  return step, result, rebind


def _trace_and_compile(conn, call, tracing, before, input_nodes, ids, result_tensors, input_assigns):
  """Runs call() with realizes deferred and sends what it built as one CompileStep."""
  first_new_id = g.GRAPH.stats()["next_id"]
  seed_before, counter_before = Tensor._seed, Tensor._counter
  with g.GRAPH.tracing(tracing.realize, tracing):
    result = call()
  # The random streams the trace drew, which every later run draws anew (as eager calls would).
  # A manual_seed inside fn restarts the counter: the step then keeps the trace's numbers.
  drawn = (Tensor._counter - counter_before) % (1 << 32)
  random = ((Tensor._seed, counter_before, drawn)
            if drawn and seed_before in (None, Tensor._seed) and Tensor._seed is not None else None)
  outs = [t._node for t in result_tensors(result)]

  # Tensors rebound through closures join the state when their old value has a buffer to update
  # in place; an input, or a tensor whose old value was never realized, gets its new value back
  # as an extra output after every run.
  input_names = {n.id: name for name, n in input_nodes.items()}
  known = {id(t) for t, _ in before}
  rebind_nodes: List[Tuple[Any, g.Node]] = []
  for t, old in tracing.assigned.values():
    if id(t) in known or t._node is old:
      continue
    if old.id in input_names:
      if not input_assigns:
        raise ValueError("compile_step: fn assigns to an input tensor")
      rebind_nodes.append((input_names[old.id], t._node))
    elif old.sent and old.handle and old.gen == g.GRAPH.gen:
      before.append((t, old))
      known.add(id(t))
    else:
      rebind_nodes.append((t, t._node))
  rebind = [(who, len(outs) + i) for i, (who, _) in enumerate(rebind_nodes)]
  outs += [n for _, n in rebind_nodes]

  assigns = [(old, t._node) for t, old in before if t._node is not old]
  for t, old in before:
    # A value with a symbolic dim is held at its largest size: its valid part is written.
    if t._node is not old and (daemon_shape(t._node.shape) != old.shape or old.dtype != t._node.dtype):
      raise ValueError(f"compile_step: fn changed a state tensor from {old.dtype.name}{list(old.shape)} to "
                       f"{t._node.dtype.name}{list(t._node.shape)}")
  for old, _ in assigns:
    if any(old is n for n in input_nodes.values()):
      raise ValueError("compile_step: fn assigns to an input tensor")
  roots = outs + [v for _, v in assigns]
  optimizers = tracing._optimizers

  with g.GRAPH._lock:
    todo = g.GRAPH._unsent(roots) if roots else []
    # A stop node matters only to a gradient, which the daemon takes through it (eager realizes
    # cut it first); a step without gradients, e.g. inference under Tensor.no_grad, has none.
    if any(n.op == g.GRADIENT for n in todo) and any(s.stop and not s.handle for n in todo for s in n.src):
      raise NotImplementedError("compile_step: detach() / Tensor.no_grad values inside a compiled step are "
                                "not supported yet")
    # Optimizer scalars that change per step become inputs of the step (realized BUFFER nodes:
    # sent before the trace, or sent now with inline data). A scalar on a GPU is a COPY of such a
    # buffer: the buffer is the input, and the step transfers it before every run.
    scalars = []
    todo_ids = {n.id for n in todo}
    for opt in optimizers:
      for attr, value in vars(opt).items():
        st = value._t if isinstance(value, _Scalar) else None
        node = st._node if st is not None else None
        if node is not None and node.op == g.COPY and node.src[0].op == g.BUFFER:
          node = node.src[0]
        if node is not None and node.op == g.BUFFER and (node.sent or node.id in todo_ids):
          scalars.append((opt, attr, value, node.id))
    scalar_ids = {nid for _, _, _, nid in scalars}
    baked = [n for n in todo if n.op == g.BUFFER and n.id >= first_new_id and n.id not in scalar_ids]
    # Random numbers drawn while traced are drawn anew every run (CompileStep's `random`), unless
    # fn reseeded: then they are as good as data baked in.
    if random is None:
      baked += [n for n in todo if n.op in (g.RAND, g.RANDN, g.RANDINT, g.DROPOUT) and n.id >= first_new_id]
    if baked:
      warnings.warn(f"compile_step: fn made {len(baked)} tensor(s) from data (or random numbers after reseeding) "
                    f"while traced; their values are baked into the step and are the same in every run",
                    stacklevel=4)
    for n in todo:
      if n.op == g.BUFFER and isinstance(n.arg, np.ndarray) and n.arg.nbytes > conn.max_inline_bytes:
        handle = conn.upload(n.dtype.wire, n.shape, memoryview(n.arg).cast("B"))
        n.arg = handle
        g.GRAPH._uploads[n.id] = handle
    # The nodes from before the trace that the step reads (weights fn reached through closures):
    # one that dies was rebound outside the step, which then reads a stale value.
    fed = set(ids) | scalar_ids
    read = {n.id: n for n in todo if n.id < first_new_id}
    read.update((s.id, s) for n in todo for s in n.src if s.sent and s.id not in fed)
    read.update((n.id, n) for n in outs if n.sent and n.id not in fed)
    start = g.GRAPH.send_leading_batches(conn, todo)
    # What fn realized (an optimizer step: gradients, new state) gets its own kernels, as eagerly.
    sent_or_todo = todo_ids | {n.id for n in tracing.deferred if n.sent}
    materialize = list(dict.fromkeys(n.id for n in tracing.deferred if n.id in sent_or_todo))
    resp = conn.compile_step([wire.node(n) for n in todo[start:]], [*ids, *sorted(scalar_ids)],
                             [n.id for n in outs],
                             [(old.id, new.id) for old, new in assigns], materialize, random)
    for n in todo[start:]:
      g.GRAPH._mark_sent(n)
    handles = [h for h in (g.GRAPH._uploads.pop(n.id, None) for n in todo) if h is not None]
    if handles:
      conn.release((), handles)
  return resp, result, outs, assigns, scalars, rebind, list(read.values()), random
