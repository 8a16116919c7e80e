"""Optimizers (torch's update rules; tinygrad's LAMB) and learning-rate schedulers. SGD, Adam(W)
and LAMB are the daemon's update ops (core/frontend/optimizers.h), one rule for every client.

A step builds every parameter's (and every state tensor's) new value as lazy graph, realizes
them all in one Realize request together with the gradients and the loss whose backward()
produced them, and rebinds each parameter to its new node (Tensor.assign: the wire has no
in-place write yet). The old nodes die with their last Python reference and are released on
the daemon, so a loop of any length runs in flat memory.

Values that change every step (the learning rate, the step number from which the daemon computes
Adam's and LAMB's bias corrections) travel as small buffers rather than constants, so every step
runs the same kernels.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..dtype import dtypes
from ..graph import GRAPH, trace_watch
from ..ops import ADAM_STEP, LAMB_STEP, LARS_UPDATE, MUON_STEP, SGD_UPDATE, Composite
from ..tensor import Tensor, take_pending_losses, untracked


def _dedup(xs: Iterable[Tensor]) -> List[Tensor]:
  seen, out = set(), []
  for x in xs:
    if id(x) not in seen:
      seen.add(id(x))
      out.append(x)
  return out


class _Scalar:
  """A float that reaches the graph as a 0-d float32 buffer, re-sent only when it changes, on the
  device of the parameters it updates (a kernel reads one device)."""

  def __init__(self, value: float, device: str = "CPU"):
    self.value, self._t, self.device = float(value), None, device

  def set(self, value: float) -> None:
    if float(value) != self.value:
      self.value, self._t = float(value), None

  def tensor(self) -> Tensor:
    if self._t is None or (self._t._node.sent and self._t._node.gen != _graph_gen()):
      self._t = Tensor(self._data(), device=self.device)
    return self._t

  def _data(self) -> np.ndarray:
    return np.float32(self.value)


class _Constants(_Scalar):
  """Fixed float64 values an update reads (Muon's Newton-Schulz coefficients): one 1-D buffer sent
  once, like a _Scalar, so a compiled step keeps it as an input it never has to feed."""

  def __init__(self, values: Sequence[float], device: str = "CPU"):
    super().__init__(0.0, device)
    self.value = tuple(float(v) for v in values)

  def _data(self) -> np.ndarray:
    return np.array(self.value, dtype=np.float64)


def _graph_gen() -> int:
  return GRAPH.gen


class Optimizer:
  """Base class: `params` with requires_grad (None becomes True) are optimized; the others (e.g.
  BatchNorm running statistics) are realized with each step as `buffers`."""

  def __init__(self, params: Iterable[Tensor], lr: float):
    params = list(params)
    for x in params:
      if x.requires_grad is None and dtypes.is_float(x.dtype):
        x.requires_grad = True
    self.params: List[Tensor] = _dedup(x for x in params if x.requires_grad)
    self.buffers: List[Tensor] = _dedup(x for x in params if not x.requires_grad)
    if not self.params:
      raise ValueError("optimizer got no parameters that require grad")
    devices = sorted({x.device for x in self.params})
    if len(devices) > 1:
      raise ValueError(f"optimizer parameters live on {' and '.join(devices)}: move them to one device (Tensor.to) "
                       f"before making the optimizer")
    self.device = devices[0]  # where its scalars and state live
    self._lr = _Scalar(lr, self.device)
    self.steps = 0  # steps taken (torch's `step` state)

  @property
  def lr(self) -> float:
    return self._lr.value

  @lr.setter
  def lr(self, value: float) -> None:
    self._lr.set(value)

  def zero_grad(self) -> None:
    for p in self.params:
      p.grad = None

  def step(self) -> None:
    """Update every parameter that has a gradient, in one Realize request."""
    Tensor.realize(*self.schedule_step())

  # tinygrad's contract, opt-in: step() outside `Tensor.training` raises AssertionError. Off by
  # default because the seed API (and torch) let an optimizer step whatever the mode; the
  # tinygrad alias package turns it on.
  require_training = False

  def schedule_step(self) -> List[Tensor]:
    """Build the update lazily (parameters rebound to their new values) and return everything the
    step should realize: parameters, buffers, optimizer state, gradients, pending losses."""
    if Optimizer.require_training and not Tensor.training:
      raise AssertionError(f"Tensor.training={Tensor.training}, Tensor.training must be enabled to use the optimizer "
                           "(Optimizer.require_training is set). Set Tensor.training = True or step inside "
                           "`with Tensor.train():`.")
    watch = trace_watch()
    if watch is not None:
      watch.stepping(self)
    self.steps += 1
    with untracked():
      state = self._step()
    grads = [p.grad for p in self.params if p.grad is not None]
    for gr in grads:  # a gradient the step consumed keeps no history once realized (torch's default)
      gr._node.rg = False
    return [*self.params, *self.buffers, *state, *grads, *take_pending_losses()]

  def _step(self) -> List[Tensor]:
    raise NotImplementedError

  def state_tensors(self) -> Dict[str, Tensor]:
    """The optimizer's state as named tensors (for get_state_dict / safe_save)."""
    return {}


class SGD(Optimizer):
  """torch.optim.SGD: weight decay adds wd*p to the gradient; momentum keeps b = m*b + g (b = g
  at the first step); nesterov uses g + m*b; then p -= lr * update."""

  def __init__(self, params: Iterable[Tensor], lr: float = 0.01, momentum: float = 0.0,
               weight_decay: float = 0.0, nesterov: bool = False):
    super().__init__(params, lr)
    if nesterov and momentum <= 0:
      raise ValueError("nesterov momentum needs momentum > 0")
    self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
    self.b = [Tensor.zeros(*t.shape, dtype=_state_dtype(t)) for t in self.params] if momentum else []

  _update_op = SGD_UPDATE

  def _rule(self) -> Composite:
    return Composite(momentum=float(self.momentum), weight_decay=float(self.wd), nesterov=bool(self.nesterov))

  def _operands(self) -> List[Tensor]:
    """Sources of the update op between the learning rate and the momentum buffer."""
    return []

  def _step(self) -> List[Tensor]:
    lr, rule, operands = self._lr.tensor(), self._rule(), self._operands()
    for i, t in enumerate(self.params):
      if t.grad is not None:
        state = [self.b[i]] if self.momentum else []
        _apply(self._update_op, rule, [t, t.grad, lr, *operands, *state], [(t, "param"), *((b, "m") for b in state)])
    return list(self.b)

  def state_tensors(self) -> Dict[str, Tensor]:
    return {f"momentum_buffer.{i}": b for i, b in enumerate(self.b)}


class Adam(Optimizer):
  """torch.optim.Adam (weight_decay is L2: wd*p added to the gradient). `betas` or tinygrad's
  b1/b2 may be given."""

  decoupled = False

  def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: Tuple[float, float] = (0.9, 0.999),
               eps: float = 1e-8, weight_decay: float = 0.0, b1: Optional[float] = None,
               b2: Optional[float] = None):
    super().__init__(params, lr)
    self.b1 = betas[0] if b1 is None else b1
    self.b2 = betas[1] if b2 is None else b2
    self.eps, self.wd = eps, weight_decay
    self.m = [Tensor.zeros(*t.shape, dtype=_state_dtype(t)) for t in self.params]
    self.v = [Tensor.zeros(*t.shape, dtype=_state_dtype(t)) for t in self.params]
    self._count = _Scalar(0, self.device)  # the step number, from which the daemon computes the bias corrections

  def _step(self) -> List[Tensor]:
    self._count.set(self.steps)
    scalars = [self._lr.tensor(), self._count.tensor()]
    rule = Composite(beta1=float(self.b1), beta2=float(self.b2), eps=float(self.eps), weight_decay=float(self.wd),
                     decoupled=self.decoupled)
    for i, t in enumerate(self.params):
      if t.grad is not None:
        _apply(ADAM_STEP, rule, [t, t.grad, self.m[i], self.v[i], *scalars],
               [(t, "param"), (self.m[i], "m"), (self.v[i], "v")])
    return [*self.m, *self.v]

  def state_tensors(self) -> Dict[str, Tensor]:
    return {**{f"exp_avg.{i}": m for i, m in enumerate(self.m)},
            **{f"exp_avg_sq.{i}": v for i, v in enumerate(self.v)}}


