"""Forward and backward of every client op against PyTorch (float64 reference), on random inputs,
with broadcasting and non-contiguous inputs; second-order gradients; and the autograd semantics
(laziness, accumulation, detach, no_grad, realized values) the client promises."""
import math

import numpy as np
import pytest

from conftest import assert_close
import polygrad
from polygrad import Tensor, dtypes
from polygrad import graph as g

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")
F = torch.nn.functional

pytestmark = pytest.mark.usefixtures("live_daemon")


def _same(f):
  return f, f


# name: (polygrad fn, torch fn, input shapes, (lo, hi) per input or one for all)
OPS = {
    # elementwise binary, broadcasting
    "add": (*_same(lambda a, b: a + b), [(3, 4), (3, 4)], (-2, 2)),
    "add_broadcast": (*_same(lambda a, b: a + b), [(2, 1, 4), (3, 1)], (-2, 2)),
    "sub_broadcast_left": (*_same(lambda a, b: a - b), [(4,), (3, 4)], (-2, 2)),
    "mul_broadcast": (*_same(lambda a, b: a * b), [(3, 1), (1, 5)], (-2, 2)),
    "div": (*_same(lambda a, b: a / b), [(3, 4), (4,)], [(-2, 2), (0.5, 2)]),
    "rdiv_scalar": (*_same(lambda a: 1.5 / a), [(3, 4)], (0.5, 2)),
    "maximum": (lambda a, b: a.maximum(b), torch.maximum, [(3, 4), (3, 4)], (-2, 2)),
    "minimum_broadcast": (lambda a, b: a.minimum(b), torch.minimum, [(3, 4), (1, 4)], (-2, 2)),
    "pow_int": (*_same(lambda a: a ** 3), [(3, 4)], (-2, 2)),
    "pow_neg_int": (*_same(lambda a: a ** -2), [(3, 4)], (0.5, 2)),
    "pow_float": (*_same(lambda a: a ** 0.7), [(3, 4)], (0.5, 2)),
    "pow_tensor": (*_same(lambda a, b: a ** b), [(3, 4), (3, 4)], [(0.5, 2), (-1.5, 1.5)]),
    "rpow": (*_same(lambda a: 2.5 ** a), [(3, 4)], (-2, 2)),
    "scalar_chain": (*_same(lambda a: (a * 3 - 1) / 2 + 0.5 - a * a), [(4, 4)], (-2, 2)),
    "where": (lambda a, b: (a > b).where(a * 2, b - 1), lambda a, b: torch.where(a > b, a * 2, b - 1),
              [(3, 4), (3, 4)], (-2, 2)),
    "where_scalar_broadcast": (lambda a, b: (b > 0).where(a, 0.5), lambda a, b: torch.where(b > 0, a, torch.tensor(0.5, dtype=a.dtype)),
                               [(3, 4), (4,)], (-2, 2)),
    # elementwise unary
    "neg": (*_same(lambda a: -a), [(3, 5)], (-2, 2)),
    "exp": (*_same(lambda a: a.exp()), [(3, 5)], (-3, 3)),
    "log": (*_same(lambda a: a.log()), [(3, 5)], (0.2, 4)),
    "exp2": (*_same(lambda a: a.exp2()), [(3, 5)], (-3, 3)),
    "log2": (*_same(lambda a: a.log2()), [(3, 5)], (0.2, 4)),
    "sqrt": (*_same(lambda a: a.sqrt()), [(3, 5)], (0.2, 4)),
    "rsqrt": (*_same(lambda a: a.rsqrt()), [(3, 5)], (0.2, 4)),
    "reciprocal": (*_same(lambda a: a.reciprocal()), [(3, 5)], (0.3, 3)),
    "sin": (*_same(lambda a: a.sin()), [(3, 5)], (-4, 4)),
    "cos": (*_same(lambda a: a.cos()), [(3, 5)], (-4, 4)),
    "tan": (*_same(lambda a: a.tan()), [(3, 5)], (-1.2, 1.2)),
    "square": (*_same(lambda a: a.square()), [(3, 5)], (-2, 2)),
    "abs": (*_same(lambda a: a.abs()), [(3, 5)], (-2, 2)),
    "relu": (*_same(lambda a: a.relu()), [(3, 5)], (-2, 2)),
    "sigmoid": (*_same(lambda a: a.sigmoid()), [(3, 5)], (-4, 4)),
    "tanh": (*_same(lambda a: a.tanh()), [(3, 5)], (-3, 3)),
    "gelu": (lambda a: a.gelu(), lambda a: F.gelu(a, approximate="tanh"), [(3, 5)], (-3, 3)),
    "silu": (lambda a: a.silu(), F.silu, [(3, 5)], (-3, 3)),
    "elu": (lambda a: a.elu(), F.elu, [(3, 5)], (-2, 2)),
    "softplus": (lambda a: a.softplus(), F.softplus, [(3, 5)], (-3, 3)),
    "leaky_relu": (lambda a: a.leaky_relu(0.1), lambda a: F.leaky_relu(a, 0.1), [(3, 5)], (-2, 2)),
    "relu6": (lambda a: a.relu6(), F.relu6, [(3, 5)], (-3, 8)),
    "clamp": (*_same(lambda a: a.clamp(-0.5, 0.7)), [(3, 5)], (-2, 2)),
    "logsigmoid": (lambda a: a.logsigmoid(), F.logsigmoid, [(3, 5)], (-3, 3)),
    "quick_gelu": (lambda a: a.quick_gelu(), lambda a: a * torch.sigmoid(1.702 * a), [(3, 5)], (-3, 3)),
    "mish": (lambda a: a.mish(), F.mish, [(3, 5)], (-3, 3)),
    "hardtanh": (lambda a: a.hardtanh(-0.5, 0.8), lambda a: F.hardtanh(a, -0.5, 0.8), [(3, 5)], (-2, 2)),
    "hardsigmoid": (lambda a: a.hardsigmoid(), F.hardsigmoid, [(3, 5)], (-5, 5)),
    "hardswish": (lambda a: a.hardswish(), F.hardswish, [(3, 5)], (-5, 5)),
    "round_floor_ceil_trunc": (lambda a: a.round() + a.floor() * 2 + a.ceil() * 3 + a.trunc() * 4 + a,
                               lambda a: a.round() + a.floor() * 2 + a.ceil() * 3 + a.trunc() * 4 + a, [(4, 5)], (-3, 3)),
    "sign_abs": (lambda a: a.sign() * a.abs(), lambda a: a.sign() * a.abs(), [(4, 5)], (-3, 3)),
    "split_chunk": (lambda a: a.split([1, 3], 1)[1] * a.chunk(2, 0)[0].sum(), lambda a: a.split([1, 3], 1)[1] * a.chunk(2, 0)[0].sum(),
                    [(4, 4)], (-2, 2)),
    # reductions
    "sum_all": (*_same(lambda a: a.sum()), [(3, 4, 5)], (-2, 2)),
    "sum_axis": (*_same(lambda a: a.sum(1)), [(3, 4, 5)], (-2, 2)),
    "sum_axes_keepdim": (lambda a: a.sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdim=True), [(3, 4, 5)], (-2, 2)),
    "max_axis": (lambda a: a.max(1), lambda a: a.amax(1), [(3, 4, 5)], (-2, 2)),
    "max_all": (lambda a: a.max(), lambda a: a.amax(), [(3, 4, 5)], (-2, 2)),
    "min_axis_keepdim": (lambda a: a.min(-1, keepdim=True), lambda a: a.amin(-1, keepdim=True), [(3, 4, 5)], (-2, 2)),
    "mean_all": (*_same(lambda a: a.mean()), [(3, 4, 5)], (-2, 2)),
    "mean_axes": (*_same(lambda a: a.mean((0, 2))), [(3, 4, 5)], (-2, 2)),
    "var_axis": (lambda a: a.var(1), lambda a: a.var(1, unbiased=True), [(3, 4, 5)], (-2, 2)),
    "var_biased_keepdim": (lambda a: a.var(-1, keepdim=True, correction=0),
                           lambda a: a.var(-1, keepdim=True, unbiased=False), [(3, 4, 5)], (-2, 2)),
    "std_all": (lambda a: a.std(), lambda a: a.std(), [(3, 4, 5)], (-2, 2)),
    "logsumexp_axis": (lambda a: a.logsumexp(1), lambda a: a.logsumexp(1), [(3, 4, 5)], (-3, 3)),
    "logsumexp_all": (lambda a: a.logsumexp(), lambda a: a.logsumexp((0, 1, 2)), [(3, 4, 5)], (-3, 3)),
    "logsumexp_axes_keepdim": (lambda a: a.logsumexp((0, 2), keepdim=True),
                               lambda a: a.logsumexp((0, 2), keepdim=True), [(3, 4, 5)], (-3, 3)),
    # movement
    "reshape": (*_same(lambda a: a.reshape(6, 10) * a.reshape(6, 10)), [(3, 4, 5)], (-2, 2)),
    "permute": (*_same(lambda a: a.permute(2, 0, 1)), [(3, 4, 5)], (-2, 2)),
    "transpose": (*_same(lambda a: a.transpose(0, 2)), [(3, 4, 5)], (-2, 2)),
    "T_matmul": (*_same(lambda a, b: a.T @ b), [(4, 3), (4, 5)], (-2, 2)),
    "expand": (*_same(lambda a: a.expand(3, 4, 5)), [(3, 1, 5)], (-2, 2)),
    "flip": (*_same(lambda a: a.flip(1) * a), [(3, 4, 5)], (-2, 2)),
    "pad": (lambda a: a.pad(((1, 2), (0, 3))), lambda a: F.pad(a, (0, 3, 1, 2)), [(3, 4)], (-2, 2)),
    "getitem_slices": (*_same(lambda a: a[1:, ::2, 3]), [(3, 4, 5)], (-2, 2)),
    "getitem_neg_step": (lambda a: a[::-1, 1:3], lambda a: a.flip(0)[:, 1:3], [(4, 5)], (-2, 2)),
    "cat": (lambda a, b: Tensor.cat(a, b, dim=1), lambda a, b: torch.cat([a, b], 1), [(2, 3), (2, 5)], (-2, 2)),
    "stack": (lambda a, b: Tensor.stack(a, b, dim=0), lambda a, b: torch.stack([a, b], 0), [(2, 3), (2, 3)], (-2, 2)),
    "repeat": (*_same(lambda a: a.repeat(2, 3)), [(2, 3)], (-2, 2)),
    "squeeze_unsqueeze_flatten": (*_same(lambda a: a.unsqueeze(0).squeeze(2).flatten(1)), [(3, 1, 4, 2)], (-2, 2)),
    # matmul
    "matmul_2d": (*_same(lambda a, b: a @ b), [(5, 7), (7, 3)], (-2, 2)),
    "matmul_batched_broadcast": (*_same(lambda a, b: a @ b), [(2, 1, 3, 4), (5, 4, 2)], (-2, 2)),
    "matmul_vec_mat": (*_same(lambda a, b: a @ b), [(4,), (4, 3)], (-2, 2)),
    "matmul_mat_vec": (*_same(lambda a, b: a @ b), [(3, 4), (4,)], (-2, 2)),
    "matmul_vec_vec": (*_same(lambda a, b: a @ b), [(6,), (6,)], (-2, 2)),
    "matmul_non_contiguous": (*_same(lambda a, b: a.permute(1, 0) @ b.flip(0)), [(6, 4), (6, 3)], (-2, 2)),
    "linear": (lambda x, w, b: x.linear(w.T, b), lambda x, w, b: F.linear(x, w, b), [(4, 6), (3, 6), (3,)], (-1, 1)),
    # softmax family and normalization
    "softmax_last": (lambda a: a.softmax(-1), lambda a: a.softmax(-1), [(4, 7)], (-3, 3)),
    "softmax_axis0": (lambda a: a.softmax(0), lambda a: a.softmax(0), [(4, 7)], (-3, 3)),
    "log_softmax": (lambda a: a.log_softmax(-1), lambda a: a.log_softmax(-1), [(2, 3, 6)], (-3, 3)),
    "softmax_non_contiguous": (lambda a: a.permute(1, 0).softmax(-1), lambda a: a.permute(1, 0).softmax(-1), [(5, 4)], (-3, 3)),
    "layernorm_last": (lambda a: a.layernorm(), lambda a: F.layer_norm(a, (6,)), [(3, 6)], (-2, 2)),
    "layernorm_two_axes": (lambda a: a.layernorm((-2, -1), eps=1e-3), lambda a: F.layer_norm(a, (4, 5), eps=1e-3),
                           [(3, 4, 5)], (-2, 2)),
    "layernorm_axis1_of_3": (lambda a: a.layernorm(1), lambda a: F.layer_norm(a.transpose(1, 2), (4,)).transpose(1, 2),
                             [(2, 4, 3)], (-2, 2)),
    "cross_entropy_probs": (lambda a, b: a.cross_entropy(b.softmax(-1)), lambda a, b: F.cross_entropy(a, b.softmax(-1)),
                            [(4, 5), (4, 5)], (-2, 2)),
    "binary_crossentropy_logits": (lambda a, b: a.binary_crossentropy_logits(b.sigmoid()),
                                   lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()), [(3, 4), (3, 4)], (-2, 2)),
    "binary_crossentropy": (lambda a, b: a.sigmoid().binary_crossentropy(b.sigmoid()),
                            lambda a, b: F.binary_cross_entropy(a.sigmoid(), b.sigmoid()), [(3, 4), (3, 4)], (-2, 2)),
    # composed
    "mlp_block": (lambda x, w: (x @ w).gelu().layernorm().softmax(-1), lambda x, w: F.layer_norm(F.gelu(x @ w, approximate="tanh"), (6,)).softmax(-1),
                  [(4, 5), (5, 6)], (-1, 1)),
    "attention": (lambda q, k, v: (q @ k.transpose(-1, -2) / 2.0).softmax(-1) @ v,
                  lambda q, k, v: (q @ k.transpose(-1, -2) / 2.0).softmax(-1) @ v, [(2, 4, 8), (2, 4, 8), (2, 4, 8)], (-1, 1)),
}


