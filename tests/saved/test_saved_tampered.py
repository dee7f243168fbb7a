"""Tampered saved directories are refused with a ValueError naming the file and the field
(found by the `stageflow.testing.saved_dirs` campaign; each once a raw internal error, a
hang or a gigabyte allocation)."""

from __future__ import annotations

import json
import os
import re
import zipfile

import numpy as np
import pytest

import stageflow as sf
from stageflow.saved.save import digest
from stageflow.testing.saved_dirs import reseal


class _Model(sf.Module):
    def __init__(self):
        super().__init__()
        self.w = sf.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")

    @sf.function(input_signature=[sf.TensorSpec([None], sf.float32),
                                  sf.TensorSpec([], sf.int32)])
    def f(self, x, n):
        return x * self.w[:1], n * 2


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model"
    sf.saved.save(_Model(), str(path))
    return path


def _edit_manifest(path, edit):
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(functions=5), r"field functions must be a dict, got int 5"),
    (lambda m: m["functions"]["f"]["concrete"][0].update(jit="yes"),
     r"field functions.f.concrete\[0\].jit must be a bool, got str 'yes'"),
    (lambda m: m["functions"]["f"]["concrete"][0]["arguments"]["tuple"][0]["tensor"].pop(
        "dtype"), r"concrete\[0\].arguments.tuple\[0\].tensor.dtype is missing"),
    (lambda m: m["variables"][0].update(name_="w"), r"variables\[0\].name_ is not a field"),
    (lambda m: m["functions"]["f"]["parameters"][0].update(kind="KEYWORD_ONLY"),
     r"functions.f.parameters are not a Python signature"),
    (lambda m: m["functions"]["f"]["concrete"][0]["arguments"]["tuple"][0]["tensor"].update(
        dtype="float64"), r"concrete\[0\] input 0 is a tensor float64\[None\], @f in .*"
                          r"module.mlir takes"),
    (lambda m: m["functions"]["f"]["concrete"][0]["captures"][0].update(variable=3),
     r"concrete\[0\] input 2 is variable 3, the manifest lists 1"),
    (lambda m: m["functions"]["f"]["concrete"][0]["outputs"].update(
        tuple=[{"output": 1}, {"output": 0}]), r"outputs uses the results \[1, 0\]"),
])
def test_a_bad_manifest_field_is_named_by_its_path(saved, edit, message):
    _edit_manifest(saved, edit)
    with pytest.raises(ValueError, match=r"sf.saved.load: .*manifest.json: .*" + message):
        sf.saved.load(saved)


def test_an_edit_the_other_files_cannot_contradict_is_refused_by_the_digest(tmp_path):
    """Deleting a Python value among the results kept every file consistent and loaded a
    function returning another structure."""

    @sf.function(input_signature=[sf.TensorSpec([2], sf.float32)])
    def f(x):
        return {"y": x * 2.0, "tag": "step"}

    sf.saved.save(f, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps(manifest, indent=4, sort_keys=True))
    assert sf.saved.load(tmp_path)(np.ones(2, np.float32))["tag"] == "step"  # whitespace
    manifest["functions"]["f"]["concrete"][0]["outputs"]["dict"].pop(0)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest.json: field digest does not match the "
                                         r"manifest's content"):
        sf.saved.load(tmp_path)


@pytest.mark.parametrize("name", ["manifest.json", "module.mlir", "variables.npz"])
@pytest.mark.parametrize("replace, message", [
    (os.remove, "No such file"),
    (lambda p: (os.remove(p), os.mkdir(p)), "it is a directory"),
    (lambda p: (os.remove(p), os.mkfifo(p)), "it is not a regular file"),
    (lambda p: (os.remove(p), os.symlink("/dev/zero", p)), "it is not a regular file"),
])
def test_a_missing_or_special_file_is_refused_without_reading_it(saved, name, replace,
                                                                 message):
    """A FIFO once blocked the load for good, /dev/zero ran it out of memory, and a missing
    module.mlir raised a raw FileNotFoundError."""
    replace(str(saved / name))
    with pytest.raises(ValueError, match=rf"cannot read .*{name}: {message}"):
        sf.saved.load(saved)


def test_garbage_ir_names_the_file_and_line(saved):
    (saved / "module.mlir").write_text("builtin.module {\n  nonsense\n}\n")
    with pytest.raises(ValueError, match=r"sf.saved.load: .*module.mlir:\d+:\d+: "
                                         r"Operation nonsense is not registered"):
        sf.saved.load(saved)
    (saved / "module.mlir").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"module.mlir: not UTF-8"):
        sf.saved.load(saved)


def test_an_array_is_checked_against_the_ir_before_its_data_is_read(saved):
    """A header claiming 2^40 elements once asked NumPy for 4 TiB."""
    with zipfile.ZipFile(saved / "variables.npz", "w") as archive:
        with archive.open("v0.npy", "w") as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f4", "fortran_order": False, "shape": (3 << 40,)})
    with pytest.raises(ValueError, match=r"variables.npz: v0 is float32\[3298534883328\], "
                                         r"@f in .*module.mlir takes"):
        sf.saved.load(saved)
    np.savez(saved / "variables.npz", v0=np.array([object(), 1], dtype=object))
    with pytest.raises(ValueError, match=r"v0 is object\[2\], not an array of a dtype"):
        sf.saved.load(saved)


