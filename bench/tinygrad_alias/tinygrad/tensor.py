import numpy as np
from polygrad import Tensor
def _to_np_dtype(dt): return np.dtype(dt.name if hasattr(dt, "name") else dt) if dt.name not in ("bfloat16",) else None
