"""The Tensor class and what every area of it shares: the node plumbing (_make, _const), properties,
realization, autograd (requires_grad, gradient, backward, assign, no_grad) and devices.

The other modules of this package are method tables, one per area (movement.py, reduce.py, ...):
each is a class decorated with @tensor_methods, whose methods are copied onto Tensor. Tensor stays
one class (isinstance, __slots__, tinygrad's flat namespace) while its methods live with their
area, and those modules import Tensor from here without this module importing them."""
from __future__ import annotations

import functools
import math
import threading
import weakref
from collections import namedtuple
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import graph as g
from ..device import Device
from ..dtype import DType, DTypeLike, dtypes, least_upper_float, np_dtype, to_dtype
from ..errors import ShapeError
from ..shape import check_shape, normalize_axis, prod
from ..variable import daemon_shape, has_symbolic, same_dims

Scalar = Union[bool, int, float]
_LOG2_E = 1.0 / math.log(2)
_LN_2 = math.log(2)


def _is_scalar(x) -> bool:
  return isinstance(x, (bool, int, float)) or (isinstance(x, np.generic) and x.shape == ())


def _py_scalar(x):
  return x.item() if isinstance(x, np.generic) else x


def _wrap_int(value: int, dt: DType) -> int:
  """An int constant wrapped into an integer dtype's range (two's complement, as numpy does)."""
  bits = 8 * dt.itemsize
  value &= (1 << bits) - 1
  if dt.kind == "i" and value >= 1 << (bits - 1):
    value -= 1 << bits
  return value


def _to_wire_array(arr: np.ndarray, dt: DType) -> np.ndarray:
  """A C-contiguous little-endian copy of `arr` in dtype `dt` (bfloat16 as rounded raw uint16)."""
  if dt == dtypes.bfloat16:
    f = np.array(arr, dtype=np.float32, order="C", copy=True)
    # 1-D while shifting: a 0-d uint64 becomes a numpy scalar, and scalar uint64 >> int is float.
    u = f.reshape(-1).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    nan = np.isnan(f.reshape(-1))
    if nan.any():
      rounded[nan] = 0x7FC0
    return rounded.reshape(f.shape)
  return np.array(arr, dtype=np_dtype(dt), order="C", copy=True)


def _infer_list_dtype(arr: np.ndarray) -> DType:
  k = arr.dtype.kind
  if k == "b":
    return dtypes.bool
  if k in "iu":
    return dtypes.default_int
  if k == "f":
    return dtypes.default_float
  raise TypeError(f"cannot make a Tensor from a list of {arr.dtype} (nested lists of numbers only)")


# What sort, topk, cummax and cummin return: unpacks as (values, indices) like tinygrad's tuple,
# and has .values / .indices like torch's.
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


class _GradMode(threading.local):
  """Autograd switches (nesting counters), per thread: one thread's optimizer update or no_grad
  block must not stop the graph another thread builds (a compile_step traced in each) from
  being tracked."""
  no_grad = 0  # inside Tensor.no_grad: nothing is tracked, and results are stop nodes
  untracked = 0  # inside the optimizers' own updates: nothing is tracked


_grad_mode = _GradMode()


class _NoGrad:
  """`with Tensor.no_grad():`, `with Tensor.no_grad:`, `@Tensor.no_grad` or `@Tensor.no_grad()`.

  Inside, results do not require grad, and no gradient flows back through them into what they
  were computed from (the daemon realizes such a value on its own before a tracked graph uses
  it). `bool(Tensor.no_grad)` says whether it is active."""

  def __call__(self, fn: Optional[Callable] = None):
    if fn is None:
      return self

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      with self:
        return fn(*args, **kwargs)
    return wrapper

  def __enter__(self):
    _grad_mode.no_grad += 1
    return self

  def __exit__(self, *exc) -> None:
    _grad_mode.no_grad -= 1

  def __bool__(self) -> bool:
    return _grad_mode.no_grad > 0

  def __repr__(self) -> str:
    return f"Tensor.no_grad(active={bool(self)})"


