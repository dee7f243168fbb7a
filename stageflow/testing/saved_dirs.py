"""Tampered saved directories, and the campaign that loads them.

`sf.saved.load` reads files a user may have edited, copied half-way or damaged, so every
damaged directory must load and compute as the saved object did, or be refused with an
error naming the file and what in it is wrong; never crash, hang or load into wrong
results. The campaign saves a few objects once (`OBJECTS`: a module with a nested module,
float32, float64, int32 and bool variables, a function with an input signature of unknown
dims, one traced with several concrete shapes and a Python value, a keyword call; a bare
function capturing a constant; a function with `sf.while_loop` and `sf.cond`), then per
case copies one saved directory, applies one tampering drawn from `TAMPERINGS` (manifest
fields deleted, retyped, renamed or re-indexed, the manifest truncated, reformatted or
garbled; npz entries removed, renamed, retyped, reshaped, made object arrays, a truncated
or garbage npz, a zip bomb; ``module.mlir`` truncated, bytes flipped, functions renamed,
argument types changed, huge splats, calls edited into cycles (a function calling itself,
or through others back to itself) or to functions that are missing or have no body; files
removed, emptied, replaced by directories, FIFOs, symlinks to /dev/zero, made unreadable)
and, in a child process (`stageflow.testing.isolated`), loads it and calls every saved call
with valid arguments. Permission tampering bites only where the children do not run as root
(as root it is applied and counted, but a root process reads past it).

The manifest records the digest of every file, so most edits are refused by it; but
whoever edits a file can recompute the digests, and what only the loader's own checks can
refuse is tampered with twice: as edited, and with the digests recomputed afterwards
(`reseal`; the ``..., resealed`` rows). Other edits are not resealed: a changed
constant or Python value under recomputed digests is a different saved object, which only
the digest tells apart from the saved one.

Outcomes, the first that applies:

- **crash**: the child died (a signal, an abort, an exit);
- **hang**: no result within the timeout;
- **loaded and correct**: the load and every call returned, and every result and every
  variable afterwards equals the original object's (same structure, dtypes and shapes,
  values within 1e-6 relative, NaN where it has NaN);
- **wrong result**: the load and every call returned, and something differs;
- **clear error**: an exception not of a raw type (`RAW`: KeyError, AttributeError,
  IndexError, TypeError, OSError, MemoryError, ... that internals raise, or an exception
  of another library) whose message names the saved directory (its path, alone or as the
  start of a file's path) and says what is wrong (`_SAYS_WHAT`); or the documented error
  of a call that the loaded signatures refuse (a TypeError or ValueError raised by the
  call, starting with the function's name: the file describes other signatures, e.g. a
  Python value the graph was traced with changed);
- **unclear error**: any other exception.

The test suite runs a slice (``tests/testing/test_saved_dirs.py``); a campaign runs many,
with a seed never used before::

    python -m stageflow.testing.saved_dirs --count 500 [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import re
import shutil
import stat
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

import stageflow as sf
from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import build_function, build_op
from stageflow.ir.text import module_to_text, parse_module
from stageflow.primitives.functional import call_p
from stageflow.saved.save import digest, file_digest
from stageflow.testing.campaign import add_seed, json_parent, json_paths, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import Died, Hung, run_isolated

OUTCOMES = ["loaded and correct", "clear error", "unclear error", "wrong result", "crash",
            "hang"]
RAW = (KeyError, AttributeError, IndexError, TypeError, AssertionError, NameError,
       UnboundLocalError, RecursionError, StopIteration, ZeroDivisionError, OSError,
       MemoryError, OverflowError, UnicodeError, EOFError, zipfile.BadZipFile)
_SAYS_WHAT = re.compile(
    r"expect|must|cannot|can.t|missing|lacks|has no|unknown|not a|invalid|differ|mismatch"
    r"|not match|inconsistent|out of range|too |dtype|shape|takes|field|format|truncated"
    r"|empty"
    r"|\.mlir:\d+:\d+: \S",
    re.IGNORECASE)
FILES = ["manifest.json", "variables.npz", "module.mlir"]


# -- the saved objects ------------------------------------------------------------------------

class Inner(sf.Module):
    """A nested module whose staged method the outer one calls."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = sf.Variable(np.array([0.5, -0.25, 1.0], np.float32), name="bias")

    @sf.function
    def shift(self, x: Any) -> Any:
        return x + self.bias


