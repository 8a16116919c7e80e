"""Optimizers and learning-rate schedulers against torch.optim on the same model and data; an MLP's
loss curve against PyTorch's; one request per step; flat daemon memory over a training loop."""

import numpy as np
import pytest

from conftest import run_watching_buffers
from polygrad import Tensor, dtypes
from polygrad import graph as g
from polygrad import nn
from polygrad.errors import PolygradResourceExhausted
from polygrad.nn import get_parameters

from mlp_twin import MLP, torch_twin  # noqa: E402

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")




def classification_data(seed, n=64, n_in=6, n_cls=3):
  r = np.random.default_rng(seed)
  x = r.standard_normal((n, n_in)).astype(np.float32)
  w = r.standard_normal((n_in, n_cls))
  y = np.argmax(x @ w + 0.3 * r.standard_normal((n, n_cls)), axis=1).astype(np.int32)
  return x, y


OPTIMIZERS = {
    "sgd": (lambda p: nn.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum": (lambda p: nn.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "sgd_nesterov_wd": (lambda p: nn.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
                        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01)),
    "sgd_weight_decay": (lambda p: nn.SGD(p, lr=0.1, weight_decay=0.05), lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.05)),
    "adam": (lambda p: nn.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    "adam_betas_wd": (lambda p: nn.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
                      lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw": (lambda p: nn.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
    "adamw_wd": (lambda p: nn.AdamW(p, lr=0.01, weight_decay=0.3), lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.3)),
}


def _torch_params_in_our_order(t):
  return [t[0].weight, t[0].bias, t[2].weight, t[2].bias]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_torch(name):
  make_ours, make_theirs = OPTIMIZERS[name]
  Tensor.manual_seed(7)
  m = MLP()
  tm = torch_twin(m)
  opt, topt = make_ours(get_parameters(m)), make_theirs(tm.parameters())
  x, y = classification_data(1)
  xt, yt = Tensor(x), Tensor(y)
  for _ in range(6):
    opt.zero_grad()
    loss = m(xt).cross_entropy(yt)
    loss.backward()
    opt.step()
    topt.zero_grad()
    tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y, dtype=torch.long))
    tl.backward()
    topt.step()
    assert abs(loss.item() - tl.item()) < 1e-5
  for ours, theirs in zip(get_parameters(m), _torch_params_in_our_order(tm)):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("name", ["sgd_nesterov_wd", "adam_betas_wd", "adamw_wd"])
def test_update_rules_match_torch_in_other_dtypes(name, dtype):
  """The daemon's update ops on a float64 parameter (against torch in float64) and a float16 one,
  whose state is float32 (against torch in float32, rounded to float16), over fixed gradients."""
  make_ours, make_theirs = OPTIMIZERS[name]
  r = np.random.default_rng(5)
  p0 = r.standard_normal((3, 4))
  grads = [r.standard_normal((3, 4)) for _ in range(4)]
  ref_dt = torch.float64 if dtype == "float64" else torch.float32
  p = Tensor(p0.astype(dtype))
  tp = torch.tensor(p0.astype(dtype), dtype=ref_dt, requires_grad=True)
  opt, topt = make_ours([p]), make_theirs([tp])
  for g in grads:
    p.grad = Tensor(g.astype(dtype))
    opt.step()
    tp.grad = torch.tensor(g.astype(dtype), dtype=ref_dt)
    topt.step()
  assert p.dtype == getattr(dtypes, dtype)
  want = tp.detach().numpy().astype(dtype)
  # The per-step numbers (lr, bias corrections) travel as float32 buffers, so a float64 update
  # is within float32's rounding of lr (about 6e-8 relative) of torch's, not float64's.
  tol = 1e-6 if dtype == "float64" else 2e-3
  np.testing.assert_allclose(p.numpy().astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def _torch_lamb_step(params, state, lr, b1, b2, eps, wd, k):
  """tinygrad's LAMB, written out in torch (float64)."""
  with torch.no_grad():
    for p in params:
      m, v = state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
      m.mul_(b1).add_(p.grad * (1 - b1))
      v.mul_(b2).add_(p.grad * p.grad * (1 - b2))
      up = (m / (1 - b1 ** k)) / ((v / (1 - b2 ** k)).sqrt() + eps) + wd * p
      r1, r2 = p.norm(), up.norm()
      r = (r1 / r2) if (r1 > 0 and r2 > 0) else 1.0
      p.sub_(lr * r * up)


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_lamb_matches_its_formula(wd):
  Tensor.manual_seed(3)
  m = MLP()
  tm = torch_twin(m).double()
  opt = nn.LAMB(get_parameters(m), lr=0.01, weight_decay=wd)
  x, y = classification_data(2)
  state = {}
  for k in range(1, 5):
    opt.zero_grad()
    m(Tensor(x)).cross_entropy(Tensor(y)).backward()
    opt.step()
    tm.zero_grad()
    torch.nn.functional.cross_entropy(tm(torch.tensor(x, dtype=torch.float64)), torch.tensor(y, dtype=torch.long)).backward()
    _torch_lamb_step(_torch_params_in_our_order(tm), state, 0.01, 0.9, 0.999, 1e-6, wd, k)
  for ours, theirs in zip(get_parameters(m), _torch_params_in_our_order(tm)):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam"])
def test_mlp_loss_curve_matches_pytorch(opt_name):
  """Issue 4, acceptance 3 (eager): same init, same data, 50 steps, losses within 1e-3."""
  make_ours, make_theirs = OPTIMIZERS[opt_name]
  Tensor.manual_seed(11)
  m = MLP(n_in=6, hidden=32, n_out=3)
  tm = torch_twin(m)
  opt, topt = make_ours(get_parameters(m)), make_theirs(tm.parameters())
  x, y = classification_data(5, n=128)
  xt, yt = Tensor(x), Tensor(y)
  ours, theirs = [], []
  for _ in range(50):
    opt.zero_grad()
    loss = m(xt).cross_entropy(yt)
    loss.backward()
    opt.step()
    ours.append(loss.item())
    topt.zero_grad()
    tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y, dtype=torch.long))
    tl.backward()
    topt.step()
    theirs.append(tl.item())
  diff = np.max(np.abs(np.array(ours) - np.array(theirs)))
  print(f"{opt_name}: max |loss - torch loss| over 50 steps = {diff:.3g} (first {ours[0]:.4f}, last {ours[-1]:.4f})")
  assert diff < 1e-3
  assert ours[-1] < 0.6 * ours[0], "the model learns"


