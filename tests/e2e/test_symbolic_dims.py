"""Variables in shapes (tinygrad's symbolic dims): attention over the first start_pos + 1 rows of a
cache matches numpy for every position, with one set of kernels for all of them; a symbolic dim
survives permutes, expands and whole-axis reshapes; what would read the dim's size is refused
with the node named; a tensor with a symbolic dim is not read back."""
import re

import numpy as np
import pytest

from polygrad import Tensor, Variable
from polygrad.errors import ShapeError
from polygrad.v1 import polygrad_pb2 as pb
from polygrad.variable import SymInt

from conftest import run_watching_buffers

W, D = 16, 8


def _attention(q, k, v, n):
  s = q @ k[:n].T
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ v[:n]


def test_attention_over_a_symbolic_prefix_matches_numpy_at_every_position():
  rng = np.random.default_rng(0)
  k, v, q = (rng.standard_normal(s).astype(np.float32) for s in ((W, D), (W, D), (2, D)))
  K, V, Q = Tensor(k).realize(), Tensor(v).realize(), Tensor(q).realize()
  start_pos = Variable("start_pos", 0, W - 1)
  for pos in (0, 4, 15, 7):
    sp = start_pos.bind(pos)
    keys, vals = K.shrink(((0, sp + 1), None)), V.shrink(((0, sp + 1), None))
    assert isinstance(keys.shape[0], SymInt) and keys.shape[0] == pos + 1 and keys.shape[0].max == W
    got = ((Q @ keys.T).softmax(-1) @ vals).numpy()
    np.testing.assert_allclose(got, _attention(q, k, v, pos + 1), rtol=1e-5, atol=1e-6, err_msg=f"position {pos}")
    # Reductions of every kind see only the valid rows.
    np.testing.assert_allclose(keys.sum(0).numpy(), k[:pos + 1].sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(keys.max(0).numpy(), k[:pos + 1].max(0))
    np.testing.assert_array_equal(keys.min(0).numpy(), k[:pos + 1].min(0))


def test_a_symbolic_dim_follows_permutes_expands_and_whole_axis_reshapes():
  a = np.arange(W * D, dtype=np.float32).reshape(W, D)
  A = Tensor(a).realize()
  n = Variable("n", 1, W).bind(5)
  part = A.shrink(((0, n), None))
  flat = part.reshape(n * D)  # the symbolic axis merged with the one inside it
  assert flat.shape == (5 * D,) and flat.shape[0].max == W * D
  assert flat.sum().item() == a[:5].sum()
  assert part.permute(1, 0).sum(1).numpy().tolist() == a[:5].sum(0).tolist()
  col = Tensor(np.ones((1, D), dtype=np.float32)).expand(n, D)  # a symbolic expand
  assert (col * part).sum().item() == a[:5].sum()
  sliced = A[:n]  # a slice to a SymInt is a symbolic shrink too
  assert isinstance(sliced.shape[0], SymInt) and sliced.sum().item() == a[:5].sum()


def test_a_symbolic_dim_of_value_1_is_not_a_broadcast_1():
  """Bound to 1 it is still the whole (masked) axis on the daemon: it broadcasts like any other
  size, squeeze keeps it, and a plain 1 expands to it."""
  a = np.arange(W * D, dtype=np.float32).reshape(W, D)
  A = Tensor(a).realize()
  one = Variable("n", 1, W).bind(1)
  part = A[:one]
  assert (part * Tensor.ones(1, D)).sum().item() == a[:1].sum()
  assert part.squeeze().shape == (1, D)
  mask = Tensor.ones(1, 1).expand(one, D)
  assert isinstance(mask.shape[0], SymInt) and (mask * part).sum().item() == a[:1].sum()
  assert (part + Tensor.ones(W, D)[:one]).sum().item() == a[:1].sum() + D


def test_ops_that_would_read_a_symbolic_dims_size_are_refused_with_the_node_named():
  A = Tensor(np.ones((W, D), dtype=np.float32)).realize()
  part = A.shrink(((0, Variable("n", 1, W - 1).bind(3) + 1), None))
  with pytest.raises(Exception, match=r"node \d+ \(MEAN\).*symbolic dim"):
    part.mean(0).numpy()
  with pytest.raises(Exception, match=r"output \d+ has a symbolic dim \(axis 0\)"):
    part.numpy()
  with pytest.raises(Exception, match=r"changes symbolic axis 0"):
    part.flip(0).sum().numpy()
  # A symbolic begin, or an end whose largest value passes the axis, takes the value instead.
  b = A.shrink(((Variable("b", 0, 3).bind(1), 4), None))
  assert b.shape == (3, D) and not isinstance(b.shape[0], SymInt) and b.sum().item() == 3 * D
  big = A.shrink(((0, Variable("big", 1, W + 4).bind(2)), None))
  assert big.shape == (2, D) and not isinstance(big.shape[0], SymInt) and big.sum().item() == 2 * D
  # Pad amounts are numbers: a Variable's value is taken at the call, not refused when sent.
  padded = A.pad(((0, Variable("p", 0, 4).bind(2)), None))
  assert padded.shape == (W + 2, D) and padded.sum().item() == W * D
  # The session goes on.
  assert A.sum().item() == W * D


def test_binding_another_value_compiles_nothing(tmp_path):
  """Counted from the daemon's own /metrics: the second and later positions build no kernel."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor, Variable
      K = Tensor(np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)).realize()
      q = Tensor(np.ones((1, 16), dtype=np.float32)).realize()
      v = Variable("start_pos", 0, 63)
      builds = []
      at = Variable("at", 0, 60)
      for pos in (3, 10, 40, 63, 0):
        keys = K.shrink(((0, v.bind(pos) + 1), None))
        (q @ keys.T).softmax(-1).matmul(keys).numpy()
        b = at.bind(min(pos, 60))
        (K[b:b + 4] * 2).numpy()  # a begin held per run
        builds.append(metric("polygradd_kernel_builds_total"))
      print(" ".join(str(b) for b in builds))
      """, "--quick-compile=off")
  builds = [float(b) for b in out.split()]
  assert builds[0] > 0 and builds[1:] == [builds[0]] * 4, builds


