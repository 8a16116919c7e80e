"""Convolution, pooling and index ops (the daemon's CONV2D, MAX_POOL2D, AVG_POOL2D, CUMSUM,
ONE_HOT, ARGMAX/ARGMIN, TRIL/TRIU, GATHER, ARANGE) against PyTorch: forward, and backward through
the daemon's GRADIENT via backward(); nn.Conv2d with copied weights; the local shape rules."""
import math

import numpy as np
import pytest

from conftest import assert_close
import polygrad
from polygrad import Tensor, dtypes, nn

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")
F = torch.nn.functional

pytestmark = pytest.mark.usefixtures("live_daemon")


def _check(rng, ours, ref, shapes, lo=-2.0, hi=2.0, tol=1e-4):
  """Forward and every input's gradient (loss = sum(out * w) with random w) against torch."""
  xs = [rng.uniform(lo, hi, s).astype(np.float32) for s in shapes]
  ts = [Tensor(x, requires_grad=True) for x in xs]
  out = ours(*ts)
  w = rng.uniform(-1, 1, out.shape).astype(np.float32)
  (out * Tensor(w)).sum().backward()
  Tensor.realize(out, *[t.grad for t in ts])
  txs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
  tout = ref(*txs)
  (tout * torch.tensor(w, dtype=torch.float64)).sum().backward()
  assert out.shape == tuple(tout.shape)
  assert_close(out.numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
  for i, (t, tx) in enumerate(zip(ts, txs)):
    want = tx.grad.numpy() if tx.grad is not None else np.zeros(t.shape)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=tol, atol=tol, err_msg=f"grad of input {i}")


# --- conv2d -----------------------------------------------------------------------------------------

CONV_CASES = [
    # (N, C, H, W), (O, KH, KW), stride, padding, dilation, groups
    ((2, 3, 7, 7), (4, 3, 3), 1, 0, 1, 1),
    ((1, 3, 8, 6), (5, 3, 3), 2, 1, 1, 1),
    ((2, 2, 9, 9), (3, 3, 2), (2, 1), (1, 2), 1, 1),
    ((1, 4, 9, 10), (4, 3, 3), 1, 2, 2, 1),
    ((2, 4, 7, 7), (6, 3, 3), 1, 1, 1, 2),
    ((1, 6, 8, 8), (6, 3, 3), 2, 1, (1, 2), 6),  # depthwise
    ((1, 2, 5, 5), (2, 1, 1), 1, 0, 1, 1),  # 1x1
    ((1, 3, 6, 7), (2, 2, 3), (1, 2), 0, (2, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv2d_matches_torch(rng, case):
  xs, (o, kh, kw), stride, padding, dilation, groups = case
  ws = (o, xs[1] // groups, kh, kw)
  _check(rng, lambda x, w, b: x.conv2d(w, b, groups=groups, stride=stride, dilation=dilation, padding=padding),
         lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups),
         [xs, ws, (o,)])


def test_conv2d_without_bias_and_tinygrad_four_padding(rng):
  # tinygrad's 4-tuple is (left, right, top, bottom), as torch's F.pad
  _check(rng, lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)),
         lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w), [(1, 2, 5, 6), (3, 2, 3, 3)])


def test_conv2d_half_accumulates_and_casts_back(rng):
  x = rng.uniform(-1, 1, (1, 3, 6, 6)).astype(np.float32)
  w = rng.uniform(-1, 1, (2, 3, 3, 3)).astype(np.float32)
  y = Tensor(x, dtype=dtypes.float16).conv2d(Tensor(w, dtype=dtypes.float16), padding=1)
  assert y.dtype == dtypes.float16
  ref = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
  assert_close(y.numpy(), ref, rtol=1e-2, atol=2e-2)


