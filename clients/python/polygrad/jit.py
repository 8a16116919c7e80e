"""TinyJit: tinygrad's decorator for a function called many times with inputs of one shape.

    @TinyJit
    def train_step(x, y):
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y).backward()
      opt.step()
      return loss

The first call runs fn as it is. The second traces it into a compiled step (polygrad.nn's
compile_step: one CompileStep request) and runs that. Every later call is one RunStep: the Tensor
arguments (and Tensors directly inside list, tuple and dict arguments) are copied into the step's
inputs, the daemon launches the compiled kernels, and the tensors fn updates (a model's weights
through an optimizer, `x.assign(...)`, `x += 1`) are updated whether fn reached them as arguments
or through closures. What fn returns comes back as new realized Tensors in the same structure.

Unlike tinygrad, returned tensors do not share one buffer across calls: each call's results stay
valid. A tensor fn updates or reads that was rebound outside the step (another jit's first call,
weights trained eagerly) makes the next call capture again. A bound Variable argument with another
value replays with that value when the capture used the Variable only in symbolic dims
(polygrad.variable: RunStep's `variables`); one that fn took as a plain number (an int, an index,
a float) while capturing, or that sized no symbolic dim, makes the call capture again (compiling
nothing: the kernels are cached). Python control flow on a Variable's value (`if pos > 3`) is not
seen: as in tinygrad, the replay follows the branch taken when capturing. A Tensor argument of another
shape, dtype or device, or other argument names, raise JitError; so do a function that computes
nothing and a return value that is not made of Tensors. Random numbers drawn inside fn (rand,
dropout) are drawn anew in every call, the numbers the same calls would draw eagerly (RunStep's
`random`). `JIT=0` in the environment runs every call eagerly.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


from . import graph as g
from .connection import get_connection
from .errors import PolygradError
from .nn.state import get_parameters
from .step import CompiledTrainingStep, awaited_outputs, host_data, trace_step
from .tensor import Tensor
from .variable import BoundVariable, watching_concrete_uses

__all__ = ["TinyJit", "JitError"]


class JitError(PolygradError):
  """A call a captured TinyJit cannot replay, or a function it cannot capture."""


class _EagerWatch:
  """The tensors the eager first call rebinds: realized after it, so the capture finds them as
  buffers to update in place."""

  def __init__(self) -> None:
    self.assigned: Dict[int, Tensor] = {}

  def assigning(self, t: Tensor) -> None:
    self.assigned.setdefault(id(t), t)

  def stepping(self, opt) -> None:
    pass


def _bound_values(args: tuple, kwargs: dict) -> List[Tuple[str, str, int]]:
  """(argument, Variable name, value) of every bound Variable argument."""
  pairs = [(f"args[{i}]", a) for i, a in enumerate(args)] + sorted(kwargs.items())
  return [(name, a.variable.name, int.__int__(a)) for name, a in pairs if isinstance(a, BoundVariable)]


def _jit_inputs(args: tuple, kwargs: dict) -> Tuple[List[str], List[Tensor]]:
  """The Tensor arguments, by name: positional ones as args[i], keywords by name, and the Tensors
  directly inside list, tuple and dict arguments (not deeper: a model's weights are state)."""
  pairs = [(f"args[{i}]", a) for i, a in enumerate(args)] + sorted(kwargs.items())
  names = [name for name, a in pairs if isinstance(a, Tensor)]
  tensors = [a for _, a in pairs if isinstance(a, Tensor)]
  for name, x in pairs:
    items = enumerate(x) if isinstance(x, (list, tuple)) else x.items() if isinstance(x, dict) else ()
    for k, t in items:
      if isinstance(t, Tensor) and not any(t is y for y in tensors):
        names.append(f"{name}[{k!r}]")
        tensors.append(t)
  return names, tensors


def _flatten(ret: Any, out: List[Tensor]) -> Any:
  """ret with every Tensor replaced by its index in `out` (where it is appended)."""
  if isinstance(ret, Tensor):
    out.append(ret)
    return len(out) - 1
  if isinstance(ret, (list, tuple)):
    return type(ret)(_flatten(x, out) for x in ret)
  if isinstance(ret, dict):
    return {k: _flatten(v, out) for k, v in ret.items()}
  if ret is None:
    return None
  raise JitError(f"TinyJit: fn returned a {type(ret).__name__}; a jitted function returns Tensors (alone or in "
                 f"lists, tuples and dicts) or None, since a replay does not run fn's Python code")


def _unflatten(template: Any, tensors: List[Tensor]) -> Any:
  if isinstance(template, int):
    return tensors[template]
  if isinstance(template, (list, tuple)):
    return type(template)(_unflatten(x, tensors) for x in template)
  if isinstance(template, dict):
    return {k: _unflatten(v, tensors) for k, v in template.items()}
  return None


class TinyJit:
  """`@TinyJit` or `TinyJit(fn)`: see the module doc. `captured` is the compiled step once the
  second call has captured fn (its `n_kernels` counts the kernels a replay launches)."""

  def __init__(self, fxn: Optional[Callable] = None, *, prune: bool = False):
    self.fxn = fxn
    self.prune = prune  # accepted for tinygrad's signature: a step already computes only what it needs
    self.cnt = 0
    self.captured: Optional[CompiledTrainingStep] = None
    self._names: List[str] = []
    self._info: List[Tuple[Any, ...]] = []
    self._template: Any = None
    self._rebind: List[Tuple[Any, int]] = []
    self._bound: List[Tuple[str, int]] = []
    self._requests_seen = -1  # g.GRAPH.requests after this jit's last call
    if fxn is not None:
      functools.update_wrapper(self, fxn)

  def __get__(self, obj, objtype=None):
    return self if obj is None else functools.partial(self.__call__, obj)

  def reset(self) -> None:
    """Forget the capture: the next call runs eagerly and the one after captures again."""
    if self.captured is not None:
      self.captured.release()
    self.captured, self.cnt = None, 0

  def __call__(self, *args, **kwargs):
    if self.fxn is None:  # @TinyJit(prune=...) decorating fn
      if len(args) == 1 and callable(args[0]) and not kwargs:
        self.fxn = args[0]
        functools.update_wrapper(self, self.fxn)
        return self
      raise TypeError("TinyJit(...) without a function decorates one: @TinyJit(prune=True)")
    names, tensors = _jit_inputs(args, kwargs)
    if self.cnt == 0 or os.environ.get("JIT", "1") == "0":
      ret = self._eager(args, kwargs)
    else:
      # A replay sends host data with the run itself; a capture needs every input on the daemon.
      unrealized = [t for t in tensors if not (t._node.handle and t._node.sent)
                    and (self.cnt == 1 or not host_data(t))]
      if unrealized:
        Tensor.realize(*unrealized)
      nodes = [t._node.id for t in tensors]
      if len(set(nodes)) != len(nodes):
        raise JitError("duplicate inputs to JIT: two Tensor arguments are the same tensor")
      info = [(t.shape, t.dtype, t.device) for t in tensors]
      if self.cnt == 1:
        ret = self._capture(args, kwargs, names, tensors, info)
      else:
        if names != self._names:
          raise JitError(f"args mismatch in JIT: the capture took Tensor arguments {self._names}, this call {names}")
        if info != self._info:
          bad = next(i for i, (a, b) in enumerate(zip(info, self._info)) if a != b)
          (s, d, dev), (es, ed, edev) = info[bad], self._info[bad]
          raise JitError(f"args mismatch in JIT: {names[bad]} is {d.name}{list(s)} on {dev}, the capture took "
                         f"{ed.name}{list(es)} on {edev}")
        bound = _bound_values(args, kwargs)
        variables = self._variables_for(bound)
        if self._stale() or variables is None:
          # fn reads a tensor that was rebound since the capture (eager training of the weights
          # a jitted evaluation reads), or a bound Variable changed that the step cannot take
          # per run: capture again.
          self.captured.release()
          ret = self._capture(args, kwargs, names, tensors, info)
        else:
          self._bound = bound
          ret = self._replay(tensors, variables)
    self.cnt += 1
    self._requests_seen = g.GRAPH.requests
    return ret

  def _variables_for(self, bound) -> Optional[List[Tuple[str, int]]]:
    """The (Variable name, value) pairs a replay sends for `bound` (the call's bound Variable
    arguments), or None when the step cannot replay them: another argument list, or a changed
    Variable that fn took as a plain number while capturing, or that sized no symbolic dim."""
    if [(a, n) for a, n, _ in bound] != [(a, n) for a, n, _ in self._bound]:
      return None
    changed = {n: v for (_, n, v), (_, _, old) in zip(bound, self._bound) if v != old}
    if len({n for _, n, _ in bound}) != len(bound):
      return None if changed else []
    if any(n in self._concrete or n not in self.captured.variables for n in changed):
      return None
    return sorted(changed.items())

  def _stale(self) -> bool:
    """Whether a tensor the step updates in place, or a node it reads, was rebound since."""
    if g.GRAPH._has_outstanding() and g.GRAPH.requests != self._requests_seen:
      # A node rebound by a realize still in flight lives until that realize is settled: settle
      # it, so a node the step reads that nothing else holds is seen to be gone. Runs of compiled
      # steps (this jit's own replays) hold no node they rebind, so with no realize sent since
      # this jit's last call there is nothing to wait for: replays stay dispatched.
      g.GRAPH.synchronize()
    step = self.captured
    return any(t._node is not old for t, old in step.state) or any(r() is None for r in step.read_nodes)

  def _eager(self, args, kwargs):
    watch = _EagerWatch()
    with g.watching(watch):
      ret = self.fxn(*args, **kwargs)
    todo = get_parameters(ret) + list(watch.assigned.values())
    if todo:
      Tensor.realize(*todo)
    return ret

  def _capture(self, args, kwargs, names, tensors, info):
    if g.trace_watch() is not None:
      raise RuntimeError("TinyJit: a jitted function cannot be captured inside another TinyJit or compile_step")
    flat: List[Tensor] = []

    def result_tensors(ret):
      self._template = _flatten(ret, flat)
      return flat

    with watching_concrete_uses() as concrete:
      step, _, rebind = trace_step(get_connection(), lambda: self.fxn(*args, **kwargs), dict(zip(names, tensors)),
                                   [], [], result_tensors, input_assigns=True)
    self._concrete = frozenset(concrete)
    if step.n_kernels == 0 and not step._targets and not rebind and not flat:
      step.release()
      raise JitError("didn't JIT anything! fn computed no tensor and assigned to none")
    self.captured, self._names, self._info, self._rebind = step, names, info, rebind
    self._bound = _bound_values(args, kwargs)
    self._n_ret = len(flat)
    return self._replay(tensors)

  def _replay(self, tensors: List[Tensor], variables: Sequence[Tuple[str, int]] = ()):
    step = self.captured
    for name, t in zip(self._names, tensors):
      step.feed(name, t)
    # Dispatched like compile_step's run(): the outputs are filled in when the answer arrives.
    nodes, answer = awaited_outputs(step._outputs)
    step.exchange({}, on_answer=answer, variables=variables)
    for who, i in self._rebind:
      t = tensors[self._names.index(who)] if isinstance(who, str) else who
      t._node = nodes[i]
    return _unflatten(self._template, [Tensor(nodes[i]) for i in range(self._n_ret)])
