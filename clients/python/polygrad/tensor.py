"""The lazy Tensor (tinygrad names and semantics). Methods only add nodes to the local graph;
realize()/numpy()/item()/tolist() send the graph to polygradd and bring results back.

The wire's elementwise ops take equal shapes and equal dtypes, so this module does broadcasting
(RESHAPE then EXPAND) and dtype promotion (CAST, tinygrad's lattice) itself."""
from __future__ import annotations

import dataclasses
import functools
import math
import time
import weakref
from collections import namedtuple
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import graph as g
from .errors import AxisError, ShapeError
from .dtype import (DType, DTypeLike, dtypes, least_upper_dtype, least_upper_float, np_dtype,
                    sum_acc_dtype, to_dtype)
from .shape import (as_shape, broadcast_shape, check_permutation, check_shape, normalize_axes,
                    normalize_axis, normalize_pairs, prod, resolve_expand, resolve_reshape)

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


class _GradMode:
  """Process-wide autograd switches (nesting counters)."""
  no_grad = 0  # inside Tensor.no_grad: nothing is tracked, and results are stop nodes
  untracked = 0  # inside the optimizers' own updates: nothing is tracked


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
    _GradMode.no_grad += 1
    return self

  def __exit__(self, *exc) -> None:
    _GradMode.no_grad -= 1

  def __bool__(self) -> bool:
    return _GradMode.no_grad > 0

  def __repr__(self) -> str:
    return f"Tensor.no_grad(active={bool(self)})"


class _Untracked:
  def __enter__(self):
    _GradMode.untracked += 1

  def __exit__(self, *exc) -> None:
    _GradMode.untracked -= 1


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
_PENDING_LOSSES: List["weakref.ref"] = []


def take_pending_losses() -> List["Tensor"]:
  out = [t for t in (r() for r in _PENDING_LOSSES) if t is not None and not t.is_realized]
  _PENDING_LOSSES.clear()
  return out