def test_a_kv_cache_written_and_read_at_a_symbolic_begin_is_captured_once():
  """tinygrad's GPT-2 example: cache[:, p:p+1].assign(new) and allpos.shrink((p, p+1)) with p a
  bound Variable. The begin is a buffer the daemon sets per run, so one capture serves every
  position; cache and results match numpy."""
  from polygrad import TinyJit
  rng = np.random.default_rng(3)
  rows = rng.standard_normal((W, D)).astype(np.float32)
  cache = Tensor.zeros(2, W, D).contiguous().realize()
  allpos = Tensor(rows).realize()
  start_pos = Variable("start_pos", 0, W - 1)

  @TinyJit
  def step(x, pos):
    cache[:, pos:pos + 1, :].assign(Tensor.stack(x, -x)).realize()
    keys = cache[0][:pos + 1]
    return (keys.sum(0) + allpos.shrink(((pos, pos + 1), None)).reshape(D)).realize()

  want = np.zeros((2, W, D), np.float32)
  for pos in range(8):
    x = rng.standard_normal((1, D)).astype(np.float32)
    got = step(Tensor(x), start_pos.bind(pos)).numpy()
    want[0, pos], want[1, pos] = x[0], -x[0]
    np.testing.assert_allclose(got, want[0, :pos + 1].sum(0) + rows[pos], rtol=1e-5, atol=1e-5, err_msg=f"position {pos}")
  np.testing.assert_array_equal(cache.numpy(), want)
  assert step.captured.runs == 7 and step.captured.variables == {"start_pos"}
  assert step.captured.n_box_assigns == 1  # each run writes the new row, not the whole cache


