"""HuggingFace GPT-2 checkpoints (config.json + safetensors) as polygrad models.

    from polygrad.hf import load_hf, generate
    inst = load_hf("path/to/gpt2", max_batch=1, max_seq_len=16)
    out = inst.forward(x=tokens, positions=np.arange(4).reshape(1, -1), arange=np.arange(16))
    result = generate(inst, tokens, max_new_tokens=8, temperature=0.8, top_k=40, seed=0)

The model is built from polygrad.nn's LayerNorm plus HF's Conv1D and a gather-based embedding
table, under HF's weight names, so `get_parameters(inst.model)` trains it and `get_state_dict(inst.model)` names match the
checkpoint. Weights are read with json + numpy (F32, F16, BF16; single file or sharded) and
computed in float32 on the daemon. With max_seq_len > 0 every forward pass runs at that padded
length, so all calls (and every generated token) reuse the same compiled kernels; the causal mask
keeps padding from reaching the real positions.
"""
from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from .dtype import DType, dtypes
from .kv_cache import kv_cache
from .nn import LayerNorm
from .nn.state import INDEX_NAME, SAFE_DTYPES, get_state_dict
from .progress import Progress
from .tensor import Tensor

__all__ = ["GPT2Config", "GPT2", "GPT2Instance", "PolyInstance", "load_hf", "load_hf_bytes",
           "download_hf", "generate"]

# HF's "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" are all the tanh approximation that
# Tensor.gelu computes; the exact erf "gelu" is a different function.
_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
# Buffers some GPT-2 checkpoints carry (the causal mask and its fill value); the model makes its own.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")
Weights = Dict[str, Tuple[np.ndarray, DType]]


# --- configuration ---------------------------------------------------------------------------------

class GPT2Config(NamedTuple):
  vocab_size: int = 50257
  n_positions: int = 1024
  n_embd: int = 768
  n_layer: int = 12
  n_head: int = 12
  n_inner: Optional[int] = None
  layer_norm_epsilon: float = 1e-5
  activation_function: str = "gelu_new"
  scale_attn_weights: bool = True
  scale_attn_by_inverse_layer_idx: bool = False
  tie_word_embeddings: bool = True

  @property
  def inner(self) -> int:
    return self.n_inner or 4 * self.n_embd

  @staticmethod
  def from_dict(cfg: Mapping[str, Any]) -> "GPT2Config":
    """A validated config from HF's config.json; ValueError naming the offending key."""
    if not isinstance(cfg, Mapping):
      raise ValueError(f"config must be a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type", "gpt2")
    if model_type != "gpt2":
      raise ValueError(f"unsupported model_type {model_type!r}: polygrad.hf loads GPT-2 (model_type 'gpt2')")
    vals: Dict[str, Any] = {}
    for key, aliases in (("vocab_size", ()), ("n_positions", ("n_ctx",)), ("n_embd", ()),
                         ("n_layer", ()), ("n_head", ())):
      v = next((cfg[k] for k in (key, *aliases) if k in cfg), getattr(GPT2Config(), key))
      if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"config {key} must be a positive integer, got {v!r}")
      vals[key] = v
    n_inner = cfg.get("n_inner")
    if n_inner is not None and (isinstance(n_inner, bool) or not isinstance(n_inner, int) or n_inner <= 0):
      raise ValueError(f"config n_inner must be a positive integer or null, got {n_inner!r}")
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
      raise ValueError(f"config layer_norm_epsilon must be a small positive number, got {eps!r}")
    act = cfg.get("activation_function", "gelu_new")
    if act not in _TANH_GELUS:
      raise ValueError(f"unsupported activation_function {act!r}: polygrad computes the tanh GELU "
                       f"({', '.join(_TANH_GELUS)})")
    if vals["n_embd"] % vals["n_head"]:
      raise ValueError(f"config n_embd {vals['n_embd']} is not a multiple of n_head {vals['n_head']}")
    flags = {}
    for key, default in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("tie_word_embeddings", True)):
      v = cfg.get(key, default)
      if not isinstance(v, bool):
        raise ValueError(f"config {key} must be true or false, got {v!r}")
      flags[key] = v
    return GPT2Config(n_inner=n_inner, layer_norm_epsilon=float(eps), activation_function=act, **vals, **flags)


