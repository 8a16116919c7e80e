"""Writing into part of a tensor: `t[idx] = v` and assign into a view (`t.shrink(...).assign(v)`,
tinygrad's KV-cache write), against numpy's setitem on the same data, and gradients against torch.
A view written through changes its base, as in torch and tinygrad; a tensor that is not a view is
rebound as before."""
import numpy as np
import pytest

from polygrad import Tensor, TinyJit, Variable, dtypes
from polygrad.errors import ShapeError

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")

SHAPE = (4, 5, 6)

# Each index is written into a random array with numpy and with polygrad; v takes what the index
# selects (or a number). numpy's rules are torch's here (no duplicate positions within one index).
BASIC = {
  "int": (1,),
  "negative int": (-1, 2),
  "slice": (slice(1, 3),),
  "slice with step": (slice(None), slice(0, 5, 2)),
  "negative step": (slice(None, None, -2), slice(None), 3),
  "ellipsis": (Ellipsis, slice(2, 5)),
  "None": (None, 2, slice(1, 4)),
  "empty slice": (slice(3, 3),),
  "whole": (Ellipsis,),
  "scalar element": (3, 4, 5),
}
ADVANCED = {
  "list": ([0, 3, 2],),
  "list, slice, list": ([0, 2], slice(1, 4), [5, 1]),
  "int and list": (1, [4, 0, 2]),
  "tensor index": (slice(None), np.array([[0, 4], [3, 1]])),
}


def _tensor_index(idx):
  return tuple(Tensor(i) if isinstance(i, np.ndarray) else i for i in idx)


@pytest.mark.parametrize("name", sorted(BASIC) + sorted(ADVANCED))
@pytest.mark.parametrize("as_number", [False, True])
def test_setitem_matches_numpy(rng, name, as_number):
  idx = BASIC.get(name, ADVANCED.get(name))
  x = rng.standard_normal(SHAPE).astype(np.float32)
  want = x.copy()
  selected = want[idx].shape
  v = np.float32(2.5) if as_number else rng.standard_normal(selected).astype(np.float32)
  want[idx] = v
  t = Tensor(x)
  t[_tensor_index(idx)] = float(v) if as_number else Tensor(v)
  np.testing.assert_array_equal(t.numpy(), want)


def test_setitem_broadcasts_casts_and_keeps_the_tensor(rng):
  x = rng.integers(0, 9, SHAPE).astype(np.int32)
  t = Tensor(x)
  same = t
  t[:, 1] = Tensor([1.7, 2.2, 3.9, 4.1, 5.5, 6.0])  # float into int32 truncates, broadcast over axis 0
  want = x.copy()
  want[:, 1] = np.array([1.7, 2.2, 3.9, 4.1, 5.5, 6.0]).astype(np.int32)
  assert same is t and t.dtype == dtypes.int32
  np.testing.assert_array_equal(t.numpy(), want)


def test_a_bool_mask_writes_where_it_is_true(rng):
  x = rng.standard_normal(SHAPE).astype(np.float32)
  t = Tensor(x)
  t[t > 0.5] = -1.0
  want = x.copy()
  want[want > 0.5] = -1.0
  np.testing.assert_array_equal(t.numpy(), want)
  with pytest.raises(IndexError, match="bool mask index must have the tensor's shape"):
    t[Tensor([True, False])] = 0.0


def test_repeated_positions_take_the_last_write():
  t = Tensor.zeros(5).contiguous()
  t[[1, 3, 1]] = Tensor([7.0, 8.0, 9.0])
  want = np.zeros(5, np.float32)
  want[[1, 3, 1]] = [7.0, 8.0, 9.0]
  np.testing.assert_array_equal(t.numpy(), want)


def test_assign_into_a_view_writes_its_base():
  # tinygrad's KV cache: cache.shrink(...).assign(new) writes rows of the cache.
  cache = Tensor.zeros(6, 3).contiguous().realize()
  cache.shrink(((2, 4), None)).assign(Tensor.ones(2, 3)).realize()
  want = np.zeros((6, 3), np.float32)
  want[2:4] = 1
  np.testing.assert_array_equal(cache.numpy(), want)
  # A chain of views (reshape, permute, a strided slice, a flip) written twice: the view stays a
  # view of its base and reads what was written.
  base = Tensor(np.arange(24, dtype=np.float32))
  view = base.reshape(4, 6).T[::2].flip(1)
  ref = np.arange(24, dtype=np.float32)
  rview = ref.reshape(4, 6).T[::2][:, ::-1]
  view.assign(Tensor.full(view.shape, -3.0))
  view.assign(view * 2)
  rview[...] = -6.0
  np.testing.assert_array_equal(base.numpy(), ref)
  np.testing.assert_array_equal(view.numpy(), rview)


