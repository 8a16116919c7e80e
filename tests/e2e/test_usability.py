"""What a user sees when things go wrong or take long: an unreachable daemon, server errors as
Python exceptions with the server's message, shape errors before any round trip, a repr that
sends nothing, and progress bars on a terminal only (checked on a real pseudo-terminal)."""
import json
import os
import pty
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time

import grpc
import numpy as np
import pytest

from conftest import PY_CLIENT, Daemon, daemon_binary, free_port
import polygrad
from polygrad import PolygradConnectionError, Tensor
from polygrad import graph as g
from polygrad.connection import Connection, probe_address
from polygrad.progress import Progress, progress_enabled

pytestmark = pytest.mark.usefixtures("live_daemon")


def run_client(body: str, address: str, extra_env=None, timeout: float = 120) -> subprocess.CompletedProcess:
  """`body` in a fresh Python process whose client points at `address`."""
  program = f"import sys\nsys.path.insert(0, {str(PY_CLIENT)!r})\n" + textwrap.dedent(body)
  env = dict(os.environ, POLYGRAD_ADDRESS=address, **(extra_env or {}))
  return subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=timeout)


# --- an unreachable daemon -------------------------------------------------------------------------

def test_unreachable_unix_socket_message(tmp_path):
  addr = f"unix:{tmp_path / 'nobody.sock'}"
  r = run_client("""
      from polygrad import Tensor, PolygradConnectionError
      try:
        Tensor([1.0]).numpy()
      except PolygradConnectionError as e:
        print(f"{type(e).__name__}: {e}")
      """, addr)
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == (f"PolygradConnectionError: cannot reach polygradd at {addr} "
                              f"(no socket file at {tmp_path / 'nobody.sock'})")


@pytest.mark.parametrize("kind", ["refused", "unknown_host", "stale_socket"])
def test_unreachable_address_names_the_cause(tmp_path, kind):
  if kind == "refused":
    addr, cause = f"127.0.0.1:{free_port()}", "Connection refused"
  elif kind == "unknown_host":
    addr, cause = "no-such-host.invalid:50051", "cannot resolve host no-such-host.invalid"
  else:  # a socket file nobody listens on (a daemon that died without cleaning up)
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    addr, cause = f"unix:{path}", "cannot connect to"
  with pytest.raises(PolygradConnectionError) as e:
    Connection(address=addr, connect_timeout=60)
  msg = str(e.value)
  assert msg.startswith(f"cannot reach polygradd at {addr} (") and cause in msg, msg
  assert isinstance(e.value, ConnectionError) and isinstance(e.value, polygrad.PolygradError)


def test_something_else_listening_times_out_with_a_hint():
  srv = socket.socket()
  srv.bind(("127.0.0.1", 0))
  srv.listen(64)
  held = []

  def accept_and_say_nothing():  # a TCP service that never speaks HTTP/2
    while True:
      try:
        held.append(srv.accept()[0])
      except OSError:
        return

  thread = threading.Thread(target=accept_and_say_nothing, daemon=True)
  thread.start()
  addr = f"127.0.0.1:{srv.getsockname()[1]}"
  try:
    with pytest.raises(PolygradConnectionError) as e:
      Connection(address=addr, connect_timeout=1.5)
  finally:
    srv.shutdown(socket.SHUT_RDWR)
    srv.close()
    thread.join(5)
    for c in held:
      c.close()
  assert str(e.value).startswith(f"cannot reach polygradd at {addr} (not ready within the connect timeout")
  assert "no gRPC answer" in str(e.value)


def test_probe_address_says_nothing_against_a_live_daemon(daemon):
  assert probe_address(daemon.address) is None
  assert probe_address("dns:///weird-form") is None  # not a form it knows: no claim


def test_daemon_that_goes_away_is_a_connection_error(tmp_path):
  d = Daemon(daemon_binary(), tmp_path)
  try:
    d.wait_ready()
    conn = Connection(address=d.address, connect_timeout=30)
    conn.release()  # an RPC that works
    d.stop()
    with pytest.raises(PolygradConnectionError) as e:
      conn.release()
    assert str(e.value).startswith(f"cannot reach polygradd at {d.address} (Release: UNAVAILABLE")
    conn.close()
  finally:
    d.stop()


# --- server errors ---------------------------------------------------------------------------------

def test_server_errors_carry_the_servers_message_and_code():
  a = Tensor(np.arange(6, dtype=np.float32))
  bad = Tensor(g.GRAPH.node(g.RESHAPE, polygrad.dtypes.float32, (4,), (a._node,), (4,)))
  with pytest.raises(polygrad.PolygradInvalidArgument) as e:
    bad.numpy()
  err = e.value
  assert err.code == grpc.StatusCode.INVALID_ARGUMENT
  assert err.details and err.details in str(err)  # the daemon's own words
  assert str(err).startswith("Realize failed: INVALID_ARGUMENT: ")
  assert (a + 1).numpy()[-1] == 6.0  # and the daemon keeps serving


