"""The benchmarks' training task, written once: a 784-256-10 ReLU MLP with a one-hot cross-entropy
loss and an optimizer step (bench/bench.py's MLP rows, bench/latency_bench.py's eager and compiled
loops). No import beyond what its caller already loaded."""


def mlp_loss(l1, l2, x, y):
  """Cross-entropy of the MLP l2(relu(l1(x))) against one-hot `y`, averaged over the batch."""
  return -(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean()


def mlp_train(l1, l2):
  """fn(opt, x, y) for compile_step (and called directly for an eager step): one optimizer step,
  returning the loss."""
  def train(opt, x, y):
    opt.zero_grad()
    loss = mlp_loss(l1, l2, x, y)
    loss.backward()
    opt.step()
    return loss
  return train
