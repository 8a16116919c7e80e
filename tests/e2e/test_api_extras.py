"""Issue 17: the smaller Tensor functions tinygrad documents — normal, replace, from_blob,
from_url, contiguous_backward — and the ones that say why they are not here (shard, the
scheduler views)."""
import ctypes
import gzip
import http.server
import threading

import numpy as np
import pytest

from polygrad import Tensor, dtypes
from polygrad.errors import ShapeError

pytestmark = pytest.mark.usefixtures("live_daemon")


def test_normal_has_its_mean_and_std():
  Tensor.manual_seed(3)
  x = Tensor.normal(200, 100, mean=5.0, std=0.5).numpy()
  assert x.shape == (200, 100) and x.dtype == np.float32
  assert abs(x.mean() - 5.0) < 0.02 and abs(x.std() - 0.5) < 0.02  # 20000 samples: 5 sigma bounds
  Tensor.manual_seed(3)
  np.testing.assert_array_equal(Tensor.normal(200, 100, mean=5.0, std=0.5).numpy(), x)


def test_replace_takes_the_other_tensors_values_and_dtype_and_checks_shape():
  a = Tensor([1.0, 2.0])
  b = Tensor([3, 4], dtype=dtypes.int32)
  assert a.replace(b) is a and a.dtype == dtypes.int32
  np.testing.assert_array_equal(a.numpy(), [3, 4])
  with pytest.raises(ShapeError, match=r"replace: shape \(3,\) differs from \(2,\)") as e:
    a.replace(Tensor([1, 2, 3]))
  assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)


@pytest.mark.parametrize("dt,ct", [("float32", ctypes.c_float), ("int64", ctypes.c_int64), ("uint8", ctypes.c_uint8)])
def test_from_blob_copies_memory_at_an_address(dt, ct):
  buf = (ct * 6)(*range(6))
  t = Tensor.from_blob(ctypes.addressof(buf), (2, 3), dtype=getattr(dtypes, dt))
  for i in range(6):
    buf[i] = 0  # copied when made: later writes do not show
  np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3))
  assert t.dtype == getattr(dtypes, dt)


def test_from_url_reads_bytes_and_gunzips(tmp_path):
  payload = bytes(range(256)) * 3

  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
      body = gzip.compress(payload) if self.path.endswith(".gz") else payload
      self.send_response(200)
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)

    def log_message(self, *a):
      pass

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    t = Tensor.from_url(f"{base}/data")
    assert t.dtype == dtypes.uint8 and t.shape == (768,)
    assert t.numpy().tobytes() == payload
    assert Tensor.from_url(f"{base}/data.gz", gunzip=True).numpy().tobytes() == payload
  finally:
    server.shutdown()
  with pytest.raises(ValueError, match="http:// and https://"):
    Tensor.from_url("file:///etc/passwd")


def test_contiguous_backward_is_the_identity_with_gradient():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x.contiguous_backward() * 3).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_what_is_not_here_says_why():
  with pytest.raises(NotImplementedError, match="multi-device"):
    Tensor.ones(4).shard(("CPU", "CPU"))
  with pytest.raises(NotImplementedError, match="multi-device"):
    Tensor.ones(4).shard_(("CPU", "CPU"))
  for name in ("schedule_linear", "linear_with_vars"):
    with pytest.raises(NotImplementedError, match="scheduler"):
      getattr(Tensor.ones(2), name)()


torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")
F = torch.nn.functional


@pytest.mark.parametrize("shape,kw", [((5, 4), {}), ((5, 4), {"reduction": "sum"}), ((5, 4), {"reduction": "none"}),
                                      ((3, 4, 2), {}), ((4,), {}), ((6, 3), {"ignore_index": 1}),
                                      ((6, 3), {"weight": True}), ((6, 3, 2), {"weight": True, "ignore_index": 0})])
