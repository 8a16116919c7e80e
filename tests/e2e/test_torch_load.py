"""nn.state.torch_load (issue 17): PyTorch checkpoints written by the real torch.save, in both of
its layouts, read without torch into Tensors that hold torch's values, and hostile or damaged
files refused with an error naming the file — never code run."""
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest
import torch

from polygrad import dtypes
from polygrad.nn.state import torch_load

pytestmark = pytest.mark.usefixtures("live_daemon")

LAYOUTS = {"zip": True, "legacy": False}


def values(t: torch.Tensor) -> np.ndarray:
  return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def ours(t) -> np.ndarray:
  return t.float().numpy() if t.dtype == dtypes.bfloat16 else t.numpy()


def checkpoint(rng):
  """A state dict of every storage dtype and view kind a real model saves."""
  model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten(),
                              torch.nn.Linear(3, 4))
  sd = dict(model.state_dict())
  base = torch.tensor(rng.standard_normal((4, 6)).astype(np.float32))
  sd.update({
      "float64": torch.tensor(rng.standard_normal(5)), "float16": base[0].half(), "bfloat16": base[1].bfloat16(),
      "int32": torch.arange(-3, 4, dtype=torch.int32), "int16": torch.arange(3, dtype=torch.int16),
      "int8": torch.tensor([-128, 0, 127], dtype=torch.int8), "uint8": torch.tensor([0, 255], dtype=torch.uint8),
      "bool": torch.tensor([True, False, True]), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
      # views: permuted, shrunk with a step, flipped-free offset view, and two views of one storage
      "transposed": base.t(), "strided": base[1:, ::2], "offset": base[2], "shared_a": base[:2], "shared_b": base[2:],
      "expanded": torch.ones(3, 1).expand(3, 4),
  })
  return sd


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_real_checkpoint_reads_back_with_torchs_values(tmp_path, rng, layout):
  sd = checkpoint(rng)
  path = tmp_path / "model.pt"
  torch.save({"model": sd, "epoch": 7, "losses": [0.5, 0.25], "extra": (torch.ones(2),)}, path,
             _use_new_zipfile_serialization=LAYOUTS[layout])
  got = torch_load(path)
  assert got["epoch"] == 7 and got["losses"] == [0.5, 0.25]
  np.testing.assert_array_equal(got["extra"][0].numpy(), np.ones(2, np.float32))
  assert list(got["model"]) == list(sd)
  for name, t in sd.items():
    g = got["model"][name]
    assert g.shape == tuple(t.shape), name
    assert g.dtype.name == str(t.dtype).removeprefix("torch."), name
    np.testing.assert_array_equal(ours(g), values(t), err_msg=name)


