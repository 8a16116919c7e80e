"""nn layers against torch.nn with copied weights (forward, input gradient, parameter gradients),
BatchNorm's running statistics, Dropout, state dicts."""
import numpy as np
import pytest

from conftest import assert_close
from polygrad import Tensor, dtypes
from polygrad import graph as g, nn
from polygrad.nn import get_parameters, get_state_dict, load_state_dict

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")


def _copy_into_torch(ours, theirs, names):
  with torch.no_grad():
    for n in names:
      getattr(theirs, n).copy_(torch.tensor(getattr(ours, n).numpy(), dtype=torch.float64))


def _check_layer(rng, ours, theirs, names, x_shape, x_range=(-2, 2), call=None, tol=1e-5):
  """forward, d(weighted sum)/d(input) and /d(each parameter) against torch (float64)."""
  theirs = theirs.double()
  _copy_into_torch(ours, theirs, names)
  x0 = rng.uniform(*x_range, x_shape).astype(np.float32)
  x = Tensor(x0, requires_grad=True)
  out = (call or ours)(x)
  w = rng.uniform(-1, 1, out.shape).astype(np.float32)
  (out * Tensor(w)).sum().backward()
  Tensor.realize(out, x.grad, *[getattr(ours, n).grad for n in names])
  tx = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
  tout = theirs(tx)
  (tout * torch.tensor(w, dtype=torch.float64)).sum().backward()
  assert_close(out.numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
  assert_close(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
  for n in names:
    assert_close(getattr(ours, n).grad.numpy(), getattr(theirs, n).grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(5, 6), (2, 3, 6)])
def test_linear(rng, bias, x_shape):
  ours = nn.Linear(6, 4, bias=bias)
  _check_layer(rng, ours, torch.nn.Linear(6, 4, bias=bias), ["weight", "bias"] if bias else ["weight"], x_shape)


def test_linear_init_is_uniform_in_torch_bounds():
  Tensor.manual_seed(0)
  layer = nn.Linear(100, 50)
  w, b = layer.weight.numpy(), layer.bias.numpy()
  assert w.shape == (50, 100) and b.shape == (50,)
  assert np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.09
  assert abs(w.mean()) < 0.01 and 0.05 < w.std() < 0.065  # U(-0.1, 0.1): std 0.0577
  Tensor.manual_seed(0)
  assert np.array_equal(nn.Linear(100, 50).weight.numpy(), w), "manual_seed makes init reproducible"


@pytest.mark.parametrize("shape,x_shape", [(8, (4, 8)), ((3, 8), (2, 3, 8))])
def test_layernorm(rng, shape, x_shape):
  ours = nn.LayerNorm(shape, eps=1e-5)
  # non-trivial affine parameters
  ours.weight.assign(Tensor(rng.uniform(0.5, 1.5, ours.weight.shape).astype(np.float32)))
  ours.bias.assign(Tensor(rng.uniform(-0.5, 0.5, ours.bias.shape).astype(np.float32)))
  _check_layer(rng, ours, torch.nn.LayerNorm(shape, eps=1e-5), ["weight", "bias"], x_shape)


def test_norm_modules_send_their_affine_inside_one_node():
  """LayerNorm's and RMSNorm's weight and bias are LAYERNORM's and RMS_NORM's own sources: the
  client sends no MUL or ADD of its own (one op's arithmetic lives in core)."""
  x = Tensor(np.ones((2, 3, 4), np.float32))
  for layer, op in [(nn.LayerNorm((3, 4)), "LAYERNORM"), (nn.RMSNorm(4), "RMS_NORM")]:
    nodes = g.GRAPH.toposort(layer(x)._node)
    assert [g.OP_NAMES[n.op] for n in nodes if n.src] == [op], [g.OP_NAMES[n.op] for n in nodes]


def test_layernorm_without_affine(rng):
  ours = nn.LayerNorm(8, elementwise_affine=False)
  assert ours.weight is None and get_parameters(ours) == []
  _check_layer(rng, ours, torch.nn.LayerNorm(8, elementwise_affine=False), [], (3, 8))


class _TorchRMSNorm(torch.nn.Module):
  """torch 1.13 has no RMSNorm: the textbook formula."""

  def __init__(self, dim, eps):
    super().__init__()
    self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(dim))

  def forward(self, x):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * self.weight


def test_rmsnorm(rng):
  ours = nn.RMSNorm(8, eps=1e-5)
  ours.weight.assign(Tensor(rng.uniform(0.5, 1.5, 8).astype(np.float32)))
  _check_layer(rng, ours, _TorchRMSNorm(8, 1e-5), ["weight"], (2, 3, 8))


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_groupnorm(rng, groups):
  ours = nn.GroupNorm(groups, 4)
  ours.weight.assign(Tensor(rng.uniform(0.5, 1.5, 4).astype(np.float32)))
  ours.bias.assign(Tensor(rng.uniform(-0.5, 0.5, 4).astype(np.float32)))
  _check_layer(rng, ours, torch.nn.GroupNorm(groups, 4), ["weight", "bias"], (3, 4, 5, 2))