class Model(sf.Module):
    """Variables of four dtypes, a signature of unknown dims, several concrete traces with
    a Python value, state updates and a dict result."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.w = sf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
        self.count = sf.Variable(np.int32(0), trainable=False, name="count")
        self.flag = sf.Variable(np.bool_(True), trainable=False, name="flag")
        self.scale = sf.Variable(np.float64(1.5), name="scale")

    @sf.function(input_signature=[sf.TensorSpec((None, 3), sf.float32)])
    def call(self, x: Any) -> Any:
        return sf.matmul(self.inner.shift(x), self.w)

    @sf.function
    def step(self, x: Any, rate: float) -> Any:
        self.count.assign_add(1)
        self.scale.assign(self.scale * 0.5 + rate)
        y = sf.where(self.flag, x * rate, -x)
        return {"y": y, "count": self.count.read_value(), "tag": "step"}


def _x(*shape: int) -> np.ndarray:
    return np.linspace(-2, 2, int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _model() -> tuple[Any, list[tuple[str, tuple, dict]]]:
    calls = [("call", (_x(2, 3),), {}), ("step", (_x(2, 3), 0.5), {}),
             ("step", (_x(4, 3), 0.25), {}), ("call", (_x(5, 3),), {}),
             ("step", (_x(2, 3),), {"rate": 0.5})]
    return Model(), calls


def _bare() -> tuple[Any, list[tuple[str, tuple, dict]]]:
    offset = sf.constant(np.float32(0.75))

    @sf.function
    def bare(x: Any) -> Any:
        return sf.tanh(x) * 2.0 + offset, sf.reduce_sum(x)

    return bare, [("", (_x(5),), {}), ("", (_x(2, 2),), {})]


def _control() -> tuple[Any, list[tuple[str, tuple, dict]]]:
    @sf.function(input_signature=[sf.TensorSpec([None]), sf.TensorSpec([], sf.int32)])
    def loop(x: Any, n: Any) -> Any:
        def body(i: Any, x: Any) -> Any:
            return i + 1, sf.cond(sf.reduce_sum(x) > 0, lambda: sf.tanh(x), lambda: -x)
        return sf.while_loop(lambda i, x: i < n, body, (0, x))[1]

    return loop, [("", (_x(3), np.int32(3)), {}), ("", (_x(1), np.int32(0)), {})]


OBJECTS: dict[str, Callable[[], tuple[Any, list[tuple[str, tuple, dict]]]]] = {
    "model": _model, "bare": _bare, "control": _control}


def _plain(value: Any) -> Any:
    """A result as NumPy arrays in plain containers, to compare and to pickle."""
    if isinstance(value, sf.Tensor | sf.Variable):
        return np.asarray(value.numpy())
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _run_calls(obj: Any, calls: list[tuple[str, tuple, dict]]) -> list[Any]:
    """Every call's result, then every variable's value."""
    results = []
    for method, args, kwargs in calls:
        function = getattr(obj, method) if method else obj
        results.append(_plain(function(*args, **kwargs)))
    variables = obj.variables if hasattr(obj, "variables") else []
    return results + [np.asarray(v.numpy()) for v in variables]


def save_originals(root: str) -> None:
    """Save every object under `root`/NAME, traced by its calls first, and pickle beside it
    its calls and what the original object gives for them from the saved state on."""
    for name, make in OBJECTS.items():
        obj, calls = make()
        _run_calls(obj, calls)  # traces every signature the calls use
        sf.saved.save(obj, os.path.join(root, name))
        want = _run_calls(obj, calls)
        with open(os.path.join(root, f"{name}.pkl"), "wb") as file:
            pickle.dump((calls, want), file)
        # Untampered, the directory must give the original's results, or every tampered
        # copy of it would be judged against calls that cannot succeed.
        outcome, detail = judge(os.path.join(root, name), calls, want)
        if outcome != "loaded and correct":
            raise RuntimeError(f"the saved {name} does not load as saved: {outcome}: {detail}")


# -- the tamperings ---------------------------------------------------------------------------

RETYPED: list[Any] = [0, 1, -1, -2**31, 2**63, 10**30, 1e308, 0.5, True, False, None, "",
                      "x", "float32", [], [0], [None], {}, {"a": 1}, {"tensor": 1}]


def _manifest(directory: str) -> tuple[str, Any]:
    path = os.path.join(directory, "manifest.json")
    with open(path, encoding="utf-8") as file:
        return path, json.load(file)


def _write_json(path: str, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=1)


def _field(change: Callable[[Any, str | int, random.Random], str]
           ) -> Callable[[str, random.Random], str]:
    """A tampering of one manifest field drawn at random: `change(parent, key, rng)`."""
    def tamper(directory: str, rng: random.Random) -> str:
        path, manifest = _manifest(directory)
        where = rng.choice(json_paths(manifest))
        what = change(json_parent(manifest, where), where[-1], rng)
        _write_json(path, manifest)
        return f"{'.'.join(map(str, where))}: {what}"
    return tamper


def _delete(parent: Any, key: str | int, rng: random.Random) -> str:
    del parent[key]
    return "deleted"


def _retype(parent: Any, key: str | int, rng: random.Random) -> str:
    parent[key] = rng.choice(RETYPED)
    return f"now {parent[key]!r}"


def _rename(parent: Any, key: str | int, rng: random.Random) -> str:
    if isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), parent.pop(key))
        return "moved"
    new = rng.choice([f"{key}_", str(key).upper(), "", *[k for k in parent if k != key]])
    parent[new] = parent.pop(key)
    return f"renamed {new!r}"


def _reindex(parent: Any, key: str | int, rng: random.Random) -> str:
    old = parent[key]
    if not isinstance(old, int) or isinstance(old, bool):
        return _retype(parent, key, rng)
    parent[key] = rng.choice([old + 1, old - 1, -1, -old - 1, 2**40, 0])
    return f"{old} -> {parent[key]}"


def _manifest_truncated(directory: str, rng: random.Random) -> str:
    path = os.path.join(directory, "manifest.json")
    data = open(path, "rb").read()
    length = rng.choice([0, 1, rng.randrange(2, 16), len(data) // 2,
                         rng.randrange(len(data)), len(data) - 1])
    open(path, "wb").write(data[:length])
    return f"{length} of {len(data)} bytes"


def _manifest_reformatted(directory: str, rng: random.Random) -> str:
    path, manifest = _manifest(directory)

    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: shuffled(v) for k, v in items}
        if isinstance(value, list):
            return [shuffled(v) for v in value]
        return value

    with open(path, "w", encoding="utf-8") as file:
        json.dump(shuffled(manifest), file, indent=rng.choice([None, 0, 4, "\t"]))
        file.write("\n" * rng.randrange(3))
    return "keys shuffled, whitespace changed"


def _garbled(name: str) -> Callable[[str, random.Random], str]:
    def tamper(directory: str, rng: random.Random) -> str:
        path = os.path.join(directory, name)
        data = bytearray(open(path, "rb").read())
        kind = rng.choice(["flip", "garbage", "truncate"])
        if kind == "flip" and data:
            at = [rng.randrange(len(data)) for _ in range(rng.randint(1, 5))]
            for i in at:
                data[i] ^= 1 << rng.randrange(8)
            open(path, "wb").write(bytes(data))
            return f"bits flipped at {at}"
        if kind == "garbage":
            open(path, "wb").write(rng.randbytes(rng.choice([1, 64, 4096])))
            return "garbage"
        length = rng.randrange(len(data) + 1)
        open(path, "wb").write(bytes(data[:length]))
        return f"truncated to {length} of {len(data)} bytes"
    return tamper


def _arrays(directory: str) -> tuple[str, dict[str, np.ndarray]]:
    path = os.path.join(directory, "variables.npz")
    with np.load(path) as arrays:
        return path, dict(arrays)


def _npz_entry(change: Callable[[dict, str, random.Random], str]
               ) -> Callable[[str, random.Random], str]:
    def tamper(directory: str, rng: random.Random) -> str:
        path, arrays = _arrays(directory)
        if not arrays:
            return "no entry to change"
        key = rng.choice(sorted(arrays))
        what = change(arrays, key, rng)
        _savez(path, arrays)
        return f"{key}: {what}"
    return tamper


def _savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as file:
        np.savez(file, **arrays)


def _npz_removed(arrays: dict, key: str, rng: random.Random) -> str:
    del arrays[key]
    return "removed"


def _npz_renamed(arrays: dict, key: str, rng: random.Random) -> str:
    new = rng.choice([f"{key}0", key.upper(), "v99", "c0", "v0", "x"])
    arrays[new] = arrays.pop(key)
    return f"renamed {new}"


def _npz_retyped(arrays: dict, key: str, rng: random.Random) -> str:
    dtype = rng.choice([np.float16, np.float32, np.float64, np.int8, np.int32, np.int64,
                        np.uint8, np.bool_, np.complex64, "U3", "S2", "V4"])
    arrays[key] = arrays[key].astype(dtype)
    return f"as {arrays[key].dtype}"


def _npz_reshaped(arrays: dict, key: str, rng: random.Random) -> str:
    value = arrays[key]
    shape = rng.choice([(), (1,), (0,), (value.size,), (1, *value.shape), (*value.shape, 2),
                        (value.size + 1,)])
    arrays[key] = np.resize(value, shape)
    return f"shape {shape}"


def _npz_object(arrays: dict, key: str, rng: random.Random) -> str:
    arrays[key] = np.array([arrays[key], None], dtype=object)
    return "object array"


def _npz_extra(arrays: dict, key: str, rng: random.Random) -> str:
    arrays["extra"] = np.zeros(3)
    return "an extra entry"


def _npz_bomb(directory: str, rng: random.Random) -> str:
    """An entry a few kilobytes long that inflates to 100 MB, or whose header claims far
    more elements than the file holds."""
    path, arrays = _arrays(directory)
    key = rng.choice(sorted(arrays)) if arrays else "v0"
    if rng.random() < 0.5:
        with open(path, "wb") as file:
            np.savez_compressed(file, **{**arrays, key: np.zeros(25_000_000, np.float32)})
        return f"{key}: 100 MB of zeros compressed"
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", "w") as member:
                if name == key:
                    header = {"descr": "<f4", "fortran_order": False,
                              "shape": (rng.choice([2**31, 2**40, 2**61]),)}
                    np.lib.format.write_array_header_1_0(member, header)
                    member.write(b"\0" * 64)
                else:
                    np.lib.format.write_array(member, value)
    return f"{key}: header claims a huge shape"


def _mlir(directory: str) -> tuple[str, str]:
    path = os.path.join(directory, "module.mlir")
    with open(path, encoding="utf-8") as file:
        return path, file.read()


def _mlir_renamed(directory: str, rng: random.Random) -> str:
    path, text = _mlir(directory)
    names = sorted(set(re.findall(r"@([A-Za-z_][\w$.]*)", text)))
    old = rng.choice(names)
    new = rng.choice([f"{old}_x", "main", *names])
    count = rng.choice([1, 0])  # one occurrence, or all of them
    text = re.sub(rf"@{re.escape(old)}\b", f"@{new}", text, count=count)
    open(path, "w", encoding="utf-8").write(text)
    return f"@{old} -> @{new} ({'once' if count else 'everywhere'})"


def _mlir_signature(directory: str, rng: random.Random) -> str:
    """One argument type of one function's signature changed (the body left as it is)."""
    path, text = _mlir(directory)
    heads = list(re.finditer(r"func\.func [^\n]*", text))
    head = rng.choice(heads)
    types = list(re.finditer(r"tensor<([^>]*)>", head.group()))
    if not types:
        return "no tensor argument"
    chosen = rng.choice(types)
    old = chosen.group(1)
    new = rng.choice([old.replace("f32", "f64"), old.replace("i32", "i64"),
                      old.replace("?", "3"), old.replace("3", "4"), "?x" + old,
                      old.split("x")[-1]])
    line = head.group()[:chosen.start(1)] + new + head.group()[chosen.end(1):]
    text = text[:head.start()] + line + text[head.end():]
    open(path, "w", encoding="utf-8").write(text)
    return f"tensor<{old}> -> tensor<{new}>"


