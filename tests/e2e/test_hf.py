"""polygrad.hf: tiny random GPT-2 checkpoints written here (config.json + safetensors, by hand:
single file, sharded, F32/F16/BF16; no network, no transformers package) are loaded and their
logits checked against an independent numpy GPT-2 forward pass; generate() against greedy and
top-k decoding done with that numpy model; a 2-layer d=64 GPT-2 trained with AdamW."""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import PY_CLIENT, REPO, run_watching_buffers

pytestmark = pytest.mark.usefixtures("live_daemon")

from polygrad import Tensor  # noqa: E402
from polygrad.hf import (GPT2, GPT2Config, download_hf, generate, load_hf,  # noqa: E402
                         load_hf_bytes)
from polygrad.nn import AdamW, get_parameters, get_state_dict  # noqa: E402

CFG = {"model_type": "gpt2", "vocab_size": 61, "n_positions": 24, "n_embd": 64, "n_layer": 2, "n_head": 4,
       "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"]}
LEN = 12  # every instance runs at this padded length, so the tests share compiled kernels


# --- a checkpoint, written by hand -----------------------------------------------------------------

def random_weights(cfg, rng):
  """HF GPT-2 names (without the transformer. prefix) -> float32 arrays."""
  c, v, p, inner = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg.get("n_inner") or 4 * cfg["n_embd"]
  f = lambda *s, scale=0.3: (rng.standard_normal(s) * scale).astype(np.float32)
  w = {"wte.weight": f(v, c), "wpe.weight": f(p, c, scale=0.1), "ln_f.weight": 1 + f(c, scale=0.1),
       "ln_f.bias": f(c, scale=0.1)}
  for i in range(cfg["n_layer"]):
    h = f"h.{i}."
    w.update({h + "ln_1.weight": 1 + f(c, scale=0.1), h + "ln_1.bias": f(c, scale=0.1),
              h + "attn.c_attn.weight": f(c, 3 * c), h + "attn.c_attn.bias": f(3 * c, scale=0.1),
              h + "attn.c_proj.weight": f(c, c), h + "attn.c_proj.bias": f(c, scale=0.1),
              h + "ln_2.weight": 1 + f(c, scale=0.1), h + "ln_2.bias": f(c, scale=0.1),
              h + "mlp.c_fc.weight": f(c, inner), h + "mlp.c_fc.bias": f(inner, scale=0.1),
              h + "mlp.c_proj.weight": f(inner, c), h + "mlp.c_proj.bias": f(c, scale=0.1)})
  return w


