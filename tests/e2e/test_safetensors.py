"""safetensors files written and read without torch: round trips through the daemon (F32, F16,
BF16, ints, bool, sharded), the exact bytes on disk, and files written by hand from the spec."""
import json
import struct

import numpy as np
import pytest

from conftest import assert_close
from polygrad import Tensor, dtypes
from polygrad import nn
from polygrad.nn import get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save
from polygrad.nn.state import INDEX_NAME, safe_load_numpy

pytestmark = pytest.mark.usefixtures("live_daemon")


def read_by_spec(path):
  """An independent reader: 8-byte little-endian header length, JSON header, raw data."""
  raw = open(path, "rb").read()
  (n,) = struct.unpack("<Q", raw[:8])
  header = json.loads(raw[8:8 + n])
  return header, raw[8 + n:]


def bf16_bits(a):
  """float32 values exactly representable in bfloat16 → their 16-bit patterns."""
  return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype("<u2")


def bf16_values(rng, shape):
  return (bf16_bits(rng.standard_normal(shape).astype(np.float32)).astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8", "bool"])
def test_round_trip_through_the_daemon(tmp_path, rng, dt):
  if dt == "bfloat16":
    base = bf16_values(rng, (3, 5))
  elif dt == "bool":
    base = rng.random((3, 5)) > 0.5
  elif dt.startswith("float"):
    base = rng.standard_normal((3, 5)).astype(dt)
  else:
    base = rng.integers(0, 100, (3, 5)).astype(dt)
  t = Tensor(base, dtype=getattr(dtypes, dt)) * 1 if dt != "bool" else Tensor(base)  # a computed tensor
  safe_save({"x": t, "scalar": Tensor(np.float32(2.5))}, tmp_path / "a.safetensors")
  back = safe_load(tmp_path / "a.safetensors")
  assert back["x"].dtype == getattr(dtypes, dt) and back["x"].shape == (3, 5)
  np.testing.assert_array_equal(back["x"].numpy(), base.astype(np.float32) if dt == "bfloat16" else base)
  assert back["scalar"].shape == () and back["scalar"].item() == 2.5


def test_bytes_on_disk_are_what_numpy_expects(tmp_path, rng):
  f32 = rng.standard_normal((2, 3)).astype(np.float32)
  f16 = rng.standard_normal(4).astype(np.float16)
  b16 = bf16_values(rng, (5,))
  i64 = np.array([-1, 2 ** 40], np.int64)
  safe_save({"f32": Tensor(f32), "f16": Tensor(f16), "bf16": Tensor(b16, dtype=dtypes.bfloat16), "i64": Tensor(i64)},
            tmp_path / "m.safetensors", metadata={"format": "pt", "note": "polygrad"})
  header, data = read_by_spec(tmp_path / "m.safetensors")
  assert header["__metadata__"] == {"format": "pt", "note": "polygrad"}
  assert {k: v["dtype"] for k, v in header.items() if k != "__metadata__"} == \
      {"f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64"}
  assert header["f32"]["shape"] == [2, 3] and header["bf16"]["shape"] == [5]
  raw = open(tmp_path / "m.safetensors", "rb").read()
  assert (8 + struct.unpack("<Q", raw[:8])[0]) % 8 == 0, "data starts 8-byte aligned"

  def chunk(name):
    b, e = header[name]["data_offsets"]
    return data[b:e]
  assert chunk("f32") == f32.astype("<f4").tobytes()
  assert chunk("f16") == f16.astype("<f2").tobytes()
  assert chunk("bf16") == bf16_bits(b16).tobytes()
  assert chunk("i64") == i64.astype("<i8").tobytes()
  ends = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
  assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:])) and ends[-1][1] == len(data)