class AdamW(Adam):
  """torch.optim.AdamW: decoupled weight decay, p *= 1 - lr*wd before the Adam update."""

  decoupled = True

  def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: Tuple[float, float] = (0.9, 0.999),
               eps: float = 1e-8, weight_decay: float = 0.01, b1: Optional[float] = None,
               b2: Optional[float] = None):
    super().__init__(params, lr, betas, eps, weight_decay, b1, b2)


class LAMB(Optimizer):
  """tinygrad's LAMB: the Adam direction plus wd*p, scaled per parameter by the trust ratio
  ||p|| / ||update|| (1 where either norm is 0)."""

  def __init__(self, params: Iterable[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-6, weight_decay: float = 0.0):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
    self.m = [Tensor.zeros(*t.shape, dtype=_state_dtype(t)) for t in self.params]
    self.v = [Tensor.zeros(*t.shape, dtype=_state_dtype(t)) for t in self.params]
    self._count = _Scalar(0, self.device)  # the step number, from which the daemon computes the bias corrections

  def _step(self) -> List[Tensor]:
    self._count.set(self.steps)
    scalars = [self._lr.tensor(), self._count.tensor()]
    rule = Composite(beta1=float(self.b1), beta2=float(self.b2), eps=float(self.eps), weight_decay=float(self.wd))
    for i, t in enumerate(self.params):
      if t.grad is not None:
        _apply(LAMB_STEP, rule, [t, t.grad, self.m[i], self.v[i], *scalars],
               [(t, "param"), (self.m[i], "m"), (self.v[i], "v")])
    return [*self.m, *self.v]

  def state_tensors(self) -> Dict[str, Tensor]:
    return {**{f"m.{i}": m for i, m in enumerate(self.m)}, **{f"v.{i}": v for i, v in enumerate(self.v)}}


class LARS(SGD):
  """Layer-wise adaptive rate scaling (tinygrad's LARS, You et al. 2017): the gradient plus wd*p,
  scaled per parameter by the trust ratio tcoef*||p|| / (||g|| + wd*||p||) (1 where a norm is
  0), with momentum b = m*b + g (nesterov: g + m*b). `classic` applies lr*ratio before the
  momentum, otherwise after it; p -= the result (the daemon's LARS_UPDATE). tcoef=0 is plain SGD."""

  def __init__(self, params: Iterable[Tensor], lr: float = 0.001, momentum: float = 0.9,
               weight_decay: float = 1e-4, nesterov: bool = False, classic: bool = True, tcoef: float = 0.001):
    if momentum < 0 or weight_decay < 0:
      raise ValueError(f"LARS: momentum {momentum} and weight_decay {weight_decay} must be >= 0")
    super().__init__(params, lr, momentum, weight_decay, nesterov)
    self.classic, self.tcoef = classic, tcoef

  _update_op = LARS_UPDATE

  def _rule(self) -> Composite:
    return dataclasses.replace(super()._rule(), trust_coefficient=float(self.tcoef),
                               classic_momentum=bool(self.classic))


class Muon(SGD):
  """Muon (Jordan et al. 2024; tinygrad's Muon): nesterov momentum of the raw gradient, each
  parameter's direction reshaped to (rows, rest) and orthogonalized by `ns_steps` Newton-Schulz
  iterations with `ns_coefficients` (as Tensor.newton_schulz), then p = p * (1 - lr*wd) - lr * it:
  the daemon's MUON_STEP. The decay is decoupled and applied after the momentum, as Muon is
  described; tinygrad's code computes that decayed value but updates from the undecayed one, so
  with weight_decay > 0 the two differ by lr*wd*p per step."""

  def __init__(self, params: Iterable[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1,
               ns_steps: int = 5, ns_coefficients: Sequence[float] = (3.4445, -4.775, 2.0315), nesterov: bool = True):
    if momentum < 0 or weight_decay < 0:
      raise ValueError(f"Muon: momentum {momentum} and weight_decay {weight_decay} must be >= 0")
    super().__init__(params, lr, momentum, weight_decay, nesterov)
    if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or not 1 <= ns_steps <= 64:
      raise ValueError(f"Muon: ns_steps must be 1 to 64, got {ns_steps!r}")
    self.ns_coefficients = tuple(float(c) for c in ns_coefficients)
    if not 1 <= len(self.ns_coefficients) <= 16:
      raise ValueError(f"Muon takes 1 to 16 ns_coefficients, got {len(self.ns_coefficients)}")
    self._coefficients = _Constants(self.ns_coefficients, self.device)
    for t in self.params:
      if t.ndim < 2:
        raise ValueError(f"Muon orthogonalizes matrices: a parameter of shape {t.shape} needs another optimizer "
                         "(e.g. AdamW for biases and norms)")
    self.ns_steps = ns_steps

  _update_op = MUON_STEP

  def _rule(self) -> Composite:
    return dataclasses.replace(super()._rule(), n=self.ns_steps, eps=1e-7)

  def _operands(self) -> List[Tensor]:
    return [self._coefficients.tensor()]


def _apply(op: int, rule: Composite, srcs: Sequence[Tensor], outputs) -> None:
  """One update rule of the daemon (core/frontend/optimizers.h) for one parameter: a node per value
  the step writes, each (tensor, output) rebound to its node once all are built from the old
  values."""
  new = [Tensor._make(op, t.dtype, t.shape, srcs, dataclasses.replace(rule, mode=out)) for t, out in outputs]
  for (t, _), x in zip(outputs, new):
    t.assign(x)


def _state_dtype(t: Tensor):
  """Optimizer state is kept in float32 for float16/bfloat16 parameters."""
  return dtypes.float32 if t.dtype in (dtypes.float16, dtypes.bfloat16) else t.dtype


# --- learning-rate schedulers (torch's closed forms) ------------------------------------------------

class LRScheduler:
  """Sets optimizer.lr from the number of step() calls so far (`last_epoch`), like torch: the
  constructor sets the initial rate, each step() advances one epoch/iteration."""

  def __init__(self, optimizer: Optimizer):
    self.optimizer = optimizer
    self.base_lr = optimizer.lr
    self.last_epoch = 0
    self.optimizer.lr = self.get_lr()

  def get_lr(self) -> float:
    raise NotImplementedError

  def get_last_lr(self) -> List[float]:
    return [self.optimizer.lr]

  def step(self) -> None:
    self.last_epoch += 1
    self.optimizer.lr = self.get_lr()


class StepLR(LRScheduler):
  """lr = base * gamma ** (epoch // step_size)."""

  def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
    self.step_size, self.gamma = step_size, gamma
    super().__init__(optimizer)

  def get_lr(self) -> float:
    return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepLR(LRScheduler):
  """lr = base * gamma ** (number of milestones passed)."""

  def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1):
    self.milestones, self.gamma = sorted(milestones), gamma
    super().__init__(optimizer)

  def get_lr(self) -> float:
    return self.base_lr * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch)


class CosineAnnealingLR(LRScheduler):
  """lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

  def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):  # noqa: N803 - torch's name
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer)

  def get_lr(self) -> float:
    return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
  """torch.optim.lr_scheduler.LinearLR: the factor goes linearly from start_factor to end_factor
  over total_iters steps, then stays."""

  def __init__(self, optimizer: Optimizer, start_factor: float = 1 / 3, end_factor: float = 1.0,
               total_iters: int = 5):
    self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
    super().__init__(optimizer)

  def get_lr(self) -> float:
    t = min(self.last_epoch, self.total_iters)
    return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters)


class LinearWarmup(LRScheduler):
  """Linear warm-up: lr = base * min(1, (step + 1) / warmup_steps), so the first step already
  uses base / warmup_steps and step warmup_steps - 1 onwards the full rate."""

  def __init__(self, optimizer: Optimizer, warmup_steps: int):
    if warmup_steps < 1:
      raise ValueError("warmup_steps must be at least 1")
    self.warmup_steps = warmup_steps
    super().__init__(optimizer)

  def get_lr(self) -> float:
    return self.base_lr * min(1.0, (self.last_epoch + 1) / self.warmup_steps)