def test_two_views_taken_before_either_write_both_land():
  base = Tensor.zeros(4).contiguous().realize()
  a, b = base[:2], base[2:]
  a.realize()  # a realized view is still a view
  a.assign(Tensor([1.0, 2.0]))
  b.assign(Tensor([3.0, 4.0]))
  assert base.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_an_expanded_view_is_refused_at_the_assign():
  row = Tensor([1.0, 2.0, 3.0])
  wide = row.reshape(1, 3).expand(4, 3)
  with pytest.raises(ShapeError, match="expands its base"):
    wide[0] = 5.0
  assert row.tolist() == [1.0, 2.0, 3.0]


def test_gradients_through_a_setitem_match_torch(rng):
  x0 = rng.standard_normal((5, 4)).astype(np.float32)
  w0 = rng.standard_normal((2, 2)).astype(np.float32)
  x, w = Tensor(x0, requires_grad=True), Tensor(w0, requires_grad=True)
  y = x * 1.5
  y[1:3, ::2] = w * w
  (y * y).sum().backward()
  tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
  ty = tx * 1.5
  ty[1:3, ::2] = tw * tw
  (ty * ty).sum().backward()
  np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)


def test_a_kv_cache_written_through_a_view_inside_a_tinyjit():
  cache = Tensor.zeros(8, 2).contiguous().realize()
  want = np.zeros((8, 2), np.float32)

  @TinyJit
  def step(pos, x):
    cache.shrink(((pos, pos + 1), None)).assign(x)
    return cache.sum(0).realize()

  for p in range(6):
    pos = Variable("pos", 0, 7).bind(p)
    out = step(pos, Tensor([[p + 1.0, -p]]))
    want[p] = [p + 1.0, -p]
    np.testing.assert_array_equal(out.numpy(), want.sum(0))
  np.testing.assert_array_equal(cache.numpy(), want)


def test_views_read_what_their_base_is_given():
  # As torch: a view taken before a write to its base reads the new value.
  t = Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
  tt = torch.arange(6, dtype=torch.float32).reshape(3, 2)
  row, trow = t[0], tt[0]
  t[0] = t[1]
  tt[0] = tt[1]
  t[2] = row
  tt[2] = trow
  np.testing.assert_array_equal(t.numpy(), tt.numpy())
  np.testing.assert_array_equal(row.numpy(), trow.numpy())
  # t[1] += 2 is a getitem, an in-place add on the view and a setitem: the view writes t.
  t[1] += 2
  tt[1] += 2
  np.testing.assert_array_equal(t.numpy(), tt.numpy())


def test_contiguous_ends_the_view_and_a_number_fills():
  base = Tensor(np.arange(4, dtype=np.float32))
  own = base.reshape(2, 2).contiguous()  # tinygrad: a buffer of its own
  own[0] = 5.0
  view = base.reshape(2, 2)
  view[1].assign(7.0)
  assert own.tolist() == [[5.0, 5.0], [2.0, 3.0]]
  assert base.tolist() == [0.0, 1.0, 7.0, 7.0]


def test_advanced_setitem_writes_rows_of_the_indexed_axes(rng):
  # numpy's "combining advanced and basic indexing" example, smaller: the write is a scatter over
  # the rows of the indexed axes (4 x 6 positions), not over every element.
  x = rng.integers(0, 9, (3, 4, 5, 6, 2)).astype(np.int32)
  i1, i2 = np.array([3, 1, 0, 2]), np.array([[[0], [1], [5]], [[3], [4], [2]]])
  v = rng.integers(10, 99, (2, 3, 4, 3, 5, 2)).astype(np.int32)
  t = Tensor(x)
  t[:, Tensor(i1), :, Tensor(i2), :] = Tensor(v)
  want = x.copy()
  want[:, i1, :, i2, :] = v
  np.testing.assert_array_equal(t.numpy(), want)
  b = Tensor(np.zeros((3, 4), bool))
  b[[0, 2], 1] = True
  assert b.numpy().tolist() == [[False, True, False, False], [False] * 4, [False, True, False, False]]
