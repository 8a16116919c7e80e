"""Tensor.einsum (the daemon's EINSUM) and Tensor.rearrange against numpy (values) and PyTorch
(gradients); the daemon's own checks of an equation no client checked."""
import numpy as np
import pytest

from polygrad import Tensor, dtypes
from polygrad import graph as g
from polygrad.errors import PolygradInvalidArgument, PolygradResourceExhausted

torch = pytest.importorskip("torch", reason="gradients are compared with PyTorch (python3-torch)")

EINSUM_CASES = [
  ("ij,jk->ik", [(3, 4), (4, 5)]),
  ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
  ("i,j->ij", [(3,), (4,)]),
  ("ij->ji", [(3, 4)]),
  ("ij->", [(3, 4)]),
  ("ij,ij->i", [(3, 4), (3, 4)]),
  ("ij,jk", [(3, 4), (4, 5)]),            # implicit output: ik
  ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
  ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
  ("i,i,i->", [(4,), (4,), (4,)]),
  ("ij,kj->ik", [(3, 1), (2, 4)]),        # size-1 broadcast along a shared letter
  ("ii->i", [(4, 4)]),                    # a letter repeated within an operand: its diagonal
  ("ii", [(4, 4)]),                       # implicit output: the trace
  ("...ii->...", [(3, 5, 5)]),            # batched traces
  ("iji,j->ij", [(3, 2, 3), (2,)]),
  ("Ab,bC->AC", [(2, 3), (3, 4)]),        # upper-case labels (numpy's)
  ("i,->i", [(3,), ()]),                  # a 0-d operand
  ("ba", [(3, 4)]),                       # implicit output in ASCII order: ab
  ("...,...->...", [(2, 3), (3,)]),       # only "...": broadcast product
]


@pytest.mark.parametrize("formula,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy_and_torch_gradients(formula, shapes):
  rng = np.random.default_rng(len(formula))
  arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  ts = [Tensor(a, requires_grad=True) for a in arrays]
  got = Tensor.einsum(formula, *ts)
  want = np.einsum(formula, *arrays)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
  w = rng.standard_normal(want.shape).astype(np.float32)
  (got * Tensor(w)).sum().backward()
  tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
  (torch.einsum(formula, *tt) * torch.tensor(w, dtype=torch.float64)).sum().backward()
  for t, r in zip(ts, tt):
    np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("formula,shapes,error", [
  ("ij,jk->ik", [(3, 4)], ValueError),             # operand count
  ("ij->ik", [(3, 4)], ValueError),                # output letter not in inputs
  ("ii->i", [(3, 4)], ValueError),                 # a diagonal of unequal axes
  ("ij,jk->ik", [(3, 4), (5, 6)], ValueError),     # j is 4 and 5
  ("ijk->i", [(3, 4)], ValueError),                # rank
])
def test_einsum_errors_name_the_problem(formula, shapes, error):
  with pytest.raises(error):
    Tensor.einsum(formula, *[Tensor(np.zeros(s, np.float32)) for s in shapes])


def test_einsum_is_one_node_keeping_integer_dtypes_and_promoting_mixed_ones():
  a = np.arange(12, dtype=np.int32).reshape(3, 4)
  b = np.arange(8, dtype=np.int32).reshape(4, 2) - 3
  got = Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b))
  assert got._node.op == g.EINSUM and got.dtype == dtypes.int32  # torch's: no widening
  np.testing.assert_array_equal(got.numpy(), a @ b)
  mixed = Tensor.einsum("i,i->", Tensor(np.ones(3, np.float16)), Tensor(np.ones(3, np.float32)))
  assert mixed.dtype == dtypes.float32 and mixed.item() == 3.0


