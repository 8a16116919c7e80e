"""The GPU suite's fixtures: the end-to-end suite's daemon and helpers (tests/e2e/conftest.py,
re-exported, so the e2e modules imported here find what they import from `conftest`), and
`device`: each test runs once per device in POLYGRAD_GPU_DEVICES (default "cuda"; e.g.
"cpu,cuda" runs the same tests on the CPU too), with polygrad.Device.DEFAULT set to it so every
tensor the test makes from data is placed there. A CUDA test skips with "CUDA unavailable:
<the daemon's reason>" where the daemon offers no CUDA."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E))
_spec = importlib.util.spec_from_file_location("polygrad_e2e_conftest", E2E / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
globals().update({k: v for k, v in vars(_e2e).items() if not k.startswith("__")})

DEVICES = [d.strip().upper() for d in os.environ.get("POLYGRAD_GPU_DEVICES", "cuda").split(",") if d.strip()]


def cuda_unavailable_reason():
  """None when the daemon offers CUDA, else the daemon's reason."""
  from polygrad import Device
  entry = Device.find("CUDA")
  if entry is None:
    return "the daemon lists no CUDA device"
  return None if entry.available else entry.detail


@pytest.fixture(params=DEVICES)
def device(request, live_daemon):
  from polygrad import Device
  name = request.param
  if name.startswith("CUDA"):
    why = cuda_unavailable_reason()
    if why is not None:
      pytest.skip(f"CUDA unavailable: {why}")
  old = Device.DEFAULT
  Device.DEFAULT = name
  yield name
  Device.DEFAULT = old