def test_unknown_handle_is_not_found_with_the_servers_message():
  conn = polygrad.get_connection()
  with pytest.raises(polygrad.PolygradNotFound) as e:
    conn.download(987654321)
  assert isinstance(e.value, LookupError)
  assert e.value.code == grpc.StatusCode.NOT_FOUND and e.value.details in str(e.value)


# --- shape errors and repr send nothing ------------------------------------------------------------

SHAPE_ERRORS = {
    "matmul": "Tensor.ones(2, 3) @ Tensor.ones(4, 5)",
    "broadcast": "Tensor.ones(2, 3) + Tensor.ones(4)",
    "reshape": "Tensor.ones(2, 3).reshape(4, 2)",
    "permute": "Tensor.ones(2, 3).permute(0, 0)",
    "expand": "Tensor.ones(2, 3).expand(4, 4)",
    "cat": "Tensor.ones(2, 3).cat(Tensor.ones(2, 4), dim=0)",
    "axis": "Tensor.ones(2, 3).sum(axis=5)",
    "conv2d": "Tensor.ones(1, 3, 8, 8).conv2d(Tensor.ones(4, 2, 3, 3))",
    "gather": "Tensor.ones(2, 3).gather(0, Tensor([[0, 1, 0, 1]]))",
    "index": "Tensor.ones(2, 3)[5]",
    "softmax": "Tensor.ones(2, 3).softmax(2)",
    "ragged": "Tensor([[1.0, 2.0], [3.0]])",
}


@pytest.fixture(scope="module")
def offline_results(tmp_path_factory):
  """Every SHAPE_ERRORS case and some reprs, in a process whose daemon address leads nowhere:
  any round trip would fail with PolygradConnectionError instead of the local error."""
  addr = f"unix:{tmp_path_factory.mktemp('offline') / 'nobody.sock'}"
  r = run_client(f"""
      import json
      from polygrad import Tensor, dtypes
      from polygrad.connection import current_connection
      out = {{}}
      for name, expr in {SHAPE_ERRORS!r}.items():
        try:
          eval(expr)
          out[name] = "no error"
        except Exception as e:
          out[name] = [type(e).__name__, [c.__name__ for c in type(e).__mro__], str(e)]
      t = (Tensor.ones(2, 3, dtype=dtypes.float16) * 2).sum(1)
      out["repr"] = repr(t)
      out["repr_big"] = repr(Tensor.zeros(1000, 1000, requires_grad=True) + 1)
      out["str"] = str(Tensor([1, 2, 3]))
      out["connected"] = current_connection() is not None
      print(json.dumps(out))
      """, addr)
  assert r.returncode == 0, r.stderr
  return json.loads(r.stdout)


@pytest.mark.parametrize("case", sorted(SHAPE_ERRORS))
def test_shape_errors_raise_before_any_round_trip(offline_results, case):
  got = offline_results[case]
  assert got != "no error", f"{SHAPE_ERRORS[case]} raised nothing"
  name, mro, msg = got
  assert "PolygradError" not in mro, f"{SHAPE_ERRORS[case]} went to the daemon: {msg}"
  # ShapeError (ValueError and RuntimeError) and AxisError (also IndexError) count as theirs
  assert {"ValueError", "IndexError", "RuntimeError", "TypeError"} & set(mro), (name, msg)
  assert msg


def test_repr_shows_shape_dtype_device_without_a_daemon(offline_results):
  assert offline_results["repr"] == "<Tensor shape=(2,) dtype=dtypes.float16 device=CPU lazy>"
  assert offline_results["repr_big"].startswith("<Tensor shape=(1000, 1000) dtype=dtypes.float32 device=CPU")
  assert offline_results["str"] == "<Tensor shape=(3,) dtype=dtypes.int32 device=CPU lazy>"
  assert offline_results["connected"] is False


def test_repr_sends_no_request_with_a_daemon():
  t = Tensor(np.ones((3, 4), np.float32)) @ Tensor(np.ones((4, 2), np.float32))
  before = g.GRAPH.stats()["requests"]
  text = repr(t)
  assert g.GRAPH.stats()["requests"] == before
  assert text == "<Tensor shape=(3, 2) dtype=dtypes.float32 device=CPU lazy>"
  t.realize()
  assert repr(t).endswith("realized>")


# --- progress bars ---------------------------------------------------------------------------------

