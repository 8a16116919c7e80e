"""The Python client's module structure, checked without a daemon: every module of the polygrad
package imports on its own in a fresh interpreter, the import graph among them (top-level imports,
read with ast) has no cycle, no module imports another polygrad module inside a function (the way
a cycle is usually hidden), and no hand-written module is longer than 700 lines (the generated
stubs in polygrad/v1 are exempt)."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PY_CLIENT

PACKAGE = PY_CLIENT / "polygrad"
MAX_LINES = 700


def modules():
  """Dotted name -> path of every hand-written module of the package."""
  out = {}
  for path in sorted(PACKAGE.rglob("*.py")):
    parts = list(path.relative_to(PY_CLIENT).with_suffix("").parts)
    if "v1" in parts:
      continue
    if parts[-1] == "__init__":
      parts.pop()
    out[".".join(parts)] = path
  return out


MODULES = modules()


def _statements(body, in_function=False):
  """(statement, inside a function) for every statement, entering if/try/with/class/def bodies."""
  for node in body:
    yield node, in_function
    inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    for field in ("body", "orelse", "finalbody", "handlers"):
      children = getattr(node, field, None)
      if isinstance(children, list):
        yield from _statements(children, inner)


def polygrad_imports(name, path, known):
  """(imported module, inside a function) for each import of a module of `known` in `path`.
  `from . import x` names the submodule x when there is one, else the package."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  out = []
  for node, in_function in _statements(ast.parse(path.read_text(), str(path)).body):
    if isinstance(node, ast.Import):
      targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = package.split(".")
      if node.level:
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
      else:
        module = node.module or ""
      targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
    else:
      continue
    out += [(t, in_function) for t in targets if t in known and t != name]
  return out


def import_graph(mods):
  return {name: sorted({t for t, local in polygrad_imports(name, path, mods) if not local})
          for name, path in mods.items()}


def find_cycle(graph):
  """One cycle of `graph` (module -> the modules it imports) as a list of modules, or None."""
  state = {}  # module -> 1 on the current path, 2 done
  path = []

  def visit(m):
    state[m] = 1
    path.append(m)
    for n in graph.get(m, ()):
      if state.get(n) == 1:
        return path[path.index(n):] + [n]
      if n not in state:
        found = visit(n)
        if found:
          return found
    path.pop()
    state[m] = 2
    return None

  for m in sorted(graph):
    if m not in state:
      found = visit(m)
      if found:
        return found
  return None


def test_the_package_has_the_modules_these_checks_expect():
  for name in ("polygrad", "polygrad.connection", "polygrad.graph", "polygrad.device", "polygrad.wire",
               "polygrad.tensor", "polygrad.tensor.core", "polygrad.step", "polygrad.nn.optim"):
    assert name in MODULES, name


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_imports_alone_in_a_fresh_interpreter(name):
  env = dict(os.environ, PYTHONPATH=str(PY_CLIENT))
  r = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True,
                     timeout=120)
  assert r.returncode == 0, f"import {name} failed:\n{r.stderr}"


def test_import_graph_has_no_cycle():
  cycle = find_cycle(import_graph(MODULES))
  assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_a_polygrad_module_inside_a_function():
  local = [f"{name} imports {t}" for name, path in MODULES.items()
           for t, in_function in polygrad_imports(name, path, MODULES) if in_function]
  assert not local, "function-local imports (import at the top instead): " + "; ".join(local)


def test_cycle_check_sees_a_cycle_through_from_dot_import(tmp_path):
  """The checks above on a package made for them: they must be able to fail."""
  pkg = tmp_path / "pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "a.py").write_text("from . import b\n")
  (pkg / "b.py").write_text("from .c import f\n")
  (pkg / "c.py").write_text("try:\n  from .a import g\nexcept ImportError:\n  pass\n\ndef f():\n  from . import a\n")
  mods = {"pkg": pkg / "__init__.py", "pkg.a": pkg / "a.py", "pkg.b": pkg / "b.py", "pkg.c": pkg / "c.py"}
  assert find_cycle(import_graph(mods)) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
  assert polygrad_imports("pkg.c", mods["pkg.c"], mods) == [("pkg.a", False), ("pkg.a", True)]
  (pkg / "c.py").write_text("def f():\n  from . import a\n")
  assert find_cycle(import_graph(mods)) is None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_at_most_700_lines(name):
  lines = len(MODULES[name].read_text().splitlines())
  assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines (at most {MAX_LINES}: split it by area)"
