"""Seeded random numbers computed on the device (RAND, RANDN, RANDINT, DROPOUT): bit-exact
against a numpy threefry2x32-20 reference (so any client language reproduces them from the seed),
deterministic per seed, independent across seeds and calls, and statistically sound."""
import math

import numpy as np
import pytest

from conftest import run_watching_buffers
from polygrad import Tensor, dtypes

pytestmark = pytest.mark.usefixtures("live_daemon")

M32 = np.uint64(0xFFFFFFFF)


def _rotl(x, r):
  return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & M32


def threefry2x32(x0, x1, k0, k1):
  """Random123's threefry2x32 with 20 rounds on uint64 arrays holding 32-bit words."""
  ks = [np.uint64(k0), np.uint64(k1), np.uint64(k0 ^ k1 ^ 0x1BD11BDA)]
  x0 = (x0 + ks[0]) & M32
  x1 = (x1 + ks[1]) & M32
  rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
  for group in range(5):
    for r in rotations[group % 2]:
      x0 = (x0 + x1) & M32
      x1 = _rotl(x1, r) ^ x0
    x0 = (x0 + ks[(group + 1) % 3]) & M32
    x1 = (x1 + ks[(group + 2) % 3] + np.uint64(group + 1)) & M32
  return x0, x1


def reference_words(n, seed, counter):
  idx = np.arange(n, dtype=np.uint64)
  return threefry2x32(idx, np.full(n, counter, dtype=np.uint64), seed & 0xFFFFFFFF, seed >> 32)


def test_reference_matches_random123_known_answers():
  # Random123's kat_vectors for threefry2x32_20.
  for ctr, key, want in [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                         ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
                         ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]:
    a, b = threefry2x32(np.array([ctr[0]], np.uint64), np.array([ctr[1]], np.uint64), key[0], key[1])
    assert (int(a[0]), int(b[0])) == want


@pytest.mark.parametrize("seed", [0, 1234, 2**40 + 7])
def test_rand_is_bit_exact_with_the_reference(seed):
  Tensor.manual_seed(seed)
  got = Tensor.rand(3, 700, dtype=dtypes.float64).numpy().reshape(-1)  # float64 keeps all 32 bits
  lo, _ = reference_words(got.size, seed, 0)
  np.testing.assert_array_equal(got, lo.astype(np.float64) * 2.0 ** -32)
  got32 = Tensor.rand(2100).numpy()  # the next call: counter 1, the top 24 bits
  lo1, _ = reference_words(2100, seed, 1)
  np.testing.assert_array_equal(got32, (lo1 >> np.uint64(8)).astype(np.float64) * 2.0 ** -24)


def test_randint_is_bit_exact_with_the_reference():
  Tensor.manual_seed(99)
  got = Tensor.randint(5000, low=-7, high=13).numpy()
  lo, _ = reference_words(5000, 99, 0)
  np.testing.assert_array_equal(got, (lo % np.uint64(20)).astype(np.int64) - 7)
  assert got.dtype == np.int32


def test_determinism_per_seed_and_fresh_streams_per_call():
  Tensor.manual_seed(7)
  a, b = Tensor.rand(1000).numpy(), Tensor.randn(1000).numpy()
  Tensor.manual_seed(7)
  np.testing.assert_array_equal(Tensor.rand(1000).numpy(), a)
  np.testing.assert_array_equal(Tensor.randn(1000).numpy(), b)
  c = Tensor.rand(1000).numpy()
  assert (a != c).mean() > 0.99, "a later call draws a new stream"
  Tensor.manual_seed(8)
  assert (Tensor.rand(1000).numpy() != a).mean() > 0.99, "another seed, another stream"


def _ks_uniform(u):
  u = np.sort(u)
  n = u.size
  return max(np.max(np.arange(1, n + 1) / n - u), np.max(u - np.arange(n) / n))


def test_rand_is_uniform():
  Tensor.manual_seed(2024)
  u = Tensor.rand(200_000).numpy().astype(np.float64)
  assert u.min() >= 0 and u.max() < 1
  assert abs(u.mean() - 0.5) < 0.004 and abs(u.var() - 1 / 12) < 0.002
  assert _ks_uniform(u) < 1.95 / math.sqrt(u.size)  # the KS test at the 0.1% level
  # Every bit of the 32-bit words is a fair coin.
  bits = (Tensor.rand(200_000, dtype=dtypes.float64).numpy() * 2.0 ** 32).astype(np.uint64)
  freq = np.array([((bits >> np.uint64(k)) & np.uint64(1)).mean() for k in range(32)])
  assert np.all(np.abs(freq - 0.5) < 0.006), freq