def test_one_request_per_step_and_no_recompiles():
  Tensor.manual_seed(0)
  m = MLP()
  opt = nn.Adam(get_parameters(m), lr=0.01)
  sched = nn.CosineAnnealingLR(opt, T_max=10)
  x, y = classification_data(3)
  xt, yt = Tensor(x), Tensor(y)
  for i in range(6):
    opt.zero_grad()
    loss = m(xt).cross_entropy(yt)
    before = g.GRAPH.stats()["requests"]
    loss.backward()
    opt.step()
    sched.step()
    assert g.GRAPH.stats()["requests"] == before + 1, "backward + step is one Realize request"
    assert loss.is_realized, "the step realizes the loss too"
    if i >= 2:  # new lr and bias corrections travel as data: the same kernels every step
      assert g.GRAPH.last_stats.compiled == 0, g.GRAPH.last_stats
    assert all(p.is_realized for p in get_parameters(m))


def test_parameters_without_gradient_are_left_alone():
  a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  opt = nn.SGD([a, b], lr=0.5)
  (a * a).sum().backward()
  opt.step()
  assert a.numpy().tolist() == [0.0, 0.0] and b.numpy().tolist() == [3.0]
  assert a.grad is not None and b.grad is None


def test_optimizer_marks_parameters_and_rejects_empty():
  t = Tensor([1.0])
  nn.SGD([t])
  assert t.requires_grad is True
  with pytest.raises(ValueError):
    nn.SGD([Tensor([1.0], requires_grad=False)])


SCHEDULERS = {
    "step": (lambda o: nn.StepLR(o, step_size=3, gamma=0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5)),
    "multistep": (lambda o: nn.MultiStepLR(o, [2, 5, 9], 0.3), lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 5, 9], 0.3)),
    "cosine": (lambda o: nn.CosineAnnealingLR(o, T_max=10, eta_min=0.01),
               lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.01)),
    "linear": (lambda o: nn.LinearLR(o, start_factor=0.25, total_iters=4),
               lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4)),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_matches_torch(name):
  make_ours, make_theirs = SCHEDULERS[name]
  opt = nn.SGD([Tensor([1.0])], lr=0.2)
  topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.2)
  s, ts = make_ours(opt), make_theirs(topt)
  for _ in range(12):
    assert opt.lr == pytest.approx(topt.param_groups[0]["lr"], rel=1e-9, abs=1e-12)
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr())
    topt.step()
    s.step()
    ts.step()


def test_linear_warmup():
  opt = nn.SGD([Tensor([1.0])], lr=0.4)
  s = nn.LinearWarmup(opt, warmup_steps=4)
  seen = []
  for _ in range(6):
    seen.append(opt.lr)
    s.step()
  assert seen == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4])


