# numpy converts dtypes here and times nothing: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE stay as set.
import numpy as np


def _to_np_dtype(dt):
  """numpy's dtype for a polygrad dtype; None for bfloat16, which numpy lacks (as tinygrad's)."""
  return None if dt.name == "bfloat16" else np.dtype(dt.name)
