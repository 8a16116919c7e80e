"""Generation with cached keys and values (polygrad.kv_cache) and the seed's polygrad.nn.gpt2.GPT2:
cached logits against the full forward pass, per-row positions, no compiles after the second
token, greedy generation against the recomputing loop, training the seed's model, and generation
after the weights were trained eagerly."""
import numpy as np
import pytest

from conftest import run_watching_buffers
from polygrad import Tensor
from polygrad.hf import GPT2, GPT2Config, GPT2Instance, generate
from polygrad.kv_cache import KVCache, kv_cache
from polygrad.nn import Adam, get_parameters
from polygrad.nn.gpt2 import GPT2 as SeedGPT2

pytestmark = pytest.mark.usefixtures("live_daemon")

CFG = GPT2Config(vocab_size=97, n_positions=24, n_embd=32, n_layer=2, n_head=4)


def _model(seed=0):
  Tensor.manual_seed(seed)
  return GPT2(CFG)


def _greedy_by_recomputing(model, prompt, n):
  """Greedy tokens from full forward passes over the whole sequence each step (no cache)."""
  inst = GPT2Instance(model, max_batch=prompt.shape[0])
  out = prompt.astype(np.int64)
  for _ in range(n):
    out = np.concatenate([out, inst.logits(out)[:, -1].argmax(-1)[:, None]], axis=1)
  return out


def test_cached_logits_equal_the_full_forward_at_every_position(rng):
  m = _model()
  toks = rng.integers(0, CFG.vocab_size, (2, 12)).astype(np.int32)
  full = GPT2Instance(m, max_batch=2).logits(toks)
  cache = KVCache(m, 2, CFG.n_positions)
  steps = np.stack([cache.step(toks[:, i], np.full(2, i)) for i in range(12)], 1)
  np.testing.assert_allclose(steps, full, rtol=1e-5, atol=1e-5)
  assert cache.n_kernels > 0


def test_a_token_writes_and_reads_the_caches_up_to_its_position_on_one_capture(rng):
  """The caches' used length is a symbolic dim (polygrad.variable): one capture serves every
  length (RunStep's `variables`), every position's logits match the full forward, and going back
  to position 0 (a new sequence, a shorter length) hides what lies past it."""
  m = _model()
  toks = rng.integers(0, CFG.vocab_size, (1, 10)).astype(np.int32)
  full = GPT2Instance(m, max_batch=1).logits(toks)
  cache = KVCache(m, 1, CFG.n_positions)
  for i in range(10):
    np.testing.assert_allclose(cache.step(toks[:, i], [i]), full[:, i], rtol=1e-5, atol=1e-5, err_msg=f"position {i}")
  step = cache._step_at.captured  # one row: its key and value are written at the position alone
  assert step.variables == {"kv_pos"} and step.runs == 10 and step.n_box_assigns == 2 * CFG.n_layer
  again = rng.integers(0, CFG.vocab_size, (1, 3)).astype(np.int32)
  restart = GPT2Instance(m, max_batch=1).logits(again)
  for i in range(3):
    np.testing.assert_allclose(cache.step(again[:, i], [i]), restart[:, i], rtol=1e-5, atol=1e-5)


def test_rows_decode_at_their_own_positions(rng):
  """Row 1 starts three tokens later: each row's logits are those of its own sequence."""
  m = _model(1)
  a = rng.integers(0, CFG.vocab_size, 9).astype(np.int32)
  b = rng.integers(0, CFG.vocab_size, 6).astype(np.int32)
  inst = GPT2Instance(m)
  want_a, want_b = inst.logits(a[None])[0], inst.logits(b[None])[0]
  cache = KVCache(m, 2, 16)
  got_b = []
  for i in range(9):
    j = max(i - 3, 0)
    out = cache.step(np.array([a[i], b[j]]), np.array([i, j]))
    np.testing.assert_allclose(out[0], want_a[i], rtol=1e-5, atol=1e-5)
    if i >= 3:
      got_b.append(out[1])
  np.testing.assert_allclose(np.array(got_b), want_b, rtol=1e-5, atol=1e-5)


def test_bad_steps_are_refused():
  cache = KVCache(_model(), 1, 8)
  with pytest.raises(ValueError, match=r"positions must be integers in \[0, 8\)"):
    cache.step([1], [8])
  with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 97\)"):
    cache.step([97], [0])
  with pytest.raises(ValueError, match="takes 1 tokens"):
    cache.step([1, 2], [0, 1])
  with pytest.raises(ValueError, match="window"):
    KVCache(_model(), 1, CFG.n_positions + 1)


