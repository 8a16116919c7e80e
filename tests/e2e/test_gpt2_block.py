"""A GPT-2-shaped block (token and position embeddings, causal self-attention, layernorm, a GELU
MLP, tied output head, cross-entropy), forward and backward in ONE realize, against PyTorch.
This is issue 3's acceptance 2; the test prints the kernel count of that realize."""
import math

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("live_daemon")
torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is the reference")

from polygrad import Tensor  # noqa: E402
from polygrad import graph as g  # noqa: E402

VOCAB, SEQ, BATCH, DIM, HEADS = 64, 8, 2, 32, 2


def make_params(rng):
  f = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
  return {
      "wte": f(VOCAB, DIM), "wpe": f(SEQ, DIM),
      "ln1_w": 1 + f(DIM), "ln1_b": f(DIM), "attn_w": f(DIM, 3 * DIM), "attn_b": f(3 * DIM),
      "proj_w": f(DIM, DIM), "proj_b": f(DIM),
      "ln2_w": 1 + f(DIM), "ln2_b": f(DIM), "fc_w": f(DIM, 4 * DIM), "fc_b": f(4 * DIM),
      "out_w": f(4 * DIM, DIM), "out_b": f(DIM), "lnf_w": 1 + f(DIM), "lnf_b": f(DIM),
  }


def block(p, idx, targets, lib):
  """The same forward pass for both libraries; `lib` supplies what differs between them."""
  hd = DIM // HEADS
  x = lib.embed(p["wte"], idx) + p["wpe"].reshape(1, SEQ, DIM)
  h = lib.layernorm(x) * p["ln1_w"] + p["ln1_b"]
  qkv = h @ p["attn_w"] + p["attn_b"]
  q, k, v = (lib.slice_last(qkv, i * DIM, (i + 1) * DIM).reshape(BATCH, SEQ, HEADS, hd).permute(0, 2, 1, 3)
             for i in range(3))
  att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
  att = lib.causal(att).softmax(-1)
  y = (att @ v).permute(0, 2, 1, 3).reshape(BATCH, SEQ, DIM)
  x = x + (y @ p["proj_w"] + p["proj_b"])
  h2 = lib.layernorm(x) * p["ln2_w"] + p["ln2_b"]
  x = x + (lib.gelu(h2 @ p["fc_w"] + p["fc_b"]) @ p["out_w"] + p["out_b"])
  logits = (lib.layernorm(x) * p["lnf_w"] + p["lnf_b"]) @ p["wte"].transpose(0, 1)
  return lib.cross_entropy(logits.reshape(BATCH * SEQ, VOCAB), targets.reshape(BATCH * SEQ))


class PolygradLib:
  embed = staticmethod(lambda w, idx: idx.one_hot(VOCAB).cast(w.dtype) @ w)
  layernorm = staticmethod(lambda x: x.layernorm(-1, eps=1e-5))
  slice_last = staticmethod(lambda t, a, b: t[:, :, a:b])
  gelu = staticmethod(lambda t: t.gelu())
  cross_entropy = staticmethod(lambda logits, y: logits.sparse_categorical_crossentropy(y))

  @staticmethod
  def causal(att):
    mask = Tensor.ones(SEQ, SEQ).tril().reshape(1, 1, SEQ, SEQ) > 0
    return mask.where(att, float("-inf"))


class TorchLib:
  embed = staticmethod(lambda w, idx: w[idx])
  layernorm = staticmethod(lambda x: torch.nn.functional.layer_norm(x, (DIM,), eps=1e-5))
  slice_last = staticmethod(lambda t, a, b: t[:, :, a:b])
  gelu = staticmethod(lambda t: torch.nn.functional.gelu(t, approximate="tanh"))
  cross_entropy = staticmethod(lambda logits, y: torch.nn.functional.cross_entropy(logits, y))

  @staticmethod
  def causal(att):
    mask = torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool))
    return att.masked_fill(~mask, float("-inf"))


def test_gpt2_block_forward_and_backward_in_one_realize():
  rng = np.random.default_rng(2)
  params = make_params(rng)
  idx = rng.integers(0, VOCAB, (BATCH, SEQ))
  targets = rng.integers(0, VOCAB, (BATCH, SEQ))

  tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
  tloss = block(tp, torch.tensor(idx), torch.tensor(targets), TorchLib)
  tloss.backward()

  pp = {k: Tensor(v, requires_grad=True).realize() for k, v in params.items()}
  loss = block(pp, Tensor(idx.astype(np.int32)), Tensor(targets.astype(np.int32)), PolygradLib)
  names = sorted(pp)
  grads = loss.gradient(*(pp[k] for k in names))
  loss.realize(*grads)  # one request: the forward pass and every gradient
  stats = g.GRAPH.last_stats
  print(f"GPT-2 block forward+backward: {stats.kernels} kernels in one realize "
        f"({stats.compiled} compiled, {stats.cache_hits} from the cache)")
  assert stats.kernels > 0

  np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-4, atol=1e-5)
  for k, gr in zip(names, grads):
    np.testing.assert_allclose(gr.numpy(), tp[k].grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=k)
