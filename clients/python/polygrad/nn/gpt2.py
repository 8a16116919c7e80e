"""polygrad.nn.gpt2: GPT-2 under the seed's constructor, for training and generation.

    model = GPT2(n_layers=4, n_heads=4, dim=128, vocab_size=512, max_seq_len=256)
    logits = model(tokens)                      # (B, T, vocab); tokens may be floats holding ids
    out = model.generate(prompt, max_new_tokens=32, temperature=0)

It is polygrad.hf's GPT-2 (pre-norm blocks, tanh GELU, learned positions) with its own LM head
(`lm_head`, no bias, untied from the token embedding, as the seed's model has), so
get_parameters() trains it and generate() decodes with cached keys and values (polygrad.kv_cache).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..dtype import dtypes
from ..hf import GPT2 as _HFGPT2
from ..hf import GPT2Config, GPT2Instance, generate as _generate
from ..tensor import Tensor

__all__ = ["GPT2", "GPT2_CONFIGS"]

# OpenAI's published sizes, and two small ones for tests and benchmarks.
GPT2_CONFIGS: Dict[str, Dict[str, int]] = {
    "gpt2": dict(n_layers=12, n_heads=12, dim=768, vocab_size=50257),
    "gpt2-medium": dict(n_layers=24, n_heads=16, dim=1024, vocab_size=50257),
    "gpt2-large": dict(n_layers=36, n_heads=20, dim=1280, vocab_size=50257),
    "gpt2-xl": dict(n_layers=48, n_heads=25, dim=1600, vocab_size=50257),
    "gpt2-tiny": dict(n_layers=2, n_heads=2, dim=64, vocab_size=256),
    "gpt2-small": dict(n_layers=4, n_heads=4, dim=128, vocab_size=512),
}


class GPT2(_HFGPT2):
  """GPT-2 with `n_layers` blocks of `n_heads` heads, width `dim`, `vocab_size` tokens and
  positions up to `max_seq_len`; weights drawn from Tensor.manual_seed's generator."""

  def __init__(self, n_layers: int = 12, n_heads: int = 12, dim: int = 768, vocab_size: int = 50257,
               max_seq_len: int = 1024, norm_eps: float = 1e-5):
    cfg = GPT2Config.from_dict(dict(vocab_size=vocab_size, n_positions=max_seq_len, n_embd=dim, n_layer=n_layers,
                                    n_head=n_heads, layer_norm_epsilon=norm_eps, tie_word_embeddings=False))
    super().__init__(cfg)
    self.vocab_size, self.dim, self.n_layers, self.max_seq_len = vocab_size, dim, n_layers, max_seq_len

  @staticmethod
  def from_config(name: str, max_seq_len: int = 1024) -> "GPT2":
    if name not in GPT2_CONFIGS:
      raise KeyError(f"unknown GPT-2 config {name!r} (known: {', '.join(GPT2_CONFIGS)})")
    return GPT2(**GPT2_CONFIGS[name], max_seq_len=max_seq_len)

  def __call__(self, tokens: Tensor, positions: Optional[Tensor] = None, select: Optional[Tensor] = None) -> Tensor:
    """Logits (B, T, vocab) of token ids (B, T): int tensors, or floats holding whole ids."""
    if not isinstance(tokens, Tensor):
      tokens = Tensor(np.asarray(tokens))
    if not dtypes.is_int(tokens.dtype):
      tokens = tokens.cast(dtypes.int32)
    return super().__call__(tokens, positions, select)

  def generate(self, tokens: Any, max_new_tokens: int, temperature: float = 1.0, top_k: Optional[int] = None,
               seed: Optional[int] = None) -> np.ndarray:
    """polygrad.hf.generate on this model: `tokens` (T,) or (B, T) followed by max_new_tokens
    tokens, one cached step each while they fit max_seq_len."""
    arr = np.asarray(tokens.numpy() if isinstance(tokens, Tensor) else tokens)
    inst = GPT2Instance(self, max_batch=arr.shape[0] if arr.ndim == 2 else 1, max_seq_len=self.max_seq_len)
    return _generate(inst, arr, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed, progress=False)
