"""Tampered saved directories are refused with a ValueError naming the file and the field
(found by the `stageflow.testing.saved_dirs` campaign; each once a raw internal error, a
hang or a gigabyte allocation)."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest

import stageflow as sf


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