# --- the model -------------------------------------------------------------------------------------

def _weight(shape: Tuple[int, ...], init: bool, std: float = 0.02) -> Tensor:
  """A parameter: N(0, std) as HF initializes GPT-2 (from the client's generator,
  Tensor.manual_seed), or zeros to be overwritten by a checkpoint."""
  if init:
    t = Tensor(Tensor._generator().standard_normal(shape).astype(np.float32) * np.float32(std))
  else:
    t = Tensor.zeros(*shape)
  t.requires_grad = True
  return t


def _zeros_param(*shape: int) -> Tensor:
  t = Tensor.zeros(*shape)
  t.requires_grad = True
  return t


def _lookup(table: Tensor, idx: Tensor) -> Tensor:
  """table[idx] for an int32 (B, T) index: one gather over rows, not a one-hot matmul, so a
  50k-token vocabulary costs T rows."""
  b, t = idx.shape
  d = table.shape[1]
  return table.gather(0, idx.reshape(b * t, 1).expand(b * t, d)).reshape(b, t, d)


class Embedding:
  """A (rows, dim) table looked up with a gather (nn.Embedding's one-hot matmul would cost
  T x vocab for GPT-2's 50k tokens)."""

  def __init__(self, rows: int, dim: int, init: bool = True, std: float = 0.02):
    self.weight = _weight((rows, dim), init, std)

  def __call__(self, idx: Tensor) -> Tensor:
    return _lookup(self.weight, idx)


class Conv1D:
  """HF's Conv1D: y = x @ weight + bias with weight stored (in, out)."""

  def __init__(self, nx: int, nf: int, init: bool = True, std: float = 0.02):
    self.weight = _weight((nx, nf), init, std)
    self.bias = _zeros_param(nf)

  def __call__(self, x: Tensor) -> Tensor:
    return x @ self.weight + self.bias


def _residual_std(cfg: GPT2Config) -> float:
  """HF (and the GPT-2 paper) shrink the projections into the residual stream by
  1/sqrt(2 * n_layer), so the stream's variance does not grow with depth."""
  return 0.02 / math.sqrt(2 * cfg.n_layer)


class Attention:
  def __init__(self, cfg: GPT2Config, layer_idx: int, init: bool = True):
    self.c_attn = Conv1D(cfg.n_embd, 3 * cfg.n_embd, init)
    self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd, init, _residual_std(cfg))
    self.n_head = cfg.n_head
    hd = cfg.n_embd // cfg.n_head
    scale = 1.0 / math.sqrt(hd) if cfg.scale_attn_weights else 1.0
    self.scale = scale / (layer_idx + 1) if cfg.scale_attn_by_inverse_layer_idx else scale

  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    b, t, c = x.shape
    hd = c // self.n_head
    qkv = self.c_attn(x)
    q, k, v = (qkv[:, :, i * c:(i + 1) * c].reshape(b, t, self.n_head, hd).permute(0, 2, 1, 3)
               for i in range(3))
    att = (q @ k.transpose(-2, -1)) * self.scale
    att = mask.where(att, float("-inf")).softmax(-1)
    return self.c_proj((att @ v).permute(0, 2, 1, 3).reshape(b, t, c))

  def cached(self, x: Tensor, write: Tensor, valid: Tensor, kc: Tensor, vc: Tensor, length=None, at=None) -> Tensor:
    """Attention of one new position per row, x (B, 1, C), against the key/value caches kc, vc
    (B, H, W, hd): the new key and value land where `write` (B, 1, W, 1) is true (the caches are
    assigned), and the query attends where `valid` (B, 1, 1, W) is true. With `length` (a SymInt
    past every row's position: polygrad.variable) only the caches' first `length` positions are
    written and read, so the work follows the positions, not the window. With `at` (a SymInt: the
    position of every row) the new key and value are written at `at` alone (tinygrad's
    cache[:, :, at:at+1].assign(k): a compiled step writes that row in place) and the query attends
    over the first at + 1 positions; write, valid and length are not used."""
    b, _, c = x.shape
    hd = c // self.n_head
    qkv = self.c_attn(x)
    q, k, v = (qkv[:, :, i * c:(i + 1) * c].reshape(b, 1, self.n_head, hd).permute(0, 2, 1, 3) for i in range(3))
    if at is not None:
      kc[:, :, at:at + 1].assign(k)
      vc[:, :, at:at + 1].assign(v)
      keys, values = kc[:, :, :at + 1], vc[:, :, :at + 1]
      att = ((q @ keys.transpose(-2, -1)) * self.scale).softmax(-1)
      return self.c_proj((att @ values).permute(0, 2, 1, 3).reshape(b, 1, c))
    if length is not None:
      write, valid = write[:, :, :length], valid[:, :, :, :length]
      kc.assign(write.where(k, kc[:, :, :length]))
      vc.assign(write.where(v, vc[:, :, :length]))
    else:
      kc.assign(write.where(k, kc))
      vc.assign(write.where(v, vc))
    att = (q @ kc.transpose(-2, -1)) * self.scale
    att = valid.where(att, float("-inf")).softmax(-1)
    return self.c_proj((att @ vc).permute(0, 2, 1, 3).reshape(b, 1, c))