def test_scheduled_lr_reaches_the_update():
  w = Tensor([1.0], requires_grad=True)
  opt = nn.SGD([w], lr=1.0)
  s = nn.StepLR(opt, step_size=1, gamma=0.5)
  for _ in range(3):
    opt.zero_grad()
    w.sum().backward()  # gradient 1
    opt.step()
    s.step()
  assert w.numpy().tolist() == [1.0 - 1.0 - 0.5 - 0.25]


def test_training_loop_memory_is_flat_on_the_daemon(tmp_path):
  """300 SGD steps of a small MLP against a daemon of its own: its live-buffer gauge (/metrics)
  and the client's node table stay flat after warm-up."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor
      from polygrad.nn import Linear, SGD, get_parameters
      Tensor.manual_seed(0)
      l1, l2 = Linear(8, 16), Linear(16, 2)
      opt = SGD(get_parameters([l1, l2]), lr=0.05, momentum=0.9)
      r = np.random.default_rng(0)
      seen, nodes = [], []
      for i in range(300):
        x = Tensor(r.standard_normal((32, 8), dtype=np.float32))
        y = Tensor(r.integers(0, 2, 32).astype(np.int32))
        opt.zero_grad()
        loss = l2(l1(x).relu()).cross_entropy(y)
        loss.backward()
        opt.step()
        if i in (50, 299):
          seen.append(buffers())
          nodes.append(graph.GRAPH.stats()["sent_live"])
      print("BUFFERS", *seen, "NODES", *nodes, "LOSS", loss.item())
  """)
  w = out.split()
  early, late = float(w[w.index("BUFFERS") + 1]), float(w[w.index("BUFFERS") + 2])
  n_early, n_late = int(w[w.index("NODES") + 1]), int(w[w.index("NODES") + 2])
  assert late <= early, f"daemon buffers grew from {early} to {late} over 250 training steps"
  assert n_late <= n_early, f"nodes known to the daemon grew from {n_early} to {n_late}"


def test_gradients_accumulated_without_zero_grad_do_not_chain_graphs():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = nn.SGD([w], lr=0.0)  # lr 0: the gradient only accumulates
  for i in range(5):
    (w * w).sum().backward()
    opt.step()
  assert w.grad.numpy().tolist() == [10.0, 20.0]
  assert not w.grad._node.keep, "a realized accumulated gradient holds no graph"


# --- issue 17: LARS and Muon, against numpy transcriptions of their update rules ---------------------

def newton_schulz_np(g, steps, coefs, eps=1e-7):
  g = g.astype(np.float64)
  if g.shape[0] > g.shape[1]:
    return newton_schulz_np(g.T, steps, coefs, eps).T
  x = g / (np.sqrt((g * g).sum()) + eps)
  for _ in range(steps):
    a = x @ x.T
    x = sum(c * np.linalg.matrix_power(a, i) @ x for i, c in enumerate(coefs))
  return x


@pytest.mark.parametrize("shape", [(4, 6), (7, 3)])
def test_newton_schulz_orthogonalizes_like_its_definition(rng, shape):
  g = rng.standard_normal(shape).astype(np.float32)
  got = Tensor(g).newton_schulz(5, (3.4445, -4.775, 2.0315)).numpy()
  np.testing.assert_allclose(got, newton_schulz_np(g, 5, (3.4445, -4.775, 2.0315)), rtol=1e-4, atol=1e-5)
  # its purpose: singular values pulled towards 1 (Muon's quintic lands them in about [0.7, 1.2])
  sv = np.linalg.svd(got, compute_uv=False)
  assert sv.min() > 0.5 and sv.max() < 1.3, sv


def test_newton_schulz_work_is_bounded_before_anything_runs():
  # 64 steps of 16 products of 40000-wide matrices: refused by the work bound, naming the op.
  with pytest.raises(PolygradResourceExhausted, match=r"NEWTON_SCHULZ's matrix products .* more work than max_work"):
    Tensor.ones(40000, 40000).newton_schulz(64, [1.0] * 16).realize().synchronize()


def lars_np(p, grads, lr, momentum, weight_decay, nesterov, classic, tcoef):
  wd = weight_decay
  p, b = p.astype(np.float64), np.zeros_like(p, dtype=np.float64)
  for g in grads:
    r1, r2 = np.sqrt((p * p).sum()), np.sqrt((g * g).sum())  # the raw gradient's norm
    r = tcoef * r1 / (r2 + wd * r1) if tcoef and r1 > 0 and r2 > 0 else 1.0
    g = g + wd * p
    if classic:
      g = g * r * lr
    if momentum:
      b = momentum * b + g
      g = g + momentum * b if nesterov else b
    if not classic:
      g = g * r * lr
    p = p - g
  return p