def _inputs(rng, shapes, ranges):
  if isinstance(ranges, tuple):
    ranges = [ranges] * len(shapes)
  return [rng.uniform(lo, hi, s).astype(np.float32) for s, (lo, hi) in zip(shapes, ranges)]


@pytest.mark.parametrize("name", list(OPS))
def test_forward_and_backward_match_torch(rng, name):
  ours, ref, shapes, ranges = OPS[name]
  xs = _inputs(rng, shapes, ranges)
  ts = [Tensor(x, requires_grad=True) for x in xs]
  out = ours(*ts)
  w = rng.uniform(-1, 1, out.shape).astype(np.float32)  # a loss that weighs every output differently
  (out * Tensor(w)).sum().backward()
  Tensor.realize(out, *[t.grad for t in ts])  # forward and every gradient in one request
  txs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
  tout = ref(*txs)
  (tout * torch.tensor(w, dtype=torch.float64)).sum().backward()
  assert out.shape == tuple(tout.shape)
  assert_close(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-5)
  for i, (t, tx) in enumerate(zip(ts, txs)):
    assert t.grad.shape == t.shape and t.grad.dtype == dtypes.float32
    want = tx.grad.numpy() if tx.grad is not None else np.zeros(t.shape)  # torch: None when only compared
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=f"grad of input {i}")


