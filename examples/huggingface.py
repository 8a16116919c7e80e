"""The HuggingFace Model Loading example of the polygrad Python README (seed 001), verbatim
except where the model comes from: a local GPT-2 checkpoint directory (config.json +
safetensors) given as the first argument or in POLYGRAD_HF_MODEL, else the seed's download
(which needs `pip install huggingface_hub` and the network). The two prints at the end show
the results.

From the repository root: PYTHONPATH=clients/python python3 examples/huggingface.py path/to/gpt2
"""
import os
import sys

from polygrad.hf import load_hf, download_hf, generate
import numpy as np
import json
from pathlib import Path

# Download a small GPT-2 checkpoint from HuggingFace Hub
model_path = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("POLYGRAD_HF_MODEL")
              or download_hf('hf-internal-testing/tiny-random-gpt2'))
config = json.loads((Path(model_path) / 'config.json').read_text())
vocab_size = config['vocab_size']
max_seq_len = 16

# Load into a PolyInstance
inst = load_hf(model_path, max_batch=1, max_seq_len=max_seq_len)

# Run forward pass
tokens = np.array([[1, 2, 3, 4]], dtype=np.float32)
outputs = inst.forward(
    x=tokens,
    positions=np.arange(tokens.shape[1], dtype=np.float32).reshape(1, -1),
    arange=np.arange(max_seq_len, dtype=np.float32)
)
logits = outputs['output'].reshape(1, max_seq_len, vocab_size)

# Autoregressive generation
result = generate(inst, tokens, max_new_tokens=2, temperature=1.0, top_k=10)

print(f"logits shape: {logits.shape}")
print(f"generated: {json.dumps(result.tolist())}")
