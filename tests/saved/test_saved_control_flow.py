"""Saved functions with control flow: region ops round-trip through the saved IR text and
run after loading as before saving; a function holding a py_func cannot be saved, and the
error names the op's line."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def test_loops_and_branches_round_trip(tmp_path):
    @sf.function(input_signature=[sf.TensorSpec([None]), sf.TensorSpec([], sf.int32)])
    def f(x, n):
        def body(i, x):
            return i + 1, sf.cond(sf.reduce_sum(x) > 0, lambda: sf.tanh(x), lambda: -x)
        return sf.while_loop(lambda i, x: i < n, body, (0, x))[1]

    sf.saved.save(f, tmp_path)
    loaded = sf.saved.load(tmp_path)
    for values, n in (([0.5, -1.0, 2.0], 3), ([-3.0, 1.0], 4), ([1.0], 0)):
        x = sf.constant(np.array(values, np.float32))
        np.testing.assert_allclose(loaded(x, sf.constant(n)).numpy(),
                                   f(x, sf.constant(n)).numpy(), rtol=1e-6)
    assert "sf.while" in (tmp_path / "module.mlir").read_text()


def test_scalar_arguments_stay_scalars(tmp_path):
    @sf.function(input_signature=[sf.TensorSpec([], sf.int32)])
    def twice(n):
        return n * 2

    sf.saved.save(twice, tmp_path)
    assert int(sf.saved.load(tmp_path)(sf.constant(21))) == 42


def test_a_py_func_cannot_be_saved(tmp_path):
    @sf.function(input_signature=[sf.TensorSpec([3])])
    def calls_python(x):
        return sf.cond(sf.reduce_sum(x) > 0,
                       lambda: sf.numpy_function(np.sort, [x], sf.TensorSpec([3])),
                       lambda: x)

    with pytest.raises(ValueError, match=r"calls_python holds a py_func \(at .*"
                                         r"test_saved_control_flow.py:\d+"):
        sf.saved.save(calls_python, tmp_path)