def test_round_is_half_to_even_and_isinf():
  a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7], np.float32)
  np.testing.assert_array_equal(Tensor(a).round().numpy(), np.round(a))
  b = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
  np.testing.assert_array_equal(Tensor(b).isinf().numpy(), np.isinf(b))
  np.testing.assert_array_equal(Tensor(b).isinf(detect_negative=False).numpy(), np.isposinf(b))


def test_every_ops_gradient_realizes_in_one_request(rng):
  a, b = Tensor(rng.standard_normal((4, 5), dtype=np.float32), requires_grad=True), \
      Tensor(rng.standard_normal((5, 3), dtype=np.float32), requires_grad=True)
  loss = (a @ b).relu().sum()
  before = g.GRAPH.stats()["requests"]
  loss.backward()
  assert g.GRAPH.stats()["requests"] == before, "backward() must not talk to the daemon"
  Tensor.realize(a.grad, b.grad, loss)
  assert g.GRAPH.stats()["requests"] == before + 1


# --- second order -----------------------------------------------------------------------------------

def _f_np(x, w):
  return torch.tanh(x @ w).square().sum() + (x ** 3).sum() * 0.1


def test_hessian_vector_product_matches_torch(rng):
  x0 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
  w0 = rng.uniform(-1, 1, (4, 2)).astype(np.float32)
  v0 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
  x, w = Tensor(x0, requires_grad=True), Tensor(w0)
  y = (x @ w).tanh().square().sum() + (x ** 3).sum() * 0.1
  gx, = y.gradient(x)
  hvp, = (gx * Tensor(v0)).sum().gradient(x)
  tx = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
  ty = _f_np(tx, torch.tensor(w0, dtype=torch.float64))
  tg, = torch.autograd.grad(ty, tx, create_graph=True)
  thvp, = torch.autograd.grad((tg * torch.tensor(v0, dtype=torch.float64)).sum(), tx)
  assert_close(gx.numpy(), tg.detach().numpy(), rtol=1e-5, atol=1e-5)
  assert_close(hvp.numpy(), thvp.numpy(), rtol=1e-4, atol=1e-5)