def to_bf16_bits(a):
  """float32 -> bfloat16 bits, round to nearest even (as torch converts)."""
  u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
  return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def stored(arrays, dtype):
  """(safetensors dtype name, bytes) per array, and the float32 values the file then holds."""
  out, values = {}, {}
  for k, a in arrays.items():
    if dtype == "F32":
      out[k], values[k] = ("F32", a.astype("<f4").tobytes()), a
    elif dtype == "F16":
      h = a.astype("<f2")
      out[k], values[k] = ("F16", h.tobytes()), h.astype(np.float32)
    else:
      bits = to_bf16_bits(a)
      out[k] = ("BF16", bits.tobytes())
      values[k] = (bits.astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
  return out, values


def safetensors_bytes(entries, shapes):
  header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
  for name, (dt, data) in entries.items():
    header[name] = {"dtype": dt, "shape": list(shapes[name]), "data_offsets": [off, off + len(data)]}
    off += len(data)
    blobs.append(data)
  hb = json.dumps(header).encode()
  hb += b" " * (-len(hb) % 8)
  return struct.pack("<Q", len(hb)) + hb + b"".join(blobs)


def write_checkpoint(path, cfg, weights, dtype="F32", shards=1, prefix="transformer.", extras=True):
  """config.json and model.safetensors (or `shards` files plus the index) in `path`; returns the
  float32 values the files hold, by unprefixed name."""
  path.mkdir(parents=True, exist_ok=True)
  (path / "config.json").write_text(json.dumps(cfg))
  entries, values = stored(weights, dtype)
  names = list(entries)
  shapes = {k: weights[k].shape for k in names}
  if extras:  # buffers real GPT-2 checkpoints carry, which the loader must skip
    t = cfg["n_positions"]
    for i in range(cfg["n_layer"]):
      m = np.tril(np.ones((1, 1, t, t), np.float32))
      entries[f"h.{i}.attn.bias"], shapes[f"h.{i}.attn.bias"] = ("F32", m.tobytes()), m.shape
    entries["lm_head.weight"] = entries["wte.weight"]
    shapes["lm_head.weight"] = shapes["wte.weight"]
  full = {prefix + k: v for k, v in entries.items()}
  full_shapes = {prefix + k: v for k, v in shapes.items()}
  if shards == 1:
    (path / "model.safetensors").write_bytes(safetensors_bytes(full, full_shapes))
    return values
  keys = list(full)
  groups = [keys[i::shards] for i in range(shards)]
  weight_map = {}
  for i, group in enumerate(groups):
    fn = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
    (path / fn).write_bytes(safetensors_bytes({k: full[k] for k in group}, full_shapes))
    weight_map.update({k: fn for k in group})
  (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
  return values


# --- the independent reference -----------------------------------------------------------------------

def np_gpt2(w, cfg, tokens, positions=None):
  """GPT-2 in float64 numpy, straight from the HF definition: logits (B, T, vocab)."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  tokens = np.asarray(tokens, np.int64)
  b, t = tokens.shape
  c, nh, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
  hd = c // nh
  pos = np.broadcast_to(np.arange(t), (b, t)) if positions is None else np.asarray(positions, np.int64)

  def ln(x, name):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

  def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

  x = w["wte.weight"][tokens] + w["wpe.weight"][pos]
  causal = np.tril(np.ones((t, t), bool))
  for i in range(cfg["n_layer"]):
    p = f"h.{i}."
    qkv = ln(x, p + "ln_1") @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
    q, k, v = (qkv[..., j * c:(j + 1) * c].reshape(b, t, nh, hd).transpose(0, 2, 1, 3) for j in range(3))
    att = np.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd), -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
    x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
    h = gelu_new(ln(x, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
    x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
  return ln(x, "ln_f") @ w.get("lm_head.weight", w["wte.weight"]).T


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
  """One F32 checkpoint with HF's prefix and extra buffers: (dir, float32 values)."""
  rng = np.random.default_rng(11)
  path = tmp_path_factory.mktemp("gpt2")
  values = write_checkpoint(path, CFG, random_weights(CFG, rng))
  return path, values


@pytest.fixture(scope="module")
def inst(ckpt):
  return load_hf(ckpt[0], max_batch=2, max_seq_len=LEN)


def tokens_of(rng, b, t):
  return rng.integers(0, CFG["vocab_size"], (b, t))


# --- loading and the forward pass ------------------------------------------------------------------

def test_logits_match_numpy_f32(ckpt, inst, rng):
  toks = tokens_of(rng, 2, 9)
  np.testing.assert_allclose(inst.logits(toks), np_gpt2(ckpt[1], CFG, toks), rtol=1e-4, atol=1e-4)
  assert inst(toks).dtype == np.float32


def test_model_state_dict_uses_hf_names(inst):
  names = set(get_state_dict(inst.model))
  assert {"wte.weight", "wpe.weight", "ln_f.weight", "h.1.attn.c_attn.weight", "h.0.mlp.c_proj.bias"} <= names
  assert len(names) == 4 + 12 * CFG["n_layer"]
  assert inst.model.h[0].attn.c_attn.weight.shape == (CFG["n_embd"], 3 * CFG["n_embd"])  # Conv1D: (in, out)


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_half_precision_checkpoints(tmp_path, rng, dtype):
  values = write_checkpoint(tmp_path, CFG, random_weights(CFG, rng), dtype=dtype)
  got = load_hf(tmp_path, max_seq_len=LEN)
  assert got.model.wte.weight.dtype.name == "float32"  # computed in float32
  toks = tokens_of(rng, 1, 7)
  np.testing.assert_allclose(got.logits(toks), np_gpt2(values, CFG, toks), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shards", [2, 3])
def test_sharded_checkpoint(tmp_path, rng, shards):
  values = write_checkpoint(tmp_path, CFG, random_weights(CFG, rng), shards=shards, prefix="")
  assert (tmp_path / "model.safetensors.index.json").exists() and not (tmp_path / "model.safetensors").exists()
  got = load_hf(tmp_path, max_seq_len=LEN)
  toks = tokens_of(rng, 1, 5)
  np.testing.assert_allclose(got.logits(toks), np_gpt2(values, CFG, toks), rtol=1e-4, atol=1e-4)


def test_load_hf_bytes_single_list_and_dict(tmp_path, rng, ckpt):
  values = write_checkpoint(tmp_path, CFG, random_weights(CFG, rng), shards=2, extras=False)
  files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "config.json"}
  config = (tmp_path / "config.json").read_bytes()
  toks = tokens_of(rng, 1, 6)
  want = np_gpt2(values, CFG, toks)
  shards = [v for k, v in sorted(files.items()) if k.endswith(".safetensors")]
  for weights in (files, shards):
    got = load_hf_bytes(config, weights, max_seq_len=LEN)
    np.testing.assert_allclose(got.logits(toks), want, rtol=1e-4, atol=1e-4)
  single = load_hf_bytes(CFG, (ckpt[0] / "model.safetensors").read_bytes(), max_seq_len=LEN)
  np.testing.assert_allclose(single.logits(toks), np_gpt2(ckpt[1], CFG, toks), rtol=1e-4, atol=1e-4)


def test_untied_head_and_options(tmp_path, rng):
  cfg = dict(CFG, tie_word_embeddings=False, n_inner=48, n_ctx=CFG["n_positions"])
  del cfg["n_positions"]  # old configs name it n_ctx
  weights = random_weights(dict(cfg, n_positions=CFG["n_positions"]), rng)
  weights["lm_head.weight"] = (rng.standard_normal((CFG["vocab_size"], CFG["n_embd"])) * 0.3).astype(np.float32)
  write_checkpoint(tmp_path, cfg, weights, prefix="", extras=False)
  got = load_hf(tmp_path)
  toks = tokens_of(rng, 1, 4)
  np.testing.assert_allclose(got.logits(toks), np_gpt2(weights, CFG, toks), rtol=1e-4, atol=1e-4)


def test_seed_forward_convention(ckpt, rng):
  max_seq_len = 16
  inst16 = load_hf(ckpt[0], max_batch=1, max_seq_len=max_seq_len)
  tokens = np.array([[1, 2, 3, 4]], dtype=np.float32)
  outputs = inst16.forward(
      x=tokens,
      positions=np.arange(tokens.shape[1], dtype=np.float32).reshape(1, -1),
      arange=np.arange(max_seq_len, dtype=np.float32))
  logits = outputs["output"].reshape(1, max_seq_len, CFG["vocab_size"])
  np.testing.assert_allclose(logits[:, :4], np_gpt2(ckpt[1], CFG, tokens), rtol=1e-4, atol=1e-4)


def test_positions_are_used(ckpt, inst, rng):
  toks = tokens_of(rng, 1, 5)
  pos = np.arange(3, 8).reshape(1, 5)
  out = inst.forward(x=toks, positions=pos)["output"][:, :5]
  np.testing.assert_allclose(out, np_gpt2(ckpt[1], CFG, toks, pos), rtol=1e-4, atol=1e-4)
  assert not np.allclose(out, np_gpt2(ckpt[1], CFG, toks), atol=1e-3)


def test_tensor_tokens_are_accepted(ckpt, inst, rng):
  toks = tokens_of(rng, 1, 5)
  np.testing.assert_allclose(inst.logits(Tensor(toks.astype(np.int32))), inst.logits(toks), rtol=1e-6)
  np.testing.assert_array_equal(generate(inst, Tensor(toks.astype(np.int32)), 2, temperature=0),
                                generate(inst, toks, 2, temperature=0))


def test_padding_does_not_change_earlier_positions(inst, rng):
  toks = tokens_of(rng, 1, 6)
  a = inst.forward(x=toks)["output"]
  b = inst.forward(x=np.concatenate([toks, tokens_of(rng, 1, 4)], 1))["output"]
  assert a.shape == b.shape == (1, 12, CFG["vocab_size"])
  np.testing.assert_allclose(a[:, :6], b[:, :6], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad, match", [
    (dict(x=np.array([[1, 2, 99]])), r"\[0, 61\)"),
    (dict(x=np.array([[1.5, 2.0]])), "whole numbers"),
    (dict(x=np.zeros((3, 2))), "max_batch=2"),
    (dict(x=np.zeros((1, 13))), "max_seq_len=12"),
    (dict(x=np.zeros((1, 3)), arange=np.arange(5)), "arange"),
    (dict(x=np.zeros((1, 3)), positions=np.arange(4)), "positions"),
    (dict(x=np.zeros((1, 3)), positions=np.array([[0, 1, 24]])), r"\[0, 24\)"),
])
def test_forward_rejects_bad_inputs_locally(inst, bad, match):
  with pytest.raises(ValueError, match=match):
    inst.forward(**bad)


# --- malformed checkpoints -------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"model_type": "llama"}, "model_type"),
    ({"n_head": 5}, "multiple of n_head"),
    ({"activation_function": "gelu"}, "activation_function"),
    ({"n_layer": -1}, "n_layer"),
    ({"vocab_size": "61"}, "vocab_size"),
    ({"n_layer": 3}, "lacks GPT-2 weights"),
    ({"n_layer": 1}, "does not"),
    ({"n_embd": 16, "n_head": 2}, "shape"),
])
def test_bad_configs_are_named(tmp_path, rng, change, match):
  write_checkpoint(tmp_path, CFG, random_weights(CFG, rng))
  (tmp_path / "config.json").write_text(json.dumps(dict(CFG, **change)))
  with pytest.raises(ValueError, match=match):
    load_hf(tmp_path)