def test_a_tinyjit_replays_a_new_variable_value_without_capturing_again():
  """The value goes with the RunStep (its `variables`), so one capture serves every position; a
  Variable fn takes as a plain number (here an index) makes each new value capture again."""
  from polygrad import TinyJit
  from polygrad.connection import get_connection
  rng = np.random.default_rng(1)
  k, q = rng.standard_normal((W, D)).astype(np.float32), rng.standard_normal((1, D)).astype(np.float32)
  K = Tensor(k).realize()
  start_pos = Variable("start_pos", 0, W - 1)

  @TinyJit
  def attend(x, pos):
    keys = K.shrink(((0, pos + 1), None))
    return ((x @ keys.T).softmax(-1) @ keys).realize()

  positions = (2, 3, 5, 9, 15, 0, 5)
  captures = set()
  for pos in positions:
    got = attend(Tensor(q), start_pos.bind(pos)).numpy()
    np.testing.assert_allclose(got, _attention(q, k, k, pos + 1), rtol=1e-5, atol=1e-6, err_msg=f"position {pos}")
    if attend.captured is not None:
      captures.add(id(attend.captured))
  assert len(captures) == 1 and attend.captured.runs == len(positions) - 1
  assert attend.captured.variables == {"start_pos"}

  @TinyJit
  def indexed(x, pos):
    return (x * K[pos]).sum().realize()  # K[pos]: a row read from a begin held per run

  for pos in (1, 2, 3):
    assert abs(indexed(Tensor(q), start_pos.bind(pos)).item() - float((q * k[pos]).sum())) < 1e-4
  assert indexed.captured.runs == 2, "one capture for every value"

  @TinyJit
  def weighted(x, pos):
    return (x * K[0] * float(pos)).sum().realize()  # float(pos) takes the value: a plain number

  for pos in (1, 2, 3):
    assert abs(weighted(Tensor(q), start_pos.bind(pos)).item() - float((q * k[0]).sum()) * pos) < 1e-4
  assert weighted.captured.runs == 1, "each new value captured again"

  @TinyJit
  def scaled(x, pos):
    return (K[:pos + 1].sum() * (W - pos) + x).realize()  # W - pos: a number computed from the value

  for pos in (1, 2, 3, 4):
    want = float(k[:pos + 1].sum()) * (W - pos)
    assert abs(scaled(Tensor([0.0]), start_pos.bind(pos)).item() - want) < 1e-3 * abs(want) + 1e-3, pos

  # A RunStep naming a Variable the step has no dim of is refused, and the step still runs.
  step = attend.captured
  with pytest.raises(Exception, match=r"variable nope has no symbolic dim in step"):
    get_connection().run_step(step.step_id, [], variables=[("nope", 3)])
  np.testing.assert_allclose(attend(Tensor(q), start_pos.bind(4)).numpy(), _attention(q, k, k, 5), rtol=1e-5, atol=1e-6)


def test_gradients_through_a_symbolic_dim_match_torch():
  """Rows past the extent reach nothing: their gradient is 0, whatever the kernels left there."""
  import torch
  rng = np.random.default_rng(2)
  k, q = rng.standard_normal((W, D)).astype(np.float32), rng.standard_normal((2, D)).astype(np.float32)
  K, Q = Tensor(k, requires_grad=True), Tensor(q, requires_grad=True)
  keys = K.shrink(((0, Variable("n", 1, W).bind(5)), None))
  ((Q @ keys.T).softmax(-1) @ keys).exp().sum().backward()
  kt, qt = torch.tensor(k, requires_grad=True), torch.tensor(q, requires_grad=True)
  ((qt @ kt[:5].T).softmax(-1) @ kt[:5]).exp().sum().backward()
  np.testing.assert_allclose(K.grad.numpy(), kt.grad.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(Q.grad.numpy(), qt.grad.numpy(), rtol=1e-5, atol=1e-5)
  assert not K.grad.numpy()[5:].any()


@pytest.mark.parametrize("change, message", [
    (lambda n: n.symbolic.add(axis=2, extent=3), r"node 2 \(SHRINK\): symbolic dim axis 2 is out of range for rank 2"),
    (lambda n: n.symbolic.extend([pb.SymbolicDim(axis=0, extent=3)] * 2), r"symbolic dim axis 0 is given twice"),
    (lambda n: n.symbolic.add(axis=0, extent=-1), r"value -1 is outside \[0, 2\^31\)"),
    (lambda n: n.symbolic.add(axis=2, extent=1, begin=True), r"symbolic begin axis 2 is out of range for rank 2"),
    (lambda n: n.symbolic.extend([pb.SymbolicDim(axis=0, extent=1, begin=True), pb.SymbolicDim(axis=0, extent=3)]),
     r"symbolic dim axis 0 is given twice"),
    (lambda n: n.symbolic.add(axis=1, extent=-2, begin=True), r"value -2 is outside \[0, 2\^31\)"),
    (lambda n: n.symbolic.add(axis=0, extent=3, variable="x" * 65, mul=1), r"a variable name of 1 to 64 bytes"),
    (lambda n: n.symbolic.add(axis=0, extent=3, variable="x", mul=0), r"mul in \[1, 2\^31\)"),
    (lambda n: n.symbolic.add(axis=1, extent=3), r"a symbolic end of axis 1 needs begin 0"),
])
def test_malformed_symbolic_dims_are_invalid_argument_naming_the_node(raw, change, message):
  import grpc
  stub, sid = raw
  data = pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32,
                 buffer=pb.BufferSource(data=np.ones((6, 4), np.float32).tobytes(), shape=[6, 4]))
  shrink = pb.Node(id=2, op=pb.SHRINK, src=[1], pairs=pb.Pairs(begin=[0, 1], end=[6, 4]))
  change(shrink)
  total = pb.Node(id=3, op=pb.REDUCE_SUM, src=[2], axes=pb.Axes(axes=[0, 1]))
  with pytest.raises(grpc.RpcError) as e:
    stub.Realize(pb.RealizeRequest(session_id=sid, nodes=[data, shrink, total], outputs=[3]), timeout=60)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and re.search(message, e.value.details()), e.value.details()
  # The session goes on, and the well-formed dim works.
  ok = pb.Node(id=2, op=pb.SHRINK, src=[1], pairs=pb.Pairs(begin=[0, 0], end=[6, 4]),
               symbolic=[pb.SymbolicDim(axis=0, extent=2)])
  r = stub.Realize(pb.RealizeRequest(session_id=sid, nodes=[data, ok, total], outputs=[3], want_data=True), timeout=60)
  assert np.frombuffer(r.results[0].data, np.float32).tolist() == [8.0]


