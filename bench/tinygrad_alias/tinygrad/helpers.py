import os, contextlib
def getenv(k, d=0):
  v = os.environ.get(k)
  return type(d)(v) if v is not None else d
DEBUG = getenv("DEBUG", 0)
IMAGE = 0
class _Dev:
  renderer = ""
  device = "CPU"
  class interface:
    @staticmethod
    def startswith(_): return False
DEV = _Dev()
@contextlib.contextmanager
def Context(**kw): yield