def test_gradient_of_a_realized_gradient(rng):
  x0 = rng.uniform(0.5, 1.5, 5).astype(np.float32)
  x = Tensor(x0, requires_grad=True)
  g1, = (x ** 3).sum().gradient(x)
  assert_close(g1.numpy(), 3 * x0.astype(np.float64) ** 2)  # realized here
  g2, = g1.sum().gradient(x)  # still differentiates the history behind g1
  assert_close(g2.numpy(), 6 * x0.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_second_derivative_through_backward(rng):
  x0 = rng.uniform(-1, 1, 4).astype(np.float32)
  x = Tensor(x0, requires_grad=True)
  x.sin().sum().backward()
  d2, = x.grad.sum().gradient(x)
  assert_close(x.grad.numpy(), np.cos(x0.astype(np.float64)))
  assert_close(d2.numpy(), -np.sin(x0.astype(np.float64)), rtol=1e-5, atol=1e-6)


# --- semantics ----------------------------------------------------------------------------------------

def test_seed_quick_start_autograd():
  x = Tensor([1.0, 2.0, 3.0])
  x.requires_grad = True
  loss = (x * x).sum()
  loss.backward()
  assert x.grad.numpy().tolist() == [2.0, 4.0, 6.0]
  assert loss.item() == 14.0


def test_item_before_backward():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  loss = (x * x).sum()
  assert loss.item() == 14.0  # realizes the loss first
  loss.backward()
  assert x.grad.numpy().tolist() == [2.0, 4.0, 6.0]


def test_gradient_flows_through_a_realized_intermediate():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  h = (w * 2).realize()
  (h * h).sum().backward()
  assert w.grad.numpy().tolist() == [8.0, 16.0, 24.0]


def test_grad_accumulates_and_zero_grad_style_reset():
  x = Tensor([1.0, -2.0], requires_grad=True)
  loss = (x * 3).sum()
  loss.backward()
  loss.backward()
  assert x.grad.numpy().tolist() == [6.0, 6.0]
  (x * x).sum().backward()
  assert x.grad.numpy().tolist() == [8.0, 2.0]
  x.grad = None
  (x * x).sum().backward()
  assert x.grad.numpy().tolist() == [2.0, -4.0]


def test_backward_with_explicit_gradient_and_non_scalar_error():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = x * x
  with pytest.raises(RuntimeError, match="one-element"):
    y.backward()
  y.backward(Tensor([1.0, 10.0]))
  assert x.grad.numpy().tolist() == [2.0, 40.0]


def test_backward_targets_only_leaves_that_require_grad():
  a = Tensor([1.0, 2.0], requires_grad=True)
  b = Tensor([3.0, 4.0])  # requires_grad None
  c = Tensor([5.0, 6.0], requires_grad=False)
  unrelated = Tensor([7.0], requires_grad=True)
  (a * b * c).sum().backward()
  assert a.grad.numpy().tolist() == [15.0, 24.0]
  assert b.grad is None and c.grad is None and unrelated.grad is None
  assert (a * b).requires_grad is True and (b * c).requires_grad is None


def test_gradient_of_unrelated_target_is_zero():
  a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([[3.0], [4.0]], requires_grad=True)
  ga, gb = (a * a).sum().gradient(a, b)
  assert ga.numpy().tolist() == [2.0, 4.0]
  assert gb.numpy().tolist() == [[0.0], [0.0]]


def test_backward_without_requires_grad_fills_unset_tensors_as_tinygrad():
  # tinygrad's tri-state requires_grad: with nothing set to True, the tensors made from data or
  # random draws and left unset (None) get gradients; comparisons on the way pass none.
  x, r = Tensor([1.0, -2.0, 3.0]), Tensor.randn(3)
  (x * (x < 0) + r * 2).sum().backward()
  assert x.grad.numpy().tolist() == [0.0, 1.0, 0.0]
  assert r.grad.numpy().tolist() == [2.0, 2.0, 2.0]


def test_backward_without_any_target_raises():
  off = Tensor([1.0], requires_grad=False)
  with pytest.raises(RuntimeError, match="requires_grad"):
    (off * 2).sum().backward()


def test_detach_stops_the_gradient():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (w * w.detach()).sum().backward()
  assert w.grad.numpy().tolist() == [1.0, 2.0, 3.0]
  v = Tensor([1.0, 2.0], requires_grad=True)
  h = (v * 3).detach()
  assert h.requires_grad is not True
  ((v + h) * 1).sum().backward()
  assert v.grad.numpy().tolist() == [1.0, 1.0]


def test_bitcast_passes_no_gradient(rng):
  """As torch's view(dtype): the bits are not a differentiable function of x, so
  d/dx sum(x * x.bitcast(int32).bitcast(float32)) is the second factor, not 2x."""
  data = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
  x = Tensor(data, requires_grad=True)
  y = x.bitcast(dtypes.int32).bitcast(dtypes.float32)
  assert y.requires_grad is not True
  (x * y).sum().backward()
  tx = torch.tensor(data, requires_grad=True)
  (tx * tx.view(torch.int32).view(torch.float32)).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
  # Through the bitcast alone, nothing arrives (torch: the result does not require grad).
  w = Tensor(data, requires_grad=True)
  loss = ((w.bitcast(dtypes.uint32).bitcast(dtypes.float32) + w) * 2).sum()
  assert loss.gradient(w)[0].numpy().tolist() == [[2.0] * 4] * 3


def test_detach_of_an_intermediate_used_twice(rng):
  x0 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
  x = Tensor(x0, requires_grad=True)
  y = x - x.max(1, keepdim=True).detach()  # the usual stable-softmax trick
  (y.exp() * Tensor(x0)).sum().backward()
  tx = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
  ty = tx - tx.amax(1, keepdim=True).detach()
  (ty.exp() * torch.tensor(x0, dtype=torch.float64)).sum().backward()
  assert_close(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["context_call", "context_bare", "decorator", "decorator_call"])
def test_no_grad(form):
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)

  def teacher():
    return w * 3

  if form == "context_call":
    with Tensor.no_grad():
      assert Tensor.no_grad
      t = teacher()
  elif form == "context_bare":
    with Tensor.no_grad:
      t = teacher()
  elif form == "decorator":
    t = Tensor.no_grad(teacher)()
  else:
    t = Tensor.no_grad()(teacher)()
  assert not Tensor.no_grad
  assert t.requires_grad is None
  loss = (w * t).sum()
  assert loss.item() == 42.0
  loss.backward()
  assert w.grad.numpy().tolist() == [3.0, 6.0, 9.0]  # no gradient through the no_grad branch