def test_randn_is_standard_normal():
  Tensor.manual_seed(5)
  z = Tensor.randn(200_000).numpy().astype(np.float64)
  assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
  cdf = 0.5 * (1 + np.vectorize(math.erf)(np.sort(z) / math.sqrt(2)))
  assert _ks_uniform(cdf) < 1.95 / math.sqrt(z.size)
  assert abs(np.mean(z ** 3)) < 0.03 and abs(np.mean(z ** 4) - 3) < 0.1  # skew 0, kurtosis 3


def test_streams_of_different_seeds_and_calls_are_uncorrelated():
  Tensor.manual_seed(1)
  a, b = Tensor.randn(100_000).numpy(), Tensor.randn(100_000).numpy()
  Tensor.manual_seed(2)
  c = Tensor.randn(100_000).numpy()
  for x, y in [(a, b), (a, c), (b, c), (a[1:], a[:-1])]:
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.015


def test_randint_covers_its_range_evenly():
  Tensor.manual_seed(3)
  v = Tensor.randint(120_000, low=0, high=6, dtype=dtypes.int64).numpy()
  counts = np.bincount(v, minlength=6)
  assert v.min() == 0 and v.max() == 5
  chi2 = ((counts - 20_000) ** 2 / 20_000).sum()
  assert chi2 < 20.5  # chi-square, 5 degrees of freedom, 0.1% level


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64])
def test_rand_in_every_float_dtype_stays_below_one(dt):
  Tensor.manual_seed(11)
  u = Tensor.rand(50_000, dtype=dt).numpy().astype(np.float64)
  assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
  assert Tensor.randn(4, dtype=dt).dtype == dt


def test_dropout_on_the_device():
  Tensor.manual_seed(4)
  x = Tensor.ones(400, 250)
  with Tensor.train():
    y = x.dropout(0.3).numpy()
  kept = y != 0
  assert abs(kept.mean() - 0.7) < 0.01
  np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
  Tensor.manual_seed(4)
  with Tensor.train():
    np.testing.assert_array_equal(x.dropout(0.3).numpy(), y)
  assert x.dropout(0.3) is x, "identity unless training"


def test_bad_random_arguments_raise_locally():
  with pytest.raises(TypeError):
    Tensor.rand(3, dtype=dtypes.int32)
  with pytest.raises(ValueError):
    Tensor.randint(3, low=5, high=5)
  with pytest.raises(ValueError):
    Tensor.randint(3, low=0, high=300, dtype=dtypes.int8)


def test_a_new_stream_compiles_nothing(tmp_path):
  """The key (seed, counter) reaches the kernels as data: after the first call of each random op,
  every later call, each drawing a new stream, reuses the compiled kernels and the schedule; the
  values stay the reference's; the keys' buffers go with the tensors."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor, graph as g
      Tensor.manual_seed(5)
      x = Tensor.ones(64, 64).contiguous().realize()
      w = Tensor([[0.2, 0.5, 0.3]] * 4).realize()
      makers = {"rand": lambda: Tensor.rand(64, 64), "randn": lambda: Tensor.randn(64, 64),
                "randint": lambda: Tensor.randint(64, 64, low=0, high=9),
                "dropout": lambda: x.dropout(0.5), "multinomial": lambda: w.multinomial(5, replacement=True)}
      Tensor.training = True
      before = buffers()
      for name, make in makers.items():
        first = make().numpy()
        for _ in range(3):
          again = make().numpy()
          s = g.GRAPH.last_stats
          print(name, s.compiled, s.schedule_cache_hit, bool((again != first).any()))
      print("buffers", buffers() - before)
      Tensor.manual_seed(11)
      print("rand11", Tensor.rand(8).numpy().tolist())
  """)
  lines = out.splitlines()
  for line in lines[:-2]:
    name, compiled, hit, differs = line.split()
    assert compiled == "0" and hit == "True", f"{name}: a new stream compiled kernels: {line}"
    assert differs == "True", f"{name}: a later call drew the first call's numbers"
  assert lines[-2] == "buffers 0.0", out
  lo, _ = reference_words(8, 11, 0)
  np.testing.assert_array_equal(np.array(eval(lines[-1].split(" ", 1)[1]), dtype=np.float32),
                                (lo >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24))


def test_daemon_rejects_bad_random_nodes_and_keeps_serving():
  from polygrad import graph as g
  from polygrad.errors import PolygradInvalidArgument
  bad = [(g.RANDINT, dtypes.int32, g.Composite(shape=(3,), low=5, high=5), "low < high"),
         (g.RAND, dtypes.int32, g.Composite(shape=(3,)), "float"),
         (g.RAND, dtypes.float32, g.Composite(shape=(3,), counter=1 << 32), "32 bits")]
  for op, dt, arg, msg in bad:
    with pytest.raises(PolygradInvalidArgument, match=msg):
      Tensor(g.GRAPH.node(op, dt, (3,), (), arg)).numpy()
  assert Tensor.rand(2).numpy().shape == (2,)