class MLP:
  def __init__(self, cfg: GPT2Config, init: bool = True):
    self.c_fc = Conv1D(cfg.n_embd, cfg.inner, init)
    self.c_proj = Conv1D(cfg.inner, cfg.n_embd, init, _residual_std(cfg))

  def __call__(self, x: Tensor) -> Tensor:
    return self.c_proj(self.c_fc(x).gelu())


class Block:
  def __init__(self, cfg: GPT2Config, layer_idx: int, init: bool = True):
    self.ln_1 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
    self.attn = Attention(cfg, layer_idx, init)
    self.ln_2 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
    self.mlp = MLP(cfg, init)

  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    x = x + self.attn(self.ln_1(x), mask)
    return x + self.mlp(self.ln_2(x))

  def cached(self, x: Tensor, write: Tensor, valid: Tensor, kc: Tensor, vc: Tensor, length=None, at=None) -> Tensor:
    x = x + self.attn.cached(self.ln_1(x), write, valid, kc, vc, length, at)
    return x + self.mlp(self.ln_2(x))


class GPT2:
  """GPT-2 (HF's GPT2LMHeadModel) under HF's weight names; the LM head is tied to wte unless the
  config unties it (then `lm_head` holds its own weight). `init=False` builds zeros to be
  overwritten by a checkpoint."""

  def __init__(self, cfg: GPT2Config, init: bool = True):
    self.config = cfg
    self.wte = Embedding(cfg.vocab_size, cfg.n_embd, init)
    self.wpe = Embedding(cfg.n_positions, cfg.n_embd, init)
    self.h = [Block(cfg, i, init) for i in range(cfg.n_layer)]
    self.ln_f = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
    self.lm_head = None if cfg.tie_word_embeddings else LMHead(cfg, init)

  def __call__(self, idx: Tensor, positions: Optional[Tensor] = None, select: Optional[Tensor] = None) -> Tensor:
    """Logits (B, T, vocab) for int32 tokens (B, T); `positions` (B, T) defaults to 0..T-1.
    With `select` (B, T) one-hot rows, only the selected position's logits: (B, vocab)."""
    if idx.ndim != 2:
      raise ValueError(f"GPT2 takes tokens of shape (batch, seq), got {idx.shape}")
    b, t = idx.shape
    cfg = self.config
    if t > cfg.n_positions:
      raise ValueError(f"sequence length {t} exceeds the model's n_positions {cfg.n_positions}")
    if positions is None:
      pos = self.wpe.weight[0:t].reshape(1, t, cfg.n_embd)
    else:
      if positions.shape != (b, t):
        raise ValueError(f"positions have shape {positions.shape}, the tokens {(b, t)}")
      pos = self.wpe(positions)
    x = self.wte(idx) + pos
    mask = Tensor.ones(t, t).tril().reshape(1, 1, t, t) > 0
    for block in self.h:
      x = block(x, mask)
    x = self.ln_f(x)
    if select is not None:
      if select.shape != (b, t):
        raise ValueError(f"select has shape {select.shape}, the tokens {(b, t)}")
      x = (x * select.reshape(b, t, 1)).sum(1)
    return self._head(x)

  def _head(self, x: Tensor) -> Tensor:
    head = self.wte.weight if self.lm_head is None else self.lm_head.weight
    return x @ head.transpose(0, 1)

  def cached(self, tok: Tensor, pos: Tensor, caches: List[Tuple[Tensor, Tensor]], length=None, at=None) -> Tensor:
    """Logits (B, vocab) of one new token per row: int32 `tok` and `pos` (B, 1), each row at its
    own position; `caches` holds every layer's (keys, values), (B, H, W, hd), which this assigns
    (the new key and value at pos). Positions are data, so one graph serves every position.
    `length` (a SymInt past every row's position) limits the caches' part written and read; `at`
    (a SymInt equal to every row's position) writes the one row in place (Attention.cached)."""
    b = tok.shape[0]
    w = caches[0][0].shape[2]
    ar = Tensor.arange(w, dtype=dtypes.int32).reshape(1, w)
    write = (ar == pos).reshape(b, 1, w, 1)
    valid = (ar <= pos).reshape(b, 1, 1, w)
    x = self.wte(tok) + self.wpe(pos)
    for block, (kc, vc) in zip(self.h, caches):
      x = block.cached(x, write, valid, kc, vc, length, at)
    return self._head(self.ln_f(x).reshape(b, self.config.n_embd))