def test_bad_files_are_named(tmp_path, rng):
  with pytest.raises(FileNotFoundError, match="not a directory"):
    load_hf(tmp_path / "nothing")
  write_checkpoint(tmp_path, CFG, random_weights(CFG, rng), shards=2)
  index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
  first = next(iter(index["weight_map"]))
  index["weight_map"][first] = "../escape.safetensors"
  (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
  with pytest.raises(ValueError, match="not a plain file name"):
    load_hf(tmp_path)
  (tmp_path / "model.safetensors.index.json").unlink()
  with pytest.raises(FileNotFoundError, match="neither model.safetensors"):
    load_hf(tmp_path)
  (tmp_path / "config.json").unlink()
  with pytest.raises(FileNotFoundError, match="config.json"):
    load_hf(tmp_path)


def test_truncated_and_garbled_weights(ckpt):
  data = (ckpt[0] / "model.safetensors").read_bytes()
  for bad, match in ((data[:-4], "do not fit"), (data[:5], "shorter than 8"),
                     (struct.pack("<Q", 10 ** 9) + data[8:], "exceeds"),
                     (data[:8] + b"\xff" + data[9:], "not JSON")):
    with pytest.raises(ValueError, match=match):
      load_hf_bytes(CFG, bad)
  with pytest.raises(TypeError):
    load_hf_bytes(CFG, 42)
  with pytest.raises(ValueError, match="more than one shard"):
    load_hf_bytes(CFG, [data, data])
  with pytest.raises(ValueError, match="max_seq_len"):
    load_hf_bytes(CFG, data, max_seq_len=CFG["n_positions"] + 1)


def test_download_hf_without_huggingface_hub(monkeypatch):
  monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # what a missing package looks like
  with pytest.raises(ImportError, match="pip install huggingface_hub"):
    download_hf("hf-internal-testing/tiny-random-gpt2")
  with pytest.raises(ValueError):
    download_hf("")


# --- generation ------------------------------------------------------------------------------------

def np_greedy(values, prompt, n, window):
  out = np.asarray(prompt, np.int64)
  for _ in range(n):
    ctx = out[:, -window:]
    out = np.concatenate([out, np_gpt2(values, CFG, ctx)[:, -1].argmax(-1)[:, None]], 1)
  return out


def test_generate_is_deterministic_for_a_seed(inst):
  prompt = np.array([[5, 9, 2]], dtype=np.float32)
  a = generate(inst, prompt, max_new_tokens=8, temperature=1.0, top_k=10, seed=123)
  b = generate(inst, prompt, max_new_tokens=8, temperature=1.0, top_k=10, seed=123)
  c = generate(inst, prompt, max_new_tokens=8, temperature=1.0, top_k=10, seed=124)
  assert a.shape == (1, 11) and a.dtype == np.float32
  np.testing.assert_array_equal(a[:, :3], prompt)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)


