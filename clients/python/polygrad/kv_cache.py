"""Generation with cached keys and values: one compiled step per token.

A KVCache holds every layer's keys and values, (batch, heads, window, head_dim), as daemon
buffers, and TinyJits over GPT2.cached (logits, or the greedy token), each capturing at its first
call: a token's step computes one position per row (its embeddings, projections and MLP), writes
that position's key and value into the caches in place and attends over the cached positions up
to it. The position is data (a one-hot write mask and a causal mask built from it on the daemon),
and the caches' used length, max(position) + 1, is a symbolic dim (polygrad.variable: a Variable
the step takes per run), so the same compiled kernels serve every position: after the first token
of each kind nothing compiles. A token's step writes and attends over the caches' first `length`
rows only (loops that stop there, and an assign that writes the valid part), so its cost grows
with its position, not with the window; when every row is at one position (a Variable as well)
the step writes that position's key and value alone, in place (a write through a shrink view).
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .dtype import dtypes
from .jit import TinyJit
from .tensor import Tensor
from .variable import Variable

__all__ = ["KVCache", "kv_cache"]


class KVCache:
  """Keys and values of `model` (polygrad.hf.GPT2 or polygrad.nn.gpt2.GPT2) for `batch` rows of
  up to `window` positions (at most the model's n_positions)."""

  def __init__(self, model, batch: int, window: int):
    cfg = model.config
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
      raise ValueError(f"batch must be a positive integer, got {batch!r}")
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= cfg.n_positions:
      raise ValueError(f"window must be an integer in [1, n_positions={cfg.n_positions}], got {window!r}")
    hd = cfg.n_embd // cfg.n_head
    self.model, self.batch, self.window = model, batch, window
    self.caches: List[Tuple[Tensor, Tensor]] = [
        (Tensor.zeros(batch, cfg.n_head, window, hd).contiguous(), Tensor.zeros(batch, cfg.n_head, window, hd).contiguous())
        for _ in range(cfg.n_layer)]
    Tensor.realize(*(t for kv in self.caches for t in kv))
    # The caches are written and read up to the furthest row's position: a symbolic dim, so one
    # step serves every length (RunStep's `variables`) and a token's work follows its position.
    self._length = Variable("kv_length", 1, window)
    # Rows at one position (one prompt, or prompts of one length): the new keys and values are
    # written at that position alone (a Variable too), in place, instead of over the prefix.
    self._at = Variable("kv_pos", 0, window - 1)
    self._step, self._greedy = TinyJit(self._decode), TinyJit(self._decode_greedy)
    self._step_at, self._greedy_at = TinyJit(self._decode), TinyJit(self._decode_greedy)
    # The caches are buffers already, so the first call may capture: an eager first call would
    # leave them in new buffers, away from the one the other steps update.
    for jit in (self._step, self._greedy, self._step_at, self._greedy_at):
      jit.cnt = 1

  def _decode(self, tok: Tensor, pos: Tensor, length, at=None) -> Tensor:
    with Tensor.no_grad:
      return self.model.cached(tok, pos, self.caches, length, at)

  def _decode_greedy(self, tok: Tensor, pos: Tensor, length, at=None) -> Tensor:
    with Tensor.no_grad:
      return self.model.cached(tok, pos, self.caches, length, at).argmax(-1).cast(dtypes.int32)

  def step(self, tokens, positions) -> np.ndarray:
    """float32 logits (batch, vocab) of `tokens` (batch,) at `positions` (batch,; each row its
    own): their keys and values join the cache. A position overwrites what was cached there and
    hides what lies after it, so a new sequence simply starts again at 0."""
    return self._run(self._step, self._step_at, tokens, positions)

  def step_greedy(self, tokens, positions) -> np.ndarray:
    """As step, but the most likely next token of each row (int32 (batch,), the first of equal
    logits), chosen on the daemon: a few bytes come back instead of the logits."""
    return self._run(self._greedy, self._greedy_at, tokens, positions)

  def _run(self, jit: TinyJit, jit_at: TinyJit, tokens, positions) -> np.ndarray:
    tok = np.asarray(tokens).reshape(-1)
    pos = np.asarray(positions).reshape(-1)
    if tok.shape[0] != self.batch or pos.shape[0] != self.batch:
      raise ValueError(f"step takes {self.batch} tokens and positions, got {tok.shape[0]} and {pos.shape[0]}")
    if pos.dtype.kind not in "iu" or pos.min() < 0 or pos.max() >= self.window:
      raise ValueError(f"positions must be integers in [0, {self.window}), got {pos.tolist()}")
    vocab = self.model.config.vocab_size
    if tok.dtype.kind not in "iu" or tok.min() < 0 or tok.max() >= vocab:
      raise ValueError(f"tokens must be integers in [0, {vocab}), got {tok.tolist()}")
    args = (Tensor(tok.astype(np.int32).reshape(-1, 1), dtype=dtypes.int32),
            Tensor(pos.astype(np.int32).reshape(-1, 1), dtype=dtypes.int32))
    if (pos == pos[0]).all():
      return jit_at(*args, None, self._at.bind(int(pos[0]))).numpy()
    return jit(*args, self._length.bind(int(pos.max()) + 1)).numpy()

  @property
  def n_kernels(self) -> int:
    """Kernels a token's step launches (the first of the steps that ran); 0 before any ran."""
    for jit in (self._step_at, self._greedy_at, self._step, self._greedy):
      if jit.captured is not None:
        return jit.captured.n_kernels
    return 0


class _KVCaches:
  """A model's KVCaches by (batch, window). Without a __dict__ it is out of get_state_dict's
  reach, so optimizers and checkpoints do not take the caches for the model's tensors."""

  __slots__ = ("by_size",)

  def __init__(self) -> None:
    self.by_size: dict = {}


def kv_cache(model, batch: int, window: int) -> KVCache:
  """`model`'s KVCache for `batch` rows of `window` positions, made once and kept with the model,
  so later generation of that size compiles nothing."""
  holder = model.__dict__.get("_kv_caches")
  if holder is None:
    holder = model.__dict__["_kv_caches"] = _KVCaches()
  key = (batch, window)
  if key not in holder.by_size:
    holder.by_size[key] = KVCache(model, batch, window)
  return holder.by_size[key]