def test_nll_loss_matches_torch_forward_and_backward(rng, shape, kw):
  x = rng.standard_normal(shape).astype(np.float32)
  y = rng.integers(0, shape[1] if len(shape) > 1 else shape[0], shape[:1] + shape[2:] if len(shape) > 1 else ())
  w = rng.uniform(0.5, 2, shape[1] if len(shape) > 1 else shape[0]).astype(np.float32)
  args = dict(kw)
  targs = dict(kw)
  if kw.get("weight"):
    args["weight"], targs["weight"] = Tensor(w), torch.tensor(w)
  px, tx = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  got = px.nll_loss(Tensor(y.astype(np.int32)), **args)
  ref = F.nll_loss(tx, torch.tensor(y), **targs)
  np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
  got.sum().backward()
  ref.sum().backward()
  np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_randperm_is_a_permutation_drawn_from_the_seed():
  Tensor.manual_seed(5)
  p = Tensor.randperm(50).numpy()
  assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
  Tensor.manual_seed(5)
  np.testing.assert_array_equal(Tensor.randperm(50).numpy(), p)


def test_multinomial_draws_follow_the_weights():
  Tensor.manual_seed(1)
  w = Tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
  with_r = w.multinomial(4000, replacement=True).numpy()
  assert with_r.shape == (2, 4000) and (with_r[1] == 0).all() and (with_r[0] != 0).all()
  assert abs((with_r[0] == 2).mean() - 0.75) < 0.03  # 4000 draws: about 4 sigma
  without = Tensor([1.0, 2.0, 0.0, 4.0]).multinomial(3).numpy()
  assert sorted(without.tolist()) == [0, 1, 3]  # never a zero weight, never twice
  with pytest.raises(ValueError, match="without replacement"):
    Tensor([1.0, 2.0]).multinomial(3)


