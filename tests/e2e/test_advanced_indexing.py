"""Advanced indexing (several index tensors mixed with ints, slices, None and an ellipsis) against
torch's rules: result shapes and values, gradients through the index, and the errors a lazy graph
has to give instead of a data-dependent shape. torch lacks negative slice steps, so most cases use
`_torch_rule`, numpy made to follow torch (ints drop their axis before the tensors broadcast), and
the test against torch itself checks that `_torch_rule` is torch."""
import numpy as np
import pytest

from polygrad import Tensor, dtypes

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")

SHAPE = (4, 5, 6, 3)


def _idx(rng, n, shape):
  """Indices in [-n, n): negative ones count from the end, as in numpy."""
  return rng.integers(-n, n, size=shape).astype(np.int64)


# Each pattern builds an index tuple from index arrays (numpy); the same tuple (with arrays turned
# into our Tensors / torch tensors) indexes all three implementations.
PATTERNS = {
    "two adjacent": lambda r: (_idx(r, 4, (2, 3)), _idx(r, 5, (2, 3))),
    "two adjacent, broadcast": lambda r: (slice(None), _idx(r, 5, (3, 1)), _idx(r, 6, (2,))),
    "three": lambda r: (_idx(r, 4, (5,)), _idx(r, 5, (5,)), _idx(r, 6, (5,))),
    "separated by a slice": lambda r: (_idx(r, 4, (2, 2)), slice(1, 4), _idx(r, 6, (2,))),
    "int and tensor, adjacent": lambda r: (slice(None), 2, _idx(r, 6, (3, 2))),
    "int and tensor, separated": lambda r: (1, slice(None), _idx(r, 6, (4,))),
    "with ellipsis": lambda r: (Ellipsis, _idx(r, 6, (2,)), _idx(r, 3, (2,))),
    "with None": lambda r: (None, _idx(r, 4, (3,)), slice(None, None, -2), _idx(r, 6, (3,))),
    "strided slice between": lambda r: (_idx(r, 4, (2,)), slice(None, None, 2), slice(1, 2), _idx(r, 3, (2,))),
    "0-d index tensors": lambda r: (_idx(r, 4, ()), _idx(r, 5, ())),
    "empty index": lambda r: (_idx(r, 4, (0,)), _idx(r, 5, (0,))),
    "list index": lambda r: ([0, -1, 2], slice(None), [1, 1, 0]),
}


def _expand(ix, ndim):
  if not any(i is Ellipsis for i in ix):
    ix = ix + (Ellipsis,)
  k = next(n for n, i in enumerate(ix) if i is Ellipsis)
  n_real = sum(1 for i in ix if i is not None and i is not Ellipsis)
  return ix[:k] + (slice(None),) * (ndim - n_real) + ix[k + 1:]


def _torch_rule(a, ix):
  """a[ix] by torch's rule, in numpy: ints first (each drops its axis), then the rest."""
  ix = _expand(ix, a.ndim)
  ints = tuple(i if isinstance(i, int) else slice(None) for i in ix if i is not None)
  return a[ints][tuple(i for i in ix if not isinstance(i, int))]


def _grad(shape, ix, w):
  """d sum(a[ix] * w) / da: w added at every position a[ix] read (repeats add up)."""
  where = _torch_rule(np.arange(int(np.prod(shape))).reshape(shape), ix)
  g = np.zeros(int(np.prod(shape)))
  np.add.at(g, where.ravel(), w.ravel())
  return g.reshape(shape)


def _ours(ix):
  return tuple(Tensor(i.astype(np.int32)) if isinstance(i, np.ndarray) else i for i in ix)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_forward_and_gradient(name):
  rng = np.random.default_rng(sum(map(ord, name)))
  ix = PATTERNS[name](rng)
  xs = rng.uniform(-2, 2, SHAPE).astype(np.float32)
  want = _torch_rule(xs, ix)
  x = Tensor(xs, requires_grad=True)
  out = x[_ours(ix)]
  assert out.shape == want.shape
  w = rng.uniform(-1, 1, want.shape).astype(np.float32)
  (out * Tensor(w)).sum().backward()
  Tensor.realize(out, x.grad)
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), _grad(SHAPE, ix, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", [n for n in PATTERNS if n not in ("with None", "empty index")])
def test_the_reference_is_torch(name):
  rng = np.random.default_rng(sum(map(ord, name)))
  ix = PATTERNS[name](rng)
  xs = rng.uniform(-2, 2, SHAPE)
  tix = tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in ix)
  tx = torch.tensor(xs, requires_grad=True)
  tout = tx[tix]
  w = rng.uniform(-1, 1, tuple(tout.shape))
  (tout * torch.tensor(w)).sum().backward()
  np.testing.assert_array_equal(tout.detach().numpy(), _torch_rule(xs, ix))
  np.testing.assert_allclose(tx.grad.numpy(), _grad(SHAPE, ix, w), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float16])