def muon_np(p, grads, lr, momentum, wd, ns_steps, coefs, nesterov):
  p, b = p.astype(np.float64), np.zeros_like(p, dtype=np.float64)
  for g in grads:
    b = momentum * b + g
    u = g + momentum * b if nesterov else b
    u = newton_schulz_np(u.reshape(u.shape[0], -1), ns_steps, coefs).reshape(u.shape)
    p = p * (1 - lr * wd) - lr * u
  return p


def run_optimizer(make, p0, grads):
  """Drives an optimizer with given gradients (a loss sum(p * G) has gradient G) and returns p."""
  p = Tensor(p0, requires_grad=True)
  opt = make([p])
  for g in grads:
    opt.zero_grad()
    (p * Tensor(g)).sum().backward()
    opt.step()
  return p.numpy()


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.0), dict(nesterov=True), dict(classic=False),
                                dict(tcoef=0.0, weight_decay=0.0), dict(weight_decay=0.1, tcoef=0.02)])
def test_lars(rng, kw):
  p0 = rng.standard_normal((5, 4)).astype(np.float32)
  grads = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(3)]
  args = dict(lr=0.1, momentum=0.9, weight_decay=1e-4, nesterov=False, classic=True, tcoef=0.001) | kw
  got = run_optimizer(lambda ps: nn.LARS(ps, **args), p0, grads)
  np.testing.assert_allclose(got, lars_np(p0, grads, **args), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,kw", [((6, 4), dict()), ((3, 8), dict(weight_decay=0.0)), ((4, 2, 3), dict(nesterov=False)),
                                      ((5, 5), dict(ns_steps=2, momentum=0.5))])
def test_muon(rng, shape, kw):
  p0 = rng.standard_normal(shape).astype(np.float32)
  grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
  args = dict(lr=0.02, momentum=0.95, weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315),
              nesterov=True) | kw
  got = run_optimizer(lambda ps: nn.Muon(ps, **args), p0, grads)
  expected = muon_np(p0, grads, args["lr"], args["momentum"], args["weight_decay"], args["ns_steps"],
                     args["ns_coefficients"], args["nesterov"])
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_muon_compiled_step_tracks_eager_and_bakes_no_data():
  """MUON_STEP in a compiled step: the coefficients are an input sent once (not data baked into
  the step, which compile_step warns about), and the weights follow the eager client's."""
  import warnings
  from mlp_twin import batches, train_step as train

  def weights(m):
    return [m.l1.weight, m.l2.weight]

  data = batches(3, 6)
  Tensor.manual_seed(5)
  mc = MLP(hidden=8)
  Tensor.manual_seed(5)
  me = MLP(hidden=8)
  optc, opte = nn.Muon(weights(mc), lr=0.05), nn.Muon(weights(me), lr=0.05)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    step = nn.compile_step(train, mc, optc, Tensor(data[0][0]), Tensor(data[0][1]))
  for x, y in data:
    step.run(x=x, y=y)
    train(me, opte, Tensor(x), Tensor(y))
  for a, b in zip(weights(mc), weights(me)):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_muon_refuses_vectors_by_name():
  with pytest.raises(ValueError, match=r"Muon orthogonalizes matrices: a parameter of shape \(3,\)"):
    nn.Muon([Tensor.zeros(3, requires_grad=True)])


def test_require_training_is_tinygrads_opt_in_contract(monkeypatch):
  from polygrad.nn.optim import Optimizer
  monkeypatch.setattr(Optimizer, "require_training", True)
  w = Tensor([1.0], requires_grad=True)
  opt = nn.optim.SGD([w], lr=0.1)
  (w * 2).sum().backward()
  with pytest.raises(AssertionError, match="Tensor.training"):
    opt.step()
  with Tensor.train():
    opt.step()
  np.testing.assert_allclose(w.numpy(), [0.8], rtol=1e-6)


def test_a_loss_left_pending_by_a_closed_session_is_not_sent():
  """backward() leaves its loss for the next optimizer step to realize; a loss whose node went
  with a closed session is not sent by the next session's step."""
  import polygrad
  w = Tensor([1.0, 2.0], requires_grad=True)
  loss = (w * w).sum()
  loss.backward()
  (loss * 2).realize()  # sends the loss's node without realizing it
  lazy = (w * 3).sum()  # unsent, reading w, which was sent
  lazy.backward()
  polygrad.close_connection()  # the next call opens a new session
  v = Tensor([3.0, 4.0], requires_grad=True)
  opt = nn.optim.SGD([v], lr=0.5)
  (v * v).sum().backward()
  opt.step()
  np.testing.assert_allclose(v.numpy(), [0.0, 0.0])
  assert loss is not None and lazy is not None
