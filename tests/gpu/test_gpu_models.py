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