class LMHead:
  """An untied LM head (tie_word_embeddings false): weight (vocab, n_embd) as HF stores it."""

  def __init__(self, cfg: GPT2Config, init: bool = True):
    self.weight = _weight((cfg.vocab_size, cfg.n_embd), init)


# --- the instance: the seed's calling convention ---------------------------------------------------

def _as_tokens(x: Any, what: str, vocab: int) -> np.ndarray:
  """Integral token ids (any numeric dtype; a Tensor is fetched) as an int32 (B, T) array,
  checked locally."""
  arr = x.numpy() if isinstance(x, Tensor) else np.asarray(x)
  if arr.dtype == object or arr.dtype.kind not in "biuf":
    raise ValueError(f"{what} must be numeric token ids, got dtype {arr.dtype}")
  if arr.ndim == 1:
    arr = arr.reshape(1, -1)
  if arr.ndim != 2 or arr.shape[1] == 0 or arr.shape[0] == 0:
    raise ValueError(f"{what} must have shape (batch, seq) with seq >= 1, got {arr.shape}")
  if arr.dtype.kind == "f" and not (np.isfinite(arr).all() and (arr == np.round(arr)).all()):
    raise ValueError(f"{what} must hold whole numbers")
  if (arr < 0).any() or (arr >= vocab).any():
    raise ValueError(f"{what} must lie in [0, {vocab}), got values from {arr.min()} to {arr.max()}")
  return arr.astype(np.int32)


