"""Issue 17: the smaller Tensor functions tinygrad documents — normal, replace, from_blob,
from_url, contiguous_backward — and the ones that say why they are not here (shard, the
scheduler views)."""
import ctypes
import gzip
import http.server
import threading

import numpy as np
import pytest

from polygrad import Tensor, dtypes
from polygrad.errors import ShapeError

pytestmark = pytest.mark.usefixtures("live_daemon")


def test_normal_has_its_mean_and_std():
  Tensor.manual_seed(3)
  x = Tensor.normal(200, 100, mean=5.0, std=0.5).numpy()
  assert x.shape == (200, 100) and x.dtype == np.float32
  assert abs(x.mean() - 5.0) < 0.02 and abs(x.std() - 0.5) < 0.02  # 20000 samples: 5 sigma bounds
  Tensor.manual_seed(3)
  np.testing.assert_array_equal(Tensor.normal(200, 100, mean=5.0, std=0.5).numpy(), x)


def test_replace_takes_the_other_tensors_values_and_dtype_and_checks_shape():
  a = Tensor([1.0, 2.0])
  b = Tensor([3, 4], dtype=dtypes.int32)
  assert a.replace(b) is a and a.dtype == dtypes.int32
  np.testing.assert_array_equal(a.numpy(), [3, 4])
  with pytest.raises(ShapeError, match=r"replace: shape \(3,\) differs from \(2,\)") as e:
    a.replace(Tensor([1, 2, 3]))
  assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)


@pytest.mark.parametrize("dt,ct", [("float32", ctypes.c_float), ("int64", ctypes.c_int64), ("uint8", ctypes.c_uint8)])
def test_from_blob_copies_memory_at_an_address(dt, ct):
  buf = (ct * 6)(*range(6))
  t = Tensor.from_blob(ctypes.addressof(buf), (2, 3), dtype=getattr(dtypes, dt))
  for i in range(6):
    buf[i] = 0  # copied when made: later writes do not show
  np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3))
  assert t.dtype == getattr(dtypes, dt)


def test_from_url_reads_bytes_and_gunzips(tmp_path):
  payload = bytes(range(256)) * 3

  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
      body = gzip.compress(payload) if self.path.endswith(".gz") else payload
      self.send_response(200)
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)

    def log_message(self, *a):
      pass

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    t = Tensor.from_url(f"{base}/data")
    assert t.dtype == dtypes.uint8 and t.shape == (768,)
    assert t.numpy().tobytes() == payload
    assert Tensor.from_url(f"{base}/data.gz", gunzip=True).numpy().tobytes() == payload
  finally:
    server.shutdown()
  with pytest.raises(ValueError, match="http:// and https://"):
    Tensor.from_url("file:///etc/passwd")


def test_contiguous_backward_is_the_identity_with_gradient():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x.contiguous_backward() * 3).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_what_is_not_here_says_why():
  with pytest.raises(NotImplementedError, match="multi-device"):
    Tensor.ones(4).shard(("CPU", "CPU"))
  with pytest.raises(NotImplementedError, match="multi-device"):
    Tensor.ones(4).shard_(("CPU", "CPU"))
  for name in ("schedule_linear", "linear_with_vars"):
    with pytest.raises(NotImplementedError, match="scheduler"):
      getattr(Tensor.ones(2), name)()