def test_top_k_1_and_temperature_0_are_greedy(ckpt, inst):
  prompt = np.array([[7, 1, 30, 4], [0, 0, 60, 2]])
  want = np_greedy(ckpt[1], prompt, 6, 12)
  np.testing.assert_array_equal(generate(inst, prompt, 6, top_k=1, seed=0), want)
  np.testing.assert_array_equal(generate(inst, prompt, 6, temperature=0.0), want)


def test_generate_beyond_the_window_slides(ckpt, inst):
  prompt = np.arange(10)  # 1-D in, 1-D out; 10 + 5 tokens > max_seq_len 12
  got = generate(inst, prompt, 5, temperature=0)
  assert got.shape == (15,)
  np.testing.assert_array_equal(got, np_greedy(ckpt[1], prompt.reshape(1, -1), 5, 12)[0])


def test_top_k_samples_stay_in_the_top_k(ckpt, inst):
  prompt = np.array([[3, 14, 15]])
  k = 3
  got = generate(inst, prompt, 6, temperature=2.0, top_k=k, seed=7)
  for i in range(3, got.shape[1]):
    ref = np_gpt2(ckpt[1], CFG, got[:, :i])[0, -1]
    assert got[0, i] in np.argsort(ref)[-k:], f"token {i} is not among the top {k}"