def test_constant_leaf_gets_its_own_gradient():
  b = Tensor.zeros(3, requires_grad=True)
  (b * Tensor.zeros(3) + b).sum().backward()
  assert b.grad.numpy().tolist() == [1.0, 1.0, 1.0]


def test_requires_grad_on_int_tensor_raises():
  with pytest.raises(RuntimeError, match="float"):
    Tensor([1, 2, 3]).requires_grad = True


def test_gradient_through_casts_and_half_precision():
  x = Tensor([0.5, 1.5], requires_grad=True)
  y = (x.cast(dtypes.float16) * 2).cast(dtypes.float32).square().sum()
  y.backward()
  assert_close(x.grad.numpy(), [4.0, 12.0])
  xd = Tensor(np.array([1.0, 2.0]), requires_grad=True)  # float64
  (xd * xd).sum().backward()
  assert xd.grad.dtype == dtypes.float64 and xd.grad.numpy().tolist() == [2.0, 4.0]


def test_assign_keeps_identity_and_grad_leaf():
  w = Tensor([1.0, 2.0], requires_grad=True)
  wid = id(w)
  w.assign(Tensor([3.0, 4.0]))
  w += 1
  assert id(w) == wid and w.requires_grad is True
  (w * w).sum().backward()
  assert w.grad.numpy().tolist() == [8.0, 10.0]
  with pytest.raises(ValueError, match="shape"):
    w.assign(Tensor([1.0]))