class GPT2Instance:
  """A loaded GPT-2: `forward(x=, positions=, arange=)` -> {'output': logits (B, L, vocab)} as in
  the seed, `logits(tokens)` (also `inst(tokens)`) -> (B, T, vocab), and `model`, the nn module."""

  def __init__(self, model: GPT2, max_batch: int = 1, max_seq_len: int = 0):
    cfg = model.config
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
      raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or not 0 <= max_seq_len <= cfg.n_positions:
      raise ValueError(f"max_seq_len must be an integer in [0, n_positions={cfg.n_positions}], got {max_seq_len!r}")
    self.model = model
    self.config = cfg
    self.max_batch = max_batch
    self.max_seq_len = max_seq_len
    self.vocab_size = cfg.vocab_size

  def _check_batch(self, arr: np.ndarray, what: str) -> None:
    if arr.shape[0] > self.max_batch:
      raise ValueError(f"{what} has batch {arr.shape[0]}, more than max_batch={self.max_batch}")

  def _padded(self, tokens: np.ndarray, positions: Optional[np.ndarray], length: int) -> Tuple[np.ndarray, np.ndarray]:
    b, t = tokens.shape
    if t > length:
      raise ValueError(f"sequence length {t} exceeds max_seq_len={length}")
    if positions is None:
      positions = np.broadcast_to(np.arange(t, dtype=np.int32), (b, t))
    idx = np.zeros((b, length), np.int32)
    idx[:, :t] = tokens
    pos = np.broadcast_to(np.arange(length, dtype=np.int32), (b, length)).copy()
    pos[:, :t] = positions
    return idx, pos

  def _run(self, idx: np.ndarray, pos: np.ndarray, select: Optional[np.ndarray] = None) -> np.ndarray:
    with Tensor.no_grad:
      out = self.model(Tensor(idx), Tensor(pos),
                       None if select is None else Tensor(select))
      return out.numpy()

  def forward(self, x: Any = None, positions: Any = None, arange: Any = None, **unused: Any) -> Dict[str, np.ndarray]:
    """The seed's convention: token ids `x` (B, T) (floats holding whole numbers are fine),
    `positions` (B, T) (default 0..T-1), `arange` = arange(L) if given. Returns {'output':
    float32 logits (B, L, vocab)} with L = max_seq_len (T when max_seq_len is 0); rows past T
    are the padding's and do not influence rows before it."""
    if x is None:
      raise ValueError("forward needs the tokens as x=")
    if unused:
      raise TypeError(f"forward got unexpected inputs {sorted(unused)} (takes x, positions, arange)")
    tokens = _as_tokens(x, "x", self.vocab_size)
    self._check_batch(tokens, "x")
    length = self.max_seq_len or tokens.shape[1]
    pos = None
    if positions is not None:
      pos = _as_tokens(positions, "positions", self.config.n_positions)
      if pos.shape[1] != tokens.shape[1] or pos.shape[0] not in (1, tokens.shape[0]):
        raise ValueError(f"positions have shape {pos.shape}, the tokens {tokens.shape}")
      pos = np.broadcast_to(pos, tokens.shape)
    if arange is not None:
      ar = np.asarray(arange)
      if ar.ndim != 1 or ar.shape[0] != length or not (ar == np.arange(length)).all():
        raise ValueError(f"arange must be arange({length}) (the padded sequence length), got shape {ar.shape}")
    idx, p = self._padded(tokens, pos, length)
    return {"output": self._run(idx, p)}

  def logits(self, tokens: Any) -> np.ndarray:
    """float32 logits (B, T, vocab) for token ids (T,) or (B, T)."""
    arr = _as_tokens(tokens, "tokens", self.vocab_size)
    self._check_batch(arr, "tokens")
    t = arr.shape[1]
    idx, pos = self._padded(arr, None, self.max_seq_len or t)
    return self._run(idx, pos)[:, :t]

  __call__ = logits

  def next_logits(self, tokens: np.ndarray, length: int) -> np.ndarray:
    """float32 logits (B, vocab) of the last position of int32 `tokens` (B, T), run at the
    padded `length`: the same shapes (and kernels) whatever T is."""
    b, t = tokens.shape
    idx, pos = self._padded(tokens, None, length)
    select = np.zeros((b, length), np.float32)
    select[:, t - 1] = 1.0
    return self._run(idx, pos, select)


PolyInstance = GPT2Instance  # the seed's name for what load_hf returns


# --- reading checkpoints ---------------------------------------------------------------------------