def test_a_module_state_dict_loads_into_our_model(tmp_path):
  from polygrad import Tensor, nn
  theirs = torch.nn.Linear(5, 3)
  torch.save(theirs.state_dict(), tmp_path / "linear.pt")
  mine = nn.Linear(5, 3)
  nn.state.load_state_dict(mine, torch_load(tmp_path / "linear.pt"))
  x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
  np.testing.assert_allclose(mine(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


class Evil:
  def __reduce__(self):
    return (os.system, ("echo pwned > /dev/null",))


def zip_with(tmp_path, pkl: bytes, data: dict, name="evil.pt"):
  p = tmp_path / name
  with zipfile.ZipFile(p, "w") as z:
    z.writestr("archive/data.pkl", pkl)
    z.writestr("archive/byteorder", "little")
    for k, v in data.items():
      z.writestr(f"archive/data/{k}", v)
  return p


def test_a_checkpoint_naming_any_other_callable_is_refused_by_name(tmp_path):
  p = tmp_path / "evil.pt"
  torch.save({"w": torch.ones(2), "payload": Evil()}, p)
  with pytest.raises(pickle.UnpicklingError, match=r"refusing to load the global posix\.system"):
    torch_load(p)
  legacy = tmp_path / "evil_legacy.pt"
  torch.save({"payload": Evil()}, legacy, _use_new_zipfile_serialization=False)
  with pytest.raises(pickle.UnpicklingError, match="refusing"):
    torch_load(legacy)


def saved_bytes(tmp_path, obj, zip_layout=True) -> bytes:
  p = tmp_path / "src.pt"
  torch.save(obj, p, _use_new_zipfile_serialization=zip_layout)
  return p.read_bytes()


def test_damaged_checkpoints_raise_value_errors_naming_the_file(tmp_path):
  good = saved_bytes(tmp_path, {"w": torch.arange(6.0).reshape(2, 3)})
  with zipfile.ZipFile(io.BytesIO(good)) as z:
    members = {n: z.read(n) for n in z.namelist()}
  pkl_name = next(n for n in members if n.endswith("data.pkl"))
  data_name = next(n for n in members if "/data/" in n)
  prefix = pkl_name[:-len("data.pkl")]
  cases = {
      "truncated": good[:len(good) // 2],
      "not a checkpoint": b"\x00" * 64,
  }
  for what, blob in cases.items():
    p = tmp_path / f"{what}.pt"
    p.write_bytes(blob)
    with pytest.raises(ValueError, match=str(p)):
      torch_load(p)
  # A storage file shorter than its reference claims, and one missing.
  short = {k[len(prefix) + 5:]: (v[:8] if k == data_name else v) for k, v in members.items() if "/data/" in k}
  p = zip_with(tmp_path, members[pkl_name], short, "short.pt")
  with pytest.raises(ValueError, match=r"short\.pt: storage .* claims 6 elements"):
    torch_load(p)
  p = zip_with(tmp_path, members[pkl_name], {}, "missing.pt")
  with pytest.raises(ValueError, match=r"missing\.pt: storage .* is missing"):
    torch_load(p)


def view_pickle(storage_numel: int, offset: int, size, stride) -> bytes:
  """A data.pkl written opcode by opcode: {"w": one float32 view of storage "0"}, as torch.save
  would write it but with any offset, size and stride."""
  text = lambda s: b"X" + struct.pack("<I", len(s)) + s.encode()
  num = lambda i: b"J" + struct.pack("<i", i)
  ints = lambda xs: b"(" + b"".join(num(x) for x in xs) + b"t"
  pid = b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text("0") + text("cpu") + num(storage_numel) + b"tQ"
  args = b"(" + pid + num(offset) + ints(size) + ints(stride) + b"\x89N" + b"t"
  return b"\x80\x02}" + text("w") + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"Rs."


@pytest.mark.parametrize("offset,size,stride,says", [
    (4, (4,), (1,), "reads past its storage"),
    (0, (3, 3), (3, 1), "reads past its storage"),
    (-1, (2,), (1,), "negative"),
    (0, (2,), (-1,), "negative"),
])
def test_a_view_outside_its_storage_is_refused(tmp_path, offset, size, stride, says):
  p = zip_with(tmp_path, view_pickle(6, offset, size, stride), {"0": struct.pack("<6f", *range(6))}, "view.pt")
  with pytest.raises(ValueError, match=says):
    torch_load(p)


def test_a_hand_built_view_inside_its_storage_reads_the_right_elements(tmp_path):
  p = zip_with(tmp_path, view_pickle(6, 1, (2, 2), (3, 1)), {"0": struct.pack("<6f", *range(6))}, "ok.pt")
  np.testing.assert_array_equal(torch_load(p)["w"].numpy(), [[1, 2], [4, 5]])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_mutated_checkpoints_raise_only_checkpoint_errors(tmp_path, layout):
  """Bytes flipped, dropped and repeated at random (seeded): every outcome is a load or a named
  refusal, never another exception."""
  from polygrad.nn.torch_load import CheckpointError, RefusedGlobal
  good = saved_bytes(tmp_path, {"w": torch.arange(6.0).reshape(2, 3), "n": 3, "b": torch.ones(2).half()},
                     zip_layout=LAYOUTS[layout])
  rng = np.random.default_rng(17)
  p = tmp_path / "m.pt"
  outcomes = {"loaded": 0, "refused": 0}
  for _ in range(150):
    b = bytearray(good)
    for _ in range(int(rng.integers(1, 4))):
      i = int(rng.integers(0, len(b)))
      kind = rng.integers(0, 3)
      if kind == 0:
        b[i] = int(rng.integers(0, 256))
      elif kind == 1:
        del b[i:i + int(rng.integers(1, 16))]
      else:
        b[i:i] = b[i:i + int(rng.integers(1, 16))]
    p.write_bytes(bytes(b))
    try:
      torch_load(p)
      outcomes["loaded"] += 1
    except (CheckpointError, RefusedGlobal) as e:
      assert str(p) in str(e)
      outcomes["refused"] += 1
  assert outcomes["refused"] > 0