def test_a_saved_function_takes_numpy_scalars_as_the_original_does(saved):
    loaded = sf.saved.load(saved)
    x = np.array([1.0, 2.0], np.float32)
    result = loaded.f(x, np.int32(4))
    np.testing.assert_array_equal(result[0].numpy(), x)
    assert int(result[1]) == 8


@sf.function
def _double(x):
    return x * 2.0


@sf.function
def _shift(x):
    return x + 3.0


@sf.function(input_signature=[sf.TensorSpec([3], sf.float32)])
def _both(x):
    return _double(x) + _shift(x)


@pytest.fixture
def calling(tmp_path):
    """A saved function calling two others: @_both -> @_double, @_shift."""
    path = tmp_path / "calling"
    sf.saved.save(_both, str(path))
    return path


def _call(style: str, callee: str) -> str:
    """One op of @_double's body: a call of @`callee` on its argument."""
    if style == "sf.call":
        return f"sf.call %0 {{callee = @{callee}}} : (tensor<3xf32>) -> tensor<3xf32>"
    return f"func.call @{callee}(%0) : (tensor<3xf32>) -> tensor<3xf32>"


def _edit_body(path, function: str, op: str) -> None:
    """The second op of @`function` (its result: what it returns) replaced by `op`."""
    lines = (path / "module.mlir").read_text().split("\n")
    head = next(i for i, line in enumerate(lines) if f"func.func @{function}(" in line)
    assert " = sf." in lines[head + 2]
    lines[head + 2] = re.sub(r"= .*? loc\(", f"= {op} loc(", lines[head + 2])
    (path / "module.mlir").write_text("\n".join(lines))


@pytest.mark.parametrize("name, edit", [
    ("module.mlir", lambda path: (path / "module.mlir").write_text(
        (path / "module.mlir").read_text().replace("dense<3.000000e+00>",
                                                   "dense<4.000000e+00>"))),
    ("variables.npz", lambda path: np.savez(path / "variables.npz",
                                            v0=np.array([9.0, 2.0, 3.0], np.float32))),
])
def test_an_edit_of_another_file_is_refused_by_the_manifest_naming_the_file(
        saved, calling, name, edit):
    """Only the manifest was covered by its digest: a constant changed in module.mlir, or a
    variable's value in variables.npz, loaded into other results."""
    path = calling if name == "module.mlir" else saved
    edit(path)
    with pytest.raises(ValueError, match=rf"sf.saved.load: .*{re.escape(name)}: differs from "
                                         rf"the SHA-256 that field files\['{re.escape(name)}'\]"
                                         r" of .*manifest.json records: the file was edited"):
        sf.saved.load(path)


@pytest.mark.parametrize("resealed", [False, True], ids=["as edited", "digests recomputed"])
@pytest.mark.parametrize("edits, message", [
    ([("_double", _call("sf.call", "_double"))], r"@_double calls itself"),
    ([("_double", _call("sf.call", "_shift")), ("_shift", _call("sf.call", "_double"))],
     r"the calls @_double -> @_shift -> @_double form a cycle"),
    ([("_double", _call("sf.call", "_both"))],
     r"the calls @_both -> @_double -> @_both form a cycle"),
    ([("_double", _call("func.call", "_double"))],
     r"@_double holds a func.call op, which sf.saved does not write"),
])
def test_a_call_cycle_is_refused_at_load_naming_the_file_and_the_function(
        calling, edits, message, resealed):
    """A function edited to call itself, or two each other, loaded, and its first call died
    in RecursionError (a func.call in an AttributeError); the digests are no defence, as
    whoever edits the file can recompute them."""
    for function, op in edits:
        _edit_body(calling, function, op)
    if resealed:
        reseal(str(calling))
    with pytest.raises(ValueError, match=r"sf.saved.load: .*module.mlir: module @_both_0: "
                                         + message):
        sf.saved.load(calling)


def test_a_call_of_a_function_without_a_body_is_refused_naming_it(calling):
    """Once a raw IndexError on the first call."""
    text = (calling / "module.mlir").read_text()
    start = text.index("    func.func @_shift(")
    end = text.index("    } loc(unknown)\n", start) + len("    } loc(unknown)\n")
    declaration = "    func.func private @_shift(tensor<3xf32>) -> tensor<3xf32>\n"
    (calling / "module.mlir").write_text(text[:start] + declaration + text[end:])
    reseal(str(calling))
    with pytest.raises(ValueError, match=r"module.mlir: module @_both_0 declares @_shift "
                                         r"without a body"):
        sf.saved.load(calling)


def test_a_directory_of_the_first_format_loads_without_file_digests(calling):
    """``stageflow-saved-1`` recorded no digests of the other files: still read, as a saved
    directory may outlive the source that could save it again."""
    manifest = json.loads((calling / "manifest.json").read_text())
    assert manifest["format"] == "stageflow-saved-2"
    manifest["format"] = "stageflow-saved-1"
    del manifest["files"]
    manifest["digest"] = digest(manifest)
    (calling / "manifest.json").write_text(json.dumps(manifest))
    loaded = sf.saved.load(calling)
    np.testing.assert_array_equal(loaded(np.ones(3, np.float32)).numpy(), np.full(3, 6.0))
    manifest["format"] = "stageflow-saved-2"
    (calling / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest.json: field files is missing"):
        sf.saved.load(calling)
    manifest["format"] = "stageflow-saved-3"
    (calling / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"has format 'stageflow-saved-3', this stageflow "
                                         r"reads 'stageflow-saved-2' and 'stageflow-saved-1'"):
        sf.saved.load(calling)