def write_by_spec(path, tensors, metadata=None):
  """An independent writer (no padding, keys in reverse order, data in a shuffled order)."""
  header, blobs, off = {}, [], 0
  if metadata:
    header["__metadata__"] = metadata
  for name, (dtype, arr) in reversed(list(tensors.items())):
    b = arr.tobytes()
    header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
  hb = json.dumps(header).encode()
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def test_reads_a_file_written_by_hand_from_the_spec(tmp_path, rng):
  f32 = rng.standard_normal((3, 2)).astype("<f4")
  f16 = rng.standard_normal((2, 2)).astype("<f2")
  bfv = bf16_values(rng, (4,))
  write_by_spec(tmp_path / "h.safetensors", {
      "w": ("F32", f32), "h": ("F16", f16), "b": ("BF16", bf16_bits(bfv)),
      "i": ("I32", np.array([7, -8], "<i4")), "u": ("U8", np.array([255, 0, 1], np.uint8)),
      "m": ("BOOL", np.array([True, False])), "e": ("F32", np.zeros((0, 3), "<f4")),
  }, metadata={"format": "np"})
  sd = safe_load(tmp_path / "h.safetensors")
  np.testing.assert_array_equal(sd["w"].numpy(), f32)
  np.testing.assert_array_equal(sd["h"].numpy(), f16)
  assert sd["b"].dtype == dtypes.bfloat16
  np.testing.assert_array_equal(sd["b"].numpy(), bfv)
  np.testing.assert_array_equal(sd["i"].numpy(), [7, -8])
  np.testing.assert_array_equal(sd["u"].numpy(), [255, 0, 1])
  np.testing.assert_array_equal(sd["m"].numpy(), [True, False])
  assert sd["e"].shape == (0, 3)
  # loaded tensors compute like any other
  assert_close((sd["b"].float() * 2 + sd["w"].sum()).numpy(), bfv.astype(np.float64) * 2 + f32.astype(np.float64).sum())
  assert safe_load_metadata(tmp_path / "h.safetensors")["__metadata__"] == {"format": "np"}


def test_sharded_save_and_load(tmp_path, rng):
  arrays = {f"layer{i}.weight": rng.standard_normal((16, 16)).astype(np.float32) for i in range(5)}
  arrays["bf"] = bf16_values(rng, (8, 8))
  tensors = {k: (Tensor(v, dtype=dtypes.bfloat16) if k == "bf" else Tensor(v)) for k, v in arrays.items()}
  written = safe_save(tensors, tmp_path / "model.safetensors", max_shard_size=2 * 16 * 16 * 4)
  index = json.loads((tmp_path / INDEX_NAME).read_text())
  shards = sorted(set(index["weight_map"].values()))
  assert len(shards) == 3 and shards[0] == "model-00001-of-00003.safetensors"
  assert written[0].endswith(INDEX_NAME) and len(written) == 4
  assert index["metadata"]["total_size"] == 5 * 16 * 16 * 4 + 8 * 8 * 2
  for name, shard in index["weight_map"].items():
    header, _ = read_by_spec(tmp_path / shard)
    assert name in header
  for where in (tmp_path / INDEX_NAME, tmp_path):
    back = safe_load(where)
    assert set(back) == set(arrays)
    for k, v in arrays.items():
      np.testing.assert_array_equal(back[k].numpy(), v)
  assert back["bf"].dtype == dtypes.bfloat16


def test_model_checkpoint_round_trip(tmp_path, rng):
  class Net:
    def __init__(self):
      self.emb = nn.Embedding(10, 8)
      self.norm = nn.LayerNorm(8)
      self.out = nn.Linear(8, 3)

    def __call__(self, idx):
      return self.out(self.norm(self.emb(idx)).gelu())

  a = Net()
  idx = Tensor(rng.integers(0, 10, (2, 5)).astype(np.int32))
  safe_save(get_state_dict(a), tmp_path / "net.safetensors")
  b = Net()
  load_state_dict(b, safe_load(tmp_path / "net.safetensors"))
  assert_close(b(idx).numpy(), a(idx).numpy())


def test_half_precision_checkpoint_loads_into_float32_model(tmp_path, rng):
  lin = nn.Linear(4, 2)
  w16 = bf16_values(rng, (2, 4))
  write_by_spec(tmp_path / "bf.safetensors", {"weight": ("BF16", bf16_bits(w16)),
                                              "bias": ("F16", np.array([0.5, -0.25], "<f2"))})
  load_state_dict(lin, safe_load(tmp_path / "bf.safetensors"))
  assert lin.weight.dtype == dtypes.float32
  np.testing.assert_array_equal(lin.weight.numpy(), w16)
  np.testing.assert_array_equal(lin.bias.numpy(), [0.5, -0.25])


