"""Random graphs mixing elementwise ops, reductions, movement, softmax and matmul, realized
together in one request and compared with numpy (float64 reference)."""
import numpy as np
import pytest

from polygrad import Tensor

pytestmark = pytest.mark.usefixtures("live_daemon")

SHAPE = (4, 5, 6)


def _grow(rng, pool):
  """Append one random op applied to members of the pool of (tensor, reference) pairs."""
  t, r = pool[rng.integers(len(pool))]
  full = r.shape == SHAPE
  k = int(rng.integers(9))
  if k == 0:
    t2, r2 = pool[rng.integers(len(pool))]
    op = int(rng.integers(4))
    if op == 2:  # keep products bounded
      t, r = t.sin(), np.sin(r)
    ours = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x.maximum(y)][op]
    ref = [np.add, np.subtract, np.multiply, np.maximum][op]
    return ours(t, t2), ref(r, r2)
  if k == 1:
    return t.sin(), np.sin(r)
  if k == 2:
    ax = int(rng.integers(3))
    if rng.integers(2):
      return t.sum(ax, keepdim=True) * 0.2, r.sum(ax, keepdims=True) * 0.2
    return t.max(ax, keepdim=True), r.max(ax, keepdims=True)
  if k == 3 and full:
    ax = int(rng.integers(3))
    return t.flip(ax), np.flip(r, ax)
  if k == 4 and full:
    ax = int(rng.integers(3))
    pads = [(0, 0)] * 3
    pads[ax] = (1, 0)
    return t.pad(pads).shrink([(0, s) for s in SHAPE]), np.pad(r, pads)[tuple(slice(0, s) for s in SHAPE)]
  if k == 5:
    c, rc = pool[rng.integers(len(pool))]
    return (c < t).where(t, c * 0.5), np.where(rc < r, r, rc * 0.5)
  if k == 6 and full:
    return (t.reshape(4, 30).permute(1, 0).reshape(6, 5, 4).permute(2, 1, 0),
            r.reshape(4, 30).T.reshape(6, 5, 4).transpose(2, 1, 0))
  if k == 7:
    e, re_ = (t - t.max(-1, keepdim=True)).exp(), np.exp(r - r.max(-1, keepdims=True))
    return e / e.sum(-1, keepdim=True), re_ / re_.sum(-1, keepdims=True)
  if k == 8 and full:
    w = rng.uniform(-1, 1, (6, 6)).astype(np.float32)
    return (t @ Tensor(w)) * 0.3, (r @ w.astype(np.float64)) * 0.3
  return None


@pytest.mark.parametrize("seed", range(12))
def test_random_graph(seed):
  rng = np.random.default_rng(1000 + seed)
  pool = []
  for _ in range(3):
    a = rng.uniform(-2, 2, SHAPE).astype(np.float32)
    pool.append((Tensor(a), a.astype(np.float64)))
  while len(pool) < 3 + 25:
    grown = _grow(rng, pool)
    if grown is not None:
      pool.append(grown)
  outs = pool[3:]
  Tensor.realize(*[t for t, _ in outs])
  for i, (t, r) in enumerate(outs):
    got = t.numpy()
    assert got.shape == r.shape, (i, got.shape, r.shape)
    np.testing.assert_allclose(got, r, rtol=1e-4, atol=1e-4, err_msg=f"output {i}")