def test_nn_conv2d_matches_torch_with_copied_weights(rng):
  for kw in [dict(), dict(stride=2, padding=1), dict(padding=(1, 2), dilation=2), dict(groups=2, bias=False),
             dict(padding="same", dilation=(2, 1))]:
    ours = nn.Conv2d(4, 6, 3, **kw)
    ref = torch.nn.Conv2d(4, 6, 3, **kw).double()
    assert ours.weight.shape == tuple(ref.weight.shape)
    with torch.no_grad():
      ref.weight.copy_(torch.tensor(ours.weight.numpy()))
      if ours.bias is not None:
        ref.bias.copy_(torch.tensor(ours.bias.numpy()))
    assert (ours.bias is None) == (ref.bias is None)
    x = rng.uniform(-1, 1, (2, 4, 9, 8)).astype(np.float32)
    y = ours(Tensor(x))
    y.sum().backward()
    ty = ref(torch.tensor(x, dtype=torch.float64))
    ty.sum().backward()
    assert_close(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    assert_close(ours.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-4, atol=1e-3)
    if ours.bias is not None:
      assert_close(ours.bias.grad.numpy(), ref.bias.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_nn_conv2d_init_is_kaiming_uniform():
  Tensor.manual_seed(3)
  m = nn.Conv2d(8, 16, (3, 5), groups=2)
  bound = 1 / math.sqrt(8 // 2 * 3 * 5)
  w, b = m.weight.numpy(), m.bias.numpy()
  assert w.shape == (16, 4, 3, 5) and b.shape == (16,)
  assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
  assert np.abs(b).max() <= bound
  assert m.weight.requires_grad and m.bias.requires_grad
  assert nn.Conv2d(2, 2, 1, bias=False).bias is None


def test_conv_transpose_init_is_uniform_in_torch_bounds():
  m = nn.ConvTranspose2d(4, 6, (3, 2), groups=2)
  bound = 1 / math.sqrt(6 // 2 * 3 * 2)  # torch's fan_in of a transposed conv: weight.shape[1] * kernel
  w, b = m.weight.numpy(), m.bias.numpy()
  assert w.shape == (4, 3, 3, 2) and b.shape == (6,)
  assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
  assert nn.ConvTranspose2d(2, 2, 1, bias=False).bias is None


# --- pooling ----------------------------------------------------------------------------------------

POOL_CASES = [
    # kernel, stride, padding, dilation
    ((2, 2), None, 0, 1),
    (3, 2, 1, 1),
    ((3, 2), (1, 2), (1, 0), 1),
    (2, 1, 1, 2),
    (3, None, 1, 1),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_max_pool2d_matches_torch(rng, case):
  k, s, p, d = case
  _check(rng, lambda x: x.max_pool2d(k, s, d, p), lambda x: F.max_pool2d(x, k, s, p, d), [(2, 3, 7, 8)])


@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[3] == 1], ids=lambda c: str(c))
def test_avg_pool2d_matches_torch_counting_padding(rng, case):
  k, s, p, _ = case
  _check(rng, lambda x: x.avg_pool2d(k, s, padding=p),
         lambda x: F.avg_pool2d(x, k, s, p, count_include_pad=True), [(2, 3, 7, 8)])


def test_avg_pool2d_with_dilation_matches_unfold(rng):
  x = rng.uniform(-1, 1, (1, 2, 7, 7)).astype(np.float32)
  ref = F.unfold(F.pad(torch.tensor(x), (1, 1, 1, 1)), 2, dilation=2).reshape(1, 2, 4, -1).mean(2).reshape(1, 2, 7, 7)
  assert_close(Tensor(x).avg_pool2d(2, 1, dilation=2, padding=1).numpy(), ref.numpy(), atol=1e-5)


def test_pools_on_3d_and_int_inputs():
  x = np.arange(2 * 4 * 4).reshape(2, 4, 4).astype(np.int32) - 10
  got = Tensor(x).max_pool2d(2, padding=1).numpy()
  want = F.max_pool2d(torch.tensor(x, dtype=torch.float64), 2, padding=1).numpy()
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, want)
  a = Tensor(x).avg_pool2d(2)
  assert a.dtype == dtypes.float32
  assert_close(a.numpy(), F.avg_pool2d(torch.tensor(x, dtype=torch.float64), 2).numpy())


# --- cumsum, tril, triu, gather ---------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_matches_torch(rng, axis):
  _check(rng, lambda x: x.cumsum(axis), lambda x: torch.cumsum(x, axis), [(3, 5, 4)])


def test_cumsum_ints_bools_and_0d():
  np.testing.assert_array_equal(Tensor([[1, 2], [3, 4]]).cumsum(1).numpy(), [[1, 3], [3, 7]])
  b = Tensor([True, False, True]).cumsum()
  assert dtypes.is_int(b.dtype)
  np.testing.assert_array_equal(b.numpy(), [1, 1, 2])
  assert Tensor(3.0).cumsum().item() == 3.0


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
def test_tril_triu_match_torch(rng, diagonal):
  _check(rng, lambda x: x.tril(diagonal), lambda x: torch.tril(x, diagonal), [(2, 4, 5)])
  _check(rng, lambda x: x.triu(diagonal), lambda x: torch.triu(x, diagonal), [(5, 3)])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_matches_torch(rng, dim):
  shape = (3, 4, 5)
  ishape = list(shape)
  ishape[dim] = 6
  idx = rng.integers(0, shape[dim], ishape).astype(np.int32)
  _check(rng, lambda x: x.gather(dim, Tensor(idx)), lambda x: torch.gather(x, dim, torch.tensor(idx, dtype=torch.int64)),
         [shape])


def test_gather_with_a_smaller_index_on_other_axes(rng):
  idx = rng.integers(0, 5, (2, 3)).astype(np.int64)
  _check(rng, lambda x: x.gather(1, Tensor(idx)), lambda x: torch.gather(x, 1, torch.tensor(idx)), [(4, 5)])


# --- one_hot, argmax, argmin, arange ----------------------------------------------------------------

def test_one_hot_matches_torch(rng):
  idx = rng.integers(0, 7, (3, 4)).astype(np.int32)
  got = Tensor(idx).one_hot(7)
  assert got.shape == (3, 4, 7) and got.dtype == dtypes.int32
  np.testing.assert_array_equal(got.numpy(), F.one_hot(torch.tensor(idx, dtype=torch.int64), 7).numpy())
  assert Tensor(np.array([1, 0], np.int64)).one_hot(2).dtype == dtypes.int64


@pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_argmax_argmin_match_torch(rng, axis, keepdim):
  x = rng.standard_normal((4, 6)).astype(np.float32)
  for ours, ref in [(Tensor(x).argmax(axis, keepdim), torch.argmax(torch.tensor(x), axis, keepdim)),
                    (Tensor(x).argmin(axis, keepdim), torch.argmin(torch.tensor(x), axis, keepdim))]:
    assert ours.dtype == dtypes.int32 and ours.shape == tuple(ref.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_argmax_ties_first_occurrence_wins():
  x = np.array([[1, 5, 5, 2], [7, 7, 7, 7], [0, -1, 0, -1]], np.float32)
  np.testing.assert_array_equal(Tensor(x).argmax(1).numpy(), np.argmax(x, 1))
  np.testing.assert_array_equal(Tensor(x).argmin(1).numpy(), np.argmin(x, 1))
  np.testing.assert_array_equal(Tensor(x).argmax(0).numpy(), np.argmax(x, 0))
  assert Tensor(x).argmax().item() == np.argmax(x) == 4
  assert Tensor(x).argmin().item() == np.argmin(x) == 9
  xi = np.array([3, 9, 1, 9, 1], np.int32)
  assert Tensor(xi).argmax().item() == 1 and Tensor(xi).argmin().item() == 2
  assert Tensor([True, False, True]).argmax().item() == 0


@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 9), {}), ((10, 0, -3), {}), ((1, 2, 0.25), {}),
                                     ((-1.5, 2.0, 0.5), {}), ((0, 5), {"dtype": dtypes.float32}),
                                     ((0, 4, 0.5), {"dtype": dtypes.int32}), ((3, 3), {})])