def with_header(header, data=b""):
  hb = header if isinstance(header, bytes) else json.dumps(header).encode()
  return struct.pack("<Q", len(hb)) + hb + data


def one_f32(**change):
  entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
  entry.update(change)
  return with_header({"x": entry}, np.array([1, 2], "<f4").tobytes())


# Damaged and hostile files, most of them found by fuzz/fuzz_safetensors.py: before the reader
# checked them, each raised KeyError, TypeError, RecursionError or a ValueError that named no file,
# or (the offsets before the data, the index naming a path) read bytes it had no business reading.
DAMAGED = {
    "short": b"\x01\x02",
    "header_too_long": struct.pack("<Q", 1 << 40) + b"{}",
    "offsets_do_not_fit": one_f32(data_offsets=[0, 12]),
    "not_utf8": with_header(b'{"x\xff": 1}'),
    "not_json": with_header(b'{"x" 1}'),
    "nested_too_deep": with_header(b'{"x": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
    "not_an_object": with_header([1, 2]),
    "entry_not_an_object": with_header({"x": 3}),
    "no_dtype": with_header({"x": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
    "dtype_not_a_string": one_f32(dtype=["F32"]),
    "shape_negative": one_f32(shape=[-2, -1]),
    "shape_bool": one_f32(shape=[True, 2]),
    "huge_empty_dimension": with_header({"x": {"dtype": "U8", "shape": [0, 2**64], "data_offsets": [0, 0]}}),
    "too_many_dimensions": with_header({"x": {"dtype": "U8", "shape": [1] * 40, "data_offsets": [0, 1]}}, b"\1"),
    "offsets_before_the_data": with_header({"x": {"dtype": "U8", "shape": [4], "data_offsets": [-4, 0]}}),
    "offsets_float": one_f32(data_offsets=[0.0, 8.0]),
    "offsets_three": one_f32(data_offsets=[0, 8, 8]),
    "overlap": with_header({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
    "gap": with_header({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
    "trailing_bytes": with_header({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
    "duplicate_name": with_header(b'{"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                                  b'"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\1"),
    "metadata_not_strings": with_header({"__metadata__": {"epoch": 3}}),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_damaged_files_raise_naming_the_file(tmp_path, damage):
  p = tmp_path / "bad.safetensors"
  p.write_bytes(DAMAGED[damage])
  with pytest.raises(ValueError, match="bad.safetensors"):
    safe_load_numpy(p)


def test_unknown_dtype_is_a_type_error_naming_the_tensor(tmp_path):
  p = tmp_path / "f8.safetensors"
  p.write_bytes(one_f32(dtype="F8_E4M3"))
  with pytest.raises(TypeError, match="f8.safetensors: tensor 'x' has unsupported dtype 'F8_E4M3'"):
    safe_load_numpy(p)


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ["a"], 7])
def test_an_index_names_only_files_beside_it(tmp_path, shard):
  (tmp_path / "outside.safetensors").write_bytes(with_header({}))
  folder = tmp_path / "ckpt"
  folder.mkdir()
  (folder / "a.safetensors").write_bytes(one_f32())
  (folder / INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "a.safetensors", "y": shard}}))
  with pytest.raises(ValueError, match="not a file name in the index's folder"):
    safe_load_numpy(folder)


@pytest.mark.parametrize("index", [b"[]", b'{"weight_map": 3}', b"{\"weight_map\": {", b'{"metadata": {}}'])
def test_a_damaged_index_raises_naming_it(tmp_path, index):
  (tmp_path / INDEX_NAME).write_bytes(index)
  with pytest.raises(ValueError, match=INDEX_NAME):
    safe_load_numpy(tmp_path)


def test_an_index_naming_a_missing_shard_says_which(tmp_path):
  (tmp_path / INDEX_NAME).write_text(json.dumps({"weight_map": {"x": "gone.safetensors"}}))
  with pytest.raises(FileNotFoundError, match="the shard 'gone.safetensors' does not exist"):
    safe_load_numpy(tmp_path)
