"""sf.onnx's creation converters (`stageflow/onnx/ops/creation.py`): constants, ranges,
windows and Det against ONNX's NumPy reference; the random draws by their law and their
freshness on every call.

(Named test_onnx_creation: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from node_check import graph_model
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(9)
FLOAT = TensorProto.FLOAT




def _outputs(model: onnx.ModelProto, *args: np.ndarray, jit: bool = True) -> tuple:
    got = sf.onnx.load(model, jit=jit)(*args)
    return tuple(np.asarray(g) for g in (got if isinstance(got, tuple) else (got,)))


def test_sparse_constant():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5, 7], np.int64)),
                                       numpy_helper.from_array(np.array([1, 4], np.int64)),
                                       [2, 3])
    model = graph_model([helper.make_node("Constant", [], ["y"], sparse_value=sparse)], {}, ["y"])
    np.testing.assert_array_equal(_outputs(model)[0], [[0, 5, 0], [0, 7, 0]])


def test_constants_ranges_eye_and_windows_fold_at_import():
    nodes = [helper.make_node("Constant", [], ["ints"], value_ints=[1, -2]),
             helper.make_node("Constant", [], ["float"], value_float=0.5),
             helper.make_node("ConstantOfShape", ["shape"], ["filled"],
                              value=numpy_helper.from_array(np.array([3], np.int32))),
             helper.make_node("Range", ["a", "b", "c"], ["ints_down"]),
             helper.make_node("Range", ["fa", "fb", "fc"], ["floats_up"]),
             helper.make_node("EyeLike", ["x"], ["eye"], k=1, dtype=TensorProto.DOUBLE),
             helper.make_node("HannWindow", ["n"], ["hann"]),
             helper.make_node("HammingWindow", ["n"], ["hamming"], periodic=0),
             helper.make_node("BlackmanWindow", ["n"], ["blackman"]),
             helper.make_node("Det", ["x"], ["det"])]
    constants = {"shape": np.array([2, 1], np.int64), "a": np.array(10, np.int32),
                 "b": np.array(1, np.int32), "c": np.array(-4, np.int32),
                 "fa": np.array(0.5, np.float32), "fb": np.array(2.0, np.float32),
                 "fc": np.array(0.4, np.float32), "n": np.array(6, np.int64)}
    outputs = [n.output[0] for n in nodes]
    model = graph_model(nodes, {"x": (FLOAT, [3, 3])}, outputs, constants)
    x = RNG.standard_normal((3, 3)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    for got, want in zip(_outputs(model, x), expected, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    traced = sf.onnx.load(model).get_concrete_function().ir("traced")
    assert "sf.iota" not in traced and "sf.cos" not in traced


@pytest.mark.parametrize("jit", [True, False])
def test_random_draws_are_fresh_on_every_call(jit):
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[4000], low=-2.0, high=3.0),
             helper.make_node("RandomNormalLike", ["x"], ["n"], mean=1.0, scale=0.5,
                              dtype=TensorProto.DOUBLE),
             helper.make_node("Bernoulli", ["p"], ["b"])]
    model = graph_model(nodes, {"x": (FLOAT, [4000]), "p": (FLOAT, [3])}, ["u", "n", "b"])
    imported = sf.onnx.load(model, jit=jit)
    x, p = np.zeros(4000, np.float32), np.array([0.0, 1.0, 1.0], np.float32)
    first = [np.asarray(v) for v in imported(x, p)]
    second = [np.asarray(v) for v in imported(x, p)]
    uniform, normal, bernoulli = first
    assert uniform.dtype == np.float32 and -2.0 <= uniform.min() and uniform.max() < 3.0
    assert abs(uniform.mean() - 0.5) < 0.15
    assert normal.dtype == np.float64 and abs(normal.mean() - 1.0) < 0.05
    assert abs(normal.std() - 0.5) < 0.05
    np.testing.assert_array_equal(bernoulli, [0.0, 1.0, 1.0])
    assert not np.array_equal(first[0], second[0]) and not np.array_equal(first[1], second[1])
