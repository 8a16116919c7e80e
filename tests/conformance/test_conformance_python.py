"""The conformance corpus through the Python client's public API (see README.md).

Each case is built with polygrad's Tensor methods, realized on the daemon named by
POLYGRAD_ADDRESS (tests/conformance/run.sh starts one; without it the client starts its own), and
its result recorded in <out>/python.json for the other clients' runners to compare byte for byte.
A case passes when the client's local shape and dtype equal the ones the daemon reports for the
realized buffer and the bytes read through the public API equal the buffer's bytes.
"""
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
PY_CLIENT = HERE.parents[1] / "clients" / "python"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(PY_CLIENT))

import corpus  # noqa: E402

if not (PY_CLIENT / "polygrad" / "v1" / "polygrad_pb2_grpc.py").exists():
  # The cmake build generates the client's stubs; a checkout that has not built generates them the
  # same way (as tests/e2e/conftest.py does).
  subprocess.run(["protoc", f"--proto_path={corpus.REPO / 'proto'}", f"--python_out={PY_CLIENT}",
                  f"--grpc_python_out={PY_CLIENT}", "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                  str(corpus.PROTO)], check=True)
from polygrad import Device, Tensor, dtypes, get_connection  # noqa: E402
from polygrad import graph as _graph  # noqa: E402  (wire op names, for the coverage check)

CASES = corpus.load_cases()


def _tuple(v):
  return tuple(v) if isinstance(v, list) else v


def _at(xs, i):
  """The i-th input, or None where the case has fewer or names none (an optional weight or bias)."""
  return xs[i] if i is not None and len(xs) > i else None


def _binary(method):
  def build(xs, a):
    other = a["scalar"] if "scalar" in a else xs[1]
    return getattr(xs[0], method)(other)
  return build


def _reduce(method, *extra):
  def build(xs, a):
    kw = {k: a[k] for k in extra if k in a}
    return getattr(xs[0], method)(axis=_tuple(a.get("axis")), keepdim=a.get("keepdim", False), **kw)
  return build


def _seeded(fn):
  def build(xs, a):
    Tensor.manual_seed(a["seed"])
    return fn(xs, a)
  return build


def _attention(xs, a):
  """With p, dropout on the weights: seeded, while training."""
  def run():
    return xs[0].scaled_dot_product_attention(xs[1], xs[2], attn_mask=xs[3] if len(xs) > 3 else None,
                                              is_causal=a.get("causal", False), dropout_p=a.get("p", 0.0))
  if "p" not in a:
    return run()
  Tensor.manual_seed(a["seed"])
  with Tensor.train():
    return run()


def _dropout(xs, a):
  with Tensor.train():
    return xs[0].dropout(a["p"])


def _index_entry(e, xs):
  if e is None:
    return None
  if e == "...":
    return Ellipsis
  if isinstance(e, dict) and "slice" in e:
    return slice(*e["slice"])
  if isinstance(e, dict) and "tensor" in e:
    return xs[e["tensor"]]
  return e


def _setitem(xs, a):
  t = xs[0]
  t[tuple(_index_entry(e, xs) for e in a["index"])] = a["value"] if "value" in a else xs[1]
  return t


def _grad(xs, a):
  target = xs[a["wrt"]]
  target.requires_grad = True
  BUILD[a["of"]](xs, a["args"]).sum().backward()
  return target.grad


def _optimizer_step(xs, a):
  """One optimizer step on parameter xs[0] with gradient xs[1], built lazily: the new parameter."""
  from polygrad.nn import optim
  p, o = xs[0], a.get("options", {})
  p.requires_grad = True
  make = {"sgd": lambda: optim.SGD([p], lr=a["lr"], momentum=o.get("momentum", 0.0), weight_decay=o.get("weightDecay", 0.0),
                                   nesterov=o.get("nesterov", False)),
          "adam": lambda: optim.Adam([p], lr=a["lr"], weight_decay=o.get("weightDecay", 0.0)),
          "adamw": lambda: optim.AdamW([p], lr=a["lr"], weight_decay=o.get("weightDecay", 0.01)),
          "lamb": lambda: optim.LAMB([p], lr=a["lr"], weight_decay=o.get("weightDecay", 0.0)),
          "lars": lambda: optim.LARS([p], lr=a["lr"], momentum=o.get("momentum", 0.9), weight_decay=o.get("weightDecay", 1e-4),
                                     nesterov=o.get("nesterov", False), classic=o.get("classic", True),
                                     tcoef=o.get("tcoef", 0.001)),
          "muon": lambda: optim.Muon([p], lr=a["lr"], momentum=o.get("momentum", 0.95), weight_decay=o.get("weightDecay", 0.1),
                                     ns_steps=o.get("nsSteps", 5),
                                     ns_coefficients=o.get("nsCoefficients", (3.4445, -4.775, 2.0315)),
                                     nesterov=o.get("nesterov", True))}
  opt = make[a["optimizer"]]()
  p.grad = xs[1]
  opt.schedule_step()
  return p


def _to(xs, a):
  y = xs[0].to(a["device"])
  return y.to("CPU") if a.get("back") else y


def _camel(name: str) -> str:
  head, *rest = name.split("_")
  return head + "".join(w.title() for w in rest)


def _generated(record):
  """The builder of a method generated from the op schema (a METHODS record), named by its
  camelCase name: its operands from the inputs after the first, then from args by name; its
  parameters from args by camelCase name, else their defaults. A new schema op needs only cases."""
  method, operands, params = record[2], record[3], record[4]

  def build(xs, a):
    ops = [*xs[1:], *(a[_camel(n)] for n in operands[len(xs) - 1:])]
    return getattr(xs[0], method)(*ops, **{p[0]: a[_camel(p[0])] for p in params if _camel(p[0]) in a})
  return build


# One builder per corpus op: (input tensors, args) -> the result tensor, through public methods only.
BUILD = {
    **{_camel(r[2]): _generated(r) for r in _graph.METHODS},
    "from": lambda xs, a: xs[0],
    "optimizerStep": _optimizer_step,
    "full": lambda xs, a: Tensor.full(tuple(a["shape"]), a["value"], dtype=a.get("dtype")),
    "zeros": lambda xs, a: Tensor.zeros(*a["shape"], dtype=a.get("dtype")),
    "ones": lambda xs, a: Tensor.ones(*a["shape"], dtype=a.get("dtype")),
    "arange": lambda xs, a: Tensor.arange(a["start"], a["stop"], a.get("step", 1), dtype=a.get("dtype")),
    "linspace": lambda xs, a: Tensor.linspace(a["start"], a["stop"], a["steps"], dtype=a.get("dtype")),
    "eye": lambda xs, a: Tensor.eye(a["n"], a.get("m"), dtype=a.get("dtype")),
    "rand": _seeded(lambda xs, a: Tensor.rand(*a["shape"], dtype=a.get("dtype"))),
    "randn": _seeded(lambda xs, a: Tensor.randn(*a["shape"], dtype=a.get("dtype"))),
    "randint": _seeded(lambda xs, a: Tensor.randint(*a["shape"], low=a["low"], high=a["high"], dtype=a.get("dtype"))),
    "dropout": _seeded(_dropout),
    **{name: (lambda m: lambda xs, a: getattr(xs[0], m)())(name)
       for name in ["neg", "relu"]},
    "gelu": lambda xs, a: xs[0].gelu(approximate=a.get("approximate", "tanh")),
    "isclose": lambda xs, a: xs[0].isclose(xs[1], rtol=a["rtol"], atol=a["atol"], equal_nan=a.get("equalNan", False)),
    "any": _reduce("any"),
    "all": _reduce("all"),
    "lshift": lambda xs, a: xs[0].lshift(a["n"]),
    "rshift": lambda xs, a: xs[0].rshift(a["n"]),
    **{name: _binary(m) for name, m in [
        ("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"), ("pow", "pow"), ("maximum", "maximum"),
        ("minimum", "minimum"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("eq", "eq"), ("ne", "ne"),
        ("idiv", "idiv"), ("fmod", "fmod"), ("remainder", "remainder"), ("floorDivide", "floor_divide"),
        ("bitwiseAnd", "bitwise_and"), ("bitwiseOr", "bitwise_or"), ("bitwiseXor", "bitwise_xor")]},
    "clamp": lambda xs, a: xs[0].clamp(a.get("min"), a.get("max")),
    "where": lambda xs, a: xs[0].where(a["x"], a["y"]) if "x" in a else xs[0].where(xs[1], xs[2]),
    "bitwiseNot": lambda xs, a: xs[0].bitwise_not(),
    "logicalNot": lambda xs, a: xs[0].logical_not(),
    "cast": lambda xs, a: xs[0].cast(a["dtype"]),
    "bitcast": lambda xs, a: xs[0].bitcast(a["dtype"]),
    "sum": _reduce("sum"),
    "max": _reduce("max"),
    "min": _reduce("min"),
    "mean": _reduce("mean"),
    "prod": _reduce("prod"),
    "var": _reduce("var", "correction"),
    "std": _reduce("std", "correction"),
    "logsumexp": _reduce("logsumexp"),
    "argmax": lambda xs, a: xs[0].argmax(axis=a.get("axis"), keepdim=a.get("keepdim", False)),
    "argmin": lambda xs, a: xs[0].argmin(axis=a.get("axis"), keepdim=a.get("keepdim", False)),
    "cumsum": lambda xs, a: xs[0].cumsum(a["axis"]),
    "sort": lambda xs, a: xs[0].sort(a["axis"], descending=a.get("descending", False)).values,
    "topk": lambda xs, a: xs[0].topk(a["k"], a["axis"], largest=a.get("largest", True)).values,
    "cummax": lambda xs, a: xs[0].cummax(a["axis"]).values,
    "cummin": lambda xs, a: xs[0].cummin(a["axis"]).values,
    "cumprod": lambda xs, a: xs[0].cumprod(a["axis"]),
    "logcumsumexp": lambda xs, a: xs[0].logcumsumexp(a["axis"]),
    "reshape": lambda xs, a: xs[0].reshape(tuple(a["shape"])),
    "permute": lambda xs, a: xs[0].permute(tuple(a["order"])),
    "transpose": lambda xs, a: xs[0].transpose(a["dim0"], a["dim1"]),
    "expand": lambda xs, a: xs[0].expand(tuple(a["shape"])),
    "pad": lambda xs, a: xs[0].pad(tuple(tuple(p) for p in a["padding"]), value=a.get("value", 0)),
    "shrink": lambda xs, a: xs[0].shrink(tuple(tuple(p) for p in a["arg"])),
    "flip": lambda xs, a: xs[0].flip(_tuple(a["axis"])),
    "squeeze": lambda xs, a: xs[0].squeeze(a.get("dim")),
    "unsqueeze": lambda xs, a: xs[0].unsqueeze(a["dim"]),
    "flatten": lambda xs, a: xs[0].flatten(a.get("start", 0), a.get("end", -1)),
    "repeat": lambda xs, a: xs[0].repeat(tuple(a["repeats"])),
    "unflatten": lambda xs, a: xs[0].unflatten(a["dim"], tuple(a["sizes"])),
    "split": lambda xs, a: xs[0].split(a["sizes"], a["dim"])[a["piece"]],
    "chunk": lambda xs, a: xs[0].chunk(a["chunks"], a["dim"])[a["piece"]],
    "cat": lambda xs, a: xs[0].cat(*xs[1:], dim=a["dim"]),
    "einsum": lambda xs, a: Tensor.einsum(a["equation"], *xs),
    "rearrange": lambda xs, a: xs[0].rearrange(a["formula"], **a["sizes"]),
    "qr": lambda xs, a: dict(zip(("q", "r"), xs[0].qr()))[a["factor"]],
    "svd": lambda xs, a: dict(zip(("u", "s", "vh"), xs[0].svd(full_matrices=a["full"], sweeps=a["sweeps"])))[a["factor"]],
    "stack": lambda xs, a: Tensor.stack(*xs, dim=a["dim"]),
    "index": lambda xs, a: xs[0][tuple(_index_entry(e, xs) for e in a["index"])],
    "setitem": _setitem,
    "matmul": lambda xs, a: xs[0].matmul(xs[1]),
    "softmax": lambda xs, a: xs[0].softmax(a["axis"]),
    "logSoftmax": lambda xs, a: xs[0].log_softmax(a["axis"]),
    "layernorm": lambda xs, a: xs[0].layernorm(_tuple(a["axis"]), a["eps"], weight=_at(xs, 1), bias=_at(xs, 2)),
    "rmsNorm": lambda xs, a: xs[0].rms_norm(_tuple(a["axis"]), a["eps"], weight=_at(xs, 1)),
    "groupNorm": lambda xs, a: xs[0].group_norm(a["groups"], *xs[1:3], eps=a["eps"]),
    "batchNorm": lambda xs, a: xs[0].batch_norm(*xs[1:5], training=a["training"], eps=a["eps"]),
    "batchnorm": lambda xs, a: xs[0].batchnorm(_at(xs, a["weight"]), _at(xs, a["bias"]), xs[1], xs[2], _tuple(a["axis"])),
    "crossEntropy": lambda xs, a: xs[0].cross_entropy(xs[1], reduction=a.get("reduction", "mean"),
                                                      label_smoothing=a.get("labelSmoothing", 0.0)),
    "sparseCategoricalCrossentropy": lambda xs, a: xs[0].sparse_categorical_crossentropy(
        xs[1], ignore_index=a.get("ignoreIndex", -1), label_smoothing=a.get("labelSmoothing", 0.0),
        reduction=a.get("reduction", "mean")),
    "binaryCrossentropy": lambda xs, a: xs[0].binary_crossentropy(xs[1], reduction=a.get("reduction", "mean")),
    "binaryCrossentropyLogits": lambda xs, a: xs[0].binary_crossentropy_logits(
        xs[1], reduction=a.get("reduction", "mean"), pos_weight=xs[2] if len(xs) > 2 else None),
    "linear": lambda xs, a: xs[0].linear(xs[1], xs[2] if len(xs) > 2 else None),
    "oneHot": lambda xs, a: xs[0].one_hot(a["n"]),
    "tril": lambda xs, a: xs[0].tril(a.get("diagonal", 0)),
    "triu": lambda xs, a: xs[0].triu(a.get("diagonal", 0)),
    "gather": lambda xs, a: xs[0].gather(a["dim"], xs[1]),
    "scatter": lambda xs, a: xs[0].scatter(a["dim"], xs[1], xs[2] if len(xs) > 2 else a["value"]),
    "scatterReduce": lambda xs, a: xs[0].scatter_reduce(a["dim"], xs[1], xs[2], a["reduce"], include_self=a["includeSelf"]),
    "nllLoss": lambda xs, a: xs[0].nll_loss(xs[1], xs[2] if len(xs) > 2 else None, ignore_index=a.get("ignoreIndex"),
                                            reduction=a.get("reduction", "mean")),
    "interpolate": lambda xs, a: xs[0].interpolate(a["size"], mode=a.get("mode", "linear"),
                                                   align_corners=a.get("alignCorners", False)),
    "unfold": lambda xs, a: xs[0].unfold(a["dim"], a["size"], a["step"]),
    "nonzero": lambda xs, a: xs[0].nonzero(),
    "maskedSelect": lambda xs, a: xs[0].masked_select(xs[1]),
    "multinomial": _seeded(lambda xs, a: xs[0].multinomial(a["n"], replacement=a.get("replacement", False))),
    "randperm": _seeded(lambda xs, a: Tensor.randperm(a["n"])),
    "normal": _seeded(lambda xs, a: Tensor.normal(*a["shape"], mean=a["mean"], std=a["std"])),
    "maxUnpool2d": lambda xs, a: xs[0].max_unpool2d(xs[1], _tuple(a.get("kernel", 2)), _tuple(a.get("stride")),
                                                    _tuple(a.get("padding", 0)), output_size=a.get("outputSize")),
    "conv2d": lambda xs, a: xs[0].conv2d(xs[1], xs[2] if len(xs) > 2 else None, groups=a.get("groups", 1),
                                         stride=_tuple(a.get("stride", 1)), dilation=_tuple(a.get("dilation", 1)),
                                         padding=_tuple(a.get("padding", 0))),
    "convTranspose2d": lambda xs, a: xs[0].conv_transpose2d(
        xs[1], xs[2] if len(xs) > 2 else None, groups=a.get("groups", 1), stride=_tuple(a.get("stride", 1)), dilation=_tuple(a.get("dilation", 1)),
        padding=_tuple(a.get("padding", 0)), output_padding=_tuple(a.get("outputPadding", 0))),
    "maxPool2d": lambda xs, a: xs[0].max_pool2d(_tuple(a.get("kernel", 2)), _tuple(a.get("stride")),
                                                _tuple(a.get("dilation", 1)), _tuple(a.get("padding", 0)),
                                                ceil_mode=a.get("ceilMode", False)),
    "maxPool2dIndices": lambda xs, a: xs[0].max_pool2d(_tuple(a.get("kernel", 2)), _tuple(a.get("stride")),
                                                       _tuple(a.get("dilation", 1)), _tuple(a.get("padding", 0)),
                                                       ceil_mode=a.get("ceilMode", False), return_indices=True).indices,
    "avgPool2d": lambda xs, a: xs[0].avg_pool2d(_tuple(a.get("kernel", 2)), _tuple(a.get("stride")),
                                                _tuple(a.get("dilation", 1)), _tuple(a.get("padding", 0)),
                                                ceil_mode=a.get("ceilMode", False),
                                                count_include_pad=a.get("countIncludePad", True)),
    "scaledDotProductAttention": _attention,
    "newtonSchulz": lambda xs, a: xs[0].newton_schulz(a["steps"], a["params"], a.get("eps", 1e-7)),
    "grad": _grad,
    "to": _to,
}


def build(case: dict, xs) -> Tensor:
  """The case's op on its inputs, then each `then` step on the previous result."""
  t = BUILD[case["op"]](xs, case["args"])
  for step in case.get("then", []):
    t = BUILD[step["op"]]([t], step["args"])
  return t


def make_input(spec: dict) -> Tensor:
  vals = corpus.input_values(spec)
  shape = tuple(spec["shape"])
  dt = dtypes.from_name(spec["dtype"])
  if dt == dtypes.bfloat16:  # numpy has no bfloat16: float32 values, exact in bfloat16, rounded by the client
    return Tensor(np.array(vals, dtype=np.float32).reshape(shape), dtype=dt)
  return Tensor(np.array(vals, dtype=dt.np).reshape(shape))


def wire_ops_in(t: Tensor) -> set:
  """The ops of the nodes the client will send for t (walked before realizing drops the sources)."""
  seen, stack, ops = set(), [t._node], set()
  while stack:
    n = stack.pop()
    if n.id in seen:
      continue
    seen.add(n.id)
    ops.add(_graph.OP_NAMES[n.op])
    stack.extend(n.src)
  return ops


def public_bytes(t: Tensor) -> bytes:
  """t's value through the public API (numpy()) in the wire layout: little-endian, bool one byte,
  bfloat16 as its 16 bits (numpy() widens it to float32 exactly)."""
  arr = t.numpy()
  if t.dtype == dtypes.bfloat16:
    return (np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
  return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()


@pytest.fixture(scope="session")
def results():
  out: dict = {}
  yield out
  path = corpus.write_results("python", out)
  print(f"\nconformance: {sum(r['status'] == 'ok' for r in out.values())} of {len(CASES)} cases ok; results in {path}")


# ---- checks that need no daemon ------------------------------------------------------------------

def test_generator_vectors():
  """The README's test vectors: a client whose generator disagrees builds different inputs."""
  g = corpus.splitmix64(0)
  assert [next(g) for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
  assert corpus.input_values({"dtype": "int8", "shape": [6], "seed": 5, "bits": True}) == [90, -8, 71, 69, -59, 68]
  assert corpus.input_values({"dtype": "float32", "shape": [2, 3], "seed": 1, "lo": -16, "hi": 16, "div": 4}) == \
      [1.0, 0.75, -4.0, 3.25, 0.5, 1.75]


def test_cases_file_is_what_the_generator_writes():
  r = subprocess.run([sys.executable, str(HERE / "gen_cases.py"), "--check"], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr


def test_corpus_covers_every_wire_op():
  """Every value of polygrad.v1.Op has a case that means to send it (and the per-case check below
  verifies that the built graph does contain it)."""
  covered = {w for c in CASES for w in c["wire"]}
  missing = [op for op in corpus.wire_ops() if op not in covered]
  assert not missing, f"wire ops without a conformance case: {missing}"
  unknown = covered - set(corpus.wire_ops())
  assert not unknown, f"cases name ops the proto does not have: {sorted(unknown)}"


def test_corpus_covers_every_dtype_and_has_enough_cases():
  assert len(CASES) >= 150
  used = {i["dtype"] for c in CASES for i in c["inputs"]} | {c["args"].get("dtype") for c in CASES} - {None}
  assert set(corpus.ITEMSIZE) <= used, f"dtypes without a case: {set(corpus.ITEMSIZE) - used}"
  ids = [c["id"] for c in CASES]
  assert len(ids) == len(set(ids)), "case ids must be unique"


def test_every_corpus_op_has_a_python_builder():
  ops = {c["op"] for c in CASES} | {s["op"] for c in CASES for s in c.get("then", [])}
  assert not ops - set(BUILD), "ops without a builder here"


# ---- the cases -----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case, results):
  cid = case["id"]
  need = case.get("requires")
  if need:
    info = Device.find(need)
    if info is None or not info.available:
      reason = f"the daemon has no available {need} device" + (f" ({info.detail})" if info and info.detail else "")
      results[cid] = {"status": "skipped", "reason": reason}
      pytest.skip(reason)
  results[cid] = {"status": "error", "error": "did not finish"}
  try:
    xs = [make_input(s) for s in case["inputs"]]
    t = build(case, xs)
    sent = wire_ops_in(t)
    t.realize()
    Tensor.synchronize()  # the handle comes with the realize's answer (asynchronous dispatch)
    # The daemon's own account of the buffer: Download answers with its dtype and shape. The
    # handle (like the graph walk above) is the one thing taken from inside the Tensor: the public
    # API reads values, not the daemon's metadata.
    wdt, wshape, wdata = get_connection().download(t._node.handle)
    data = public_bytes(t)
  except Exception as e:
    results[cid] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
    raise
  daemon_dtype = dtypes.from_wire(wdt).name
  results[cid] = corpus.result_entry(t.dtype.name, t.shape, daemon_dtype, wshape, data)
  missing = set(case["wire"]) - sent
  assert not missing, f"the graph does not contain {sorted(missing)} (it has {sorted(sent)})"
  assert (t.dtype.name, tuple(t.shape)) == (daemon_dtype, tuple(wshape)), "local shape/dtype differ from the daemon's"
  assert data == wdata, (f"numpy() bytes differ from the downloaded buffer "
                         f"({hashlib.sha256(data).hexdigest()} vs {hashlib.sha256(wdata).hexdigest()})")