def _parse_safetensors(buf: Any, what: str) -> Weights:
  """{name: (array in the wire layout, dtype)} from one safetensors file's bytes (bytes,
  memoryview or a uint8 memmap), every offset checked against the buffer."""
  data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
  if data.size < 8:
    raise ValueError(f"{what}: not a safetensors file (shorter than 8 bytes)")
  (n,) = struct.unpack("<Q", data[:8].tobytes())
  if n > data.size - 8:
    raise ValueError(f"{what}: header length {n} exceeds the file ({data.size} bytes)")
  try:
    header = json.loads(data[8:8 + n].tobytes())
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise ValueError(f"{what}: the safetensors header is not JSON ({e})") from None
  if not isinstance(header, dict):
    raise ValueError(f"{what}: the safetensors header is not a JSON object")
  header.pop("__metadata__", None)
  start, end = 8 + n, data.size
  out: Weights = {}
  for name, info in header.items():
    try:
      dt = SAFE_DTYPES[info["dtype"]]
      shape = tuple(int(s) for s in info["shape"])
      b, e = (int(v) for v in info["data_offsets"])
    except (KeyError, TypeError, ValueError):
      raise ValueError(f"{what}: tensor {name!r} has a malformed header entry {info!r}") from None
    wire = np.dtype("<u2") if dt == dtypes.bfloat16 else np.dtype(dt.np).newbyteorder("<")
    count = math.prod(shape)
    if any(s < 0 for s in shape) or b < 0 or e - b != count * wire.itemsize or start + e > end:
      raise ValueError(f"{what}: tensor {name!r} data_offsets {b}..{e} do not fit "
                       f"{info['dtype']}{list(shape)} in {end - start} data bytes")
    out[name] = (np.frombuffer(data[start + b:start + e], dtype=wire).reshape(shape), dt)
  return out


def _merge(parts: Iterable[Tuple[str, Weights]]) -> Weights:
  out: Weights = {}
  for what, w in parts:
    for name, v in w.items():
      if name in out:
        raise ValueError(f"{what}: tensor {name!r} appears in more than one shard")
      out[name] = v
  return out


def _shard_names(index: Any, what: str) -> List[str]:
  """The shard file names of an index, each a plain file name (never a path): an index is data."""
  if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
    raise ValueError(f"{what}: no weight_map object")
  names = list(dict.fromkeys(index["weight_map"].values()))
  for n in names:
    if not isinstance(n, str) or not n or n in (".", "..") or "/" in n or "\\" in n or "\0" in n:
      raise ValueError(f"{what}: shard name {n!r} is not a plain file name")
  return names


def _check_index(index: Any, weights: Weights, what: str) -> None:
  missing = [k for k in index["weight_map"] if k not in weights]
  if missing:
    raise ValueError(f"{what} lists tensors no shard holds: {missing[:5]}")


def _assign(model: GPT2, weights: Weights, what: str, progress: bool) -> None:
  """Point every model tensor at the checkpoint's (cast to float32 on the daemon), one realize
  per tensor so that a bar can follow the upload."""
  cfg = model.config
  named: Weights = {}
  for name, v in weights.items():
    key = name[len("transformer."):] if name.startswith("transformer.") else name
    if key.endswith(_IGNORED_SUFFIXES):
      continue
    if key == "lm_head.weight" and cfg.tie_word_embeddings:
      continue  # tied: the head is wte (some checkpoints store the same matrix twice)
    named[key] = v
  sd = get_state_dict(model)
  missing = [k for k in sd if k not in named]
  if missing:
    raise ValueError(f"{what} lacks GPT-2 weights {missing[:5]}{' ...' if len(missing) > 5 else ''}")
  extra = [k for k in named if k not in sd]
  if extra:
    raise ValueError(f"{what} has tensors a GPT-2 of this config does not: {extra[:5]}"
                     f"{' ...' if len(extra) > 5 else ''}")
  for name, t in sd.items():
    arr, dt = named[name]
    if tuple(arr.shape) != t.shape:
      raise ValueError(f"{what}: {name} has shape {tuple(arr.shape)}, the config implies {t.shape}")
    if not dtypes.is_float(dt):
      raise ValueError(f"{what}: {name} is {dt.name}; GPT-2 weights are F32, F16 or BF16")
  with Progress(len(sd), "loading", enabled=None if progress else False, unit="tensors") as bar:
    for name, t in sd.items():
      arr, dt = named[name]
      v = Tensor.from_wire_array(arr, dt)
      t.assign(v if dt == dtypes.float32 else v.cast(dtypes.float32))
      t.realize()
      bar.update(1, name)