def test_embedding(rng):
  ours = nn.Embedding(11, 5)
  theirs = torch.nn.Embedding(11, 5).double()
  _copy_into_torch(ours, theirs, ["weight"])
  idx = rng.integers(0, 11, (3, 4)).astype(np.int32)
  out = ours(Tensor(idx))
  w = rng.uniform(-1, 1, out.shape).astype(np.float32)
  (out * Tensor(w)).sum().backward()
  tout = theirs(torch.tensor(idx, dtype=torch.long))
  (tout * torch.tensor(w, dtype=torch.float64)).sum().backward()
  assert out.shape == (3, 4, 5)
  assert_close(out.numpy(), tout.detach().numpy())
  assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_accepts_numpy_indices_and_one_hot():
  e = nn.Embedding(4, 2)
  table = e.weight.numpy()
  np.testing.assert_array_equal(e(np.array([3, 0, 3])).numpy(), table[[3, 0, 3]])
  np.testing.assert_array_equal(Tensor([2, 0]).one_hot(3).numpy(), [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("x_shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batchnorm_train_and_eval(rng, x_shape):
  ours = nn.BatchNorm(3, eps=1e-5, momentum=0.1)
  ours.weight.assign(Tensor(rng.uniform(0.5, 1.5, 3).astype(np.float32)))
  ours.bias.assign(Tensor(rng.uniform(-0.5, 0.5, 3).astype(np.float32)))
  theirs = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(x_shape)](3).double()
  theirs.train()
  with Tensor.train():
    for _ in range(2):  # two batches: the running statistics move twice
      _check_layer(rng, ours, theirs, ["weight", "bias"], x_shape)
      ours.weight.grad = ours.bias.grad = None
      theirs.zero_grad()
  Tensor.realize(ours.running_mean, ours.running_var)
  assert_close(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
  assert_close(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
  assert ours.num_batches_tracked.numpy().tolist() == [2]
  theirs.eval()
  _check_layer(rng, ours, theirs, ["weight", "bias"], x_shape)  # Tensor.training is False: running stats


def test_batchnorm_running_stats_stay_realized_in_a_loop(rng):
  bn = nn.BatchNorm(2)
  opt = nn.SGD(get_parameters(bn), lr=0.1)
  assert any(t is bn.running_mean for t in opt.buffers) and any(t is bn.weight for t in opt.params)
  with Tensor.train():
    for _ in range(3):
      opt.zero_grad()
      bn(Tensor(rng.standard_normal((8, 2), dtype=np.float32))).square().mean().backward()
      opt.step()
      assert bn.running_mean.is_realized and bn.running_var.is_realized


def test_dropout(rng):
  x = Tensor.ones(200, 50)
  d = nn.Dropout(0.25)
  assert d(x) is x, "identity unless Tensor.training"
  with Tensor.train():
    y = d(x).numpy()
  kept = y != 0
  assert 0.70 < kept.mean() < 0.80
  np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
  with Tensor.train():
    assert (d(x).numpy() != y).any(), "a fresh mask per call"
    assert nn.Dropout(0.0)(x) is x


def test_dropout_gradient_uses_the_same_mask():
  x = Tensor.ones(10, 10, requires_grad=True)
  with Tensor.train():
    y = x.dropout(0.5)
  y.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), y.numpy())


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                {"groups": 2, "dilation": 2, "bias": False}])
def test_conv_transpose2d_layer(rng, kw):
  ours = nn.ConvTranspose2d(4, 6, 3, **kw)
  names = ["weight", "bias"] if kw.get("bias", True) else ["weight"]
  _check_layer(rng, ours, torch.nn.ConvTranspose2d(4, 6, 3, **kw), names, (2, 4, 5, 5), tol=1e-4)


# --- state dicts ------------------------------------------------------------------------------------

class Net:
  def __init__(self):
    self.l1 = nn.Linear(4, 8)
    self.norm = nn.LayerNorm(8)
    self.blocks = [nn.Linear(8, 8), nn.Linear(8, 2, bias=False)]
    self.bn = nn.BatchNorm(8)

  def __call__(self, x):
    x = self.norm(self.l1(x).relu())
    return self.blocks[1](self.bn(self.blocks[0](x)).gelu())


def test_state_dict_names_and_parameters():
  net = Net()
  sd = get_state_dict(net)
  assert list(sd) == ["l1.weight", "l1.bias", "norm.weight", "norm.bias", "blocks.0.weight", "blocks.0.bias",
                      "blocks.1.weight", "bn.weight", "bn.bias", "bn.num_batches_tracked", "bn.running_mean",
                      "bn.running_var"]
  params = get_parameters(net)
  assert len(params) == len(sd) and all(isinstance(p, Tensor) for p in params)