def _mlir_splat(directory: str, rng: random.Random) -> str:
    """A constant made a huge splat: its type and every use disagree, or too big to build."""
    path, text = _mlir(directory)
    literals = list(re.finditer(r"dense<([^>]*)> : tensor<([^>]*)>", text))
    if not literals:
        return "no dense literal"
    chosen = rng.choice(literals)
    size = rng.choice(["4000000", "16777216", "16777217", "100000000000", "?"])
    element = chosen.group(2).split("x")[-1]
    text = (text[:chosen.start()] + f"dense<{chosen.group(1).split(',')[0]}> : "
            f"tensor<{size}x{element}>" + text[chosen.end():])
    open(path, "w", encoding="utf-8").write(text)
    return f"tensor<{size}x{element}> splat"


def _mlir_comments(directory: str, rng: random.Random) -> str:
    path, text = _mlir(directory)
    lines = text.split("\n")
    at = rng.randrange(len(lines) + 1)
    lines.insert(at, rng.choice(["", "// a comment", "   "]))
    open(path, "w", encoding="utf-8").write("\n".join(lines))
    return f"blank or comment line at {at}"


def _call(style: str, callee: str, arguments: list[SSAValue], function: FuncOp) -> Operation:
    """A call of @`callee` returning what `function` returns: an ``sf.call`` (`style`
    ``sf``: what `sf.saved.save` writes) or a ``func.call`` (``func``)."""
    results = list(function.function_type.outputs.data)
    if style == "func":
        return CallOp(callee, arguments, results)
    return build_op(call_p, arguments, {"callee": SymbolRef(callee)}, results)


