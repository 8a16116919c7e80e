"""Small measurements shared by the load scripts (load.py, soak.py)."""
import re


def rss_bytes(pid: int) -> int:
  """Resident set size of a process, from /proc."""
  with open(f"/proc/{pid}/status") as f:
    return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024


def percentile(xs, q):
  """The q-quantile (0..1) of xs by rank; NaN for none."""
  xs = sorted(xs)
  return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