class Tensor:
  """A lazy tensor on polygradd. Shape and dtype are known locally."""

  __slots__ = ("_node", "_rg", "grad", "__weakref__")
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
    self._node = Tensor._node_of(data, dtype)
    if device is None and not isinstance(data, (g.Node, Tensor)):
      from .device import Device
      device = None if Device.DEFAULT == "CPU" else Device.DEFAULT  # tinygrad's Device.DEFAULT
    if device is not None:
      target = _require_device(device)
      if target != self.device:  # data lands on the CPU first; an explicit COPY moves it
        self._node = self.to(target)._node
    if requires_grad and dtype is None and not dtypes.is_float(self.dtype) and not isinstance(data, (g.Node, Tensor)):
      # Tensor([1, 2, 3], requires_grad=True): data meant to be differentiated is float (the
      # seed polygrad API); only a float tensor can have a gradient.
      self._node = self.cast(dtypes.default_float)._node
    if requires_grad is not None:
      self.requires_grad = requires_grad

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
    track = (not _GradMode.no_grad and not _GradMode.untracked
             and any(t._rg or t._node.rg for t in src))
    n = g.GRAPH.node(op, dtype, tuple(shape), tuple(t._node for t in src), arg, rg=track,
                     stop=_GradMode.no_grad > 0)
    t = Tensor(n)
    if track:
      t._rg = True
    return t

  @staticmethod
  def _const(value: Scalar, dtype: DType, shape: Tuple[int, ...] = ()) -> "Tensor":
    return Tensor(g.GRAPH.node(g.CONST, dtype, tuple(shape), (), _const_value(value, dtype)))

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
    from .device import Device
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
    """Compute this tensor (and `others`) on the daemon; the result stays there."""
    g.GRAPH.realize([self._node, *(t._node for t in others)], want_data=False)
    return self

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
    return self

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

  @staticmethod
  def from_blob(ptr: int, shape: Tuple[int, ...], dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """A tensor of the `prod(shape)` elements of `dtype` at address `ptr` in this process (e.g. a
    ctypes buffer or another library's array), copied when created: the memory need not outlive
    the call, and must hold that many bytes (nothing can check it)."""
    import ctypes
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    shape = as_shape(shape)
    if not isinstance(ptr, int) or ptr <= 0:
      raise ShapeError(f"from_blob needs a nonzero address, got {ptr!r}")
    wire = np_dtype(dt)
    raw = (ctypes.c_char * (prod(shape) * wire.itemsize)).from_address(ptr)
    arr = np.frombuffer(bytes(raw), dtype=wire).reshape(shape)
    return Tensor.from_wire_array(arr, dt) if dt == dtypes.bfloat16 else Tensor(arr, dtype=dt, **kwargs)

  @staticmethod
  def from_url(url: str, gunzip: bool = False, **kwargs) -> "Tensor":
    """The bytes at an http(s) URL as a uint8 tensor (gunzip: decompressed first), as tinygrad."""
    import gzip
    import urllib.parse
    import urllib.request
    if urllib.parse.urlparse(url).scheme not in ("http", "https"):
      raise ShapeError(f"from_url reads http:// and https:// URLs, got {url[:100]!r}")
    with urllib.request.urlopen(url, timeout=kwargs.pop("timeout", 60)) as r:
      data = r.read()
    if gunzip:
      data = gzip.decompress(data)
    return Tensor(np.frombuffer(data, dtype=np.uint8).copy(), dtype=dtypes.uint8, **kwargs)

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
    nodes), in node order."""
    ids = {n.id for n in g.GRAPH.toposort(self._node, lambda n: n.stop)}
    found = [t for t in g.GRAPH.leaves if t._node.id in ids]
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
    track = not _GradMode.no_grad and not _GradMode.untracked
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
      raise RuntimeError("backward(): the loss does not depend on any tensor with requires_grad=True")
    grads = self.gradient(*targets, gradient=gradient)
    done = {}
    for t, gr in zip(targets, grads):
      gr = done.setdefault(t._node.id, gr)  # tensors sharing one node share its gradient
      t.grad = gr if t.grad is None else t.grad + gr
    if len(_PENDING_LOSSES) >= 64:
      _PENDING_LOSSES[:] = [r for r in _PENDING_LOSSES if r() is not None][-32:]
    _PENDING_LOSSES.append(weakref.ref(self))
    return self

  def assign(self, x) -> "Tensor":
    """Make this tensor stand for x's values (lazily). The wire has no in-place write yet, so this
    rebinds the tensor to x's node; the Python object, its requires_grad and grad stay."""
    if not isinstance(x, Tensor):
      x = Tensor(x, dtype=self.dtype)
    if x.shape != self.shape:
      raise ShapeError(f"assign: shape {x.shape} differs from {self.shape}")
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
    self._node = x._node
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
    target = _require_device(device)
    if target == self.device:
      return self
    return Tensor._make(g.COPY, self.dtype, self.shape, (self,), g.Composite(device=target))

  def to_(self, device: Optional[str] = None) -> "Tensor":
    return self.to(device)

  def cpu(self) -> "Tensor":
    return self.to("CPU")

  def cuda(self) -> "Tensor":
    return self.to("CUDA")

  # --- construction -----------------------------------------------------------------------------

  @staticmethod
  def full(shape, fill_value: Scalar, dtype: Optional[DTypeLike] = None,
           requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    _require_device(kwargs.get("device"))
    shape = check_shape(as_shape((shape,) if isinstance(shape, int) else tuple(shape)))
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(_py_scalar(fill_value))
    t = Tensor._const(_py_scalar(fill_value), dt, shape)
    if requires_grad is not None:
      t.requires_grad = requires_grad
    return t

  @staticmethod
  def zeros(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(as_shape(shape), 0.0, dtype=dtype or dtypes.default_float, **kwargs)

  @staticmethod
  def ones(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(as_shape(shape), 1.0, dtype=dtype or dtypes.default_float, **kwargs)

  @staticmethod
  def empty(*shape, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.zeros(*shape, dtype=dtype, **kwargs)

  def full_like(self, fill_value: Scalar, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor.full(self.shape, fill_value, dtype=dtype or self.dtype, **kwargs)

  def zeros_like(self, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return self.full_like(0, dtype, **kwargs)

  def ones_like(self, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return self.full_like(1, dtype, **kwargs)

  @staticmethod
  def arange(start, stop=None, step=1, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """start, start + step, ... up to (not including) stop: the daemon's ARANGE times step plus
    start (computed in the result dtype, or in the default float for a float step into ints)."""
    _require_device(kwargs.get("device"))
    if stop is None:
      start, stop = 0, start
    for v in (start, stop, step):
      if isinstance(v, bool) or not isinstance(_py_scalar(v), (int, float)):
        raise ShapeError(f"arange takes int or float bounds, got {v!r}")
    start, stop, step = (_py_scalar(v) for v in (start, stop, step))
    if step == 0:
      raise ShapeError("arange: step must not be zero")
    if not all(math.isfinite(v) for v in (start, stop, step)):
      raise ShapeError(f"arange bounds must be finite, got {(start, stop, step)}")
    if dtype is None:
      dtype = dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) \
          else dtypes.default_int
      # Integer bounds past int32 need int64 (torch's default); the default int would wrap.
      if dtype == dtypes.default_int and not all(dtypes.min(dtype) <= v <= dtypes.max(dtype)
                                                 for v in (start, stop - step, step)):
        dtype = dtypes.int64
    dt = to_dtype(dtype)
    if dt == dtypes.bool:
      raise ShapeError("arange cannot make a bool tensor")
    n = max(0, math.ceil((stop - start) / step))
    if n == 0:
      return Tensor(np.zeros((0,), dtype=np.float64), dtype=dt)
    all_int = all(isinstance(v, int) for v in (start, stop, step))
    calc = dt if (dtypes.is_float(dt) or all_int) else dtypes.default_float
    x = Tensor._make(g.ARANGE, calc, check_shape((n,)), (), (n,))
    if step != 1:
      x = x * Tensor._const(step, calc)
    if start != 0:
      x = x + Tensor._const(start, calc)
    return x.cast(dt)

  @staticmethod
  def linspace(start, stop, steps: int, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor(np.linspace(start, stop, steps, dtype=np.float64), dtype=dtype or dtypes.default_float,
                  device=kwargs.get("device"))

  @staticmethod
  def eye(n: int, m: Optional[int] = None, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    return Tensor(np.eye(n, m if m is not None else n), dtype=dtype or dtypes.default_float,
                  device=kwargs.get("device"))

  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Seeds rand/randn/randint/dropout (computed on the device from (seed, call counter): the
    same seed gives the same numbers in every client language) and the client's generator that
    the initializers (uniform, kaiming_*, glorot_uniform) draw from."""
    Tensor._seed = int(seed) % (1 << 64)
    Tensor._counter = 0
    Tensor._rng = np.random.default_rng(seed)

  @staticmethod
  def _random_key() -> Tuple[int, int]:
    """(seed, counter) for the next device random op: each call gets a stream of its own."""
    if Tensor._seed is None:
      Tensor._seed = int(time.time()) % (1 << 64)  # tinygrad's default: unseeded runs differ
    counter = Tensor._counter
    Tensor._counter = (counter + 1) % (1 << 32)
    return Tensor._seed, counter

  @staticmethod
  def _random(op: int, shape, dtype: DType, **fields) -> "Tensor":
    seed, counter = Tensor._random_key()
    shape = check_shape(as_shape(shape))
    return Tensor(g.GRAPH.node(op, dtype, shape, (), g.Composite(shape=shape, seed=seed, counter=counter, **fields)))

  @staticmethod
  def _generator() -> np.random.Generator:
    if Tensor._rng is None:
      Tensor._rng = np.random.default_rng(Tensor._seed)
    return Tensor._rng

  # rand/randn/randint/dropout are computed on the device (the daemon's RAND, RANDN, RANDINT,
  # DROPOUT) from Tensor.manual_seed's seed and a per-call counter; nothing travels as data.

  @staticmethod
  def _random_float(op: int, name: str, shape, dtype, requires_grad, kwargs) -> "Tensor":
    _require_device(kwargs.get("device"))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt):
      raise TypeError(f"{name} makes float tensors, got {dt.name}")
    t = Tensor._random(op, shape, dt)
    if requires_grad is not None:
      t.requires_grad = requires_grad
    return t

  @staticmethod
  def rand(*shape, dtype: Optional[DTypeLike] = None, requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Uniform in [0, 1), computed on the device."""
    return Tensor._random_float(g.RAND, "rand", shape, dtype, requires_grad, kwargs)

  @staticmethod
  def randn(*shape, dtype: Optional[DTypeLike] = None, requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Standard normal, computed on the device."""
    return Tensor._random_float(g.RANDN, "randn", shape, dtype, requires_grad, kwargs)

  @staticmethod
  def normal(*shape, mean: float = 0.0, std: float = 1.0, dtype: Optional[DTypeLike] = None,
             requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    """Normal with `mean` and `std` (randn scaled and shifted on the device)."""
    with untracked():
      t = Tensor.randn(*shape, dtype=dtype, **kwargs) * std + mean
    if requires_grad is not None:
      t.requires_grad = requires_grad
    return t

  @staticmethod
  def randint(*shape, low: int = 0, high: int = 10, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """Integers uniform in [low, high), computed on the device."""
    _require_device(kwargs.get("device"))
    dt = to_dtype(dtype) if dtype is not None else dtypes.int32
    if not dtypes.is_int(dt):
      raise TypeError(f"randint makes integer tensors, got {dt.name}")
    low, high = int(low), int(high)
    if high <= low:
      raise ShapeError(f"randint needs low < high, got [{low}, {high})")
    if high - low > 1 << 32 or not dtypes.min(dt) <= low <= high - 1 <= dtypes.max(dt):
      raise ShapeError(f"randint range [{low}, {high}) does not fit {dt.name} (or spans more than 2^32)")
    return Tensor._random(g.RANDINT, shape, dt, low=low, high=high)

  @staticmethod
  def uniform(*shape, low: float = 0.0, high: float = 1.0, dtype: Optional[DTypeLike] = None,
              requires_grad: Optional[bool] = None, **kwargs) -> "Tensor":
    _require_device(kwargs.get("device"))
    vals = Tensor._generator().uniform(low, high, as_shape(shape))
    return Tensor(vals.astype(np.float32), dtype=dtype or dtypes.default_float, requires_grad=requires_grad)

  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> "Tensor":
    """uniform(-1, 1) scaled by 1/sqrt(numel) (tinygrad)."""
    shape = as_shape(shape)
    return Tensor.uniform(*shape, low=-prod(shape) ** -0.5, high=prod(shape) ** -0.5, **kwargs)

  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> "Tensor":
    """Glorot/Xavier uniform: bound sqrt(6 / (shape[0] + prod(shape[1:]))) (tinygrad)."""
    shape = as_shape(shape)
    bound = math.sqrt(6 / (shape[0] + prod(shape[1:])))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> "Tensor":
    shape = as_shape(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kwargs) -> "Tensor":
    shape = as_shape(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return Tensor(Tensor._generator().standard_normal(shape).astype(np.float32) * np.float32(std), **kwargs)

  @staticmethod
  def randperm(n: int, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    """A random permutation of 0..n-1: the positions that sort n uniform draws (the daemon's
    RAND and SORT, so every client draws the same permutation from one seed)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
      raise ShapeError(f"randperm needs a count n >= 0, got {n!r}")
    perm = Tensor.rand(n, **kwargs).argsort()
    return perm if dtype is None else perm.cast(to_dtype(dtype))

  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> "Tensor":
    """Class indices (int32) drawn from the weights along the last axis of a 1-D or 2-D tensor,
    on the daemon (its MULTINOMIAL, seeded like rand): with replacement by inverting the running
    distribution at uniform draws; without, the largest of log(weight) plus Gumbel noise, so
    num_samples is at most the number of classes."""
    if self.ndim not in (1, 2):
      raise ShapeError(f"multinomial takes a 1-D or 2-D tensor of weights, got shape {self.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
      raise ShapeError(f"multinomial: num_samples must be an int >= 1, got {num_samples!r}")
    n = self.shape[-1]
    if n == 0:
      raise ShapeError("multinomial: no classes to draw from")
    if not replacement and num_samples > n:
      raise ShapeError(f"multinomial: {num_samples} samples without replacement from {n} classes")
    seed, counter = Tensor._random_key()
    shape = self.shape[:-1] + (num_samples,)
    return Tensor._make(g.MULTINOMIAL, dtypes.int32, shape, (self,),
                        g.Composite(n=num_samples, replacement=bool(replacement), seed=seed, counter=counter))

  def rand_like(self, **kwargs) -> "Tensor":
    return Tensor.rand(*self.shape, dtype=kwargs.pop("dtype", self.dtype), **kwargs)

  def randn_like(self, **kwargs) -> "Tensor":
    return Tensor.randn(*self.shape, dtype=kwargs.pop("dtype", self.dtype), **kwargs)

  # --- movement ---------------------------------------------------------------------------------

  def reshape(self, shape, *args) -> "Tensor":
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    new = resolve_reshape(self.shape, [None if s is None else int(s) for s in new])
    if new == self.shape:
      return self
    return Tensor._make(g.RESHAPE, self.dtype, new, (self,), new)

  view = reshape

  def permute(self, order, *args) -> "Tensor":
    order = (order,) + args if args or not isinstance(order, (tuple, list)) else tuple(order)
    order = check_permutation(order, self.ndim)
    if order == tuple(range(self.ndim)):
      return self
    return Tensor._make(g.PERMUTE, self.dtype, tuple(self.shape[i] for i in order), (self,), order)

  def transpose(self, dim0: int = -2, dim1: int = -1) -> "Tensor":
    order = list(range(self.ndim))
    a, b = normalize_axis(dim0, self.ndim), normalize_axis(dim1, self.ndim)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> "Tensor":
    return self.transpose() if self.ndim >= 2 else self

  def expand(self, shape, *args) -> "Tensor":
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    new = resolve_expand(self.shape, [None if s is None else int(s) for s in new])
    return self._broadcast_to(new)

  def _broadcast_to(self, shape: Tuple[int, ...]) -> "Tensor":
    if self.shape == shape:
      return self
    x = self
    if x.ndim < len(shape):
      x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    resolve_expand(x.shape, shape)  # raises for incompatible shapes
    if x.shape == shape:
      return x
    return Tensor._make(g.EXPAND, x.dtype, shape, (x,), tuple(shape))

  def _pad_from_edges(self, pairs, mode: str) -> "Tensor":
    x = self
    for axis, (b, a) in enumerate(pairs):
      if b == 0 and a == 0:
        continue
      n = x.shape[axis]
      limit = n - 1 if mode == "reflect" else n
      if mode != "replicate" and (b > limit or a > limit):
        raise ShapeError(f"pad: {mode} padding of ({b}, {a}) on axis {axis} of size {n} needs amounts "
                         f"{'below' if mode == 'reflect' else 'at most'} the size")
      if n == 0:
        raise ShapeError(f"pad: {mode} padding of an empty axis {axis}")

      def part(lo: int, hi: int) -> "Tensor":
        return x.shrink(tuple((lo, hi) if i == axis else (0, d) for i, d in enumerate(x.shape)))

      def edge(lo: int, count: int) -> "Tensor":
        one = part(lo, lo + 1)
        return one.expand(*[count if i == axis else d for i, d in enumerate(one.shape)])

      if mode == "reflect":
        left, right = part(1, b + 1).flip(axis), part(n - 1 - a, n - 1).flip(axis)
      elif mode == "replicate":
        left, right = edge(0, b), edge(n - 1, a)
      else:
        left, right = part(n - b, n), part(0, a)
      x = Tensor.cat(*[t for t, k in ((left, b), (x, 1), (right, a)) if k], dim=axis)
    return x

  def pad(self, padding, mode: str = "constant", value: Scalar = 0) -> "Tensor":
    """padding: one (before, after) pair or None per axis, or a flat torch-style sequence
    (last axis first). Negative amounts shrink. mode: 'constant' (value), or torch's 'reflect'
    (mirrored without the edge; an amount must be smaller than the axis), 'replicate' (the edge
    repeated) and 'circular' (wrapped around; at most the axis), built from slices of x."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise ShapeError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    padding = tuple(padding)
    if padding and all(isinstance(p, int) for p in padding):
      if len(padding) % 2 or len(padding) > 2 * self.ndim:
        raise ShapeError(f"pad: flat padding needs an even count ≤ 2*ndim, got {len(padding)}")
      flat = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
      padding = ((0, 0),) * (self.ndim - len(flat)) + tuple(flat)
    pairs = normalize_pairs(padding, self.shape, "pad", lambda s: (0, 0))
    # Negative amounts shrink first.
    x = self
    if any(b < 0 or a < 0 for b, a in pairs):
      shr = []
      for (b, a), s in zip(pairs, self.shape):
        lo, hi = max(0, -b), s - max(0, -a)
        if lo > hi:
          raise ShapeError(f"pad: {padding} removes more than the whole axis of size {s}")
        shr.append((lo, hi))
      x = x.shrink(shr)
      pairs = tuple((max(0, b), max(0, a)) for b, a in pairs)
    if all(b == 0 and a == 0 for b, a in pairs):
      return x
    if mode != "constant":
      return x._pad_from_edges(pairs, mode)
    shape = tuple(s + b + a for s, (b, a) in zip(x.shape, pairs))
    out = Tensor._make(g.PAD, x.dtype, shape, (x,), pairs)
    if value != 0:
      mask = Tensor._make(g.PAD, dtypes.bool, shape, (Tensor._const(True, dtypes.bool, x.shape),), pairs)
      out = mask.where(out, value)
    return out

  def shrink(self, arg) -> "Tensor":
    pairs = normalize_pairs(arg, self.shape, "shrink", lambda s: (0, s))
    for (b, e), s in zip(pairs, self.shape):
      if not 0 <= b <= e <= s:
        raise ShapeError(f"shrink: ({b}, {e}) is out of range for an axis of size {s}")
    if all(b == 0 and e == s for (b, e), s in zip(pairs, self.shape)):
      return self
    return Tensor._make(g.SHRINK, self.dtype, tuple(e - b for b, e in pairs), (self,), pairs)

  def flip(self, axis, *args) -> "Tensor":
    axis = (axis,) + args if args or not isinstance(axis, (tuple, list)) else tuple(axis)
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self
    return Tensor._make(g.FLIP, self.dtype, self.shape, (self,), axes)

  def squeeze(self, dim: Optional[int] = None) -> "Tensor":
    if dim is None:
      return self.reshape(tuple(s for s in self.shape if s != 1))
    d = normalize_axis(dim, self.ndim)
    if self.ndim == 0 or self.shape[d] != 1:
      return self
    return self.reshape(self.shape[:d] + self.shape[d + 1:])

  def unsqueeze(self, dim: int) -> "Tensor":
    d = normalize_axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
    if self.ndim == 0:
      return self.reshape(1)
    s, e = normalize_axis(start_dim, self.ndim), normalize_axis(end_dim, self.ndim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  def unflatten(self, dim: int, sizes) -> "Tensor":
    d = normalize_axis(dim, self.ndim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

  def repeat(self, repeats, *args) -> "Tensor":
    reps = as_shape((repeats,) + args if args or not isinstance(repeats, (tuple, list)) else tuple(repeats))
    if len(reps) < self.ndim:
      raise ShapeError(f"repeat: need at least {self.ndim} repeat counts, got {len(reps)}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(d for s in base for d in (1, s)))
    x = x.expand(tuple(d for r, s in zip(reps, base) for d in (r, s)))
    return x.reshape(tuple(r * s for r, s in zip(reps, base)))

  def interpolate(self, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> "Tensor":
    """Resizes the last len(size) axes (tinygrad's interpolate; torch's F.interpolate on the
    spatial axes): mode 'linear' (separable: torch's linear, bilinear, trilinear; integers become
    float32), 'nearest' or 'nearest-exact'. The daemon's INTERPOLATE: sampling positions from
    the shapes, values gathered and blended there. Differentiable."""
    size = tuple(size)
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise ShapeError(f"interpolate: mode must be 'linear', 'nearest' or 'nearest-exact', got {mode!r}")
    if not size or len(size) > self.ndim or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in size):
      raise ShapeError(f"interpolate: size {size} must be 1 to {self.ndim} positive ints for a tensor of shape {self.shape}")
    lead = self.ndim - len(size)
    if 0 in self.shape[lead:]:
      raise ShapeError(f"interpolate: cannot resize the empty axes of shape {self.shape}")
    dt = self.dtype if mode != "linear" or dtypes.is_float(self.dtype) else dtypes.float32
    return Tensor._make(g.INTERPOLATE, dt, self.shape[:lead] + size, (self,),
                        g.Composite(shape=size, mode=mode, align_corners=bool(align_corners)))

  def unfold(self, dim: int, size: int, step: int) -> "Tensor":
    """torch's unfold: the windows of `size` elements every `step` along `dim`, that axis becoming
    the window count and a new last axis the window (the daemon's UNFOLD, a view). A 0-d tensor
    gives the (size,) window of its element, as torch."""
    ax = _axis_of(dim, max(self.ndim, 1), "unfold")
    n = self.shape[ax] if self.ndim else 1
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= n:
      raise ShapeError(f"unfold: size {size!r} must be an int from 0 to {n} (the size of dim {dim})")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
      raise ShapeError(f"unfold: step must be an int >= 1, got {step!r}")
    count = (n - size) // step + 1
    shape = self.shape[:ax] + (count,) + self.shape[ax + 1:] + (size,) if self.ndim else (size,)
    return Tensor._make(g.UNFOLD, self.dtype, shape, (self,), g.Composite(axes=(ax,), n=size, step=step))

  def nonzero(self) -> "Tensor":
    """The (count, ndim) int32 positions of the nonzero elements, in row-major order. The count is
    data: it is realized first (one round trip), then the daemon's NONZERO computes the positions."""
    count = int((self != 0).cast(dtypes.int32).sum().item())
    return Tensor._make(g.NONZERO, dtypes.int32, (count, self.ndim), (self,), g.Composite(n=count))

  def masked_select(self, mask: "Tensor") -> "Tensor":
    """The elements where `mask` (broadcast to this shape) is true, flattened in row-major order;
    the count is realized first, as in nonzero."""
    x, m = self._broadcasted(mask if isinstance(mask, Tensor) else Tensor(mask), match_dtype=False)
    flat_x, flat_m = x.reshape(-1), m.cast(dtypes.bool).reshape(-1)
    idx = flat_m.nonzero().reshape(-1)
    return flat_x.gather(0, idx) if idx.shape[0] else Tensor.zeros(0, dtype=self.dtype)

  def cat(self, *others: "Tensor", dim: int = 0) -> "Tensor":
    tensors = [self, *others]
    d = normalize_axis(dim, self.ndim)
    for t in tensors:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ShapeError(f"cat: shapes {[t.shape for t in tensors]} differ outside axis {d}")
    dt = least_upper_dtype(*[t.dtype for t in tensors])
    total = sum(t.shape[d] for t in tensors)
    out, off = None, 0
    for t in tensors:
      pads = [(0, 0)] * self.ndim
      pads[d] = (off, total - off - t.shape[d])
      p = t.cast(dt).pad(pads)
      out = p if out is None else out + p
      off += t.shape[d]
    return out

  def split(self, sizes, dim: int = 0) -> List["Tensor"]:
    """Pieces of `sizes` along dim (an int: pieces of that size, the last one smaller)."""
    d = normalize_axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0:
        raise ShapeError("split size must be positive")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n:
      raise ShapeError(f"split sizes {list(sizes)} do not add up to {n}")
    out, off = [], 0
    for sz in sizes:
      pairs = [(0, s) for s in self.shape]
      pairs[d] = (off, off + sz)
      out.append(self.shrink(pairs))
      off += sz
    return out

  def chunk(self, chunks: int, dim: int = 0) -> List["Tensor"]:
    n = self.shape[normalize_axis(dim, self.ndim)]
    return self.split(max(1, -(-n // chunks)), dim)

  def roll(self, shifts, dims=None) -> "Tensor":
    """torch.roll: shifted along each of dims, wrapping around; dims=None rolls the flattened tensor."""
    if dims is None:
      return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
      raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    x = self
    for s, d in zip(shifts, dims):
      d = normalize_axis(d, x.ndim)
      n = x.shape[d]
      k = int(s) % n if n else 0
      if k:
        head, tail = x.split([n - k, k], d)
        x = tail.cat(head, dim=d)
    return x

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> "Tensor":
    """torch.diagonal: the elements (i, i + offset) of the planes of dim1 and dim2, as a new last axis."""
    d1, d2 = normalize_axis(dim1, self.ndim), normalize_axis(dim2, self.ndim)
    if d1 == d2:
      raise ValueError(f"diagonal: dim1 and dim2 are both axis {d1}")
    x = self.permute(tuple(i for i in range(self.ndim) if i not in (d1, d2)) + (d1, d2))
    batch, (r, c) = x.shape[:-2], x.shape[-2:]
    lo_r, lo_c = min(r, max(0, -offset)), min(c, max(0, offset))
    n = max(0, min(r - lo_r, c - lo_c))
    keep = [(0, s) for s in batch]
    x = x.shrink(keep + [(lo_r, lo_r + n), (lo_c, lo_c + n)])
    # The n x n block read with a row stride of n + 1 walks its diagonal.
    x = x.reshape(batch + (n * n,)).pad([(0, 0)] * len(batch) + [(0, n)]).reshape(batch + (n, n + 1))
    return x.shrink(keep + [(0, n), (0, 1)]).reshape(batch + (n,))

  def diag(self, diagonal: int = 0) -> "Tensor":
    """torch.diag: a 1-D tensor's values on a diagonal of a square matrix, or a matrix's diagonal."""
    if self.ndim == 2:
      return self.diagonal(diagonal)
    if self.ndim != 1:
      raise ValueError(f"diag takes a 1-D or 2-D tensor, got {self.ndim}-D")
    n, k = self.shape[0], abs(diagonal)
    # diagonal()'s walk backwards: each value followed by n zeros, read as n x n.
    x = self.reshape(n, 1).pad([(0, 0), (0, n)]).reshape(n * (n + 1)).shrink([(0, n * n)]).reshape(n, n)
    return x.pad([(0, k), (k, 0)] if diagonal >= 0 else [(k, 0), (0, k)])

  def meshgrid(self, *args: "Tensor", indexing: str = "ij") -> Tuple["Tensor", ...]:
    """Grids of self and args (1-D each), one per input, shaped by all their lengths (indexing
    "xy" swaps the first two axes of that shape, as torch and numpy)."""
    if indexing not in ("ij", "xy"):
      raise ValueError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [t.reshape(-1) for t in (self, *args)]
    if indexing == "xy" and len(ts) > 1:
      grids = ts[1].meshgrid(ts[0], *ts[2:], indexing="ij")
      return (grids[1], grids[0], *grids[2:])
    shape = tuple(t.shape[0] for t in ts)
    return tuple(t.reshape(tuple(n if j == i else 1 for j, n in enumerate(shape))).expand(shape)
                 for i, t in enumerate(ts))

  def repeat_interleave(self, repeats: int, dim: Optional[int] = None) -> "Tensor":
    """Each element `repeats` times in a row along dim (None: of the flattened tensor). The count is
    an int, as in tinygrad: per-element tensor counts would make the shape depend on the data."""
    if isinstance(repeats, bool) or not isinstance(_py_scalar(repeats), int) or repeats < 0:
      raise TypeError(f"repeat_interleave takes a count >= 0 (an int), got {repeats!r}")
    x, d = (self.flatten(), 0) if dim is None else (self, normalize_axis(dim, self.ndim))
    x = x.unsqueeze(d + 1)
    return x.expand(x.shape[:d + 1] + (int(repeats),) + x.shape[d + 2:]).flatten(d, d + 1)

  def masked_fill(self, mask, value) -> "Tensor":
    """self with `value` where the bool mask (broadcasting to self's shape) is true."""
    mask = mask if isinstance(mask, Tensor) else Tensor(mask)
    if broadcast_shape(mask.shape, self.shape) != self.shape:
      raise ValueError(f"masked_fill: a mask of shape {mask.shape} does not broadcast to {self.shape}")
    return mask.where(value, self)

  @staticmethod
  def stack(tensor: "Tensor", *others: "Tensor", dim: int = 0) -> "Tensor":
    if isinstance(tensor, (list, tuple)):
      tensor, others = tensor[0], tuple(tensor[1:]) + others
    d = normalize_axis(dim, tensor.ndim + 1)
    return Tensor.cat(*[t.unsqueeze(d) for t in (tensor, *others)], dim=d)

  def __getitem__(self, idx) -> "Tensor":
    idx = self._expand_ellipsis(idx if isinstance(idx, tuple) else (idx,))
    if any(isinstance(i, (Tensor, list, np.ndarray)) for i in idx):
      return self._index_with_tensor(idx)
    x, axis, final = self, 0, []
    for i in idx:
      if i is None:
        final.append(1)
      elif isinstance(i, slice):
        x, n = x._slice_axis(axis, i)
        final.append(n)
        axis += 1
      else:
        x = x._select(axis, i)
    return x.reshape(tuple(final))

  def _expand_ellipsis(self, idx: tuple) -> tuple:
    """`idx` with its ellipsis (or an implied trailing one) replaced by full slices."""
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
      raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim:
      raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")
    if n_ell == 0:
      idx = idx + (Ellipsis,)
    pos = idx.index(Ellipsis)
    return idx[:pos] + (slice(None),) * (self.ndim - n_real) + idx[pos + 1:]

  def _index_with_tensor(self, idx: tuple) -> "Tensor":
    """Advanced indexing as torch does it: integer index tensors (or lists/arrays), mixed with
    ints, slices, None and an ellipsis. Ints drop their axis first (numpy would instead broadcast
    them with the tensors, which moves the result axes when an int separates them from a slice).
    The index tensors broadcast to one shape B; B replaces the indexed axes where they are
    adjacent, and comes first when a slice separates them. Negative indices count from the end; an index
    still out of range selects zeros (no error can come back from a lazy graph). Built as
    one_hot(flat index) @ x over the indexed axes flattened, so it is differentiable."""
    # Basic entries first (slices, None); the advanced ones keep their axis in the result `x`.
    x = self if dtypes.is_float(self.dtype) or dtypes.is_int(self.dtype) else self.cast(dtypes.int32)
    axis, adv = 0, []
    for i in idx:
      if i is None:
        x = x.unsqueeze(axis)
      elif isinstance(i, slice):
        x, _ = x._slice_axis(axis, i)
      elif isinstance(i, (Tensor, list, np.ndarray)):
        adv.append((axis, self._index_tensor(i, x.shape[axis])))
      else:  # an int drops its axis first, as in torch (numpy would broadcast it with the tensors)
        x = x._select(axis, i)
        continue
      axis += 1
    axes = [a for a, _ in adv]
    sizes = [x.shape[a] for a in axes]
    rest = [d for d in range(x.ndim) if d not in axes]
    b_shape = broadcast_shape(*[t.shape for _, t in adv])
    # One flat index over the indexed axes (row-major); -1 where any index is out of range.
    flat, valid, stride = None, None, 1
    for (_, t), n in reversed(list(zip(adv, sizes))):
      term = t * stride if stride != 1 else t
      flat = term if flat is None else flat + term
      ok = (t >= 0) & (t < n)
      valid = ok if valid is None else valid & ok
      stride *= n
    out_rest = tuple(x.shape[d] for d in rest)
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if stride == 0:  # an indexed axis is empty: every index is out of range
      p = axes[0] if adjacent else 0
      return Tensor.zeros(out_rest[:p] + b_shape + out_rest[p:], dtype=self.dtype)
    flat = valid.where(flat, -1)._broadcast_to(b_shape)
    moved = x.permute(axes + rest)
    rows = moved.reshape(stride, -1)
    picked = flat.reshape(-1).one_hot(stride).cast(rows.dtype) @ rows
    out = picked.reshape(b_shape + out_rest)
    nb = len(b_shape)
    if adjacent:  # B goes where the indexed axes were
      p = axes[0]
      out = out.permute(list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim)))
    return out.cast(self.dtype)

  def _select(self, axis: int, i) -> "Tensor":
    """x[..., i, ...] for an int i on `axis`: that axis removed."""
    size = self.shape[axis]
    i = _py_scalar(i)
    if isinstance(i, bool) or not isinstance(i, int):
      raise TypeError(f"unsupported index type {type(i).__name__}")
    if not -size <= i < size:
      raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
    i = i + size if i < 0 else i
    pairs = [(0, s) for s in self.shape]
    pairs[axis] = (i, i + 1)
    return self.shrink(pairs).reshape(self.shape[:axis] + self.shape[axis + 1:])

  @staticmethod
  def _index_tensor(i, size: int) -> "Tensor":
    """One index tensor (or list/array) as int32 with negative entries wrapped."""
    index = i if isinstance(i, Tensor) else Tensor(np.asarray(i))
    if index.dtype == dtypes.bool:
      raise IndexError("boolean mask indexing gives a data-dependent shape, which a lazy graph cannot have; "
                       "use mask.where(x, 0) or realize the mask and index with np.nonzero")
    if not dtypes.is_int(index.dtype):
      raise IndexError(f"tensor indices must be integers, got {index.dtype.name}")
    index = index.cast(dtypes.int32)
    return (index < 0).where(index + size, index)

  def _slice_axis(self, axis: int, sl: slice) -> Tuple["Tensor", int]:
    size = self.shape[axis]
    start, stop, step = sl.indices(size)
    x = self
    if step < 0:
      x = x.flip(axis)
      start, stop, step = size - 1 - start, size - 1 - stop, -step
    n = max(0, -(-(stop - start) // step))
    pairs = [(0, s) for s in x.shape]
    if n == 0:
      pairs[axis] = (0, 0)
      return x.shrink(pairs), 0
    if step == 1:
      pairs[axis] = (start, start + n)
      return x.shrink(pairs), n
    end = min(size, start + n * step)
    pairs[axis] = (start, end)
    x = x.shrink(pairs)
    pads = [(0, 0)] * x.ndim
    pads[axis] = (0, n * step - (end - start))
    x = x.pad(pads)
    x = x.reshape(x.shape[:axis] + (n, step) + x.shape[axis + 1:])
    pairs = [(0, s) for s in x.shape]
    pairs[axis + 1] = (0, 1)
    x = x.shrink(pairs)
    return x.reshape(x.shape[:axis] + (n,) + x.shape[axis + 2:]), n

  # --- dtype ------------------------------------------------------------------------------------

  def cast(self, dtype: DTypeLike) -> "Tensor":
    dt = to_dtype(dtype)
    if dt == self.dtype:
      return self
    if self._node.op == g.CONST and not self._node.sent and (dt.kind == "f" or math.isfinite(self._node.arg)):
      return Tensor._const(self._node.arg, dt, self.shape)  # fold: a constant of the new dtype
    return Tensor._make(g.CAST, dt, self.shape, (self,))

  def bitcast(self, dtype: DTypeLike) -> "Tensor":
    """Each element's bits read as `dtype` (torch's ``view(dtype)``, tinygrad's ``bitcast``),
    exact on every bit pattern, NaN payloads included. Between integers it wraps like a cast;
    int8/uint8 read as bool is ``x != 0``. A differing itemsize regroups the bytes of the last
    axis (little-endian): its size is multiplied by the ratio, or divided by it, which it must be
    a multiple of; any layout works. No gradient passes it (as in torch), so the result does not
    require grad."""
    dt = to_dtype(dtype)
    if dt == self.dtype:
      return self
    shape, a, b = self.shape, self.dtype.itemsize, dt.itemsize
    if a != b:
      what = f"bitcast from {self.dtype.name} ({a} bytes) to {dt.name} ({b} bytes)"
      if not shape:
        raise ShapeError(f"{what} of a 0-d tensor: differing itemsizes need a last axis")
      if b > a and shape[-1] % (b // a):
        raise ShapeError(f"{what}: the last axis ({shape[-1]}) must be a multiple of {b // a}")
      shape = shape[:-1] + (shape[-1] * a // b,)
    return Tensor(g.GRAPH.node(g.BITCAST, dt, shape, (self._node,), None))

  def float(self) -> "Tensor":
    return self.cast(dtypes.float32)

  def half(self) -> "Tensor":
    return self.cast(dtypes.float16)

  def int(self) -> "Tensor":
    return self.cast(dtypes.int32)

  def bool(self) -> "Tensor":
    return self.cast(dtypes.bool)

  def long(self) -> "Tensor":
    return self.cast(dtypes.int64)

  def short(self) -> "Tensor":
    return self.cast(dtypes.int16)

  def bfloat16(self) -> "Tensor":
    return self.cast(dtypes.bfloat16)

  def is_floating_point(self) -> bool:
    return dtypes.is_float(self.dtype)

  def double(self) -> "Tensor":
    return self.cast(dtypes.float64)

  # --- broadcasting and binary ops --------------------------------------------------------------

  def _operand(self, y) -> "Tensor":
    """A non-Tensor operand as a Tensor, with tinygrad's scalar dtype rule."""
    if isinstance(y, Tensor):
      return y
    if _is_scalar(y):
      y = _py_scalar(y)
      if dtypes.is_float(self.dtype) or (dtypes.is_int(self.dtype) and isinstance(y, int)):
        ydt = self.dtype
      else:
        ydt = dtypes.from_py(y)
      return Tensor._const(y, ydt, self.shape)
    if isinstance(y, (list, tuple, np.ndarray)):
      return Tensor(y)
    raise TypeError(f"unsupported operand type {type(y).__name__} for a Tensor op")

  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True) -> Tuple["Tensor", "Tensor"]:
    x, y = self, self._operand(y)
    if match_dtype and x.dtype != y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(out), y.cast(out)
    if reverse:
      x, y = y, x
    shape = broadcast_shape(x.shape, y.shape)
    return x._broadcast_to(shape), y._broadcast_to(shape)

  def _binop(self, op: int, y, reverse: bool = False) -> "Tensor":
    a, b = self._broadcasted(y, reverse)
    return Tensor._make(op, a.dtype, a.shape, (a, b))

  def add(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.ADD, x, reverse)

  def sub(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.SUB, x, reverse)

  def mul(self, x, reverse: bool = False) -> "Tensor":
    return self._binop(g.MUL, x, reverse)

  def div(self, x, reverse: bool = False, rounding_mode: Optional[str] = None) -> "Tensor":
    """True division; integer operands divide in float32 (tinygrad). torch's rounding_mode:
    'trunc' rounds toward zero, 'floor' toward negative infinity (integers stay integers)."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "floor":
      return a.floor_divide(b)
    if rounding_mode == "trunc":
      return a.idiv(b) if not dtypes.is_float(a.dtype) else a.div(b).trunc()
    if rounding_mode is not None:
      raise ShapeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = a._float(), b._float()
    return Tensor._make(g.DIV, a.dtype, a.shape, (a, b))

  def maximum(self, x) -> "Tensor":
    return self._binop(g.MAX, x)

  def minimum(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return Tensor._make(g.MAX, a.dtype, a.shape, (a._inverse(), b._inverse()))._inverse()

  def _inverse(self) -> "Tensor":
    """An order-reversing map of the dtype onto itself: -x, max-x (unsigned), not x (bool)."""
    if self.dtype == dtypes.bool:
      return self.logical_not()
    if dtypes.is_unsigned(self.dtype):
      return Tensor._make(g.SUB, self.dtype, self.shape, (Tensor._const(dtypes.max(self.dtype), self.dtype, self.shape), self))
    return self._unop(g.NEG)

  __add__ = add
  __sub__ = sub
  __mul__ = mul
  __truediv__ = div

  def __radd__(self, x):
    return self.add(x, True)

  def __rsub__(self, x):
    return self.sub(x, True)

  def __rmul__(self, x):
    return self.mul(x, True)

  def __rtruediv__(self, x):
    return self.div(x, True)

  def __neg__(self) -> "Tensor":
    return self.logical_not() if self.dtype == dtypes.bool else self._unop(g.NEG)

  def neg(self) -> "Tensor":
    return -self

  def __pow__(self, x):
    return self.pow(x)

  def __rpow__(self, x):
    return self.pow(x, reverse=True)

  def pow(self, x, reverse: bool = False) -> "Tensor":
    if not reverse and _is_scalar(x) and not isinstance(_py_scalar(x), bool) and \
        float(_py_scalar(x)).is_integer() and abs(x) <= 64:
      n = int(_py_scalar(x))
      base = self if isinstance(_py_scalar(x), int) else self._float()
      if n < 0:
        base, n = base._float().reciprocal(), -n
      out = base.ones_like() if n == 0 else None
      sq = base
      while n:
        if n & 1:
          out = sq if out is None else out * sq
        n >>= 1
        if n:
          sq = sq * sq
      return out
    # The daemon's POW (tinygrad's semantics): 2 ** (y * log2|x|), negative bases keep the sign
    # for odd integer exponents and give nan for non-integer ones, x ** 0 = 1.
    a, b = self._broadcasted(x, reverse)
    a, b = a._float(), b._float()
    return Tensor._make(g.POW, a.dtype, a.shape, (a, b))

  def _trunc(self) -> "Tensor":
    if not dtypes.is_float(self.dtype):
      return self
    return self.cast(dtypes.int64).cast(self.dtype)

  def trunc(self) -> "Tensor":
    return self._trunc()

  def floor(self) -> "Tensor":
    t = self._trunc()
    return (self < t).where(t - 1, t)

  def ceil(self) -> "Tensor":
    t = self._trunc()
    return (self > t).where(t + 1, t)

  # --- comparisons ------------------------------------------------------------------------------

  def __lt__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return Tensor._make(g.CMPLT, dtypes.bool, a.shape, (a, b))

  def __gt__(self, x) -> "Tensor":
    a, b = self._broadcasted(x, reverse=True)
    return Tensor._make(g.CMPLT, dtypes.bool, a.shape, (a, b))

  def __ne__(self, x) -> "Tensor":  # type: ignore[override]
    if not isinstance(x, Tensor) and not _is_scalar(x) and not isinstance(x, (list, tuple, np.ndarray)):
      return NotImplemented
    a, b = self._broadcasted(x)
    return Tensor._make(g.CMPNE, dtypes.bool, a.shape, (a, b))

  def __eq__(self, x) -> "Tensor":  # type: ignore[override]
    ne = self.__ne__(x)
    return ne if ne is NotImplemented else ne.logical_not()

  def __ge__(self, x) -> "Tensor":
    return (self < x).logical_not()

  def __le__(self, x) -> "Tensor":
    return (self > x).logical_not()

  def lt(self, x): return self < x
  def gt(self, x): return self > x
  def le(self, x): return self <= x
  def ge(self, x): return self >= x
  def eq(self, x): return self == x
  def ne(self, x): return self != x

  def logical_not(self) -> "Tensor":
    b = self.cast(dtypes.bool)
    return Tensor._make(g.CMPNE, dtypes.bool, b.shape, (b, Tensor._const(True, dtypes.bool, b.shape)))

  def __invert__(self) -> "Tensor":
    return self.bitwise_not()

  def __and__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return b.where(a, False) if a.dtype == dtypes.bool else a._int_binop(g.AND, "&", b)

  def __or__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return b.where(True, a) if a.dtype == dtypes.bool else a._int_binop(g.OR, "|", b)

  def __xor__(self, x) -> "Tensor":
    a, b = self._broadcasted(x)
    return a != b if a.dtype == dtypes.bool else a._int_binop(g.XOR, "^", b)

  __rand__ = __and__
  __ror__ = __or__
  __rxor__ = __xor__
  bitwise_and = __and__
  bitwise_or = __or__
  bitwise_xor = __xor__

  def bitwise_not(self) -> "Tensor":
    """~x: logical not of a bool, every bit flipped in an integer."""
    if self.dtype == dtypes.bool:
      return self.logical_not()
    ones = dtypes.max(self.dtype) if dtypes.is_unsigned(self.dtype) else -1
    return self._int_binop(g.XOR, "~", Tensor._const(ones, self.dtype, self.shape))

  def _int_binop(self, op: int, name: str, y: "Tensor") -> "Tensor":
    """An integer-only ALU op on two tensors already broadcast to one dtype and shape."""
    if not dtypes.is_int(self.dtype):
      raise TypeError(f"{name} needs integer tensors, got {self.dtype.name}")
    return Tensor._make(op, self.dtype, self.shape, (self, y))

  def idiv(self, x, reverse: bool = False) -> "Tensor":
    """Integer division truncating toward zero (C, tinygrad's idiv); x / 0 gives 0."""
    a, b = self._broadcasted(x, reverse)
    return a._int_binop(g.IDIV, "idiv", b)

  def fmod(self, x, reverse: bool = False) -> "Tensor":
    """Remainder with the dividend's sign (torch.fmod): a - trunc(a / b) * b; x % 0 gives 0 for integers."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      return a - (a / b).trunc() * b
    return a._int_binop(g.MOD, "fmod", b)

  def floor_divide(self, x, reverse: bool = False) -> "Tensor":
    """a // b rounded toward negative infinity, as Python and torch do; integer x // 0 gives 0."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      return (a / b).floor()
    q = a._int_binop(g.IDIV, "//", b)
    if dtypes.is_unsigned(a.dtype):
      return q
    return q - Tensor._make(g.MOD, a.dtype, a.shape, (a, b))._off_floor(b).cast(a.dtype)

  def remainder(self, x, reverse: bool = False) -> "Tensor":
    """a % b with the divisor's sign, as Python and torch do; integer x % 0 gives 0."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      return a - (a / b).floor() * b
    r = a._int_binop(g.MOD, "%", b)
    return r if dtypes.is_unsigned(a.dtype) else r._off_floor(b).where(r + b, r)

  def _off_floor(self, b: "Tensor") -> "Tensor":
    """For a truncating remainder `self` of a divisor b: where the truncated quotient is one
    above the floored one (a nonzero remainder whose sign differs from b's)."""
    return (self != 0) & ((self < 0) != (b < 0))

  def lshift(self, n) -> "Tensor":
    """x << n for an integer tensor: x * 2**n, wrapping. n: an int, or an integer tensor of
    shifts in [0, bits) broadcasting with x."""
    if isinstance(n, Tensor):
      return self._tensor_shift(n, "<<")
    return self.mul(self._shift_amount(n, "<<"))

  def _tensor_shift(self, n: "Tensor", name: str) -> "Tensor":
    """x << n or x >> n by a tensor of amounts: 2**n made exactly in float64 (n < bits <= 64), the
    top bit as the dtype's minimum (2**(bits-1) does not fit a signed type)."""
    if not dtypes.is_int(self.dtype) or not dtypes.is_int(n.dtype):
      raise TypeError(f"{name} by a tensor needs integer tensors, got {self.dtype.name} and {n.dtype.name}")
    x, amounts = self._broadcasted(n)
    x, amounts = x.cast(self.dtype), amounts.cast(dtypes.int64)
    bits = 8 * self.dtype.itemsize
    top = amounts == bits - 1
    low = top.where(0, amounts)
    power = (low.cast(dtypes.float64) * 1.0).exp2().cast(self.dtype)
    if not dtypes.is_unsigned(self.dtype):
      power = top.where(dtypes.min(self.dtype), power)
    else:
      power = top.where(Tensor._const(1 << (bits - 1), self.dtype, x.shape), power)
    if name == "<<":
      return x * power
    if dtypes.is_unsigned(self.dtype):
      return x.floor_divide(power)
    # a signed shift by bits-1 is the sign: floor division by the (negative) minimum would not be
    return top.where((x < 0).where(-1, 0).cast(self.dtype), x.floor_divide(top.where(1, power)))

  def rshift(self, n) -> "Tensor":
    """x >> n for an integer tensor: arithmetic (floor) for signed types, as torch does. n: an int,
    or an integer tensor of shifts in [0, bits)."""
    if isinstance(n, Tensor):
      return self._tensor_shift(n, ">>")
    amount = self._shift_amount(n, ">>")
    if dtypes.is_int(self.dtype) and not dtypes.is_unsigned(self.dtype) and n == 8 * self.dtype.itemsize - 1:
      # 2**(bits-1) does not fit the dtype (it wraps to the minimum): floor division composes,
      # so shift by bits-2, then by 1.
      return self.rshift(n - 1).floor_divide(Tensor._const(2, self.dtype, self.shape))
    return self.floor_divide(amount)

  def _shift_amount(self, n, name: str) -> "Tensor":
    if not dtypes.is_int(self.dtype):
      raise TypeError(f"{name} needs an integer tensor, got {self.dtype.name}")
    n = _py_scalar(n)
    bits = 8 * self.dtype.itemsize
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < bits:
      raise ShapeError(f"{name} takes a shift in [0, {bits}) for {self.dtype.name}, got {n!r}")
    # 2**n wraps to the dtype like the product does (2**(bits-1) is the sign bit for signed types)
    value = (1 << n) if dtypes.is_unsigned(self.dtype) or n < bits - 1 else dtypes.min(self.dtype)
    return Tensor._const(value, self.dtype, self.shape)

  __floordiv__ = floor_divide
  __mod__ = remainder
  mod = remainder
  __lshift__ = lshift
  __rshift__ = rshift

  def __rfloordiv__(self, x):
    return self.floor_divide(x, True)

  def __rmod__(self, x):
    return self.remainder(x, True)

  def where(self, x, y) -> "Tensor":
    """self is the condition: where(cond, x, y) or cond.where(x, y); scalars allowed."""
    if isinstance(x, Tensor):
      x, y = x._broadcasted(y)
    elif isinstance(y, Tensor):
      y, x = y._broadcasted(x)
    cond, x = self._broadcasted(x, match_dtype=False)
    cond, y = cond._broadcasted(y, match_dtype=False)
    x, y = x._broadcasted(y)
    shape = broadcast_shape(cond.shape, x.shape)
    cond, x, y = cond.cast(dtypes.bool)._broadcast_to(shape), x._broadcast_to(shape), y._broadcast_to(shape)
    return Tensor._make(g.WHERE, x.dtype, shape, (cond, x, y))

  # --- unary math -------------------------------------------------------------------------------

  def exp2(self) -> "Tensor":
    return self._float()._unop(g.EXP2)

  def log2(self) -> "Tensor":
    return self._float()._unop(g.LOG2)

  def exp(self) -> "Tensor":
    return self._float()._unop(g.EXP)

  def log(self) -> "Tensor":
    return self._float()._unop(g.LOG)

  def sqrt(self) -> "Tensor":
    return self._float()._unop(g.SQRT)

  def rsqrt(self) -> "Tensor":
    return self.sqrt().reciprocal()

  def reciprocal(self) -> "Tensor":
    return self._float()._unop(g.RECIPROCAL)

  def sin(self) -> "Tensor":
    return self._float()._unop(g.SIN)

  def cos(self) -> "Tensor":
    return ((math.pi / 2) - self._float()).sin()

  def tan(self) -> "Tensor":
    return self.sin() / self.cos()

  def relu(self) -> "Tensor":
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype):
      return self
    return self._unop(g.RELU)

  def relu6(self) -> "Tensor":
    return self.relu().minimum(6)

  def leaky_relu(self, neg_slope: float = 0.01) -> "Tensor":
    return (self < 0).where(self * neg_slope, self)

  def sigmoid(self) -> "Tensor":
    return self._float()._unop(g.SIGMOID)

  def tanh(self) -> "Tensor":
    return self._float()._unop(g.TANH)

  def silu(self) -> "Tensor":
    return self._float()._unop(g.SILU)

  swish = silu

  def gelu(self, approximate: str = "tanh") -> "Tensor":
    """The tanh approximation (tinygrad's gelu, the default), or with approximate='none' the exact
    x * Phi(x) through erf (torch's default)."""
    if approximate == "none":
      x = self._float()
      return x * 0.5 * (1 + (x * (1 / math.sqrt(2))).erf())
    if approximate != "tanh":
      raise ShapeError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")
    return self._float()._unop(g.GELU)

  def elu(self, alpha: float = 1.0) -> "Tensor":
    return self.relu() - alpha * (1 - self.exp()).relu()

  def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> "Tensor":
    """log(1 + exp(beta * x)) / beta, and x where beta * x > threshold (torch's softplus): no
    overflow at large inputs, and a gradient of 1 there."""
    x = self._float()
    return Tensor._make(g.SOFTPLUS, x.dtype, x.shape, (x,), g.Composite(beta=float(beta), threshold=float(threshold)))

  def abs(self) -> "Tensor":
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype):
      return self
    return self.maximum(-self)

  def sign(self) -> "Tensor":
    return (self != 0).where((self < 0).where(self.full_like(-1), self.full_like(1)), self.full_like(0))

  def square(self) -> "Tensor":
    return self * self

  def clip(self, min_=None, max_=None) -> "Tensor":
    """torch's clamp: min_ and max_ are numbers or tensors (broadcast, promoting the dtype). A nan
    anywhere gives nan; at a bound the whole gradient reaches self."""
    if min_ is None and max_ is None:
      raise ShapeError("clip needs min_ or max_")
    x = self if min_ is None else self._clamp(g.CLAMP_MIN, min_)
    return x if max_ is None else x._clamp(g.CLAMP_MAX, max_)

  def clamp_min(self, min_) -> "Tensor":
    return self._clamp(g.CLAMP_MIN, min_)

  def clamp_max(self, max_) -> "Tensor":
    return self._clamp(g.CLAMP_MAX, max_)

  def _clamp(self, op: int, bound) -> "Tensor":
    if self.dtype == dtypes.bool:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} does not take bool tensors")
    return self._binop(op, bound)

  clamp = clip

  def isnan(self) -> "Tensor":
    return self != self

  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> "Tensor":
    pos = (self == math.inf) if detect_positive else self.zeros_like(dtype=dtypes.bool)
    return pos | (self == -math.inf) if detect_negative else pos

  def round(self) -> "Tensor":
    """Round half to even (numpy, torch, tinygrad)."""
    if not dtypes.is_float(self.dtype):
      return self
    lo = self.floor()
    frac = self - lo
    odd = (lo * 0.5)._trunc() != lo * 0.5
    return (frac > 0.5).where(lo + 1, (frac < 0.5).where(lo, odd.where(lo + 1, lo)))

  def quick_gelu(self) -> "Tensor":
    return self * (self * 1.702).sigmoid()

  def mish(self) -> "Tensor":
    return self * self.softplus().tanh()

  def hardtanh(self, min_val: float = -1, max_val: float = 1) -> "Tensor":
    return self.clip(min_val, max_val)

  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> "Tensor":
    return (alpha * self + beta).relu() - (alpha * self + beta - 1).relu()

  def hardswish(self) -> "Tensor":
    return self * (self + 3).relu6() * (1 / 6)

  # The daemon's elementwise math (core/frontend/math.h): torch's values at the domain edges,
  # e.g. asin(2) is nan, atanh(1) is inf; float16/bfloat16 are computed in float32.

  def erf(self) -> "Tensor":
    return self._float()._unop(g.ERF)

  def atan(self) -> "Tensor":
    return self._float()._unop(g.ATAN)

  def asin(self) -> "Tensor":
    return self._float()._unop(g.ASIN)

  def acos(self) -> "Tensor":
    return self._float()._unop(g.ACOS)

  def sinh(self) -> "Tensor":
    return self._float()._unop(g.SINH)

  def cosh(self) -> "Tensor":
    return self._float()._unop(g.COSH)

  def asinh(self) -> "Tensor":
    return self._float()._unop(g.ASINH)

  def acosh(self) -> "Tensor":
    return self._float()._unop(g.ACOSH)

  def atanh(self) -> "Tensor":
    return self._float()._unop(g.ATANH)

  def log10(self) -> "Tensor":
    return self._float()._unop(g.LOG10)

  def log1p(self) -> "Tensor":
    return self._float()._unop(g.LOG1P)

  def expm1(self) -> "Tensor":
    return self._float()._unop(g.EXPM1)

  def softsign(self) -> "Tensor":
    return self._float()._unop(g.SOFTSIGN)

  def selu(self) -> "Tensor":
    return self._float()._unop(g.SELU)

  def celu(self, alpha: float = 1.0) -> "Tensor":
    x = self._float()
    return Tensor._make(g.CELU, x.dtype, x.shape, (x,), g.Composite(alpha=float(alpha)))

  def _float_binop(self, op: int, x, reverse: bool = False) -> "Tensor":
    a, b = self._broadcasted(x, reverse)
    a, b = a._float(), b._float()
    return Tensor._make(op, a.dtype, a.shape, (a, b))

  def logaddexp(self, x) -> "Tensor":
    """log(exp(self) + exp(x)) without overflow; -inf operands are fine."""
    return self._float_binop(g.LOGADDEXP, x)

  def copysign(self, x) -> "Tensor":
    """|self| with the sign bit of x (-0.0 counts as negative); no gradient flows to x."""
    return self._float_binop(g.COPYSIGN, x)

  def lerp(self, end, weight) -> "Tensor":
    """self + weight * (end - self), computed from the nearer end (exact at weight 1)."""
    a, b = self._broadcasted(end)
    a, w = a._broadcasted(weight)
    a, b = a._broadcasted(b)
    a, b, w = a._float(), b._float(), w.cast(least_upper_float(a.dtype))
    return Tensor._make(g.LERP, a.dtype, a.shape, (a, b, w))

  def isfinite(self) -> "Tensor":
    return Tensor._make(g.ISFINITE, dtypes.bool, self.shape, (self,))

  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> "Tensor":
    """|self - other| <= atol + rtol * |other| elementwise (bool), as torch.isclose."""
    if rtol < 0 or atol < 0:
      raise ValueError(f"isclose needs rtol >= 0 and atol >= 0, got {rtol} and {atol}")
    a, b = self._broadcasted(other)
    return Tensor._make(g.ISCLOSE, dtypes.bool, a.shape, (a, b),
                        g.Composite(rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan)))

  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element isclose (a Python bool: this realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  # --- reductions -------------------------------------------------------------------------------

  def _reduce(self, op: int, axis, keepdim: bool) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self
    kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
    r = Tensor._make(op, self.dtype, kept, (self,), axes)
    return r if keepdim else r.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

  def sum(self, axis=None, keepdim: bool = False, dtype: Optional[DTypeLike] = None, **kwargs) -> "Tensor":
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(g.REDUCE_SUM, axis, keepdim)
    if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16):
      ret = ret.cast(self.dtype)
    return ret

  def prod(self, axis=None, keepdim: bool = False, dtype: Optional[DTypeLike] = None) -> "Tensor":
    """Product over `axis` (None: all axes), in sum's accumulation dtype (bool and small ints
    multiply in int32, float16/bfloat16 in float32 and are cast back). The gradient is exact
    where elements are zero."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(g.REDUCE_PROD, axis, keepdim)
    if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16):
      ret = ret.cast(self.dtype)
    return ret

  def max(self, axis=None, keepdim: bool = False) -> "Tensor":
    return self._reduce(g.REDUCE_MAX, axis, keepdim)

  def min(self, axis=None, keepdim: bool = False) -> "Tensor":
    return self._inverse()._reduce(g.REDUCE_MAX, axis, keepdim)._inverse()

  def any(self, axis=None, keepdim: bool = False) -> "Tensor":
    """Whether any element along `axis` (None: all) is nonzero (bool)."""
    return self.bool().cast(dtypes.uint8).max(axis, keepdim).bool()

  def all(self, axis=None, keepdim: bool = False) -> "Tensor":
    """Whether every element along `axis` (None: all) is nonzero (bool); true over no elements."""
    return self.logical_not().any(axis, keepdim).logical_not()

  # Composites with a reduction inside run in float32 for float16/bfloat16 inputs (tinygrad
  # accumulates half sums in float32 too) and are cast back to the input's dtype.

  def _acc_float(self) -> Tuple["Tensor", DType]:
    """(this tensor as the float dtype a reducing composite runs in, the dtype to return)."""
    out = least_upper_float(self.dtype)
    return self.cast(sum_acc_dtype(out)), out

  def _composite(self, op: int, shape: Tuple[int, ...], arg: g.Composite) -> "Tensor":
    x, out = self._acc_float()
    return Tensor._make(op, x.dtype, shape, (x,), arg).cast(out)

  def mean(self, axis=None, keepdim: bool = False) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:
      return self._float()
    shape = _reduced_shape(self.shape, axes, keepdim)
    return self._composite(g.MEAN, shape, g.Composite(axes=axes, keepdim=keepdim))

  def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> "Tensor":
    axes = normalize_axes(axis, self.ndim)
    if not axes:  # numpy: the variance over no axes is 0 (nan for a correction ≥ 1)
      return (self._float() - self._float()) / max(0, 1 - correction)
    shape = _reduced_shape(self.shape, axes, keepdim)
    return self._composite(g.VAR, shape, g.Composite(axes=axes, keepdim=keepdim, correction=float(correction)))

  def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> "Tensor":
    return self.var(axis, keepdim, correction).sqrt()

  def std_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tuple["Tensor", "Tensor"]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  def var_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tuple["Tensor", "Tensor"]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

  def _softmax_like(self, op: int, axis: int, dtype: Optional[DTypeLike]) -> "Tensor":
    x = self.cast(dtype) if dtype is not None else self._float()
    if x.ndim == 0:
      x = x.reshape(1)
      return x._softmax_like(op, 0, None).reshape(())
    ax = normalize_axis(axis, x.ndim)
    return x._composite(op, x.shape, g.Composite(axes=(ax,)))

  def softmax(self, axis: int = -1, dtype: Optional[DTypeLike] = None) -> "Tensor":
    return self._softmax_like(g.SOFTMAX, axis, dtype)

  def log_softmax(self, axis: int = -1, dtype: Optional[DTypeLike] = None) -> "Tensor":
    return self._softmax_like(g.LOG_SOFTMAX, axis, dtype)

  def logsumexp(self, axis=None, keepdim: bool = False) -> "Tensor":
    """log(sum(exp(x))) over `axis` (None: all axes), computed stably by the daemon."""
    x = self._float()
    axes = normalize_axes(axis, x.ndim)
    if not axes:
      return x
    out_shape = _reduced_shape(x.shape, axes, keepdim)
    if len(axes) > 1:  # the wire takes one axis: move the reduced axes last and merge them
      rest = [i for i in range(x.ndim) if i not in axes]
      x = x.permute(rest + list(axes))
      x = x.reshape(x.shape[:len(rest)] + (-1,))
      axes = (x.ndim - 1,)
    shape = _reduced_shape(x.shape, axes, False)
    return x._composite(g.LOGSUMEXP, shape, g.Composite(axes=axes)).reshape(out_shape)

  def layernorm(self, axis=-1, eps: float = 1e-5) -> "Tensor":
    """(x - mean) / sqrt(var + eps) over `axis` (an int or a tuple), without an affine part."""
    x = self._float()
    axes = normalize_axes(axis, x.ndim)
    if not axes:
      raise ShapeError("layernorm needs at least one axis")
    n = len(axes)
    if axes == tuple(range(x.ndim - n, x.ndim)):
      return x._composite(g.LAYERNORM, x.shape, g.Composite(normalized_axes=n, eps=float(eps)))
    rest = [i for i in range(x.ndim) if i not in axes]
    order = rest + list(axes)
    inverse = [order.index(i) for i in range(x.ndim)]
    return x.permute(order).layernorm(tuple(range(len(rest), x.ndim)), eps).permute(inverse)

  # --- linear algebra ---------------------------------------------------------------------------

  @staticmethod
  def einsum(formula: str, *operands) -> "Tensor":
    """numpy.einsum over Tensors ("ij,jk->ik", implicit output, "..."); see polygrad.einsum."""
    from .einsum import einsum
    return einsum(formula, *operands)

  def rearrange(self, formula: str, **sizes: int) -> "Tensor":
    """einops-style rearrange ("b (h w) c -> b h w c", h=2); see polygrad.einsum."""
    from .einsum import rearrange
    return rearrange(self, formula, **sizes)

  def dot(self, w: "Tensor", dtype: Optional[DTypeLike] = None) -> "Tensor":
    """numpy matmul semantics, computed by the daemon's MATMUL (which the client only types and
    shapes): 1-D operands are promoted and the added axis dropped, batch axes broadcast.
    float16/bfloat16 and small integer types accumulate in float32/int32 and are cast back."""
    if not isinstance(w, Tensor):
      w = Tensor(w)
    shape = _matmul_shape(self.shape, w.shape)
    out_dt = least_upper_dtype(self.dtype, w.dtype) if dtype is None else to_dtype(dtype)
    acc = sum_acc_dtype(out_dt)
    a, b = self.cast(acc), w.cast(acc)
    return Tensor._make(g.MATMUL, acc, shape, (a, b)).cast(out_dt)

  matmul = dot

  def __matmul__(self, x) -> "Tensor":
    return self.dot(x)

  def __rmatmul__(self, x) -> "Tensor":
    return Tensor(x).dot(self)

  def linear(self, weight: "Tensor", bias: Optional["Tensor"] = None) -> "Tensor":
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x + bias if bias is not None else x

  def sequential(self, layers: Sequence[Callable[["Tensor"], "Tensor"]]) -> "Tensor":
    return functools.reduce(lambda x, f: f(x), layers, self)

  def qr(self) -> Tuple["Tensor", "Tensor"]:
    """(Q, R) of the last two axes, reduced as torch.linalg.qr: Householder reflections with
    LAPACK's signs (each R[j, j] is minus the sign of the column's leading element times its
    norm), so Q and R match torch's. min(m, n) - (m <= n) reflections, each a few matmuls on the
    daemon; differentiable."""
    if self.ndim < 2:
      raise ShapeError(f"qr needs a matrix (or a batch of them), got shape {self.shape}")
    m, n = self.shape[-2:]
    r = self._float()
    q = Tensor.eye(m, dtype=r.dtype).expand(*self.shape[:-2], m, m)
    for j in range(min(m - 1, n)):
      x = r[..., j:, j]  # (..., m - j)
      alpha = x[..., 0]
      norm = (x * x).sum(-1).sqrt()
      beta = -(alpha >= 0).where(1.0, -1.0) * norm
      v = Tensor.cat((alpha - beta).unsqueeze(-1), x[..., 1:], dim=-1)  # (..., m - j)
      vv = (v * v).sum(-1)
      scale = (vv == 0).where(0.0, 2 / vv.maximum(1e-30)).unsqueeze(-1).unsqueeze(-1)
      vc, vr = v.unsqueeze(-1), v.unsqueeze(-2)  # column and row
      below, right = r[..., j:, :], q[..., :, j:]
      below, right = below - scale * (vc @ (vr @ below)), right - scale * ((right @ vc) @ vr)
      r = Tensor.cat(r[..., :j, :], below, dim=-2) if j else below  # rows above j are final
      q = Tensor.cat(q[..., :, :j], right, dim=-1) if j else right
    k = min(m, n)
    return q[..., :, :k], r[..., :k, :].triu()

  def svd(self, full_matrices: bool = True, sweeps: int = 12) -> Tuple["Tensor", "Tensor", "Tensor"]:
    """(U, S, Vh) of the last two axes by one-sided Jacobi rotations (Hestenes): `sweeps` passes
    over every column pair, each rotation a small matmul on the daemon, so the graph grows with
    sweeps * n² / 2 for n = min(m, n) columns: meant for small matrices. Singular values
    descending; singular vectors are unique up to sign (torch's may differ in sign). With
    full_matrices the square cases only (the reduced and full factors coincide)."""
    if self.ndim < 2:
      raise ShapeError(f"svd needs a matrix (or a batch of them), got shape {self.shape}")
    m, n = self.shape[-2:]
    if m < n:
      u, sv, vh = self.transpose(-2, -1).svd(full_matrices, sweeps)
      return vh.transpose(-2, -1), sv, u.transpose(-2, -1)
    if full_matrices and m != n:
      raise NotImplementedError(f"svd(full_matrices=True) of a non-square {m}x{n} matrix: pass full_matrices=False")
    u = self._float()
    lead = self.shape[:-2]
    v = Tensor.eye(n, dtype=u.dtype).expand(*lead, n, n)
    eye = np.eye(n, dtype=np.float32)
    for _ in range(sweeps):
      for p in range(n - 1):
        for q in range(p + 1, n):
          up, uq = u[..., :, p], u[..., :, q]
          alpha, beta, gamma = (up * up).sum(-1), (uq * uq).sum(-1), (up * uq).sum(-1)
          # the rotation that zeroes gamma (c, s) = (1, 0) when the columns are already orthogonal
          flat = gamma == 0
          zeta = (beta - alpha) / (2 * flat.where(1.0, gamma))
          t = (zeta >= 0).where(1.0, -1.0) / (zeta.abs() + (1 + zeta * zeta).sqrt())
          c = flat.where(1.0, 1 / (1 + t * t).sqrt())
          sn = flat.where(0.0, c * t)
          pp, qq, pq = (Tensor(np.outer(eye[a], eye[b]), dtype=u.dtype) for a, b in ((p, p), (q, q), (p, q)))
          rot = Tensor(eye, dtype=u.dtype) + (c - 1).unsqueeze(-1).unsqueeze(-1) * (pp + qq) \
              + sn.unsqueeze(-1).unsqueeze(-1) * (pq - pq.transpose())
          u, v = u @ rot, v @ rot
    sv = (u * u).sum(-2).sqrt()  # (..., n)
    order = sv.argsort(-1, descending=True)
    sv = sv.gather(-1, order)
    cols = order.unsqueeze(-2).expand(*lead, m, n)
    u = u.gather(-1, cols) / (sv == 0).where(1.0, sv).unsqueeze(-2)
    v = v.gather(-1, order.unsqueeze(-2).expand(*lead, n, n))
    return u, sv, v.transpose(-2, -1)

  def newton_schulz(self, steps: int, params: Sequence[float], eps: float = 1.0e-7) -> "Tensor":
    """Orthogonalizes the last two axes (tinygrad's newton_schulz, Muon's core): X = self / (its
    Frobenius norm + eps), then `steps` times X = sum_i params[i] * (X X^T)^i X, computed on the
    wide orientation (a tall matrix is transposed there and back)."""
    if self.ndim < 2:
      raise ShapeError(f"newton_schulz needs a matrix (or a batch of them), got shape {self.shape}")
    if self.shape[-2] > self.shape[-1]:
      return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    x = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term, acc = x @ x.transpose(-2, -1), x, x * params[0]
      for p in params[1:]:
        term = gram @ term
        acc = acc + term * p
      x = acc
    return x

  # --- convolution and pooling over 1, 2 or 3 spatial axes (the daemon's CONV2D,
  # CONV_TRANSPOSE2D, MAX_POOL2D, AVG_POOL2D, named for 2-D but taking any of the three) ---------

  def conv2d(self, weight: "Tensor", bias: Optional["Tensor"] = None, groups: int = 1, stride=1, dilation=1,
             padding=0) -> "Tensor":
    """Cross-correlation of x (N, C, *spatial) with weight (O, C/groups, *kernel) over 1, 2 or 3
    spatial axes, their count being weight.ndim - 2 (tinygrad's conv2d; torch's conv1d/2d/3d).
    stride/dilation: an int or one value per axis; padding: an int, one value per axis, or
    tinygrad's (before, after) pairs from the last axis back, e.g. (left, right, top, bottom).
    bias (O,) is added with the broadcasting add. float16/bfloat16 accumulate in float32 and are
    cast back."""
    if not isinstance(weight, Tensor):
      weight = Tensor(weight)
    n = _spatial_count(self.shape, weight.shape, "conv2d", "(O, C/groups, *kernel)")
    st, dil = _ntuple(stride, n, "stride", 1), _ntuple(dilation, n, "dilation", 1)
    pads = _padding_pairs(padding, n)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
      raise ShapeError(f"conv2d: groups must be an int >= 1, got {groups!r}")
    shape = _conv_shape(self.shape, weight.shape, groups, st, dil, pads)
    if bias is not None:
      if not isinstance(bias, Tensor):
        bias = Tensor(bias)
      if bias.shape != (weight.shape[0],):
        raise ShapeError(f"conv2d: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    out = least_upper_float(least_upper_dtype(self.dtype, weight.dtype))
    acc = sum_acc_dtype(out)
    arg = g.Composite(stride=st, padding=pads, dilation=dil, groups=groups)
    y = Tensor._make(g.CONV2D, acc, shape, (self.cast(acc), weight.cast(acc)), arg).cast(out)
    return y if bias is None else y + bias.reshape(1, -1, *(1,) * n)

  def conv_transpose2d(self, weight: "Tensor", bias: Optional["Tensor"] = None, groups: int = 1, stride=1,
                       dilation=1, padding=0, output_padding=0) -> "Tensor":
    """The transposed convolution of x (N, Cin, *spatial) with weight (Cin, Cout/groups, *kernel)
    over 1, 2 or 3 spatial axes (torch's conv_transpose1d/2d/3d): out = (in-1)*stride -
    2*padding + dilation*(k-1) + output_padding + 1 per axis. stride, dilation, padding,
    output_padding: an int or one value per axis. bias (Cout,) is added with the broadcasting
    add."""
    if not isinstance(weight, Tensor):
      weight = Tensor(weight)
    n = _spatial_count(self.shape, weight.shape, "conv_transpose2d", "(Cin, Cout/groups, *kernel)")
    st, dil = _ntuple(stride, n, "stride", 1), _ntuple(dilation, n, "dilation", 1)
    pad, opad = _ntuple(padding, n, "padding", 0), _ntuple(output_padding, n, "output_padding", 0)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
      raise ShapeError(f"conv_transpose2d: groups must be an int >= 1, got {groups!r}")
    cin = self.shape[1]
    if weight.shape[0] != cin or cin % groups:
      raise ShapeError(f"conv_transpose2d: weight {weight.shape} does not fit {cin} input channels in {groups} groups")
    for o, s, d in zip(opad, st, dil):
      if o >= s and o >= d:
        raise ShapeError(f"conv_transpose2d: output_padding {opad} must be smaller than stride or dilation")
    out_sp = tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1
                   for i, s, p, d, k, o in zip(self.shape[2:], st, pad, dil, weight.shape[2:], opad))
    if any(v <= 0 for v in out_sp):
      raise ShapeError(f"conv_transpose2d: padding {pad} leaves no output for input {self.shape}")
    cout = weight.shape[1] * groups
    if bias is not None:
      if not isinstance(bias, Tensor):
        bias = Tensor(bias)
      if bias.shape != (cout,):
        raise ShapeError(f"conv_transpose2d: bias must have shape ({cout},), got {bias.shape}")
    out = least_upper_float(least_upper_dtype(self.dtype, weight.dtype))
    acc = sum_acc_dtype(out)
    arg = g.Composite(stride=st, padding=pad, dilation=dil, groups=groups, output_padding=opad)
    y = Tensor._make(g.CONV_TRANSPOSE2D, acc, (self.shape[0], cout) + out_sp, (self.cast(acc), weight.cast(acc)),
                     arg).cast(out)
    return y if bias is None else y + bias.reshape(1, -1, *(1,) * n)

  def _pool_geometry(self, name: str, kernel_size, stride, dilation, padding, ceil_mode: bool):
    """(kernel, stride, dilation, the user's padding pairs, the pairs sent) of a pooling over the
    last len(kernel_size) axes (an int kernel: 2, as tinygrad). ceil_mode grows each axis' after-
    padding so a last partial window counts as long as it starts inside the input or its
    before-padding (torch); padding never wins a max, and a mean leaves it out (see avg_pool2d)."""
    k = _ntuple(kernel_size, 2, "kernel_size", 1) if isinstance(kernel_size, (int, np.integer)) \
        else _ints(kernel_size, "kernel_size")
    n = len(k)
    if not 1 <= n <= 3 or any(v < 1 for v in k):
      raise ShapeError(f"{name}: kernel_size needs an int or 1 to 3 values >= 1, got {kernel_size!r}")
    if self.ndim < n:
      raise ShapeError(f"{name} pools over the last {n} axes, got shape {self.shape}")
    st = k if stride is None else _ntuple(stride, n, "stride", 1)
    dil = _ntuple(dilation, n, "dilation", 1)
    base = _padding_pairs(padding, n)
    pads = list(base)
    if ceil_mode:
      for i, size in enumerate(self.shape[-n:]):
        before, after = pads[2 * i], pads[2 * i + 1]
        span = dil[i] * (k[i] - 1) + 1
        out = -(-(size + before + after - span) // st[i]) + 1
        if (out - 1) * st[i] >= size + before:
          out -= 1
        pads[2 * i + 1] += max(0, (out - 1) * st[i] + span - (size + before + after))
    return k, st, dil, base, tuple(pads)

  def _pool(self, op: int, name: str, kernel_size, stride, dilation, padding, ceil_mode: bool, **kw):
    k, st, dil, base, pads = self._pool_geometry(name, kernel_size, stride, dilation, padding, ceil_mode)
    n = len(k)
    shape = self.shape[:-n] + _window_out(self.shape[-n:], k, st, dil, pads, name)
    return shape, g.Composite(kernel=k, stride=st, padding=pads, dilation=dil, **kw), base

  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 return_indices: bool = False):
    """Max over windows of the last len(kernel_size) axes, 1 to 3 (an int kernel: 2), as
    tinygrad's max_pool2d and torch's max_pool1d/2d/3d; stride defaults to the kernel; padding
    never wins. padding: an int, one value per axis, or tinygrad's (before, after) pairs from the
    last axis back. ceil_mode keeps a last partial window (torch). return_indices: (values,
    indices), the indices (int32) being torch's: each maximum's flat position in the input's
    spatial volume, the first on ties, a NaN over numbers."""
    shape, arg, _ = self._pool(g.MAX_POOL2D, "max_pool2d", kernel_size, stride, dilation, padding, ceil_mode)
    values = Tensor._make(g.MAX_POOL2D, self.dtype, shape, (self,), arg)
    if not return_indices:
      return values
    indices = Tensor._make(g.MAX_POOL2D, dtypes.int32, shape, (self,), dataclasses.replace(arg, indices=True))
    return ValuesIndices(values, indices)

  def max_unpool2d(self, indices: "Tensor", kernel_size=(2, 2), stride=None, padding=0,
                   output_size: Optional[Sequence[int]] = None) -> "Tensor":
    """torch's max_unpool1d/2d/3d over the last len(kernel_size) axes (an int kernel: 2): zeros
    of the pooled input's spatial shape, with each value written at its flat position from
    max_pool2d(return_indices=True) (a scatter along the flattened spatial volume)."""
    k = _ntuple(kernel_size, 2, "kernel_size", 1) if isinstance(kernel_size, (int, np.integer)) \
        else _ints(kernel_size, "kernel_size")
    n = len(k)
    st = k if stride is None else _ntuple(stride, n, "stride", 1)
    pad = _ntuple(padding, n, "padding", 0)
    if not 1 <= n <= 3 or self.ndim < n or indices.shape != self.shape:
      raise ShapeError(f"max_unpool2d: indices {indices.shape} must have the values' shape {self.shape}, of at least "
                       f"{n} axes (1 to 3)")
    pooled = self.shape[-n:]
    spatial = tuple((o - 1) * s - 2 * p + kk for o, s, p, kk in zip(pooled, st, pad, k)) if output_size is None \
        else tuple(output_size)[-n:]
    lead = self.shape[:-n]
    volume, count = math.prod(spatial), math.prod(pooled)
    zeros = Tensor.zeros(*lead, volume, dtype=self.dtype)
    idx = indices.reshape(*lead, count)
    flat = zeros.scatter(-1, idx, self.reshape(*lead, count))
    if any(s < kk for s, kk in zip(st, k)):
      # Overlapping windows can pick one element twice, with the same value each time: scatter
      # sums the copies, so divide by how many landed (exact for 2 and 4 copies, within an ulp
      # for others; the gradient is shared among the copies where torch gives each all of it).
      hits = Tensor.zeros(*lead, volume, dtype=dtypes.int32).scatter(-1, idx, 1).maximum(1)
      flat = flat / hits.cast(flat.dtype) if dtypes.is_float(flat.dtype) else flat.floor_divide(hits.cast(flat.dtype))
    return flat.reshape(*lead, *spatial)

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> "Tensor":
    """Mean over windows of the last len(kernel_size) axes, 1 to 3 (an int kernel: 2), as
    tinygrad's avg_pool2d and torch's avg_pool1d/2d/3d. count_include_pad (torch's default)
    divides by the window's elements inside the padded input; without it, inside the input
    only. ceil_mode keeps a last partial window, whose part beyond the padding never counts."""
    shape, arg, base = self._pool(g.AVG_POOL2D, "avg_pool2d", kernel_size, stride, dilation, padding, ceil_mode)
    x, out = self._acc_float()
    mean = Tensor._make(g.AVG_POOL2D, x.dtype, shape, (x,), arg)
    if count_include_pad and arg.padding == base:
      return mean.cast(out)
    # The share of each window that counts, from a pool of ones over what counts: the input, or
    # the input with its own padding when padding counts.
    n = len(arg.kernel)
    spatial = self.shape[-n:]
    if count_include_pad:
      ones = Tensor.ones(*(s + base[2 * i] + base[2 * i + 1] for i, s in enumerate(spatial)), dtype=x.dtype)
      extra = tuple(v for i in range(n) for v in (0, arg.padding[2 * i + 1] - base[2 * i + 1]))
      ones_arg = dataclasses.replace(arg, padding=extra)
    else:
      ones, ones_arg = Tensor.ones(*spatial, dtype=x.dtype), arg
    share = Tensor._make(g.AVG_POOL2D, x.dtype, shape[-n:], (ones,), ones_arg)
    return (mean / share).cast(out)

  # --- index ops (the daemon's CUMSUM, ARGMAX, ARGMIN, TRIL, TRIU, GATHER) -----------------------

  def cumsum(self, axis: int = 0) -> "Tensor":
    """Running sum along `axis` (bool counts as int32; float16/bfloat16 sum in float32)."""
    if self.ndim == 0:
      _axis_of(axis, 1, "cumsum")
      return self.reshape(1).cumsum(0).reshape(())
    ax = _axis_of(axis, self.ndim, "cumsum")
    if self.dtype == dtypes.bool:
      return self.cast(dtypes.default_int).cumsum(ax)
    acc = sum_acc_dtype(self.dtype) if dtypes.is_float(self.dtype) else self.dtype
    x = self.cast(acc)
    return Tensor._make(g.CUMSUM, acc, self.shape, (x,), g.Composite(axes=(ax,))).cast(self.dtype)

  # --- sorting and running extremes (the daemon's SORT, TOPK, CUMMAX, CUMMIN, CUMPROD,
  # LOGCUMSUMEXP: O(n²) comparisons per row; NaN sorts last, ties keep their order) -------------

  def _along(self, op: int, axis: int, name: str, arg: g.Composite, dtype=None, shape=None) -> "Tensor":
    ax = _axis_of(axis, self.ndim, name)
    arg = dataclasses.replace(arg, axes=(ax,))
    return Tensor._make(op, dtype or self.dtype, self.shape if shape is None else shape, (self,), arg)

  def _values_indices(self, op: int, axis: int, name: str, shape=None, **kw) -> "ValuesIndices":
    if self.ndim == 0:
      v, i = self.reshape(1)._values_indices(op, 0, name, None if shape is None else (1,), **kw)
      return ValuesIndices(v.reshape(()), i.reshape(()))
    values = self._along(op, axis, name, g.Composite(**kw), shape=shape)
    indices = self._along(op, axis, name, g.Composite(indices=True, **kw), dtypes.int32, shape)
    return ValuesIndices(values, indices)

  def sort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> "ValuesIndices":
    """(values, indices) sorted along `dim`; stable always (ties keep their order), NaN last
    (first when descending), as torch.sort(stable=True). Differentiable through the values."""
    return self._values_indices(g.SORT, dim, "sort", descending=descending)

  def argsort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> "Tensor":
    return self.sort(dim, descending).indices

  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True, sorted: bool = True
           ) -> "ValuesIndices":
    """(values, indices) of the k largest (smallest) along `dim`, in order (always sorted)."""
    ax = _axis_of(dim, max(self.ndim, 1), "topk")
    n = self.shape[ax] if self.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
      raise ShapeError(f"topk: k must be an int from 0 to {n} (the size of dim {dim}), got {k!r}")
    shape = tuple(k if i == ax else d for i, d in enumerate(self.shape)) if self.ndim else (k,)
    if self.ndim == 0:
      return self.reshape(1).topk(k, 0, largest)
    return self._values_indices(g.TOPK, ax, "topk", shape=shape, n=k, descending=largest)

  def cummax(self, axis: int = 0) -> "ValuesIndices":
    """(running maximum, where it last occurred) along `axis`; NaN, once seen, stays (torch)."""
    return self._values_indices(g.CUMMAX, axis, "cummax")

  def cummin(self, axis: int = 0) -> "ValuesIndices":
    return self._values_indices(g.CUMMIN, axis, "cummin")

  def cumprod(self, axis: int = 0, dtype: Optional[DTypeLike] = None) -> "Tensor":
    """Running product along `axis` (bool as the default int; float16/bfloat16 multiply in
    float32). Differentiable."""
    if self.ndim == 0:
      _axis_of(axis, 1, "cumprod")
      return self.reshape(1).cumprod(0, dtype).reshape(())
    x = self.cast(dtypes.default_int) if self.dtype == dtypes.bool else self
    if dtype is not None:
      x = x.cast(to_dtype(dtype))
    acc = sum_acc_dtype(x.dtype) if dtypes.is_float(x.dtype) else x.dtype
    return x.cast(acc)._along(g.CUMPROD, axis, "cumprod", g.Composite()).cast(x.dtype)

  def logcumsumexp(self, axis: int = 0) -> "Tensor":
    """log(cumsum(exp(x))) along `axis` without overflow; float results (ints become the default
    float). Differentiable."""
    if self.ndim == 0:
      _axis_of(axis, 1, "logcumsumexp")
      return self.reshape(1).logcumsumexp(0).reshape(())
    x = self._float()
    acc = sum_acc_dtype(x.dtype)
    return x.cast(acc)._along(g.LOGCUMSUMEXP, axis, "logcumsumexp", g.Composite()).cast(x.dtype)

  def _arg_extreme(self, op: int, axis, keepdim: bool) -> "Tensor":
    if axis is None:  # over the flattened tensor (keepdim does not apply, as in tinygrad)
      return self.reshape(-1)._arg_extreme(op, 0, False)
    if self.ndim == 0:
      _axis_of(axis, 1, g.OP_NAMES[op].lower())
      return Tensor._make(op, dtypes.int32, (), (self.reshape(1),), g.Composite(axes=(0,), keepdim=False))
    ax = _axis_of(axis, self.ndim, g.OP_NAMES[op].lower())
    if self.shape[ax] == 0:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} of an empty axis {ax} (shape {self.shape})")
    shape = _reduced_shape(self.shape, (ax,), keepdim)
    return Tensor._make(op, dtypes.int32, shape, (self,), g.Composite(axes=(ax,), keepdim=bool(keepdim)))

  def argmax(self, axis: Optional[int] = None, keepdim: bool = False) -> "Tensor":
    """int32 index of the largest value along `axis` (None: of the flattened tensor); the first
    one wins on ties, as in numpy."""
    return self._arg_extreme(g.ARGMAX, axis, keepdim)

  def argmin(self, axis: Optional[int] = None, keepdim: bool = False) -> "Tensor":
    """int32 index of the smallest value along `axis` (None: of the flattened tensor); the first
    one wins on ties."""
    return self._arg_extreme(g.ARGMIN, axis, keepdim)

  def _triangle(self, op: int, diagonal: int) -> "Tensor":
    if self.ndim < 2:
      raise ShapeError(f"{g.OP_NAMES[op].lower()} needs at least 2 axes, got shape {self.shape}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
      raise ShapeError(f"diagonal must be an int, got {diagonal!r}")
    return Tensor._make(op, self.dtype, self.shape, (self,), g.Composite(diagonal=diagonal))

  def tril(self, diagonal: int = 0) -> "Tensor":
    """Zero the elements above the `diagonal`-th diagonal of the last two axes."""
    return self._triangle(g.TRIL, diagonal)

  def triu(self, diagonal: int = 0) -> "Tensor":
    """Zero the elements below the `diagonal`-th diagonal of the last two axes."""
    return self._triangle(g.TRIU, diagonal)

  def _scatter(self, dim: int, index: "Tensor", src, mode: str, include_self: bool, name: str) -> "Tensor":
    """The daemon's SCATTER_REDUCE after the shape checks (src a tensor or a scalar)."""
    if self.ndim == 0:
      raise ShapeError(f"{name} needs a tensor of at least 1 axis")
    ax = _axis_of(dim, self.ndim, name)
    if not isinstance(index, Tensor):
      index = Tensor(index)
    if not dtypes.is_int(index.dtype) or index.ndim != self.ndim:
      raise ShapeError(f"{name}: index must be an integer tensor of rank {self.ndim}, got {index.dtype.name} "
                       f"of shape {index.shape}")
    if any(i != s for a, (i, s) in enumerate(zip(index.shape, self.shape)) if a != ax):
      raise ShapeError(f"{name}: index {index.shape} must match {self.shape} on every axis but {ax}")
    src = src if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype)
    if src.ndim != self.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
      raise ShapeError(f"{name}: src {src.shape} must be at least index's shape {index.shape}")
    return Tensor._make(g.SCATTER_REDUCE, self.dtype, self.shape, (self, index, src),
                        g.Composite(axes=(ax,), mode=mode, include_self=include_self))

  def scatter(self, dim: int, index: "Tensor", src, reduce: Optional[str] = None) -> "Tensor":
    """torch's scatter: a copy of self with src's elements written at `index` along `dim` (src a
    tensor or a scalar); reduce 'add' or 'multiply' combines them with self instead. Where two
    updates land on one position without a reduce, torch leaves the winner undefined; here it is
    their sum."""
    if reduce is not None:
      return self.scatter_reduce(dim, index, src, {"add": "sum", "multiply": "prod"}.get(reduce, reduce))
    return self._scatter(dim, index, src, "none", False, "scatter")

  def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str, include_self: bool = True
                     ) -> "Tensor":
    """torch's scatter_reduce: src's elements combined into self at `index` along `dim` with
    reduce 'sum', 'prod', 'mean', 'amax' or 'amin'; without include_self the positions written
    start from the updates alone. Differentiable for sum and mean."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ShapeError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    return self._scatter(dim, index, src, reduce, bool(include_self), "scatter_reduce")

  def gather(self, dim: int, index: "Tensor") -> "Tensor":
    """out[..., i, ...] = self[..., index[..., i, ...], ...] along `dim` (torch.gather): index has
    self's rank and, on the other axes, sizes up to self's. Indices must lie in
    [0, self.shape[dim]); others select nothing (zero)."""
    if not isinstance(index, Tensor):
      index = Tensor(index)
    if not dtypes.is_int(index.dtype):
      raise ShapeError(f"gather needs an integer index, got {index.dtype.name}")
    if self.ndim == 0:
      raise ShapeError("gather needs a tensor of at least 1 axis")
    ax = _axis_of(dim, self.ndim, "gather")
    if index.ndim != self.ndim:
      raise ShapeError(f"gather: index has {index.ndim} axes, the input {self.ndim}")
    for i, (a, b) in enumerate(zip(index.shape, self.shape)):
      if i != ax and a > b:
        raise ShapeError(f"gather: index size {a} on axis {i} exceeds the input's {b} "
                         f"(index {index.shape}, input {self.shape})")
    x = self
    if any(i != ax and a != b for i, (a, b) in enumerate(zip(index.shape, self.shape))):
      x = self.shrink(tuple((0, self.shape[i]) if i == ax else (0, s) for i, s in enumerate(index.shape)))
    if self.shape[ax] == 0 and index.shape[ax] > 0:
      raise ShapeError(f"gather from an empty axis {ax}")
    return Tensor._make(g.GATHER, self.dtype, index.shape, (x, index), g.Composite(axes=(ax,)))

  # --- nn helpers -------------------------------------------------------------------------------

  def dropout(self, p: float = 0.5) -> "Tensor":
    """Zero each element with probability p and scale the rest by 1/(1-p), only while
    Tensor.training is set. The mask is drawn on the device (the daemon's DROPOUT)."""
    if not 0 <= p <= 1:
      raise ShapeError(f"dropout probability must be in [0, 1], got {p}")
    if not Tensor.training or p == 0:
      return self
    x = self._float()
    seed, counter = Tensor._random_key()
    return Tensor._make(g.DROPOUT, x.dtype, x.shape, (x,), g.Composite(seed=seed, counter=counter, p=float(p)))

  def one_hot(self, num_classes: int) -> "Tensor":
    """One-hot encoding along a new last axis, in the indices' dtype (the daemon's ONE_HOT).
    Indices outside [0, num_classes) give a row of zeros. Float class indices (the seed polygrad
    API: labels loaded as floats) are cast to int32, a fraction truncated toward zero."""
    if dtypes.is_float(self.dtype):
      return self.cast(dtypes.int32).one_hot(num_classes)
    if not dtypes.is_int(self.dtype):
      raise TypeError(f"one_hot needs an integer (or integral float) tensor, got {self.dtype.name}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
      raise ShapeError(f"one_hot needs num_classes >= 1 (an int), got {num_classes!r}")
    return Tensor._make(g.ONE_HOT, self.dtype, self.shape + (num_classes,), (self,), g.Composite(n=num_classes))

  def _do_reduction(self, reduction: str) -> "Tensor":
    if reduction == "mean":
      return self.mean()
    if reduction == "sum":
      return self.sum()
    if reduction == "none":
      return self
    raise ShapeError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

  def logsigmoid(self) -> "Tensor":
    return -(-self).softplus()

  def cross_entropy(self, Y: "Tensor", reduction: str = "mean", label_smoothing: float = 0.0,
                    axis: Optional[int] = None) -> "Tensor":
    """Cross entropy of logits `self` with class indices or class probabilities `Y`; the class
    axis is 1 (torch), or -1 for a 1-D input, unless `axis` is given."""
    if not 0.0 <= label_smoothing <= 1.0:
      raise ShapeError("label_smoothing must be in [0, 1]")
    ax = normalize_axis(axis if axis is not None else (1 if self.ndim >= 2 else -1), self.ndim)
    n_cls = self.shape[ax]
    if Y.ndim < self.ndim:  # class indices
      Y = Y.one_hot(n_cls)
      if ax != self.ndim - 1:
        Y = Y.permute(*range(ax), Y.ndim - 1, *range(ax, Y.ndim - 1))
    Y = Y.cast(least_upper_float(self.dtype))
    if label_smoothing:
      Y = (1 - label_smoothing) * Y + label_smoothing / n_cls
    return (-(self.log_softmax(ax) * Y).sum(ax))._do_reduction(reduction)

  def nll_loss(self, Y: "Tensor", weight: Optional["Tensor"] = None, ignore_index: Optional[int] = None,
               reduction: str = "mean") -> "Tensor":
    """torch's nll_loss (the daemon's NLL_LOSS): log-probabilities `self` (N, C, ...) or (C,),
    class indices Y (N, ...) or (); -weight[y] * self[y] per element, targets equal to
    ignore_index counting for nothing; the mean divides by the summed weights of the counted
    targets."""
    if reduction not in ("mean", "sum", "none"):
      raise ShapeError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if self.ndim == 0 or not dtypes.is_float(self.dtype):
      raise ShapeError(f"nll_loss: log-probabilities must be a float tensor with a class axis, got {self.dtype.name} "
                       f"of shape {self.shape}")
    if not isinstance(Y, Tensor):
      Y = Tensor(Y)
    ax = 1 if self.ndim >= 2 else 0
    want = self.shape[:ax] + self.shape[ax + 1:]
    if Y.shape != want or Y.dtype == dtypes.bool:
      raise ShapeError(f"nll_loss: targets of shape {Y.shape} do not fit log-probabilities {self.shape} "
                       f"(want class indices of shape {want})")
    src = (self, Y)
    if weight is not None:
      weight = weight if isinstance(weight, Tensor) else Tensor(weight)
      if weight.shape != (self.shape[ax],):
        raise ShapeError(f"nll_loss: weight {weight.shape} must have one entry per class ({self.shape[ax]})")
      src = (self, Y, weight)
    # -100 is torch's default: never a class, like None (a target outside [0, C) counts for nothing).
    arg = g.Composite(mode=reduction, ignore_index=-100 if ignore_index is None else int(ignore_index))
    return Tensor._make(g.NLL_LOSS, self.dtype, Y.shape if reduction == "none" else (), src, arg)

  def sparse_categorical_crossentropy(self, Y: "Tensor", ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> "Tensor":
    """tinygrad's: logits over the last axis, integer targets Y; targets equal to ignore_index
    (when it is not -1) count for nothing."""
    log_probs = self.log_softmax(-1)
    mask = (Y != ignore_index) if ignore_index != -1 else Y.ones_like(dtype=dtypes.bool)
    y = Y.one_hot(self.shape[-1]).cast(log_probs.dtype) * mask.unsqueeze(-1).cast(log_probs.dtype)
    maskf = mask.cast(log_probs.dtype)
    smoothing = label_smoothing * (log_probs.mean(-1) * maskf)
    unreduced = (1 - label_smoothing) * (log_probs * y).sum(-1) + smoothing
    if reduction == "mean":
      return -(unreduced.sum() / maskf.sum())
    return -(unreduced.sum() if reduction == "sum" else unreduced._do_reduction(reduction))

  def binary_crossentropy(self, Y: "Tensor", reduction: str = "mean") -> "Tensor":
    return (-Y * self.log() - (1 - Y) * (1 - self).log())._do_reduction(reduction)

  def binary_crossentropy_logits(self, Y: "Tensor", reduction: str = "mean", pos_weight=None) -> "Tensor":
    w = 1 if pos_weight is None else pos_weight
    return (-(w * Y * self.logsigmoid() + (1 - Y) * (-self).logsigmoid()))._do_reduction(reduction)

  def batchnorm(self, weight: Optional["Tensor"], bias: Optional["Tensor"], mean: "Tensor", invstd: "Tensor",
                axis=1) -> "Tensor":
    """(x - mean) * invstd * weight + bias, the statistics shaped along `axis` (tinygrad)."""
    axes = normalize_axes(axis, self.ndim)
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None:
      x = x * weight.reshape(shape)
    x = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return x + bias.reshape(shape) if bias is not None else x

  # --- normalization and attention (the daemon's RMS_NORM, GROUP_NORM, BATCHNORM_*, SDPA) -------

  def rms_norm(self, axis=-1, eps: float = 1e-6) -> "Tensor":
    """x / sqrt(mean(x^2) + eps) over the last axes (`axis`: -1, or a tuple of the last axes); no
    affine part. float16/bfloat16 compute in float32 and are cast back."""
    axes = normalize_axes(axis, self.ndim)
    if not axes or axes != tuple(range(self.ndim - len(axes), self.ndim)):
      raise ShapeError(f"rms_norm normalizes over the last axes, got axis={axis!r} for shape {self.shape}")
    return self._composite(g.RMS_NORM, self.shape, g.Composite(normalized_axes=len(axes), eps=float(eps)))

  def group_norm(self, num_groups: int, weight: Optional["Tensor"] = None, bias: Optional["Tensor"] = None,
                 eps: float = 1e-5) -> "Tensor":
    """torch's group_norm: x (N, C, ...) normalized per (sample, group of C/num_groups channels),
    then weight and bias (C,) per channel when given."""
    if self.ndim < 2:
      raise ShapeError(f"group_norm needs (N, C, ...), got shape {self.shape}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1 or self.shape[1] % num_groups:
      raise ShapeError(f"group_norm: {self.shape[1]} channels do not split into {num_groups!r} groups")
    y = self._composite(g.GROUP_NORM, self.shape, g.Composite(groups=num_groups, eps=float(eps)))
    return y._channel_affine(weight, bias)

  def _channel_affine(self, weight, bias) -> "Tensor":
    shape = (1, -1) + (1,) * (self.ndim - 2)
    y = self if weight is None else self * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)

  def batch_norm(self, running_mean: Optional["Tensor"] = None, running_var: Optional["Tensor"] = None,
                 weight: Optional["Tensor"] = None, bias: Optional["Tensor"] = None, training: bool = False,
                 eps: float = 1e-5) -> "Tensor":
    """torch's batch_norm over axis 1 of x (N, C, ...): with the batch statistics (mean and
    biased variance) when `training` or no running statistics are given, else with
    running_mean/running_var (C,); then weight and bias (C,) per channel when given. The running
    statistics are inputs only (nn.BatchNorm updates them)."""
    if self.ndim < 2:
      raise ShapeError(f"batch_norm needs (N, C, ...), got shape {self.shape}")
    x, out = self._acc_float()
    if training or running_mean is None or running_var is None:
      y = Tensor._make(g.BATCHNORM_TRAIN, x.dtype, x.shape, (x,), g.Composite(eps=float(eps)))
    else:
      for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t.shape != (self.shape[1],):
          raise ShapeError(f"batch_norm: {name} must have shape ({self.shape[1]},), got {t.shape}")
      stats = (running_mean.cast(x.dtype), running_var.cast(x.dtype))
      y = Tensor._make(g.BATCHNORM_EVAL, x.dtype, x.shape, (x, *stats), g.Composite(eps=float(eps)))
    return y.cast(out)._channel_affine(weight, bias)

  def scaled_dot_product_attention(self, key: "Tensor", value: "Tensor", attn_mask: Optional["Tensor"] = None,
                                   dropout_p: float = 0.0, is_causal: bool = False) -> "Tensor":
    """softmax(q @ k^T / sqrt(d) + mask) @ v with q = self (..., L, d), k (..., S, d), v (..., S,
    dv), batch axes broadcasting (the daemon's SCALED_DOT_PRODUCT_ATTENTION). attn_mask
    broadcasts to (..., L, S): bool keeps where true, float is added. is_causal masks keys after
    the query position. dropout_p applies to the attention weights while Tensor.training."""
    q, k, v = self, key, value
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
      raise ShapeError(f"scaled_dot_product_attention needs q, k, v of rank >= 2, got {q.shape}, {k.shape}, {v.shape}")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
      raise ShapeError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit")
    batch = broadcast_shape(broadcast_shape(q.shape[:-2], k.shape[:-2]), v.shape[:-2])
    scores = batch + (q.shape[-2], k.shape[-2])
    if attn_mask is not None:
      if not isinstance(attn_mask, Tensor):
        attn_mask = Tensor(attn_mask)
      if broadcast_shape(attn_mask.shape, scores) != scores:
        raise ShapeError(f"attention mask {attn_mask.shape} does not broadcast to the scores {scores}")
    if dropout_p and Tensor.training:  # the weights themselves are needed: compose it here
      qf = q._float()
      w = (qf @ k.cast(qf.dtype).transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))
      if attn_mask is not None:
        w = attn_mask.where(w, -math.inf) if attn_mask.dtype == dtypes.bool else w + attn_mask.cast(w.dtype)
      if is_causal:
        keep = Tensor.ones(q.shape[-2], k.shape[-2], dtype=dtypes.bool).tril()
        w = keep.where(w, -math.inf)
      return w.softmax(-1).dropout(dropout_p) @ v.cast(w.dtype)
    dt = least_upper_float(least_upper_dtype(q.dtype, k.dtype, v.dtype))
    acc = sum_acc_dtype(dt)
    src = [q.cast(acc), k.cast(acc), v.cast(acc)]
    op = g.SCALED_DOT_PRODUCT_ATTENTION
    if attn_mask is not None:
      src.append(attn_mask if attn_mask.dtype == dtypes.bool else attn_mask.cast(acc))
      op = g.SCALED_DOT_PRODUCT_ATTENTION_MASKED
    out_shape = batch + (q.shape[-2], v.shape[-1])
    return Tensor._make(op, acc, out_shape, tuple(src), g.Composite(causal=bool(is_causal))).cast(dt)

  # --- in-place ops: assign() of the result (the tensor object keeps its identity) ---------------

  def __iadd__(self, x): return self.assign(self + x)
  def __isub__(self, x): return self.assign(self - x)
  def __imul__(self, x): return self.assign(self * x)
  def __itruediv__(self, x): return self.assign(self / x)
  def __ipow__(self, x): return self.assign(self ** x)
  def __imatmul__(self, x): return self.assign(self @ x)


def _axis_of(axis, ndim: int, what: str) -> int:
  if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
    raise AxisError(f"{what}: axis must be an int, got {axis!r}")
  axis = int(axis)
  if not -ndim <= axis < ndim:
    raise AxisError(f"{what}: axis {axis} is out of range for {ndim} axes")
  return axis % ndim


def _ints(v, what: str) -> Tuple[int, ...]:
  vals = (v,) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
  try:
    out = tuple(vals)
  except TypeError:
    raise ShapeError(f"{what} must be an int or a tuple of ints, got {v!r}") from None
  if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in out):
    raise ShapeError(f"{what} must be an int or a tuple of ints, got {v!r}")
  return tuple(int(x) for x in out)


def _ntuple(v, n: int, what: str, low: int) -> Tuple[int, ...]:
  """n values from an int (repeated) or n values, each at least `low`."""
  out = _ints(v, what)
  if len(out) == 1 and not isinstance(v, (tuple, list)):
    out = out * n
  if len(out) != n:
    raise ShapeError(f"{what} needs an int or {n} values (one per spatial axis), got {v!r}")
  if any(x < low for x in out):
    raise ShapeError(f"{what} values must be >= {low}, got {v!r}")
  return out


def _padding_pairs(padding, n: int) -> Tuple[int, ...]:
  """The wire's (before, after) per spatial axis in axis order ((top, bottom, left, right) in
  2-D) from an int, n values (one per axis), or tinygrad's 2n values, which list the pairs from
  the last axis back ((left, right, top, bottom) in 2-D)."""
  p = _ints(padding, "padding")
  if len(p) == 1 and not isinstance(padding, (tuple, list)):
    p = p * n
  if len(p) == n:
    out = tuple(v for x in p for v in (x, x))
  elif len(p) == 2 * n:
    out = tuple(v for i in reversed(range(n)) for v in (p[2 * i], p[2 * i + 1]))
  else:
    raise ShapeError(f"padding needs an int, {n} values or {2 * n} ((before, after) from the last axis back), "
                     f"got {padding!r}")
  if any(x < 0 for x in out):
    raise ShapeError(f"padding must be >= 0, got {padding!r}")
  return out


def _window_out(spatial: Tuple[int, ...], k: Tuple[int, ...], stride: Tuple[int, ...], dil: Tuple[int, ...],
                pads: Tuple[int, ...], what: str) -> Tuple[int, ...]:
  out = []
  for i, size in enumerate(spatial):
    span = dil[i] * (k[i] - 1) + 1
    padded = size + pads[2 * i] + pads[2 * i + 1]
    if padded < span:
      raise ShapeError(f"{what}: a window of {span} (kernel {k[i]}, dilation {dil[i]}) does not fit spatial axis "
                       f"{i} = {size} padded to {padded}")
    out.append((padded - span) // stride[i] + 1)
  return tuple(out)


def _spatial_count(sx: Tuple[int, ...], sw: Tuple[int, ...], what: str, layout: str) -> int:
  """The spatial axes of a convolution: weight.ndim - 2, 1 to 3, the input of the same rank."""
  if not 3 <= len(sw) <= 5 or len(sx) != len(sw):
    raise ShapeError(f"{what} takes input (N, C, *spatial) and weight {layout} of the same rank with 1 to 3 spatial "
                     f"axes, got {sx} and {sw}")
  return len(sw) - 2


def _conv_shape(sx: Tuple[int, ...], sw: Tuple[int, ...], groups: int, stride, dil, pads) -> Tuple[int, ...]:
  o, cg = sw[:2]
  if cg * groups != sx[1] or o % groups:
    raise ShapeError(f"conv2d: weight {sw} with groups={groups} does not fit input {sx} "
                     f"(need C = groups * weight.shape[1] and O divisible by groups)")
  if any(k < 1 for k in sw[2:]):
    raise ShapeError(f"conv2d: empty kernel {sw}")
  return (sx[0], o) + _window_out(sx[2:], sw[2:], stride, dil, pads, "conv2d")


def _reduced_shape(shape: Tuple[int, ...], axes: Tuple[int, ...], keepdim: bool) -> Tuple[int, ...]:
  if keepdim:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))
  return tuple(s for i, s in enumerate(shape) if i not in axes)


def _matmul_shape(sa: Tuple[int, ...], sb: Tuple[int, ...]) -> Tuple[int, ...]:
  """numpy matmul's result shape (the daemon's MATMUL rule), or the error numpy would give."""
  if not sa or not sb:
    raise ShapeError(f"both tensors need to be at least 1D, got {len(sa)}D and {len(sb)}D")
  a = (1,) + sa if len(sa) == 1 else sa
  b = sb + (1,) if len(sb) == 1 else sb
  if a[-1] != b[-2]:
    raise ShapeError(f"cannot matmul {sa} with {sb} ({a[-1]} != {b[-2]})")
  try:
    batch = broadcast_shape(a[:-2], b[:-2])
  except ValueError as e:
    raise ShapeError(f"cannot matmul {sa} with {sb}: batch {e}") from None
  return batch + ((a[-2],) if len(sa) > 1 else ()) + ((b[-1],) if len(sb) > 1 else ())


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


def _require_device(device: Optional[str]) -> str:
  """The canonical name of `device` (None: the default) if tensors can live there, else raises;
  the CPU needs no round trip."""
  from .device import Device
  return Device.require(device)