def test_the_daemon_checks_an_equation_no_client_checked():
  x = Tensor(np.zeros((3, 4), np.float32))
  bad = Tensor._make(g.EINSUM, x.dtype, (3,), (x,), g.Composite(equation="ij->k"))
  with pytest.raises(PolygradInvalidArgument, match=r"einsum: output label 'k' is not in any input"):
    bad.realize().synchronize()
  long = Tensor._make(g.EINSUM, x.dtype, (3,), (x,), g.Composite(equation="i" * 5000 + "\n"))
  with pytest.raises(PolygradInvalidArgument, match=r"the equation has 5001 characters, more than 512") as e:
    long.realize().synchronize()
  assert len(str(e.value)) < 400, "the client's string is not echoed back"
  odd = Tensor._make(g.EINSUM, x.dtype, (3,), (x,), g.Composite(equation="i\x07->i"))
  with pytest.raises(PolygradInvalidArgument, match=r"byte 7 is not a letter"):
    odd.realize().synchronize()


def test_an_einsum_product_is_bounded_by_its_work():
  # 5000^3 products are computed, never allocated: refused by --max-work, naming EINSUM.
  v = Tensor.ones(5000)
  with pytest.raises(PolygradResourceExhausted, match=r"EINSUM's product"):
    Tensor.einsum("i,j,k->", v, v, v).realize().synchronize()


def test_factorizations_are_bounded_and_checked_by_the_daemon():
  # 12 sweeps over 40 columns are 9360 rotations: refused before anything is built, naming the bound.
  with pytest.raises(PolygradInvalidArgument, match=r"svd: 12 sweeps over 40 columns are 9360 rotations, more than 8192"):
    Tensor.ones(40, 40).svd()[1].realize().synchronize()
  x = Tensor(np.eye(3, dtype=np.float32))
  bad = Tensor._make(g.QR, x.dtype, (3, 3), (x,), g.Composite(mode="z"))
  with pytest.raises(PolygradInvalidArgument, match=r"qr: the factor \(composite.mode\) is 'q' or 'r'"):
    bad.realize().synchronize()
  ints = Tensor._make(g.SVD, dtypes.int32, (3,), (Tensor(np.eye(3, dtype=np.int32)),), g.Composite(mode="s", n=2))
  with pytest.raises(PolygradInvalidArgument, match=r"svd: needs a float matrix, got int32"):
    ints.realize().synchronize()


REARRANGE_CASES = [
  ("b (h w) c -> b h w c", (2, 6, 3), {"h": 2}, lambda a: a.reshape(2, 2, 3, 3)),
  ("b h w c -> b c h w", (2, 3, 4, 5), {}, lambda a: a.transpose(0, 3, 1, 2)),
  ("b h w c -> b (h w c)", (2, 3, 4, 5), {}, lambda a: a.reshape(2, 60)),
  ("(a b) c -> c b a", (6, 4), {"a": 3}, lambda a: a.reshape(3, 2, 4).transpose(2, 1, 0)),
  ("a b -> b () a", (2, 3), {}, lambda a: a.T.reshape(3, 1, 2)),
]


@pytest.mark.parametrize("formula,shape,sizes,ref", REARRANGE_CASES, ids=[c[0] for c in REARRANGE_CASES])
def test_rearrange_matches_numpy(formula, shape, sizes, ref):
  a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  np.testing.assert_array_equal(Tensor(a).rearrange(formula, **sizes).numpy(), ref(a))


@pytest.mark.parametrize("formula,shape,sizes", [
  ("b (h w) -> b h w", (2, 6), {}),                 # two unknowns in one group
  ("b (h w) -> b h w", (2, 7), {"h": 2}),           # 7 does not split by 2
  ("a b -> a", (2, 3), {}),                         # names differ
  ("a b c -> a b c", (2, 3), {}),                   # rank
  ("a b", (2, 3), {}),                              # no arrow
])
def test_rearrange_errors(formula, shape, sizes):
  with pytest.raises(ValueError):
    Tensor(np.zeros(shape, np.float32)).rearrange(formula, **sizes)