def test_other_dtypes_keep_their_values_and_dtype(dtype):
  rng = np.random.default_rng(3)
  xs = rng.integers(0, 100, SHAPE).astype(dtype)
  if dtype == np.int64:
    xs = xs * (1 << 40) + 7  # beyond float precision: the selection must be exact
  ix = (slice(None), _idx(rng, 5, (3,)), _idx(rng, 6, (3,)))
  out = Tensor(xs)[_ours(ix)]
  got = out.numpy()
  assert got.dtype == xs.dtype
  np.testing.assert_array_equal(got, _torch_rule(xs, ix))


def test_random_index_tuples_follow_torch():
  """Random mixes of ints, slices (any step), None, an ellipsis and broadcastable index tensors.
  Indices lie in [-3, 3), valid on every axis, since an ellipsis moves entries between axes."""
  rng = np.random.default_rng(11)
  xs = rng.uniform(-1, 1, SHAPE).astype(np.float32)
  x = Tensor(xs)
  cases = []
  while len(cases) < 40:
    bshape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))

    def tensor():
      # a suffix of the broadcast shape, some dims 1: broadcasting between index tensors
      sub = bshape[int(rng.integers(0, len(bshape) + 1)):]
      return _idx(rng, 3, tuple(1 if rng.random() < 0.3 else s for s in sub))

    ix = []
    for n in SHAPE:
      kind = rng.choice(["tensor", "slice", "int", "none"], p=[0.45, 0.3, 0.15, 0.1])
      if kind == "none":
        ix.append(None)
      if kind == "tensor":
        ix.append(tensor())
      elif kind == "int":
        ix.append(int(rng.integers(-3, 3)))
      else:
        start, stop = sorted(int(v) for v in rng.integers(-n, n + 1, 2))
        ix.append(slice(start, stop, int(rng.choice([1, 2, -1, -2]))))
    if rng.random() < 0.3:  # drop a tail and put an ellipsis anywhere
      ix = ix[:int(rng.integers(1, len(ix)))]
      ix.insert(int(rng.integers(0, len(ix) + 1)), Ellipsis)
    if not any(isinstance(i, np.ndarray) for i in ix):
      ix.insert(int(rng.integers(0, len(ix) + 1)), tensor())
    if sum(1 for i in ix if i is not None and i is not Ellipsis) > len(SHAPE):
      continue
    ix = tuple(ix)
    cases.append((ix, x[_ours(ix)]))
  Tensor.realize(*[out for _, out in cases])
  for ix, out in cases:
    want = _torch_rule(xs, ix)
    assert out.shape == want.shape, ix
    np.testing.assert_array_equal(out.numpy(), want, err_msg=str(ix))


def test_out_of_range_indices_select_zeros():
  xs = np.arange(20, dtype=np.float32).reshape(4, 5)
  got = Tensor(xs)[Tensor(np.array([0, 7, -9], dtype=np.int32)), Tensor(np.array([1, 1, 1], dtype=np.int32))].numpy()
  np.testing.assert_array_equal(got, [1, 0, 0])


def test_bool_masks_and_float_indices_are_refused_with_the_reason():
  x = Tensor(np.ones((3, 4), np.float32))
  with pytest.raises(IndexError, match="data-dependent shape"):
    x[Tensor(np.array([True, False, True]))]
  with pytest.raises(IndexError, match="must be integers"):
    x[Tensor(np.array([0.0, 1.0], np.float32)), 0]
  with pytest.raises(IndexError, match="out of bounds"):
    x[Tensor(np.array([0], np.int32)), 9]
  with pytest.raises(IndexError, match="too many indices"):
    x[Tensor(np.array([0], np.int32)), 0, 0]