def test_load_state_dict_copies_values_and_checks(rng):
  a, b = Net(), Net()
  x = Tensor(rng.standard_normal((5, 4), dtype=np.float32))
  load_state_dict(b, get_state_dict(a))
  assert_close(b(x).numpy(), a(x).numpy())
  # b's parameters are its own gradient targets, not a's
  b(x).sum().backward()
  assert b.l1.weight.grad is not None and a.l1.weight.grad is None
  numpy_sd = {k: v.numpy() for k, v in get_state_dict(a).items()}
  c = Net()
  load_state_dict(c, numpy_sd)
  assert_close(c(x).numpy(), a(x).numpy())
  with pytest.raises(KeyError, match="l1.weight"):
    load_state_dict(Net(), {k: v for k, v in numpy_sd.items() if k != "l1.weight"})
  load_state_dict(Net(), {k: v for k, v in numpy_sd.items() if k != "l1.weight"}, strict=False)
  bad = dict(numpy_sd, **{"l1.bias": np.zeros(3, np.float32)})
  with pytest.raises(ValueError, match="shape"):
    load_state_dict(Net(), bad)


# --- issue 17: Conv1d, ConvTranspose1d, InstanceNorm, LayerNorm2d, LSTMCell -------------------------

@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, groups=2), dict(padding="same"),
                                dict(bias=False)])
def test_conv1d(rng, kw):
  ours = nn.Conv1d(4, 6, 3, **kw)
  names = ["weight", "bias"] if kw.get("bias", True) else ["weight"]
  _check_layer(rng, ours, torch.nn.Conv1d(4, 6, 3, **kw), names, (2, 4, 11))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(dilation=2, groups=2)])
def test_conv_transpose1d(rng, kw):
  _check_layer(rng, nn.ConvTranspose1d(4, 6, 3, **kw), torch.nn.ConvTranspose1d(4, 6, 3, **kw), ["weight", "bias"],
               (2, 4, 7))


@pytest.mark.parametrize("x_shape", [(2, 3, 10), (2, 3, 4, 5), (1, 3, 2, 3, 4)])
def test_instance_norm(rng, x_shape):
  ours = nn.InstanceNorm(3)
  # non-trivial affine parameters (copied to torch by _check_layer)
  ours.weight = Tensor(rng.uniform(0.5, 1.5, 3).astype(np.float32), requires_grad=True)
  ours.bias = Tensor(rng.uniform(-1, 1, 3).astype(np.float32), requires_grad=True)
  theirs = {3: torch.nn.InstanceNorm1d, 4: torch.nn.InstanceNorm2d, 5: torch.nn.InstanceNorm3d}[len(x_shape)](3, affine=True)
  _check_layer(rng, ours, theirs, ["weight", "bias"], x_shape, tol=1e-4)


def test_instance_norm_without_affine(rng):
  _check_layer(rng, nn.InstanceNorm(3, affine=False), torch.nn.InstanceNorm2d(3), [], (2, 3, 4, 4), tol=1e-4)


def test_layernorm2d(rng):
  class Theirs(torch.nn.LayerNorm):
    def forward(self, x):
      return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
  _check_layer(rng, nn.LayerNorm2d(5), Theirs(5), ["weight", "bias"], (2, 5, 3, 4), tol=1e-4)


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_two_steps(rng, bias):
  ours, theirs = nn.LSTMCell(5, 7, bias=bias), torch.nn.LSTMCell(5, 7, bias=bias).double()
  names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if bias else [])
  _copy_into_torch(ours, theirs, names)
  xs = [rng.uniform(-1, 1, (3, 5)).astype(np.float32) for _ in range(2)]
  hc, thc = None, None
  for x in xs:
    hc = ours(Tensor(x), hc)
    thc = theirs(torch.tensor(x, dtype=torch.float64), thc)
  (hc[0].sum() + (hc[1] * 2).sum()).backward()
  (thc[0].sum() + (thc[1] * 2).sum()).backward()
  assert_close(hc[0].numpy(), thc[0].detach().numpy(), rtol=1e-5, atol=1e-5)
  assert_close(hc[1].numpy(), thc[1].detach().numpy(), rtol=1e-5, atol=1e-5)
  for n in names:
    assert_close(getattr(ours, n).grad.numpy(), getattr(theirs, n).grad.numpy(), rtol=1e-4, atol=1e-5)


def test_new_layers_name_their_shape_errors():
  for layer, x in [(nn.Conv1d(2, 2, 3), Tensor.zeros(1, 2, 3, 3)), (nn.InstanceNorm(3), Tensor.zeros(2, 4, 5)),
                   (nn.LayerNorm2d(3), Tensor.zeros(2, 3, 4)), (nn.ConvTranspose1d(2, 2, 3), Tensor.zeros(2, 3))]:
    with pytest.raises(ValueError, match=type(layer).__name__):
      layer(x)