def test_progress_line_format():
  p = Progress(4, "loading", enabled=False, unit="tensors")
  p._start = 0.0
  assert p.line(now=0.5) == "loading   0%|                        | 0/4 tensors 0.5s"
  p.update(1, "wte.weight")
  assert p.line(now=1.0) == "loading  25%|######                  | 1/4 tensors 1.0s wte.weight"
  p.update(10)
  assert p.n == 4 and "100%|" + "#" * 24 + "|" in p.line()


def test_progress_is_off_for_pipes_and_files(tmp_path, monkeypatch):
  monkeypatch.delenv("POLYGRAD_PROGRESS", raising=False)
  with open(tmp_path / "log", "w") as f:
    assert not progress_enabled(f)
    with Progress(3, "x", stream=f) as p:
      for _ in range(3):
        p.update(1)
  assert (tmp_path / "log").read_text() == ""
  r, w = os.pipe()
  with os.fdopen(w, "w") as wf:
    assert not progress_enabled(wf)
  os.close(r)


def test_progress_env_overrides(tmp_path, monkeypatch):
  with open(tmp_path / "log", "w") as f:
    monkeypatch.setenv("POLYGRAD_PROGRESS", "1")
    assert progress_enabled(f)
    with Progress(2, "forced", stream=f) as p:
      p.update(2)
  assert "forced 100%|" in (tmp_path / "log").read_text()
  master, slave = pty.openpty()
  try:
    with os.fdopen(os.dup(slave), "w") as tty:
      monkeypatch.setenv("POLYGRAD_PROGRESS", "0")
      assert tty.isatty() and not progress_enabled(tty)
      monkeypatch.delenv("POLYGRAD_PROGRESS")
      assert progress_enabled(tty)
  finally:
    os.close(master)
    os.close(slave)


def run_on_a_terminal(body: str, address: str, timeout: float = 300) -> str:
  """`body` in a fresh process whose stderr is a pseudo-terminal; returns what it drew there."""
  program = f"import sys\nsys.path.insert(0, {str(PY_CLIENT)!r})\n" + textwrap.dedent(body)
  env = dict(os.environ, POLYGRAD_ADDRESS=address)
  env.pop("POLYGRAD_PROGRESS", None)
  master, slave = pty.openpty()
  proc = subprocess.Popen([sys.executable, "-c", program], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=slave)
  os.close(slave)
  drawn = b""
  deadline = time.monotonic() + timeout
  try:
    while time.monotonic() < deadline:
      ready, _, _ = select.select([master], [], [], 0.2)
      if ready:
        try:
          chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
          break
        if not chunk:
          break
        drawn += chunk
      elif proc.poll() is not None:
        break
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
    os.close(master)
  assert proc.returncode == 0, drawn.decode(errors="replace") + proc.stdout.read().decode()
  return drawn.decode(errors="replace")


def test_load_and_generate_draw_progress_on_a_terminal(daemon, tmp_path):
  from test_hf import CFG, random_weights, write_checkpoint
  write_checkpoint(tmp_path, CFG, random_weights(CFG, np.random.default_rng(1)))
  drawn = run_on_a_terminal(f"""
      from polygrad.hf import load_hf, generate
      inst = load_hf({str(tmp_path)!r}, max_seq_len=8)
      generate(inst, [[1, 2]], max_new_tokens=3, seed=0)
      """, daemon.address)
  n = 4 + 12 * CFG["n_layer"]
  assert f"loading 100%|{'#' * 24}| {n}/{n} tensors" in drawn, drawn
  assert f"generate 100%|{'#' * 24}| 3/3 tok" in drawn, drawn
  assert "\r" in drawn  # redrawn in place


def test_progress_can_be_turned_off_per_call(daemon, tmp_path):
  from test_hf import CFG, random_weights, write_checkpoint
  write_checkpoint(tmp_path, CFG, random_weights(CFG, np.random.default_rng(2)))
  drawn = run_on_a_terminal(f"""
      from polygrad.hf import load_hf, generate
      inst = load_hf({str(tmp_path)!r}, max_seq_len=8, progress=False)
      generate(inst, [[1, 2]], max_new_tokens=2, seed=0, progress=False)
      """, daemon.address)
  assert drawn == ""


# --- packaging -------------------------------------------------------------------------------------