@pytest.mark.parametrize("shape,dim,size,step", [((7,), 0, 3, 2), ((2, 9, 3), 1, 4, 1), ((4, 5), -1, 5, 3), ((3, 4), 0, 0, 1)])
def test_unfold_matches_torch(rng, shape, dim, size, step):
  x = rng.standard_normal(shape).astype(np.float32)
  px, tx = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  got, ref = px.unfold(dim, size, step), tx.unfold(dim, size, step)
  np.testing.assert_array_equal(got.numpy(), ref.detach().numpy())
  if got.numel():
    (got * 2).sum().backward()
    (ref * 2).sum().backward()
    np.testing.assert_array_equal(px.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("x", [[[0, 1.5, 0], [2, 0, -1]], [0.0, 0.0], [[[1, 0], [0, 1]], [[0, 0], [3, 0]]], 4.0])
def test_nonzero_and_masked_select_match_torch(x):
  a = np.array(x, dtype=np.float32)
  got = Tensor(a).nonzero().numpy()
  ref = torch.tensor(a).nonzero().numpy()
  assert got.shape == ref.shape and (got == ref).all()
  mask = a > 0.5
  np.testing.assert_array_equal(Tensor(a).masked_select(Tensor(mask)).numpy(),
                                torch.tensor(a).masked_select(torch.from_numpy(np.array(mask))).numpy())


def _scatter_case(rng, dt):
  x = rng.integers(-5, 6, (3, 5)).astype(dt)
  index = rng.integers(0, 5, (3, 4))
  src = rng.integers(-5, 6, (3, 6)).astype(dt)
  return x, index, src


@pytest.mark.parametrize("dt", [np.float32, np.int32])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_matches_torch_where_updates_do_not_collide(rng, dt, dim):
  x = rng.integers(-5, 6, (4, 5)).astype(dt)
  # a permutation per row/column: no two updates land on one position (torch's winner is undefined)
  index = np.stack([rng.permutation(x.shape[dim])[:3] for _ in range(x.shape[1 - dim])], axis=1 - dim)
  src = rng.integers(-5, 6, (5, 6)).astype(dt)
  got = Tensor(x).scatter(dim, Tensor(index.astype(np.int32)), Tensor(src)).numpy()
  ref = torch.tensor(x).scatter(dim, torch.tensor(index), torch.tensor(src)).numpy()
  np.testing.assert_array_equal(got, ref)
  got = Tensor(x).scatter(dim, Tensor(index.astype(np.int32)), 7).numpy()
  np.testing.assert_array_equal(got, torch.tensor(x).scatter(dim, torch.tensor(index), 7).numpy())


@pytest.mark.filterwarnings("ignore:scatter_reduce\\(\\) is in beta")
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_scatter_reduce_matches_torch(rng, reduce, include_self, dt):
  x, index, src = _scatter_case(rng, dt)
  got = Tensor(x).scatter_reduce(1, Tensor(index.astype(np.int32)), Tensor(src), reduce, include_self=include_self)
  ref = torch.tensor(x).scatter_reduce(1, torch.tensor(index), torch.tensor(src), reduce, include_self=include_self)
  np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:scatter_reduce\\(\\) is in beta")
def test_scatter_reduce_sum_is_differentiable(rng):
  x, index, src = _scatter_case(rng, np.float32)
  src = np.ascontiguousarray(src[:, :4])  # torch 1.13's backward fails for a src larger than index
  px, ps = Tensor(x, requires_grad=True), Tensor(src, requires_grad=True)
  tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
  w = rng.standard_normal((3, 5)).astype(np.float32)
  (px.scatter_reduce(1, Tensor(index.astype(np.int32)), ps, "sum") * Tensor(w)).sum().backward()
  (tx.scatter_reduce(1, torch.tensor(index), ts, "sum") * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
  np.testing.assert_allclose(ps.grad.numpy(), ts.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape,size,mode,ac", [
    ((1, 2, 5), (8,), "linear", False), ((1, 2, 5), (3,), "linear", True), ((2, 1, 4, 6), (7, 3), "linear", False),
    ((2, 1, 4, 6), (8, 12), "linear", True), ((1, 1, 2, 3, 4), (3, 5, 2), "linear", False),
    ((1, 3, 5), (9,), "nearest", False), ((1, 1, 4, 6), (3, 10), "nearest", False),
    ((1, 1, 4, 6), (7, 5), "nearest-exact", False)])
def test_interpolate_matches_torch(rng, shape, size, mode, ac):
  x = rng.standard_normal(shape).astype(np.float32)
  torch_mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode == "linear" else mode
  kw = {"align_corners": ac} if mode == "linear" else {}
  px, tx = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  got = px.interpolate(size, mode=mode, align_corners=ac)
  ref = F.interpolate(tx, size=size, mode=torch_mode, **kw)
  np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
  w = rng.standard_normal(ref.shape).astype(np.float32)
  (got * Tensor(w)).sum().backward()
  (ref * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


_TORCH_POOL = {1: (F.max_pool1d, F.max_unpool1d), 2: (F.max_pool2d, F.max_unpool2d),
               3: (F.max_pool3d, F.max_unpool3d)}


# Windows that tile, overlap, pad, dilate and keep a last partial window (ceil_mode), in 1-D, 2-D
# and 3-D; inputs with ties and NaNs (torch: the first maximum wins a tie, the last NaN a window).
@pytest.mark.parametrize("shape,k,kw", [
    ((2, 3, 4, 6), (2, 2), {}), ((1, 2, 6, 6), (3, 3), {}), ((3, 4, 4), (2, 1), {}),
    ((2, 2, 7, 8), (3, 3), dict(stride=2, padding=1)), ((1, 2, 9, 7), (3, 2), dict(stride=1, dilation=2)),
    ((1, 1, 7, 7), (3, 3), dict(stride=2, padding=1, dilation=2, ceil_mode=True)),
    ((2, 3, 11), (3,), dict(stride=2, padding=1, ceil_mode=True)), ((2, 10), (4,), dict(stride=1, dilation=2)),
    ((1, 2, 5, 6, 7), (2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
    ((1, 1, 6, 5, 5), (3, 3, 3), dict(stride=2, padding=1, dilation=(1, 2, 1), ceil_mode=True))])
@pytest.mark.parametrize("data", ["distinct", "ties_nans"])
def test_max_pool_indices_and_unpool_match_torch(rng, shape, k, kw, data):
  n = int(np.prod(shape))
  if data == "distinct":
    x = rng.permutation(n).reshape(shape).astype(np.float32)
  else:
    x = rng.integers(0, 3, shape).astype(np.float32)  # many ties
    x.reshape(-1)[rng.choice(n, max(1, n // 10), replace=False)] = np.nan
  pool, unpool = _TORCH_POOL[len(k)]
  values, indices = Tensor(x).max_pool2d(k, return_indices=True, **kw)
  tx = torch.tensor(x) if len(shape) > len(k) + 1 else torch.tensor(x).unsqueeze(0)  # torch wants (C, *spatial)
  tv, ti = pool(tx, k, return_indices=True, **kw)
  tv, ti = tv.reshape(values.shape), ti.reshape(indices.shape)
  np.testing.assert_array_equal(values.numpy(), tv.numpy())
  np.testing.assert_array_equal(indices.numpy(), ti.numpy())
  if data == "distinct" and len(shape) > len(k) + 1 and "dilation" not in kw:  # torch's unpool takes no dilation
    stride = kw.get("stride", k)
    got = values.max_unpool2d(indices, k, stride, kw.get("padding", 0), output_size=shape[-len(k):])
    ref = unpool(tv, ti, k, stride, kw.get("padding", 0), output_size=shape[-len(k):])
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    # The gradient is a gather: overlapping windows pick one element several times, each copy
    # getting the output's whole gradient there (torch).
    w = rng.standard_normal(ref.shape).astype(np.float32)
    v = Tensor(tv.numpy(), requires_grad=True)
    (v.max_unpool2d(Tensor(ti.numpy()), k, stride, kw.get("padding", 0), output_size=shape[-len(k):]) * Tensor(w)).sum().backward()
    tvg = tv.detach().requires_grad_()
    (unpool(tvg, ti, k, stride, kw.get("padding", 0), output_size=shape[-len(k):]) * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), tvg.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_max_unpool_writes_every_value_bit_for_bit(dtype):
  # -0.0, nan and inf keep their bits; of two values at one position the last wins; an index
  # outside the volume writes nothing.
  x = np.array([[[-0.0, np.nan], [np.inf, -np.inf]], [[1.5, -2.0], [3.0, 4.0]]], dtype)
  idx = np.array([[[0, 3], [5, 5]], [[15, 16], [-1, 2]]], np.int32)
  want = np.zeros((2, 16), dtype)
  want[0, [0, 3, 5]] = [-0.0, np.nan, -np.inf]
  want[1, [15, 2]] = [1.5, 4.0]
  got = Tensor(x).max_unpool2d(Tensor(idx), 2).numpy()
  assert got.dtype == dtype and got.shape == (2, 4, 4)
  bits = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
  np.testing.assert_array_equal(got.reshape(2, 16).view(bits), want.view(bits))


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 4), (5, 1), (1, 4)])
def test_qr_matches_torch(rng, shape):
  a = rng.standard_normal(shape).astype(np.float32)
  q, r = Tensor(a).qr()
  tq, tr = torch.linalg.qr(torch.tensor(a, dtype=torch.float64))
  np.testing.assert_allclose(q.numpy(), tq.numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(r.numpy(), tr.numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose((q @ r).numpy(), a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,full", [((4, 3), False), ((3, 3), True), ((3, 5), False), ((2, 4, 4), True)])
def test_svd_factors_reconstruct_and_match_torchs_singular_values(rng, shape, full):
  a = rng.standard_normal(shape).astype(np.float32)
  u, sv, vh = Tensor(a).svd(full_matrices=full)
  ref = torch.linalg.svdvals(torch.tensor(a, dtype=torch.float64)).numpy()
  np.testing.assert_allclose(sv.numpy(), ref, rtol=1e-4, atol=1e-5)
  recon = (u * sv.unsqueeze(-2)) @ vh
  np.testing.assert_allclose(recon.numpy(), a, rtol=1e-4, atol=1e-4)
  k = min(shape[-2:])
  eye = np.broadcast_to(np.eye(k), shape[:-2] + (k, k))
  np.testing.assert_allclose((u.transpose(-2, -1) @ u).numpy(), eye, atol=1e-4)
  np.testing.assert_allclose((vh @ vh.transpose(-2, -1)).numpy(), eye, atol=1e-4)


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint8])
def test_shifts_by_tensors_match_torch(rng, dt):
  bits = 8 * np.dtype(dt).itemsize
  lo = 0 if np.dtype(dt).kind == "u" else -100
  x = rng.integers(lo, 100, (3, 8)).astype(dt)
  amounts = list(range(0, bits, max(1, bits // 8)))[:7] + [bits - 1]  # the top bit too
  n = np.tile(amounts, (3, 1)).astype(dt if np.dtype(dt).kind != "u" else np.uint8)
  tn = torch.tensor(n.astype(np.int64) if dt == np.uint8 else n)
  px, pn = Tensor(x), Tensor(n)
  np.testing.assert_array_equal((px << pn).numpy(), (torch.tensor(x) << tn.to(torch.tensor(x).dtype)).numpy())
  np.testing.assert_array_equal((px >> pn).numpy(), (torch.tensor(x) >> tn.to(torch.tensor(x).dtype)).numpy())