def _load_config(config: Any) -> GPT2Config:
  if isinstance(config, (bytes, bytearray, memoryview)):
    config = bytes(config).decode("utf-8")
  if isinstance(config, str):
    try:
      config = json.loads(config)
    except json.JSONDecodeError as e:
      raise ValueError(f"config is not JSON: {e}") from None
  return GPT2Config.from_dict(config)


def load_hf_bytes(config: Any, weights: Any, max_batch: int = 1, max_seq_len: int = 0,
                  progress: bool = True) -> GPT2Instance:
  """A GPT2Instance from bytes, no filesystem: `config` is config.json's text (str/bytes) or a
  dict; `weights` is one safetensors file's bytes, a list of shards' bytes, or {file name: bytes}
  (an entry named model.safetensors.index.json is checked against the shards)."""
  cfg = _load_config(config)
  inst = GPT2Instance(GPT2(cfg, init=False), max_batch, max_seq_len)  # validates the limits first
  index = None
  if isinstance(weights, (bytes, bytearray, memoryview)):
    parts = [("weights", weights)]
  elif isinstance(weights, Mapping):
    parts = []
    for name, data in weights.items():
      if name == INDEX_NAME:
        index = json.loads(bytes(data).decode("utf-8") if not isinstance(data, str) else data)
        _shard_names(index, INDEX_NAME)
      else:
        parts.append((str(name), data))
  elif isinstance(weights, (list, tuple)):
    parts = [(f"shard {i}", w) for i, w in enumerate(weights)]
  else:
    raise TypeError(f"weights must be bytes, a list of bytes or a dict of bytes, got {type(weights).__name__}")
  merged = _merge((what, _parse_safetensors(data, what)) for what, data in parts)
  if index is not None:
    _check_index(index, merged, INDEX_NAME)
  _assign(inst.model, merged, "the weights", progress)
  return inst


def load_hf(path: Union[str, os.PathLike], max_batch: int = 1, max_seq_len: int = 0,
            progress: bool = True) -> GPT2Instance:
  """A GPT2Instance from a directory holding config.json and model.safetensors, or shards named
  by model.safetensors.index.json. A progress bar follows the upload when stderr is a terminal."""
  root = Path(path)
  if not root.is_dir():
    raise FileNotFoundError(f"load_hf: {root} is not a directory (expected config.json + safetensors)")
  if not (root / "config.json").is_file():
    raise FileNotFoundError(f"load_hf: {root} has no config.json")
  cfg_text = (root / "config.json").read_text(encoding="utf-8")
  cfg = _load_config(cfg_text)
  inst = GPT2Instance(GPT2(cfg, init=False), max_batch, max_seq_len)
  index_path = root / INDEX_NAME
  index = None
  if index_path.is_file():
    index = json.loads(index_path.read_text(encoding="utf-8"))
    files = [root / n for n in _shard_names(index, str(index_path))]
  elif (root / "model.safetensors").is_file():
    files = [root / "model.safetensors"]
  else:
    raise FileNotFoundError(f"load_hf: {root} has neither model.safetensors nor {INDEX_NAME}")
  for f in files:
    if not f.is_file():
      raise FileNotFoundError(f"load_hf: shard {f} named by {INDEX_NAME} is missing")
  merged = _merge((str(f), _parse_safetensors(np.memmap(f, dtype=np.uint8, mode="r"), str(f)))
                  for f in files)
  if index is not None:
    _check_index(index, merged, str(index_path))
  _assign(inst.model, merged, str(root), progress)
  return inst


def download_hf(repo_id: str, cache_dir: Optional[Union[str, os.PathLike]] = None) -> str:
  """The local directory of a HuggingFace Hub repository's config.json and safetensors
  (downloaded by huggingface_hub, which must be installed: pip install huggingface_hub)."""
  if not isinstance(repo_id, str) or not repo_id:
    raise ValueError(f"repo_id must be a non-empty string such as 'gpt2', got {repo_id!r}")
  try:
    from huggingface_hub import snapshot_download
  except ImportError:
    raise ImportError("download_hf needs the huggingface_hub package, which is not installed: "
                      "pip install huggingface_hub (or download config.json and the .safetensors "
                      "files yourself and call load_hf on their directory)") from None
  return snapshot_download(repo_id=repo_id, cache_dir=None if cache_dir is None else str(cache_dir),
                           allow_patterns=["config.json", "*.safetensors", INDEX_NAME])