def test_train_context_sets_training():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training is True
    with Tensor.test():
      assert Tensor.training is False
    assert Tensor.training is True
  assert Tensor.training is False


def test_memory_stays_flat_over_many_backward_steps(rng):
  import gc
  w = Tensor(rng.standard_normal((8, 8), dtype=np.float32), requires_grad=True)
  x = Tensor(rng.standard_normal((4, 8), dtype=np.float32))
  samples = []
  for i in range(60):
    w.grad = None
    loss = (x @ w).tanh().sum()
    loss.backward()
    with Tensor.no_grad():
      w.assign(w - 0.01 * w.grad)
    w.realize()
    if i in (10, 59):
      gc.collect()
      samples.append(g.GRAPH.stats())
  assert samples[1]["live_nodes"] <= samples[0]["live_nodes"] + 5, samples
  assert samples[1]["sent_live"] <= samples[0]["sent_live"] + 5, samples


def test_hand_written_assign_loop_sends_the_same_graph_every_step(monkeypatch):
  """The tinygrad-style loop `w.assign(w.detach() - lr * w.grad)`: a realized parameter must not
  carry earlier steps into the next gradient. Before assign detached the value it gives a leaf,
  each step sent more nodes than the one before (the realized update kept its history for
  relazy) and the client walked all of it. Counted in nodes sent, not time; the losses are a
  numpy SGD's."""
  from polygrad.connection import Connection
  sent = []
  real = Connection.realize

  def counting(self, nodes, *args, **kwargs):
    sent[-1] += len(nodes)
    return real(self, nodes, *args, **kwargs)

  monkeypatch.setattr(Connection, "realize", counting)
  rng = np.random.default_rng(7)
  x = rng.random((16, 64), dtype=np.float32)
  y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
  w1 = (rng.standard_normal((64, 32)) * 0.1).astype(np.float32)
  w2 = (rng.standard_normal((32, 10)) * 0.1).astype(np.float32)
  X, Y = Tensor(x), Tensor(y)
  W1, W2 = Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True)
  lr, losses, ref = 0.05, [], []
  for _ in range(50):
    sent.append(0)
    lo = (X @ W1).relu() @ W2
    loss = -(lo.log_softmax(-1) * Y).sum(-1).mean()
    loss.backward()
    for w in (W1, W2):
      w.assign(w.detach() - lr * w.grad)
    for w in (W1, W2):
      w.grad = None
    losses.append(loss.item())
    W1.realize(), W2.realize()
    # the same step in float64 numpy
    h = np.maximum(x @ w1.astype(np.float64), 0)
    z = h @ w2
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref.append(-(np.log(p) * y).sum(-1).mean())
    dz = (p - y) / len(x)
    dh = dz @ w2.T * (h > 0)
    w2 = w2 - lr * (h.T @ dz)
    w1 = w1 - lr * (x.T @ dh)
  assert sent[49] == sent[4], f"nodes sent per step grew: {sent}"
  np.testing.assert_allclose(losses, ref, rtol=1e-4)
  np.testing.assert_allclose(W1.numpy(), w1, rtol=1e-3, atol=1e-5)