def _returns(function: FuncOp, call: Operation) -> None:
    """`function` made to return what `call`, inserted before its return, returns."""
    block = function.body.blocks[0]
    old = block.last_op
    assert isinstance(old, ReturnOp)
    block.insert_op_before(call, old)
    block.insert_op_before(ReturnOp(*call.results), old)
    block.erase_op(old)


def _mlir_calls(edit: Callable[[ModuleOp, FuncOp, str, random.Random], str]
                ) -> Callable[[str, random.Random], str]:
    """A tampering of the calls of one function (of one nested module, drawn at random)
    of ``module.mlir``, through the parsed IR, printed back as `sf.saved.save` prints it:
    `edit(module, function, style, rng)`, `style` the dialect of the call ops it adds."""
    def tamper(directory: str, rng: random.Random) -> str:
        path, text = _mlir(directory)
        outer = parse_module(text, path)
        module = rng.choice([op for op in outer.ops if isinstance(op, ModuleOp)])
        function = rng.choice([op for op in module.ops if isinstance(op, FuncOp)])
        style = rng.choice(["sf", "func"])
        what = edit(module, function, style, rng)
        with open(path, "w", encoding="utf-8") as file:
            file.write(module_to_text(outer, debuginfo=True))
        return f"module @{module.sym_name.data}: {what} ({style}.call)"
    return tamper


