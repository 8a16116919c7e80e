"""TinyJit (polygrad.TinyJit): tinygrad's call pattern (eager, capture, replay), state reached
through closures (an optimizer's model, assign to an input), training against the eager client and
PyTorch, argument checks, and that a replay is one RunStep with nothing sent or compiled."""
import numpy as np
import pytest

from polygrad import JitError, Tensor, TinyJit
from polygrad import graph as g
from polygrad import nn
from polygrad.nn import get_parameters

from mlp_twin import MLP, batches, torch_twin  # noqa: E402

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference for these tests")

pytestmark = pytest.mark.usefixtures("live_daemon")


def test_add_every_call_right_and_one_kernel(rng):
  @TinyJit
  def add(a, b):
    return (a + b).realize()

  for i in range(5):
    x, y = rng.standard_normal((10, 10), dtype=np.float32), rng.standard_normal((10, 10), dtype=np.float32)
    out = add(Tensor(x), Tensor(y))
    np.testing.assert_allclose(out.numpy(), x + y, rtol=1e-6)
    assert (add.captured is None) == (i == 0), "the first call is eager, the second captures"
  assert add.captured.n_kernels == 1 and add.captured.runs == 4


def test_replay_is_one_run_step_and_sends_no_graph(rng):
  @TinyJit
  def f(a, b):
    return (a @ b).relu().sum(0), a - b

  a, b = Tensor(rng.standard_normal((8, 8), dtype=np.float32)).realize(), Tensor(rng.standard_normal((8, 8), dtype=np.float32)).realize()
  f(a, b), f(a, b)
  requests, next_id = g.GRAPH.requests, g.GRAPH.stats()["next_id"]
  runs = f.captured.runs
  for _ in range(3):
    s, d = f(a, b)
  assert g.GRAPH.requests == requests, "a replay sends no Realize"
  assert f.captured.runs == runs + 3
  # Each replay makes only the result nodes (two outputs), no graph.
  assert g.GRAPH.stats()["next_id"] - next_id == 3 * 2
  an, bn = a.numpy(), b.numpy()
  np.testing.assert_allclose(s.numpy(), np.maximum(an @ bn, 0).sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(d.numpy(), an - bn)


def test_results_of_earlier_calls_stay_valid():
  """tinygrad hands back the same buffer every call; here each call's results are its own."""
  @TinyJit
  def f(x):
    return x.sum().realize()

  results = [f(Tensor([float(i)] * 2)) for i in range(1, 5)]
  assert [r.item() for r in results] == [2.0, 4.0, 6.0, 8.0]


def test_structures_returned_and_kwargs():
  @TinyJit
  def f(first, second):
    return {"sum": first + second, "pair": [first * second, (first - second,)]}

  for i in range(4):
    a, b = Tensor([1.0, 2.0]) + i, Tensor([3.0, 5.0])
    r = f(first=a, second=b)
    np.testing.assert_allclose(r["sum"].numpy(), a.numpy() + b.numpy())
    np.testing.assert_allclose(r["pair"][0].numpy(), a.numpy() * b.numpy())
    np.testing.assert_allclose(r["pair"][1][0].numpy(), a.numpy() - b.numpy())


def test_assign_to_an_input_and_to_closure_state():
  @TinyJit
  def inc(a):
    a += 1
    a.realize()

  a = Tensor.zeros(1).contiguous().realize()
  for _ in range(5):
    inc(a)
  assert a.item() == 5

  counter = Tensor([0, 0], dtype="int32").realize()

  @TinyJit
  def bump(step):
    counter.assign(counter + step)
    return counter * 2

  outs = [bump(Tensor([1, 2], dtype="int32")).tolist() for _ in range(4)]
  assert counter.tolist() == [4, 8]
  assert outs == [[2, 4], [4, 8], [6, 12], [8, 16]]


def test_closure_weights_tensor_in_a_list_and_methods(rng):
  w = Tensor.eye(5)

  @TinyJit
  def foo(x, extra):
    return w.dot(x) + extra[0]

  rows = rng.standard_normal((4, 5), dtype=np.float32)
  got = [foo(Tensor(r), [Tensor(np.float32(i))]).numpy() for i, r in enumerate(rows)]
  np.testing.assert_allclose(np.array(got), rows + np.arange(4, dtype=np.float32)[:, None], rtol=1e-6)

  class Fun:
    def __init__(self):
      self.a = Tensor(rng.standard_normal((3, 3), dtype=np.float32))

    @TinyJit
    def __call__(self, b):
      return (self.a + b).realize()

  fun = Fun()
  for _ in range(4):
    b = rng.standard_normal((3, 3), dtype=np.float32)
    np.testing.assert_allclose(fun(Tensor(b)).numpy(), fun.a.numpy() + b, rtol=1e-6)


def test_mismatched_and_bad_calls_raise_jit_error():
  @TinyJit
  def add(a, b):
    return (a + b).realize()

  for _ in range(3):
    add(Tensor.randn(4, 4), Tensor.randn(4, 4))
  with pytest.raises(JitError, match=r"args\[1\] is float32\[2, 2\].*float32\[4, 4\]"):
    add(Tensor.randn(4, 4), Tensor.randn(2, 2))
  with pytest.raises(JitError, match="int32"):
    add(Tensor.randn(4, 4), Tensor.ones(4, 4, dtype="int32"))
  with pytest.raises(JitError, match="args mismatch"):
    add(a=Tensor.randn(4, 4), b=Tensor.randn(4, 4))
  x = Tensor.randn(4, 4)
  with pytest.raises(JitError, match="duplicate"):
    add(x, x)
  assert add(Tensor.ones(4, 4), Tensor.ones(4, 4)).numpy().tolist() == [[2.0] * 4] * 4, "still usable"

  @TinyJit
  def nothing(a, b):
    return None

  with pytest.raises(JitError, match="didn't JIT anything"):
    for _ in range(3):
      nothing(Tensor([1.0]), Tensor([2.0]))

  @TinyJit
  def returns_int(a, i):
    return a + 1, i

  with pytest.raises(JitError, match="returned a int"):
    for i in range(3):
      returns_int(Tensor([1.0]), i)


def test_reset_captures_again_with_new_shapes():
  @TinyJit
  def add(a, b):
    return a + b

  for n in (3, 5):
    for _ in range(3):
      x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
      np.testing.assert_allclose(add(Tensor(x), Tensor(y)).numpy(), x + y)
    add.reset()
    assert add.captured is None and add.cnt == 0


OPTIMIZERS = {
    "sgd_momentum": (lambda p: nn.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "adam": (lambda p: nn.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
}


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_training_loop_with_closures_matches_eager_and_pytorch(opt_name):
  """tinygrad's training-loop shape: model and optimizer reached through the closure, the batch
  as arguments. 30 steps; losses and trained weights against the eager client and PyTorch (Adam's
  bias corrections change every step: they are the step's scalar inputs)."""
  make_ours, make_theirs = OPTIMIZERS[opt_name]
  data = batches(7, 30)
  Tensor.manual_seed(3)
  mj = MLP(hidden=16)
  Tensor.manual_seed(3)
  me = MLP(hidden=16)
  tm = torch_twin(mj)
  optj, opte, topt = make_ours(get_parameters(mj)), make_ours(get_parameters(me)), make_theirs(tm.parameters())

  @TinyJit
  def step(x, y):
    optj.zero_grad()
    loss = mj(x).cross_entropy(y).backward()
    optj.step()
    return loss

  jitted, eager, theirs = [], [], []
  for x, y in data:
    jitted.append(step(Tensor(x), Tensor(y)).item())
    opte.zero_grad()
    le = me(Tensor(x)).cross_entropy(Tensor(y)).backward()
    opte.step()
    eager.append(le.item())
    topt.zero_grad()
    tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y, dtype=torch.long))
    tl.backward()
    topt.step()
    theirs.append(tl.item())
  jitted, eager, theirs = map(np.array, (jitted, eager, theirs))
  assert np.abs(jitted - eager).max() < 1e-4
  assert np.abs(jitted - theirs).max() < 1e-3
  assert jitted[-5:].mean() < 0.8 * jitted[:5].mean(), "the model learns"
  for ours, twin in zip(get_parameters(mj), [tm[0].weight, tm[0].bias, tm[2].weight, tm[2].bias]):
    np.testing.assert_allclose(ours.numpy(), twin.detach().numpy(), rtol=1e-4, atol=1e-4)
  assert optj.steps == 30
  assert step.captured.runs == 29


def test_jit_env_zero_runs_eagerly(monkeypatch):
  monkeypatch.setenv("JIT", "0")

  @TinyJit
  def add(a, b):
    return (a + b).realize()

  for i in range(4):
    assert add(Tensor([float(i)]), Tensor([1.0])).item() == i + 1
  assert add.captured is None


def test_two_jits_updating_one_tensor_see_each_other():
  """Each jit's eager first call leaves the tensor in a new buffer; the other jit, captured on the
  old one, then captures again instead of updating a buffer nobody reads."""
  acc = Tensor([0.0]).realize()

  @TinyJit
  def add1():
    acc.assign(acc + 1)
    return acc * 1

  @TinyJit
  def add10():
    acc.assign(acc + 10)
    return acc * 1

  got = [f().item() for f in (add1, add1, add10, add1, add10, add10, add1, add1)]
  assert got == [1, 2, 12, 13, 23, 33, 34, 35]
  assert acc.item() == 35


def test_variables_bind_and_a_jit_follows_their_value():
  """tinygrad's Variable: bounds, binding, an int wherever one is taken. A jitted function captures
  again for a new bound value instead of replaying the old one (its kernels are cached)."""
  from polygrad import Variable
  v = Variable("start_pos", 1, 8)
  assert (v.name, v.min_val, v.max_val, v.expr, v.vmin, v.vmax) == ("start_pos", 1, 8, "start_pos", 1, 8)
  b = v.bind(3)
  assert int(b) == 3 and b.variable is v and b.unbind() == (v, 3) and repr(b) == "start_pos=3" and "start_pos" in repr(v)
  for bad in (0, 9):
    with pytest.raises(AssertionError, match=r"outside \[1, 8\]"):
      v.bind(bad)
  with pytest.raises(TypeError):
    v.bind(2.5)

  cache = Tensor(np.arange(10, dtype=np.float32)).realize()

  @TinyJit
  def head_sum(x, pos):
    return cache[0:pos + 1].sum() + x

  got = [head_sum(Tensor([0.0]), v.bind(p)).item() for p in (1, 2, 2, 2, 5, 5, 3)]
  assert got == [float(np.arange(p + 1).sum()) for p in (1, 2, 2, 2, 5, 5, 3)]


def test_random_numbers_are_drawn_anew_every_replay_as_eagerly():
  """tinygrad's jit draws new random numbers on every call; so does a replay here: each call's
  dropout mask and Tensor.rand are exactly what the same calls made eagerly draw. A tensor drawn
  before the jit keeps its numbers."""
  x = Tensor.ones(4, 8).contiguous().realize()
  Tensor.manual_seed(3)
  before = Tensor.rand(4, 8)  # drawn outside fn, read inside: the same in every call

  @TinyJit
  def f(x):
    return (x.dropout(0.5) + Tensor.rand(4, 8) * before).realize()

  def calls(g_):
    with Tensor.train():
      return [g_(x).numpy() for _ in range(5)]

  jitted = calls(f)
  assert f.captured is not None and f.captured.runs == 4
  Tensor.manual_seed(3)
  before = Tensor.rand(4, 8)
  eager = calls(lambda x: x.dropout(0.5) + Tensor.rand(4, 8) * before)
  for i, (a, b) in enumerate(zip(jitted, eager)):
    np.testing.assert_array_equal(a, b, err_msg=f"call {i}")
  assert len({a.tobytes() for a in jitted}) == 5, "every call drew new numbers"


def test_a_compiled_steps_random_key_must_fit_32_bits():
  from polygrad.connection import get_connection
  from polygrad.errors import PolygradInvalidArgument
  Tensor.manual_seed(1)
  x = Tensor.ones(3).contiguous().realize()
  step = nn.compile_step(lambda x: x + Tensor.rand(3), x)
  step.run()
  with pytest.raises(PolygradInvalidArgument, match="counter_base .* 32 bits"):
    get_connection().run_step(step.step_id, [], random=(1, 1 << 32))
  with pytest.raises(PolygradInvalidArgument, match="count .* must fit in 32 bits"):
    get_connection().compile_step([], [], [], [], [], random=(1, 0, (1 << 32) + 1))
  step.run()