def test_arange_matches_numpy(args, kw):
  t = Tensor.arange(*args, **kw)
  want = np.arange(*args, dtype=np.float64)
  if "dtype" in kw:
    want = want.astype(kw["dtype"].np)
  assert t.shape == want.shape
  if t.numel():
    from polygrad import graph as g
    assert "ARANGE" in {g.OP_NAMES[n.op] for n in g.GRAPH.toposort(t._node)}
  assert_close(t.numpy(), want)


def test_arange_default_dtypes():
  assert Tensor.arange(4).dtype == dtypes.default_int
  assert Tensor.arange(0, 1, 0.5).dtype == dtypes.default_float


# --- local shape rules: ValueError before any round trip ----------------------------------------------

BAD = [
    lambda: Tensor.zeros(1, 3, 5, 5).conv2d(Tensor.zeros(2, 2, 3, 3)),  # channels
    lambda: Tensor.zeros(1, 4, 5, 5).conv2d(Tensor.zeros(3, 2, 3, 3), groups=2),  # O % groups
    lambda: Tensor.zeros(3, 5, 5).conv2d(Tensor.zeros(2, 3, 3, 3)),  # rank
    lambda: Tensor.zeros(1, 3, 2, 2).conv2d(Tensor.zeros(2, 3, 3, 3)),  # window does not fit
    lambda: Tensor.zeros(1, 3, 5, 5).conv2d(Tensor.zeros(2, 3, 3, 3), stride=0),
    lambda: Tensor.zeros(1, 3, 5, 5).conv2d(Tensor.zeros(2, 3, 3, 3), padding=-3),  # crops more than the axis
    lambda: Tensor.zeros(1, 3, 5, 5).conv2d(Tensor.zeros(2, 3, 3, 3), padding=(1, 2, 3)),
    lambda: Tensor.zeros(1, 3, 5, 5).conv2d(Tensor.zeros(2, 3, 3, 3), bias=Tensor.zeros(3)),
    lambda: Tensor.zeros(5).max_pool2d(),
    lambda: Tensor.zeros(1, 1, 2, 2).max_pool2d(3),
    lambda: Tensor.zeros(1, 1, 4, 4).avg_pool2d(2, dilation=0),
    lambda: Tensor.zeros(3).cumsum(1),
    lambda: Tensor.zeros(3).tril(),
    lambda: Tensor.zeros(3, 3).triu(0.5),
    lambda: Tensor([1, 2]).one_hot(0),
    lambda: Tensor.zeros(3, 3).argmax(2),
    lambda: Tensor.zeros(3, 0).argmax(1),
    lambda: Tensor.zeros(3, 4).gather(0, Tensor.zeros(2, 4)),  # float index
    lambda: Tensor.zeros(3, 4).gather(0, Tensor.zeros(2, 5, dtype=dtypes.int32)),
    lambda: Tensor.zeros(3, 4).gather(0, Tensor.zeros(2, dtype=dtypes.int32)),
    lambda: Tensor.zeros(3, 4).gather(2, Tensor.zeros(3, 4, dtype=dtypes.int32)),
    lambda: Tensor.arange(0, 5, 0),
    lambda: Tensor.arange(0, math.inf),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_raises_value_error_locally(i, monkeypatch):
  from polygrad import graph as g

  def no_round_trip(*a, **k):
    raise AssertionError("a bad input reached the daemon")
  monkeypatch.setattr(g.GRAPH, "realize", no_round_trip)
  with pytest.raises(ValueError):
    BAD[i]()


def test_one_hot_needs_integers_or_integral_floats():
  with pytest.raises(TypeError):
    Tensor([True]).one_hot(2)
  # the seed polygrad API: float class indices are cast (test_seed_api.py)
  np.testing.assert_array_equal(Tensor([1.0]).one_hot(2).numpy(), [[0, 1]])