def copy_client(dst):
  """clients/python without build leftovers: pip builds in the copy, not in the source tree."""
  import shutil
  shutil.copytree(PY_CLIENT, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
  return dst


def check_installed(python, daemon, cwd, extra_env=None):
  """Import polygrad with `python` from outside the source tree and compute on the daemon."""
  body = ("import polygrad, polygrad.hf\n"
          "from polygrad import Tensor\n"
          "print(polygrad.__file__)\n"
          "print((Tensor([1.0, 2.0]) * 3).numpy().tolist())\n")
  env = dict(os.environ, POLYGRAD_ADDRESS=daemon.address)
  env.pop("PYTHONPATH", None)
  env.update(extra_env or {})
  r = subprocess.run([python, "-c", body], env=env, capture_output=True, text=True, timeout=120, cwd=cwd)
  assert r.returncode == 0, r.stderr
  return r.stdout.splitlines()


def pip(python, *args, cwd):
  r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", *args],
                     capture_output=True, text=True, timeout=300, cwd=cwd)
  if r.returncode != 0 and "No module named pip" in r.stderr:
    pytest.skip("this python has no pip")
  assert r.returncode == 0, r.stdout + r.stderr
  return r


def test_pip_install_ships_the_generated_stubs(daemon, tmp_path):
  src = copy_client(tmp_path / "src")
  pip(sys.executable, "--target", str(tmp_path / "site"), str(src), cwd=tmp_path)
  assert (tmp_path / "site" / "polygrad" / "v1" / "polygrad_pb2_grpc.py").exists()
  assert (tmp_path / "site" / "polygrad" / "hf.py").exists()
  out = check_installed(sys.executable, daemon, tmp_path, {"PYTHONPATH": str(tmp_path / "site")})
  assert out == [str(tmp_path / "site" / "polygrad" / "__init__.py"), "[3.0, 6.0]"]


def test_editable_install_in_a_venv_finds_the_stubs(daemon, tmp_path):
  venv = tmp_path / "venv"
  r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], capture_output=True,
                     text=True, timeout=120)
  if r.returncode != 0:
    pytest.skip(f"cannot make a venv here: {r.stderr.strip()[-200:]}")
  src = copy_client(tmp_path / "src")
  pip(str(venv / "bin" / "python"), "-e", str(src), cwd=tmp_path)
  out = check_installed(str(venv / "bin" / "python"), daemon, tmp_path)
  assert out == [str(src / "polygrad" / "__init__.py"), "[3.0, 6.0]"]


def test_a_long_realize_shows_that_work_goes_on(daemon):
  drawn = run_on_a_terminal("""
      import os
      os.environ["POLYGRAD_PROGRESS_DELAY"] = "0"  # every realize counts as long
      import numpy as np
      from polygrad import Tensor
      a = Tensor(np.ones((64, 64), np.float32))
      print((a @ a).softmax(-1).sum().item())
      """, daemon.address)
  assert "polygradd: realizing " in drawn and " nodes (compiling kernels?) " in drawn, drawn
  assert drawn.endswith("\r\x1b[K"), repr(drawn[-40:])  # erased once the answer came


def test_waiting_lines_share_one_watcher_thread(monkeypatch):
  """Every realize on a terminal opens a Waiting: one long-lived thread watches them all, rather
  than a thread started (and joined) per call."""
  import threading
  from polygrad.progress import Waiting
  monkeypatch.delenv("POLYGRAD_PROGRESS", raising=False)
  master, slave = pty.openpty()
  try:
    with os.fdopen(os.dup(slave), "w") as tty:
      watchers = set()
      for _ in range(20):
        with Waiting("x", stream=tty) as w:
          assert w.enabled
          watchers |= {t.ident for t in threading.enumerate() if t.name == "polygrad-waiting"}
      assert len(watchers) == 1, watchers
      assert any(t.ident in watchers for t in threading.enumerate()), "the watcher stays for the next call"
    # A call whose stream fails while it waits still ends: the next call gets a line.
    with Waiting("x", stream=tty) as w:
      w.enabled = False  # what a failed draw leaves
    with os.fdopen(os.dup(slave), "w") as tty2:
      with Waiting("y", stream=tty2) as w2:
        assert w2.enabled, "the failed call's Waiting still holds the watcher"
  finally:
    os.close(master)
    os.close(slave)


def test_no_waiting_line_under_a_bar_or_off_a_terminal(tmp_path, monkeypatch):
  from polygrad.progress import Waiting
  monkeypatch.setenv("POLYGRAD_PROGRESS_DELAY", "0")
  monkeypatch.delenv("POLYGRAD_PROGRESS", raising=False)
  with open(tmp_path / "log", "w") as f:
    with Waiting("x", stream=f):  # with a delay of 0, an enabled line is always drawn once
      pass
  assert (tmp_path / "log").read_text() == ""
  master, slave = pty.openpty()
  try:
    with os.fdopen(os.dup(slave), "w") as tty:
      with Progress(2, "bar", stream=tty) as bar:
        assert not Waiting("x", stream=tty).enabled
        bar.update(1)
      assert Waiting("x", stream=tty).enabled
  finally:
    os.close(master)
    os.close(slave)
