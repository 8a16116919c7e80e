"""Issue 17, acceptance 1: every function tinygrad's documentation lists exists on polygrad.Tensor.

The list is checked into the repo (tinygrad_tensor_api.txt, with the tinygrad commit it was read
from). Names not there yet are listed in NOT_YET, and the test also fails when one of them
appears, so the list only shrinks and says at every commit exactly what is missing."""
from pathlib import Path

import pytest

from polygrad import Tensor

NAMES = [line.strip() for line in (Path(__file__).with_name("tinygrad_tensor_api.txt")).read_text().splitlines()
         if line.strip() and not line.startswith("#")]

# Views of tinygrad's own scheduler: they exist and raise NotImplementedError saying so.
SCHEDULER_VIEWS = {"schedule_linear", "linear_with_vars"}

NOT_YET: set = set()  # every documented function exists (62 were missing at the start of issue 17)


def test_the_list_is_tinygrads_219_documented_functions():
  assert len(NAMES) == 219 and len(set(NAMES)) == 219


@pytest.mark.parametrize("name", NAMES)
def test_every_documented_function_exists(name):
  if name in NOT_YET:
    assert not hasattr(Tensor, name), f"Tensor.{name} exists now: take it off NOT_YET"
    pytest.xfail(f"Tensor.{name} is not implemented yet (issue 17)")
  assert hasattr(Tensor, name), f"tinygrad documents Tensor.{name}; polygrad.Tensor has no such attribute"


@pytest.mark.parametrize("name", sorted(SCHEDULER_VIEWS - NOT_YET))
def test_scheduler_views_say_they_are_tinygrads_own(name):
  with pytest.raises(NotImplementedError, match="scheduler"):
    getattr(Tensor.ones(2), name)()