class _Untracked:
  def __enter__(self):
    _grad_mode.untracked += 1

  def __exit__(self, *exc) -> None:
    _grad_mode.untracked -= 1


def untracked() -> _Untracked:
  """Internal: build graph that requires no grad (optimizer updates, running statistics)."""
  return _Untracked()


class _Training:
  def __init__(self, mode: bool):
    self.mode = mode

  def __enter__(self):
    self.prev, Tensor.training = Tensor.training, self.mode
    return self

  def __exit__(self, *exc) -> None:
    Tensor.training = self.prev

  def __call__(self, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      with _Training(self.mode):
        return fn(*args, **kwargs)
    return wrapper


# Losses whose backward() ran and that nobody realized yet: an optimizer step realizes them in
# the same request as the new parameters (their value is part of that computation anyway).
_PENDING_LOSSES: List[Tuple["weakref.ref", int]] = []  # (the loss, the session generation)


def take_pending_losses() -> List["Tensor"]:
  # A loss from an earlier session's backward() is not taken: its graph reads that session's nodes.
  out = [t for t in (r() for r, gen in _PENDING_LOSSES if gen == g.GRAPH.gen) if t is not None and not t.is_realized]
  _PENDING_LOSSES.clear()
  return out


class _View:
  """What a movement op's result is a view of: `base`, the steps (op, shape, arg) taken from it,
  and `node`, the view's node then. A tensor that was assigned since holds another node and is no
  longer the view."""
  __slots__ = ("base", "steps", "node")

  def __init__(self, base: "Tensor", steps: tuple, node: g.Node):
    self.base, self.steps, self.node = base, steps, node

  def replay(self, base: "Tensor") -> "Tensor":
    """The same steps taken from base's current node."""
    t = base
    for op, shape, arg in self.steps:
      t = t._moved(op, shape, arg)
    return t


class Tensor:
  """A lazy tensor on polygradd. Shape and dtype are known locally."""

  __slots__ = ("_node", "_rg", "grad", "_view", "_views", "__weakref__")
  __array_ufunc__ = None  # numpy defers to Tensor's reflected operators (np_array + tensor)
  training = False
  no_grad = _NoGrad()
  _seed = None
  _counter = 0
  _rng = None

  def __init__(self, data: Any = None, dtype: Optional[DTypeLike] = None, device: Optional[str] = None,
               requires_grad: Optional[bool] = None):
    self._rg = None
    self.grad: Optional[Tensor] = None
    self._view: Optional[_View] = None
    self._views: Optional[weakref.WeakSet] = None
    self._node = Tensor._node_of(data, dtype)
    if device is None and not isinstance(data, (g.Node, Tensor)):
      device = None if Device.DEFAULT == "CPU" else Device.DEFAULT  # tinygrad's Device.DEFAULT
    if device is not None:
      target = Device.require(device)
      if target != self.device:  # data lands on the CPU first; an explicit COPY moves it
        self._node = self.to(target)._node
    if requires_grad and dtype is None and not dtypes.is_float(self.dtype) and not isinstance(data, (g.Node, Tensor)):
      # Tensor([1, 2, 3], requires_grad=True): data meant to be differentiated is float (the
      # seed polygrad API); only a float tensor can have a gradient.
      self._node = self.cast(dtypes.default_float)._node
    if requires_grad is not None:
      self.requires_grad = requires_grad
    elif not isinstance(data, (g.Node, Tensor)) and dtypes.is_float(self.dtype):
      g.GRAPH.created.add(self)  # only a float tensor can be a gradient target

  @staticmethod
  def _node_of(data: Any, dtype: Optional[DTypeLike]) -> g.Node:
    dt = to_dtype(dtype) if dtype is not None else None
    if isinstance(data, g.Node):
      return data
    if isinstance(data, Tensor):
      return (data.cast(dt) if dt is not None else data)._node
    if data is None:
      data = np.zeros((0,), dtype=np.float32) if dt is None else np.zeros((0,), dtype=np.float64)
    if _is_scalar(data) and not isinstance(data, np.generic):
      dt = dt or dtypes.from_py(data)
      return g.GRAPH.node(g.CONST, dt, (), (), _const_value(data, dt))
    if isinstance(data, (bytes, bytearray, memoryview)):
      arr = np.frombuffer(bytes(data), dtype=np.uint8)
      dt = dt or dtypes.uint8
    elif isinstance(data, np.ndarray) or isinstance(data, np.generic):
      arr = np.asarray(data)
      src_dt = dtypes.from_np(arr.dtype)  # TypeError for unsupported numpy dtypes
      dt = dt or src_dt
    elif isinstance(data, (list, tuple)):
      try:
        arr = np.array(data)
      except ValueError as e:
        raise ShapeError(f"cannot make a Tensor from a ragged list: {e}") from None
      if arr.dtype == object:
        raise ShapeError("cannot make a Tensor from a ragged or mixed list")
      if arr.size == 0 and arr.dtype.kind == "f":
        dt = dt or dtypes.default_float
      else:
        dt = dt or _infer_list_dtype(arr)
    else:
      raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
    if dt.kind in "iu" and arr.dtype.kind == "f" and dt.np is not None:
      arr = arr.astype(dt.np)  # float → int truncates (C semantics), as a CAST would
    shape = check_shape(tuple(int(s) for s in arr.shape))
    return g.GRAPH.node(g.BUFFER, dt, shape, (), _to_wire_array(arr, dt))

  @staticmethod
  def from_wire_array(arr: np.ndarray, dtype: DTypeLike) -> "Tensor":
    """A tensor from data already in the wire layout of `dtype` (bfloat16: raw uint16 bits)."""
    dt = to_dtype(dtype)
    want = np_dtype(dt)
    if arr.dtype.itemsize != want.itemsize:
      raise TypeError(f"{arr.dtype} data cannot hold {dt.name} values")
    arr = np.array(arr, order="C", copy=False).view(want)
    return Tensor(g.GRAPH.node(g.BUFFER, dt, check_shape(tuple(int(s) for s in arr.shape)), (), arr.copy()))

  # --- node plumbing ----------------------------------------------------------------------------

  @staticmethod
  def _make(op: int, dtype: DType, shape: Tuple[int, ...], src: Sequence["Tensor"] = (), arg=None) -> "Tensor":
    no_grad = _grad_mode.no_grad
    track = False
    if not no_grad and not _grad_mode.untracked:
      for t in src:
        if t._rg or t._node.rg:
          track = True
          break
    n = g.GRAPH.node(op, dtype, tuple(shape), tuple([t._node for t in src]), arg, track, no_grad > 0)
    t = Tensor._wrap(n)
    if track:
      t._rg = True
    return t

  @staticmethod
  def _wrap(node: g.Node) -> "Tensor":
    """Tensor(node) without __init__'s checks, which a node never needs: every op makes one."""
    t = object.__new__(Tensor)
    t._rg = None
    t.grad = None
    t._view = None
    t._views = None
    t._node = node
    return t

  def _moved(self, op: int, shape: Tuple[int, ...], arg) -> "Tensor":
    """A movement op's result (reshape, permute, expand, pad, shrink, flip): a view of self, or of
    what self is a view of, which an assign writes through (tinygrad's assign into a view)."""
    out = Tensor._make(op, self.dtype, shape, (self,), arg)
    step = ((op, shape, arg),)
    v = self._view
    if v is not None and v.node is self._node:
      out._view = _View(v.base, v.steps + step, out._node)
    else:
      out._view = _View(self, step, out._node)
    base = out._view.base
    if base._views is None:
      base._views = weakref.WeakSet()
    base._views.add(out)
    return out

  def _refresh_views(self) -> None:
    """After self took a new value: its live views read it (they alias self, as in torch and
    tinygrad: `row = t[0]; t[0] = t[1]` leaves row reading t's new row)."""
    for view in list(self._views):
      v = view._view
      if v is not None and v.base is self and v.node is view._node:
        again = v.replay(self)
        view._node, view._view = again._node, again._view

  def _write_through_view(self, x: "Tensor") -> bool:
    """assign() of a view: its base takes x where the view reads it (the daemon's WRITE_VIEW) and
    this tensor stays that view of the base. False when self is not a current view."""
    v = self._view
    if v is None or v.node is not self._node:
      return False
    if any(op == g.EXPAND for op, _, _ in v.steps):
      raise ShapeError(f"assign: this view expands its base {v.base.shape} (an element would take several "
                       "values); assign to the base or to a view without expand")
    base = v.base
    # The steps taken anew from base's node: the daemon follows them back to it, which a node of
    # the chain realized since (then a buffer there) or a base assigned since would break.
    view = v.replay(base)
    base.assign(Tensor._make(g.WRITE_VIEW, base.dtype, base.shape, (base, view, x), g.Composite()))
    return True  # base's assign made self (one of its views) read the new value

  @staticmethod
  def _const(value: Scalar, dtype: DType, shape: Tuple[int, ...] = ()) -> "Tensor":
    return Tensor._wrap(g.GRAPH.node(g.CONST, dtype, tuple(shape), (), _const_value(value, dtype)))

  def _unop(self, op: int) -> "Tensor":
    return Tensor._make(op, self.dtype, self.shape, (self,))

  def _float(self) -> "Tensor":
    return self.cast(least_upper_float(self.dtype))

  # --- properties -------------------------------------------------------------------------------

  @property
  def shape(self) -> Tuple[int, ...]:
    return self._node.shape

  @property
  def dtype(self) -> DType:
    return self._node.dtype

  @property
  def ndim(self) -> int:
    return len(self._node.shape)

  @property
  def device(self) -> str:
    """Where the tensor lives ('CPU', 'CUDA', 'CUDA:1'): where its data was placed or copied to with
    to(); a tensor computed from others lives on theirs (constants follow their consumer)."""
    if self._node.device is not None:
      return self._node.device
    name = Device.canonicalize(Device.DEFAULT)  # constants and random ops follow Device.DEFAULT
    return name[:-2] if name.endswith(":0") else name

  @property
  def node_id(self) -> int:
    """This tensor's node id in the session's graph (wire-level debugging)."""
    return self._node.id

  @property
  def is_realized(self) -> bool:
    return bool(self._node.handle)

  def numel(self) -> int:
    return prod(self.shape)

  def element_size(self) -> int:
    return self.dtype.itemsize

  def nbytes(self) -> int:
    return self.numel() * self.element_size()

  def size(self, dim: Optional[int] = None):
    return self.shape if dim is None else self.shape[normalize_axis(dim, self.ndim)]

  def __len__(self) -> int:
    if not self.shape:
      raise TypeError("len() of a 0-d tensor")
    return self.shape[0]

  def __bool__(self):
    raise TypeError("the truth value of a Tensor is not defined (call .item() or .numpy())")

  __hash__ = object.__hash__

  def __repr__(self) -> str:
    state = "realized" if self.is_realized else "lazy"
    return f"<Tensor shape={self.shape} dtype={self.dtype} device={self.device} {state}>"

  __str__ = __repr__

  # --- realization ------------------------------------------------------------------------------

  def realize(self, *others: "Tensor") -> "Tensor":
    """Compute this tensor (and `others`) on the daemon; the result stays there. Returns once
    the request is sent (asynchronous dispatch): an error is raised by the next read of data
    (numpy(), item(), tolist()) or Tensor.synchronize()."""
    g.GRAPH.realize([self._node, *(t._node for t in others)] if others else [self._node], want_data=False)
    return self

  @staticmethod
  def synchronize() -> None:
    """Waits until the daemon has run everything this process sent, and raises the first error
    among it (tinygrad's Device.synchronize)."""
    g.GRAPH.synchronize()

  def numpy(self) -> np.ndarray:
    if self.numel() == 0:
      return np.zeros(self.shape, dtype=np.float32 if self.dtype.np is None else self.dtype.np)
    return g.GRAPH.realize([self._node], want_data=True)[0]

  def item(self):
    if self.numel() != 1:
      raise ShapeError(f"item() needs a tensor of one element, shape is {self.shape}")
    return self.numpy().reshape(()).item()

  def tolist(self):
    return self.numpy().tolist()

  def data(self) -> memoryview:
    return memoryview(self.numpy())

  def contiguous(self) -> "Tensor":
    """Itself, or for a view a tensor of the same values that is not one (tinygrad's contiguous
    makes a buffer of its own: writing it leaves the view's base alone)."""
    v = self._view
    if v is None or v.node is not self._node:
      return self
    t = Tensor._wrap(self._node)
    t._rg = self._rg
    return t

  def detach(self) -> "Tensor":
    """The same values with no gradient flowing back through them. Lazy: the wire has no
    stop-gradient op, so the result is a node the client realizes on its own (one extra small
    request) before a tracked graph that depends on it is sent."""
    if not dtypes.is_float(self.dtype):
      return Tensor(self._node)
    zero = g.GRAPH.node(g.CONST, self.dtype, self.shape, (), 0.0)
    return Tensor(g.GRAPH.node(g.ADD, self.dtype, self.shape, (self._node, zero), None, stop=True))

  def clone(self) -> "Tensor":
    """A tensor of the same node; gradients flow through it to this one (as in torch)."""
    t = Tensor(self._node)
    t._rg = self._rg
    return t

  def replace(self, x: "Tensor") -> "Tensor":
    """This tensor now stands for x (tinygrad's replace): the shapes must match, the dtype
    becomes x's. Unlike assign, nothing is cast and x's history comes along."""
    if not isinstance(x, Tensor):
      raise TypeError(f"replace takes a Tensor, got {type(x).__name__}")
    if x.shape != self.shape:
      raise ShapeError(f"replace: shape {x.shape} differs from {self.shape}")
    watch = g.trace_watch()
    if watch is not None:
      watch.assigning(self)
    self._node = x._node
    return self

  def contiguous_backward(self) -> "Tensor":
    """Itself: tinygrad makes the gradient flowing back here contiguous; the daemon chooses every
    buffer's layout, so there is nothing to ask for."""
    return self

  def shard(self, devices, axis: Optional[int] = None) -> "Tensor":
    raise NotImplementedError("shard splits a tensor across several devices; polygrad's tensors live on one device "
                              "each (Tensor.to moves one) until multi-device tensors exist")

  def shard_(self, devices, axis: Optional[int] = None) -> "Tensor":
    return self.shard(devices, axis)

  def schedule_linear(self, *args, **kwargs):
    raise NotImplementedError("schedule_linear shows tinygrad's own scheduler; polygrad schedules in the daemon "
                              "(Tensor.realize runs it; POLYGRAD_DUMP_KERNELS=1 prints the kernels)")

  def linear_with_vars(self, *args, **kwargs):
    raise NotImplementedError("linear_with_vars shows tinygrad's own scheduler; polygrad schedules in the daemon "
                              "(Tensor.realize runs it; POLYGRAD_DUMP_KERNELS=1 prints the kernels)")

  # --- autograd ---------------------------------------------------------------------------------

  @property
  def requires_grad(self) -> Optional[bool]:
    return self._rg

  @requires_grad.setter
  def requires_grad(self, value: Optional[bool]) -> None:
    if value and not dtypes.is_float(self.dtype):
      raise RuntimeError(f"only float tensors can require gradients, this one is {self.dtype.name}")
    self._rg = value
    if value:
      n = self._node
      if n.op == g.CONST and not n.sent:
        # Constants are hash-consed by the daemon: an equal constant elsewhere in the graph would
        # be the same node and share this one's gradient. A leaf gets a buffer of its own.
        self._node = g.GRAPH.node(g.BUFFER, n.dtype, n.shape, (),
                                  _to_wire_array(np.full(n.shape, n.arg, np.float64), n.dtype))
      g.GRAPH.leaves.add(self)
    else:
      g.GRAPH.leaves.discard(self)

  def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
    self.requires_grad = requires_grad
    return self

  def _grad_targets(self) -> List["Tensor"]:
    """Tensors with requires_grad=True that this tensor's value depends on (not through stop
    nodes), in node order. Where there are none, tinygrad's rule: the live float tensors made
    from data or random draws whose requires_grad is unset (None, not False). Constants
    (Tensor.ones, full) are left out: the daemon merges equal ones into one node."""
    ids = {n.id for n in g.GRAPH.toposort(self._node, lambda n: n.stop)}
    found = [t for t in g.GRAPH.leaves if t._node.id in ids]
    if not found:
      found = [t for t in g.GRAPH.created if t._rg is None and t._node.id in ids and t._node.op != g.CONST
               and dtypes.is_float(t.dtype)]
    return sorted(found, key=lambda t: t._node.id)

  def gradient(self, *targets: "Tensor", gradient: Optional["Tensor"] = None) -> List["Tensor"]:
    """d(self)/d(target) for each target, as lazy tensors (more graph: a gradient of a gradient
    works). self must have one element unless `gradient` (shaped like self) is given; a target
    self does not depend on gets zeros."""
    loss = self._loss_for(gradient)
    for t in targets:
      if not isinstance(t, Tensor):
        raise TypeError(f"gradient targets must be Tensors, got {type(t).__name__}")
      if not dtypes.is_float(t.dtype):
        raise RuntimeError(f"cannot take a gradient with respect to a {t.dtype.name} tensor")
    root = loss._node  # re-lazied when sent (Graph._unsent), should parts of it be realized by then
    track = not _grad_mode.no_grad and not _grad_mode.untracked
    out = []
    for t in targets:
      n = g.GRAPH.node(g.GRADIENT, t.dtype, t.shape, (root, t._node), None, rg=track)
      gt = Tensor(n)
      gt._rg = True if track else None
      out.append(gt)
    return out

  def _loss_for(self, gradient) -> "Tensor":
    if not dtypes.is_float(self.dtype):
      raise RuntimeError(f"cannot differentiate a {self.dtype.name} tensor")
    if gradient is None:
      if self.numel() != 1:
        raise RuntimeError(f"backward()/gradient() without `gradient` needs a one-element loss, "
                           f"got shape {self.shape}")
      return self
    if not isinstance(gradient, Tensor):
      gradient = Tensor(gradient, dtype=self.dtype)
    if gradient.shape != self.shape:
      raise ShapeError(f"gradient shape {gradient.shape} differs from the tensor's shape {self.shape}")
    return self * gradient

  def backward(self, gradient: Optional["Tensor"] = None, retain_graph: Optional[bool] = None) -> "Tensor":
    """Lazily add d(self)/d(leaf) to `.grad` of every tensor with requires_grad=True that self
    depends on (tinygrad/torch accumulation: grad = old + new). Nothing runs until a gradient
    (or an optimizer step) is realized; `self.item()` works before or after."""
    targets = self._grad_targets()
    if not targets:
      raise RuntimeError("backward(): the loss depends on no tensor with requires_grad=True, nor on a float "
                         "tensor made from data or a random draw with requires_grad left unset")
    grads = self.gradient(*targets, gradient=gradient)
    done = {}
    for t, gr in zip(targets, grads):
      gr = done.setdefault(t._node.id, gr)  # tensors sharing one node share its gradient
      t.grad = gr if t.grad is None else t.grad + gr
    if len(_PENDING_LOSSES) >= 64:
      _PENDING_LOSSES[:] = [(r, gen) for r, gen in _PENDING_LOSSES if r() is not None][-32:]
    _PENDING_LOSSES.append((weakref.ref(self), g.GRAPH.gen))
    return self

  def assign(self, x) -> "Tensor":
    """Make this tensor stand for x's values (lazily; a number fills it): the Python object, its
    requires_grad and grad stay. A view (a movement op's result) writes its base, whose views
    then read the new value; inside a TinyJit or compile_step the write is the step's assign."""
    if not isinstance(x, Tensor):
      x = Tensor(x, dtype=self.dtype)
      if x.ndim == 0 and self.ndim:
        x = x._broadcast_to(self.shape)
    if not same_dims(x.shape, self.shape):
      # A value with a symbolic dim over a concrete tensor of its largest size: its valid part.
      if has_symbolic(self.shape) or not has_symbolic(x.shape) or daemon_shape(x.shape) != self.shape:
        raise ShapeError(f"assign: shape {x.shape} differs from {self.shape}")
      if g.trace_watch() is None:
        raise ShapeError(f"assign: a value with a symbolic dim ({x.shape}) is written (its valid part) only by a "
                         "TinyJit or compile_step, not eagerly")
    if x.dtype != self.dtype:
      x = x.cast(self.dtype)
    if x is not self and x in g.GRAPH.leaves:
      # Another gradient leaf: take a copy, so the two tensors do not become one gradient target.
      with untracked():
        x = x + 0
    elif self in g.GRAPH.leaves and x._node.rg:
      # A gradient leaf takes x's value, not its history (torch updates a leaf in place under
      # no_grad; tinygrad writes into the leaf's buffer): later gradients stop at this leaf
      # anyway, and a realized tracked value keeps the graph behind it (Node.keep), so a
      # hand-written `w.assign(w.detach() - lr * w.grad)` loop would carry every earlier step.
      x = x.detach()
    if self._write_through_view(x):
      return self
    watch = g.trace_watch()
    if watch is not None:
      watch.assigning(self)
    self._node = x._node
    if self._views:
      self._refresh_views()
    return self

  @staticmethod
  def train(mode: bool = True) -> _Training:
    """`with Tensor.train():` (or a decorator): Tensor.training is `mode` inside."""
    return _Training(mode)

  @staticmethod
  def test() -> _Training:
    return _Training(False)

  def to(self, device: Optional[str] = None) -> "Tensor":
    """This tensor on `device`: itself when it is there already, else an explicit COPY node (a
    transfer the daemon runs between kernels; gradients pass through it). Raises
    PolygradDeviceError quoting the daemon's reason when it lacks the device or lists it as
    unavailable."""
    target = Device.require(device)
    if target == self.device:
      return self
    return Tensor._make(g.COPY, self.dtype, self.shape, (self,), g.Composite(device=target))

  def to_(self, device: Optional[str] = None) -> "Tensor":
    return self.to(device)

  def cpu(self) -> "Tensor":
    return self.to("CPU")

  def cuda(self) -> "Tensor":
    return self.to("CUDA")

  # --- in-place ops: assign() of the result (the tensor object keeps its identity) ---------------

  def __iadd__(self, x): return self.assign(self + x)
  def __isub__(self, x): return self.assign(self - x)
  def __imul__(self, x): return self.assign(self * x)
  def __itruediv__(self, x): return self.assign(self / x)
  def __ipow__(self, x): return self.assign(self ** x)
  def __imatmul__(self, x): return self.assign(self @ x)


def _const_value(value, dt: DType):
  value = _py_scalar(value)
  if dt.kind in "iu":
    if isinstance(value, float):
      if not math.isfinite(value):
        raise ShapeError(f"cannot make an {dt.name} constant from {value}")
      value = int(value)
    return _wrap_int(int(value), dt)
  if dt.kind == "b":
    return bool(value)
  return float(value)


# Names every class has: not methods of an area.
_NOT_METHODS = frozenset(vars(type("Area", (), {})))


def tensor_methods(area: type) -> type:
  """Class decorator of an area's method table (tensor/*.py): copies its methods, properties and
  class attributes onto Tensor. A name defined twice is an error rather than a silent override."""
  for name, value in vars(area).items():
    # Defining __eq__ sets a class's __hash__ to None; Tensor keeps object's (above).
    if name in _NOT_METHODS or name == "__hash__":
      continue
    if name in vars(Tensor):
      raise TypeError(f"Tensor.{name} is defined by {area.__name__} and before it")
    for fn in (value, getattr(value, "__func__", None), getattr(value, "fget", None), getattr(value, "fset", None)):
      if callable(fn) and hasattr(fn, "__qualname__") and fn.__qualname__.startswith(area.__name__ + "."):
        fn.__qualname__ = "Tensor" + fn.__qualname__[len(area.__name__):]  # tracebacks and help() say Tensor.x
    setattr(Tensor, name, value)
  return area