def test_a_symbolic_dim_on_another_op_is_invalid_argument(raw):
  import grpc
  stub, sid = raw
  data = pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32,
                 buffer=pb.BufferSource(data=np.ones(4, np.float32).tobytes(), shape=[4]))
  neg = pb.Node(id=2, op=pb.NEG, src=[1], symbolic=[pb.SymbolicDim(axis=0, extent=2)])
  with pytest.raises(grpc.RpcError, match=r"node 2 \(NEG\): symbolic dims are taken by RESHAPE, EXPAND and SHRINK only"):
    stub.Realize(pb.RealizeRequest(session_id=sid, nodes=[data, neg], outputs=[2]), timeout=60)


def test_symbolic_dims_leave_no_buffer_behind(tmp_path):
  """Each symbolic dim's extent is a small buffer of the daemon's: it goes with the graph that
  reads it, in realizes and in a jit's steps alike."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor, Variable, TinyJit
      K = Tensor(np.ones((32, 8), dtype=np.float32)).realize()
      v = Variable("n", 1, 32)
      base = buffers()
      for n in range(1, 21):
        assert K[:v.bind(n)].sum().item() == 8 * n
        at = Variable("at", 0, 30).bind(n)
        assert K[at:at + 2].sum().item() == 16  # a begin held per run
      @TinyJit
      def f(x, n):
        return (K[:n].sum(0) + x).realize()
      for n in range(1, 11):
        assert f(Tensor.zeros(8), v.bind(n)).numpy().tolist() == [float(n)] * 8
      f.reset()
      print(base, buffers())
      """)
  base, after = (float(b) for b in out.split())
  assert after == base, (base, after)


def test_a_step_assigns_a_symbolic_values_valid_part_and_refuses_to_materialize_one(raw):
  """Past the extent a symbolic value is not computed: an assign writes its valid part and leaves
  the rest of the target; a materialized node or an output would hold garbage there, so a step
  takes neither."""
  import grpc
  stub, sid = raw
  data = pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32,
                 buffer=pb.BufferSource(data=np.ones((6, 4), np.float32).tobytes(), shape=[6, 4]))
  marked = pb.Node(id=2, op=pb.SHRINK, src=[1], pairs=pb.Pairs(begin=[0, 0], end=[6, 4]),
                   symbolic=[pb.SymbolicDim(axis=0, extent=2, variable="n", mul=1)])
  doubled = pb.Node(id=3, op=pb.ADD, src=[2, 2])
  with pytest.raises(grpc.RpcError) as e:
    stub.CompileStep(pb.CompileStepRequest(session_id=sid, nodes=[data, marked, doubled], materialize=[3]), timeout=60)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "3 has a symbolic dim (axis 0)" in e.value.details()
  step = stub.CompileStep(pb.CompileStepRequest(session_id=sid, nodes=[data, marked, doubled],
                                                assigns=[pb.StepAssign(target_node=1, value=3)]), timeout=60)
  assert list(step.variables) == ["n"]

  def rows():
    r = stub.Realize(pb.RealizeRequest(session_id=sid, outputs=[1], want_data=True), timeout=60)
    return np.frombuffer(r.results[0].data, np.float32).reshape(6, 4)[:, 0].tolist()

  stub.RunStep(pb.RunStepRequest(session_id=sid, step_id=step.step_id), timeout=60)
  assert rows() == [2, 2, 1, 1, 1, 1]
  stub.RunStep(pb.RunStepRequest(session_id=sid, step_id=step.step_id, variables=[pb.VariableValue(name="n", value=3)]),
               timeout=60)
  assert rows() == [4, 4, 2, 1, 1, 1]


def test_an_eager_assign_of_a_symbolic_value_is_refused():
  K = Tensor(np.ones((W, D), dtype=np.float32)).realize()
  part = K[:Variable("n", 1, W).bind(3)]
  with pytest.raises(ShapeError, match="only by a TinyJit or compile_step"):
    K.assign(part * 2)