def _call_cycle(module: ModuleOp, function: FuncOp, style: str, rng: random.Random) -> str:
    """`function` made to return a call of itself, or of the first of new functions of its
    signature each calling the next, the last calling `function` back."""
    name = function.sym_name.data
    chain = [name, *(f"{name}_cycle{i}" for i in range(1, rng.choice([1, 2, 3])))]
    callees = [*chain[1:], name]  # each function of the chain calls the next
    for caller, callee in zip(chain[1:], callees[1:], strict=True):
        module.body.blocks[0].add_op(_forwarding(caller, callee, style, function))
    block = function.body.blocks[0]
    _returns(function, _call(style, callees[0], list(block.args), function))
    return " -> ".join(f"@{f}" for f in [*chain, name])


def _forwarding(name: str, callee: str, style: str, like: FuncOp) -> FuncOp:
    """``func.func @name``, of the signature of `like`, returning what @`callee` returns
    for its arguments."""
    def body(args: Any) -> tuple[list[Operation], list[SSAValue]]:
        call = _call(style, callee, list(args), like)
        return [call], list(call.results)
    return build_function(name, list(like.function_type.inputs.data), body)


def _call_missing(module: ModuleOp, function: FuncOp, style: str, rng: random.Random) -> str:
    """`function` made to return a call of a function its module does not hold, or holds
    as a declaration without a body."""
    callee = f"{function.sym_name.data}_missing"
    kind = rng.choice(["absent", "declared without a body"])
    if kind != "absent":
        signature = function.function_type
        module.body.blocks[0].add_op(FuncOp.external(callee, list(signature.inputs.data),
                                                     list(signature.outputs.data)))
    block = function.body.blocks[0]
    _returns(function, _call(style, callee, list(block.args), function))
    return f"@{function.sym_name.data} calls @{callee}, {kind}"


def reseal(directory: str) -> str:
    """Recompute the manifest's digests (of the other files, then its own) over the files
    as they are now, as whoever edits a saved directory can: only the loader's own checks
    can then refuse the edit. A manifest that is no JSON object is left as it is."""
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path, encoding="utf-8") as file:
            manifest = json.load(file)
    except (OSError, ValueError):
        return "manifest unreadable, not resealed"
    if not isinstance(manifest, dict):
        return "manifest not an object, not resealed"
    files = manifest.get("files")
    for name in files if isinstance(files, dict) else ():
        target = os.path.join(directory, name)
        if os.path.isfile(target):  # never a FIFO or a device
            with open(target, "rb") as file:
                files[name] = file_digest(file.read())
    if "digest" in manifest:
        manifest["digest"] = digest(manifest)
    _write_json(path, manifest)
    return "digests recomputed"