def test_greedy_generation_batched_matches_recomputing(rng):
  m = _model(2)
  prompt = rng.integers(0, CFG.vocab_size, (3, 5))
  inst = GPT2Instance(m, max_batch=3, max_seq_len=CFG.n_positions)
  got = generate(inst, prompt, max_new_tokens=10, temperature=0, progress=False)
  np.testing.assert_array_equal(got, _greedy_by_recomputing(m, prompt, 10))
  # The cache is kept with the model and is no parameter of it.
  assert len(m.__dict__["_kv_caches"].by_size) == 1
  assert all(t is not c for t in get_parameters(m) for kv in kv_cache(m, 3, CFG.n_positions).caches for c in kv)


def test_no_compiles_after_the_second_token(tmp_path):
  """The position is data: tokens 3 to 20 reuse the kernels compiled for the first two (the
  eager first call and the capture). Counted from the daemon's own /metrics."""
  out = run_watching_buffers(tmp_path, """
      import numpy as np
      from polygrad import Tensor
      from polygrad.hf import GPT2, GPT2Config
      from polygrad.kv_cache import KVCache
      Tensor.manual_seed(0)
      cfg = GPT2Config(vocab_size=97, n_positions=24, n_embd=32, n_layer=2, n_head=4)
      cache = KVCache(GPT2(cfg), 1, 24)
      builds = []
      for i in range(20):
        cache.step([i % 97], [i])
        builds.append(metric("polygradd_kernel_builds_total"))
      print(" ".join(str(b) for b in builds))
      """, "--quick-compile=off")
  builds = [float(v) for v in out.split()]
  assert builds[1] > 0, "the first two tokens compile"
  assert builds[2:] == [builds[1]] * 18, builds


def test_seed_gpt2_forward_backward_and_training():
  model = SeedGPT2(n_layers=1, n_heads=2, dim=32, vocab_size=64, max_seq_len=16)
  Tensor.manual_seed(42)
  tokens = Tensor(np.random.default_rng(0).integers(0, 64, (1, 4)).astype(np.float32))
  logits = model(tokens)
  assert logits.shape == (1, 4, 64) and np.isfinite(logits.numpy()).all()
  params = get_parameters(model)
  loss = model(tokens).sum()
  grads = loss.gradient(*params)
  assert all(np.isfinite(g.numpy()).all() and g.shape == p.shape for g, p in zip(grads, params))
  assert model.lm_head.weight.shape == (64, 32), "its own head, untied from wte"

  opt = Adam(params, lr=1e-2)
  x = np.random.default_rng(1).integers(0, 64, (2, 9))
  losses = []
  for _ in range(8):
    opt.zero_grad()
    loss = model(Tensor(x[:, :-1])).sparse_categorical_crossentropy(Tensor(x[:, 1:])).backward()
    opt.step()
    losses.append(loss.item())
  assert losses[-1] < 0.8 * losses[0], losses


def test_generation_sees_weights_trained_after_the_capture():
  """The decode step is captured with the weights of its time; training them eagerly rebinds
  every parameter, and the next generation captures again instead of reading the old ones."""
  model = SeedGPT2.from_config("gpt2-tiny", max_seq_len=16)
  x = np.random.default_rng(2).integers(0, 256, (2, 9))
  before = model.generate(x[:, :3], 6, temperature=0)
  np.testing.assert_array_equal(before, _greedy_by_recomputing(model, x[:, :3], 6))
  opt = Adam(get_parameters(model), lr=3e-2)
  for _ in range(5):
    opt.zero_grad()
    model(Tensor(x[:, :-1])).sparse_categorical_crossentropy(Tensor(x[:, 1:])).backward()
    opt.step()
  after = model.generate(x[:, :3], 6, temperature=0)
  np.testing.assert_array_equal(after, _greedy_by_recomputing(model, x[:, :3], 6))
  assert len(get_parameters(model)) == 12 * 2 + 2 + 2 + 1 and all(p.requires_grad for p in get_parameters(model))


def test_logits_and_greedy_steps_share_one_cache(rng):
  """The logits step and the greedy step update the same buffers in any order (each captures at
  its first call, so neither leaves the caches in buffers of its own)."""
  m = _model(3)
  toks = rng.integers(0, CFG.vocab_size, (1, 10)).astype(np.int32)
  full = GPT2Instance(m).logits(toks)[0]
  cache = KVCache(m, 1, 16)
  for rnd in range(2):
    for i in range(10):
      if i % 3 == 0:
        assert cache.step_greedy(toks[:, i], [i])[0] == full[i].argmax(), (rnd, i)
      else:
        np.testing.assert_allclose(cache.step(toks[:, i], [i])[0], full[i], rtol=1e-5, atol=1e-5)
  assert cache._step_at.captured.runs == 12 and cache._greedy_at.captured.runs == 8, "each captured once"
