"""compile_step from several threads at once: a trace defers only the realizes of its own thread
(Graph.tracing holds it in a context variable), so steps traced at the same time are each the step
their own fn describes, and train as the same fn does eagerly."""
import threading

import numpy as np
import pytest

from conftest import WAIT_LIMIT
from polygrad import Tensor, nn

pytestmark = pytest.mark.usefixtures("live_daemon")

STEPS = 5


class Affine:
  def __init__(self, seed):
    rng = np.random.default_rng(seed)
    self.w = Tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    self.b = Tensor(rng.standard_normal((3,)).astype(np.float32), requires_grad=True)


def data(seed):
  rng = np.random.default_rng(100 + seed)
  return [(rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32))
          for _ in range(STEPS)]


def loss_of(model, x, y):
  return ((x @ model.w + model.b - y) ** 2).mean()


def eager_losses(seed):
  model = Affine(seed)
  opt = nn.SGD([model.w, model.b], lr=0.1)
  out = []
  for xb, yb in data(seed):
    loss = loss_of(model, Tensor(xb), Tensor(yb))
    loss.backward()
    opt.step()
    opt.zero_grad()
    out.append(loss.item())
  return out


def test_two_threads_trace_compiled_steps_at_once():
  """Both traces are open together (a barrier inside fn), and the second thread's optimizer step
  runs only once the first thread's trace has ended and its step is compiled: with one global
  trace, that optimizer step would have run eagerly and been baked into the step."""
  both_tracing = threading.Barrier(2, timeout=WAIT_LIMIT)
  first_compiled = threading.Event()
  losses, errors = {}, {}

  def worker(seed, wait_for):
    try:
      model = Affine(seed)
      opt = nn.SGD([model.w, model.b], lr=0.1)
      batches = data(seed)
      x, y = Tensor(batches[0][0]), Tensor(batches[0][1])

      def train(model, opt, x, y):
        loss = loss_of(model, x, y)
        loss.backward()
        both_tracing.wait()
        if wait_for is not None:
          assert wait_for.wait(WAIT_LIMIT), "the other thread's step was not compiled in time"
        opt.step()
        opt.zero_grad()
        return loss

      step = nn.compile_step(train, model, opt, x, y)
      if wait_for is None:
        first_compiled.set()
      losses[seed] = [step.run(x=xb, y=yb).loss_value() for xb, yb in batches]
    except BaseException as e:  # reported by the test thread
      errors[seed] = e
      both_tracing.abort()
      first_compiled.set()

  threads = [threading.Thread(target=worker, args=(1, None)), threading.Thread(target=worker, args=(2, first_compiled))]
  for t in threads:
    t.start()
  for t in threads:
    t.join(WAIT_LIMIT)
  assert not any(t.is_alive() for t in threads), "a worker thread hung"
  for seed, e in errors.items():
    raise AssertionError(f"thread {seed} failed: {e!r}") from e
  for seed in (1, 2):
    np.testing.assert_allclose(losses[seed], eager_losses(seed), rtol=1e-5, atol=1e-6, err_msg=f"thread {seed}")