def _resealed(tamper: Callable[[str, random.Random], str]) -> Callable[[str, random.Random], str]:
    def resealed(directory: str, rng: random.Random) -> str:
        return f"{tamper(directory, rng)}; {reseal(directory)}"
    return resealed


def _file(change: Callable[[str, random.Random], str]) -> Callable[[str, random.Random], str]:
    def tamper(directory: str, rng: random.Random) -> str:
        name = rng.choice(FILES)
        return f"{name}: {change(os.path.join(directory, name), rng)}"
    return tamper


def _removed(path: str, rng: random.Random) -> str:
    os.remove(path)
    return "removed"


def _emptied(path: str, rng: random.Random) -> str:
    open(path, "wb").close()
    return "emptied"


def _directory(path: str, rng: random.Random) -> str:
    os.remove(path)
    os.mkdir(path)
    return "a directory"


def _fifo(path: str, rng: random.Random) -> str:
    os.remove(path)
    os.mkfifo(path)
    return "a FIFO"


def _dev_zero(path: str, rng: random.Random) -> str:
    os.remove(path)
    os.symlink("/dev/zero", path)
    return "a symlink to /dev/zero"


def _unreadable(path: str, rng: random.Random) -> str:
    os.chmod(path, 0)
    return "mode 000"


TAMPERINGS: dict[str, Callable[[str, random.Random], str]] = {
    "manifest field deleted": _field(_delete),
    "manifest field retyped": _field(_retype),
    "manifest field renamed": _field(_rename),
    "manifest index changed": _field(_reindex),
    "manifest truncated": _manifest_truncated,
    "manifest reformatted": _manifest_reformatted,
    "manifest garbled": _garbled("manifest.json"),
    "npz entry removed": _npz_entry(_npz_removed),
    "npz entry renamed": _npz_entry(_npz_renamed),
    "npz entry retyped": _npz_entry(_npz_retyped),
    "npz entry reshaped": _npz_entry(_npz_reshaped),
    "npz object array": _npz_entry(_npz_object),
    "npz extra entry": _npz_entry(_npz_extra),
    "npz garbled": _garbled("variables.npz"),
    "npz bomb": _npz_bomb,
    "mlir garbled": _garbled("module.mlir"),
    "mlir function renamed": _mlir_renamed,
    "mlir signature changed": _mlir_signature,
    "mlir huge splat": _mlir_splat,
    "mlir comments": _mlir_comments,
    "mlir call cycle": _mlir_calls(_call_cycle),
    "mlir call cycle, resealed": _resealed(_mlir_calls(_call_cycle)),
    "mlir call missing": _mlir_calls(_call_missing),
    "mlir call missing, resealed": _resealed(_mlir_calls(_call_missing)),
    "file removed": _file(_removed),
    "file emptied": _file(_emptied),
    "file a directory": _file(_directory),
    "file a FIFO": _file(_fifo),
    "file to /dev/zero": _file(_dev_zero),
    "file unreadable": _file(_unreadable),
}


# -- one case ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One tampered copy of one saved object; drawn from (campaign seed, index) alone."""

    obj: str
    tampering: str
    seed: int

    @staticmethod
    def draw(campaign_seed: int, index: int) -> Case:
        rng = random.Random(f"{campaign_seed}:{index}")
        return Case(rng.choice(sorted(OBJECTS)), rng.choice(sorted(TAMPERINGS)),
                    rng.getrandbits(32))

    def prepare(self, root: str, directory: str) -> str:
        """Copy the saved object to `directory` and tamper with it; say how."""
        shutil.copytree(os.path.join(root, self.obj), directory)
        return TAMPERINGS[self.tampering](directory, random.Random(self.seed))

    def __str__(self) -> str:
        return f"{self.obj}, {self.tampering} (seed {self.seed})"