@pytest.mark.parametrize("kw", [dict(max_new_tokens=-1), dict(max_new_tokens=2, temperature=-1.0),
                                dict(max_new_tokens=2, top_k=0), dict(max_new_tokens=2.5)])
def test_generate_rejects_bad_arguments(inst, kw):
  with pytest.raises(ValueError):
    generate(inst, [[1, 2]], **kw)


# --- training ---------------------------------------------------------------------------------------

def test_tiny_gpt2_trains_with_adamw():
  """Issue 4, acceptance 4: 2 layers, d=64, 20 AdamW steps; the loss falls."""
  Tensor.manual_seed(3)
  cfg = GPT2Config.from_dict(CFG)  # the same shapes as the gradient test: the kernels are shared
  model = GPT2(cfg)
  opt = AdamW(get_parameters(model), lr=3e-3, weight_decay=0.01)
  rng = np.random.default_rng(0)
  seq = rng.integers(0, cfg.vocab_size, (2, 13))
  x, y = Tensor(seq[:, :-1].astype(np.int32)), Tensor(seq[:, 1:].astype(np.int32))
  losses = []
  with Tensor.train():
    for _ in range(20):
      opt.zero_grad()
      loss = model(x).reshape(-1, cfg.vocab_size).sparse_categorical_crossentropy(y.reshape(-1))
      loss.backward()
      opt.step()
      losses.append(loss.item())
  print("tiny GPT-2 losses:", " ".join(f"{v:.3f}" for v in losses))
  assert all(math.isfinite(v) for v in losses)
  assert losses[0] == pytest.approx(math.log(cfg.vocab_size), abs=0.5)  # small init: near uniform
  assert losses[-1] < 0.5 * losses[0]
  assert losses[-1] < min(losses[:5])


