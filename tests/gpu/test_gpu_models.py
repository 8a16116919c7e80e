"""The compiled MLP step (tests/e2e/test_compiled_step.py with mlp_twin.py) and the GPT-2 block
(tests/e2e/test_gpt2_block.py) on each device, against PyTorch and the eager client, by calling
the end-to-end tests themselves with every tensor placed on the device."""
import pytest

import test_compiled_step as compiled_step
import test_gpt2_block as gpt2_block


@pytest.mark.parametrize("opt_name", list(compiled_step.OPTIMIZERS))
def test_compiled_mlp_step_on_device(device, opt_name):
  compiled_step.test_mlp_compiled_matches_eager_and_pytorch(opt_name)


def test_gpt2_block_on_device(device):
  gpt2_block.test_gpt2_block_forward_and_backward_in_one_realize()


def test_gradient_returns_from_the_device_to_the_cpu(device):
  # A CPU tensor moved to the device: its gradient comes back to the CPU (a COPY in the daemon's
  # gradient graph), where an SGD update of the tensor then runs.
  import numpy as np
  from polygrad import Tensor
  a = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
  x = Tensor(a, requires_grad=True, device="CPU")
  moved = x.to(device)
  assert moved.device.startswith(device.split(":")[0])
  (moved * moved * 3).sum().backward()
  assert x.grad.device == "CPU"
  np.testing.assert_allclose(x.grad.numpy(), 6 * a, rtol=1e-5)
  x.assign(x - x.grad * 0.5).realize()
  np.testing.assert_allclose(x.numpy(), a - 3 * a, rtol=1e-5)