def unclear_because(error: BaseException, directory: str, function: str | None) -> str | None:
    """Why `error` is unclear, or None if it is clear (the rules in the module docstring).
    `function` is the name of the loaded function whose call raised it, None for the load."""
    message = str(error)
    if function is not None and isinstance(error, TypeError | ValueError) \
            and message.startswith(f"{function}:"):
        return None
    if isinstance(error, RAW) or not type(error).__module__.startswith(("builtins", "stageflow")):
        return f"raw {type(error).__module__}.{type(error).__name__}"
    if os.path.normpath(directory) not in message:
        return "does not name the saved directory"
    if not _SAYS_WHAT.search(message.replace(directory, "")):
        return "does not say what is wrong"
    return None


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return (isinstance(got, np.ndarray) and got.dtype == want.dtype
                and got.shape == want.shape
                and bool(np.allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)))
    if isinstance(want, list | tuple):
        return (type(got) is type(want) and len(got) == len(want)
                and all(_same(g, w) for g, w in zip(got, want, strict=True)))
    if isinstance(want, dict):
        return (isinstance(got, dict) and sorted(got) == sorted(want)
                and all(_same(got[k], want[k]) for k in want))
    return type(got) is type(want) and got == want


def judge(directory: str, calls: list[tuple[str, tuple, dict]], want: list[Any]
          ) -> tuple[str, str]:
    """(outcome, detail) of loading `directory` and making `calls`, in this process."""
    function = None
    try:
        loaded = sf.saved.load(directory)
        results = []
        for method, args, kwargs in calls:
            callee = getattr(loaded, method) if method else loaded
            function = method or getattr(callee, "name", None)
            results.append(_plain(callee(*args, **kwargs)))
        function = None
        variables = loaded.variables if hasattr(loaded, "variables") else []
        got = results + [np.asarray(v.numpy()) for v in variables]
    except Exception as error:  # noqa: BLE001 - judged here
        why = unclear_because(error, directory, function)
        detail = f"{type(error).__name__}: {' '.join(str(error).split())[:400]}"
        return ("unclear error", f"{why}: {detail}") if why else ("clear error", detail)
    if _same(got, want):
        return "loaded and correct", ""
    return "wrong result", f"got {got!r}, want {want!r}"[:600]


def _run_item(item: tuple[str, str]) -> tuple[str, str]:
    """A child's work on one case: (tampered directory, the saved object's pickle)."""
    directory, expected = item
    with open(expected, "rb") as file:
        calls, want = pickle.load(file)  # noqa: S301 - written by this campaign
    return judge(directory, calls, want)


# -- the campaign -----------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per tampering, and the first few cases of each bad outcome."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, how: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(case.tampering, Counter())[outcome] += 1
        if outcome not in ("loaded and correct", "clear error") and len(self.examples) < 30:
            self.examples.append(f"{outcome}: {case}: {how}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 100, timeout: float = 30.0,
                 worker: Callable[[tuple[str, str]], tuple[str, str]] = _run_item,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` cases drawn from `campaign_seed`, each loaded in a child process, tallied."""
    cases = [Case.draw(campaign_seed, i) for i in range(count)]
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="saved-dirs-") as root:
        save_originals(root)
        items, hows = [], []
        for index, case in enumerate(cases):
            directory = os.path.join(root, f"case{index}")
            hows.append(case.prepare(root, directory))
            items.append((directory, os.path.join(root, f"{case.obj}.pkl")))
        results = run_isolated(worker, items, batch=batch, timeout=timeout, progress=progress)
        for case, how, result in zip(cases, hows, results, strict=True):
            if isinstance(result, Died):
                result = ("crash", f"{result.how}{'' if result.alone else ' (after others)'}")
            elif isinstance(result, Hung):
                result = ("hang", f"no result in {result.seconds:.0f} s")
            tally.add(case, how, *result)
        for directory, _ in items:  # unreadable files and FIFOs removed with the rest
            for folder, _, names in os.walk(directory):
                for name in names:
                    path = os.path.join(folder, name)
                    if not os.path.islink(path):
                        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return tally


def print_table(tally: Tally) -> None:
    short = {"loaded and correct": "correct", "clear error": "clear",
             "unclear error": "unclear", "wrong result": "wrong"}
    print_counts("tampering", TAMPERINGS, tally.counts, OUTCOMES, short, 28)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.saved_dirs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500)
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()

    progress = report_progress("directories")

    tally = run_campaign(args.count, campaign_seed, progress=progress)
    print(f"tampered saved directories, seed {campaign_seed}, {args.count} loads, "
          f"{time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    bad = sum(tally.total(o) for o in ("unclear error", "wrong result", "crash", "hang"))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