# --- generation ------------------------------------------------------------------------------------

def _sample(logits: np.ndarray, temperature: float, top_k: Optional[int], rng: np.random.Generator) -> np.ndarray:
  """One token per row: argmax when temperature is 0 or top_k is 1, else a draw from
  softmax(logits / temperature) restricted to the top_k largest."""
  if temperature == 0 or top_k == 1:
    return logits.argmax(-1)
  z = logits.astype(np.float64) / temperature
  if top_k is not None and top_k < z.shape[-1]:
    kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
    z = np.where(z < kth, -np.inf, z)
  z = z - z.max(-1, keepdims=True)
  p = np.exp(z)
  p /= p.sum(-1, keepdims=True)
  u = rng.random((z.shape[0], 1))
  return np.minimum((np.cumsum(p, -1) < u).sum(-1), z.shape[-1] - 1)


def generate(inst: GPT2Instance, tokens: Any, max_new_tokens: int, temperature: float = 1.0,
             top_k: Optional[int] = None, seed: Optional[int] = None, progress: bool = True) -> np.ndarray:
  """`tokens` (T,) or (B, T) followed by max_new_tokens sampled tokens, same rank (and, for a
  numpy input, dtype). Sampling runs on the client with numpy's Generator(seed): the same seed
  gives the same tokens; temperature 0 or top_k=1 is greedy. While prompt and new tokens fit
  max_seq_len (else n_positions), each token is one step against cached keys and values
  (polygrad.kv_cache); past that the context is cut to the last max_seq_len tokens and every step
  runs the whole window."""
  if not isinstance(inst, GPT2Instance):
    raise TypeError(f"generate takes what load_hf returns, got {type(inst).__name__}")
  if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
    raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
  if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
      math.isfinite(temperature) and temperature >= 0):
    raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
  if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1):
    raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
  src = tokens.numpy() if isinstance(tokens, Tensor) else np.asarray(tokens)
  ctx = _as_tokens(src, "tokens", inst.vocab_size)
  inst._check_batch(ctx, "tokens")
  length = inst.max_seq_len or min(inst.config.n_positions, ctx.shape[1] + int(max_new_tokens))
  rng = np.random.default_rng(seed)
  out = ctx.astype(np.int64)
  n_new = int(max_new_tokens)
  with Progress(n_new, "generate", enabled=None if progress else False, unit="tok") as bar:
    if n_new and ctx.shape[1] + n_new - 1 <= length:
      # Everything fits the window: cached keys and values, one token per step.
      # Greedy decoding picks the token on the daemon, so no logits travel.
      cache = kv_cache(inst.model, ctx.shape[0], length)
      greedy = temperature == 0 or top_k == 1
      b, t = ctx.shape
      for i in range(t - 1):
        cache.step_greedy(ctx[:, i], np.full(b, i))
      for i in range(n_new):
        pos = t - 1 + i
        if greedy:
          nxt = cache.step_greedy(out[:, pos], np.full(b, pos))
        else:
          nxt = _sample(cache.step(out[:, pos], np.full(b, pos)), float(temperature), top_k, rng)
        out = np.concatenate([out, nxt[:, None].astype(np.int64)], axis=1)
        bar.update(1)
    else:
      # The context slides past the window: positions shift, so the whole window runs each step.
      for _ in range(n_new):
        window = out[:, -length:].astype(np.int32)
        nxt = _sample(inst.next_logits(window, length), float(temperature), top_k, rng)
        out = np.concatenate([out, nxt[:, None].astype(np.int64)], axis=1)
        bar.update(1)
  out = out if src.ndim == 2 else out[0]
  return out.astype(src.dtype) if isinstance(tokens, np.ndarray) else out