def torch_gpt2_loss(torch, w, cfg, tokens, targets):
  """The same GPT-2 written in PyTorch (no transformers package), for autograd's gradients."""
  F = torch.nn.functional
  b, t = tokens.shape
  c, nh = cfg["n_embd"], cfg["n_head"]
  hd = c // nh
  x = w["wte.weight"][tokens] + w["wpe.weight"][torch.arange(t)]
  mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
  ln = lambda x, n: F.layer_norm(x, (c,), w[n + ".weight"], w[n + ".bias"], cfg["layer_norm_epsilon"])
  for i in range(cfg["n_layer"]):
    p = f"h.{i}."
    qkv = ln(x, p + "ln_1") @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
    q, k, v = (qkv[..., j * c:(j + 1) * c].reshape(b, t, nh, hd).transpose(1, 2) for j in range(3))
    att = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(~mask, float("-inf")).softmax(-1)
    x = x + (att @ v).transpose(1, 2).reshape(b, t, c) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
    h = F.gelu(ln(x, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
    x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
  logits = ln(x, "ln_f") @ w["wte.weight"].T
  return F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), targets.reshape(-1))


def test_loaded_model_loss_and_gradients_match_torch(ckpt, inst, rng):
  """Fine-tuning a loaded checkpoint: the loss and the gradient of every weight (through the
  embedding gathers, attention, GELU and the tied head) against PyTorch autograd."""
  torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference")
  seq = tokens_of(rng, 2, LEN + 1)
  logits = inst.model(Tensor(seq[:, :-1].astype(np.int32)))
  loss = logits.reshape(-1, CFG["vocab_size"]).sparse_categorical_crossentropy(Tensor(seq[:, 1:].reshape(-1).astype(np.int32)))
  sd = get_state_dict(inst.model)
  names = sorted(sd)
  grads = loss.gradient(*(sd[k] for k in names))
  loss.realize(*grads)
  tw = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in ckpt[1].items()}
  tloss = torch_gpt2_loss(torch, tw, CFG, torch.tensor(seq[:, :-1]), torch.tensor(seq[:, 1:]))
  tloss.backward()
  assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
  for k, g in zip(names, grads):
    np.testing.assert_allclose(g.numpy(), tw[k].grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=k)


def test_load_generate_and_drop_leave_no_buffers(ckpt, tmp_path):
  """Loading holds one daemon buffer per weight; the first generation adds the model's KV cache
  and its compiled step, which later generations reuse without growing; dropping the instance
  frees every weight, the cache and the step."""
  out = run_watching_buffers(tmp_path, f"""
      import gc
      from polygrad.hf import load_hf, generate
      base = buffers()
      inst = load_hf({str(ckpt[0])!r}, max_seq_len={LEN})
      loaded = buffers()
      generate(inst, [[1, 2, 3]], max_new_tokens=4, top_k=5, seed=0)
      first = buffers()
      for seed in range(1, 4):
        generate(inst, [[1, 2, 3]], max_new_tokens=4, top_k=5, seed=seed)
      after = buffers()
      del inst
      gc.collect()
      print(base, loaded, first, after, buffers())
      """)
  base, loaded, first, after, dropped = (float(v) for v in out.split())
  assert loaded - base == 4 + 12 * CFG["n_layer"]
  assert first - loaded >= 2 * CFG["n_layer"], "the keys and values of every layer"
  assert after == first
  assert dropped == base


# --- the seed's example ---------------------------------------------------------------------------

def test_huggingface_example(daemon, ckpt):
  env = dict(os.environ, POLYGRAD_ADDRESS=daemon.address, POLYGRAD_HF_MODEL=str(ckpt[0]),
             PYTHONPATH=os.pathsep.join([str(PY_CLIENT), os.environ.get("PYTHONPATH", "")]))
  r = subprocess.run([sys.executable, str(REPO / "examples" / "huggingface.py")], env=env, capture_output=True,
                     text=True, timeout=300, cwd=REPO)
  assert r.returncode == 0, r.stdout + r.stderr
  assert r.stderr == ""  # no progress bar when stderr is not a terminal
  lines = dict(ln.split(": ", 1) for ln in r.stdout.strip().splitlines())
  assert lines["logits shape"] == f"(1, 16, {CFG['vocab_size']})"
  result = np.array(json.loads(lines["generated"]))
  assert result.shape == (1, 6) and (result[0, :4] == [1, 2, 3, 4]).all()
