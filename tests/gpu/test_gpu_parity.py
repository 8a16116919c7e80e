"""The numeric forward/backward parity table (tests/e2e/test_torch_parity.py, imported, not
copied) on each device: every tensor made from data is placed on the device, so every kernel
of every case and gradient runs there; the references are PyTorch's on the CPU in float64."""
import pytest

import test_torch_parity as parity

pytestmark = pytest.mark.skipif(parity.torch is None, reason="PyTorch (Debian's python3-torch) is the reference")


@pytest.mark.parametrize("op,dt", parity.CASE_PARAMS)
def test_parity_on_device(device, rng, op, dt):
  parity.test_parity(rng, op, dt)
