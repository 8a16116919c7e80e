"""Issue 17: what programs written for the seed polygrad API expect (its API tables in
shared/seeds): a dtype equals its name, Device['cpu'] names the device, float class indices, and a
tensor made from ints to be differentiated is float."""
import numpy as np
import pytest

from polygrad import Device, Tensor, dtypes

pytestmark = pytest.mark.usefixtures("live_daemon")


def test_a_dtype_equals_its_name():
  t = Tensor([1.0, 2.0])
  assert t.dtype == "float32" and "float32" == t.dtype and t.dtype != "float16"
  assert {dtypes.int32: 1}["int32"] == 1 and "int64" in {dtypes.int64}
  assert dtypes.float32 != dtypes.float16 and dtypes.float32 == dtypes.float32


def test_device_by_name():
  assert Device["cpu"] == "CPU" and Device["cuda:1"] == "CUDA:1"
  with pytest.raises(ValueError, match="malformed device name"):
    Device["not a device"]


def test_one_hot_and_cross_entropy_take_integral_float_class_indices():
  np.testing.assert_array_equal(Tensor([0.0, 2.0]).one_hot(3).numpy(), [[1, 0, 0], [0, 0, 1]])
  logits = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
  y = np.array([0, 2, 1, 2])
  got = Tensor(logits).cross_entropy(Tensor(y.astype(np.float32))).item()
  want = Tensor(logits).cross_entropy(Tensor(y.astype(np.int32))).item()
  assert got == pytest.approx(want, rel=1e-6)


def test_int_data_with_requires_grad_is_a_float_leaf():
  x = Tensor([1, 2, 3], requires_grad=True)
  assert x.dtype == dtypes.float32 and x.requires_grad
  (x * x).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
  assert Tensor([1, 2, 3]).dtype == dtypes.int32  # without requires_grad, ints stay ints


@pytest.mark.parametrize("bad", [
    lambda: Tensor.ones(2, 3) @ Tensor.ones(4, 5), lambda: Tensor.ones(2, 3) + Tensor.ones(4, 5),
    lambda: Tensor.ones(2, 3).reshape(4), lambda: Tensor.ones(2, 3).sum(5), lambda: Tensor.ones(2, 3).permute(0, 0),
    lambda: Tensor.ones(2, 3).conv2d(Tensor.ones(1, 2, 1, 1)), lambda: Tensor.ones(3).topk(4),
])
def test_a_shape_or_argument_error_is_both_value_error_and_runtime_error(bad):
  """torch and tinygrad raise RuntimeError; Python code catches ValueError: it is both, and says
  the shapes it concerns."""
  with pytest.raises(ValueError) as e:
    bad()
  assert isinstance(e.value, RuntimeError), e.value
  assert any(c.isdigit() for c in str(e.value)), f"the message names no shape, size or axis: {e.value}"


def test_arange_past_int32_is_int64():
  t = Tensor.arange(2**31 - 2, 2**31 + 3)
  assert t.dtype == dtypes.int64
  np.testing.assert_array_equal(t.numpy(), np.arange(2**31 - 2, 2**31 + 3))
  big = Tensor.arange(0, 3 * 10**10, 10**10)
  np.testing.assert_array_equal(big.numpy(), [0, 10**10, 2 * 10**10])
  assert Tensor.arange(5).dtype == dtypes.int32
