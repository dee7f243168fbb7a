"""sf.onnx's indexing converters (`stageflow/onnx/ops/indexing.py`) against ONNX's NumPy
reference, compiled and interpreted.

(Named test_onnx_indexing: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from node_check import graph_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(5)
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64




def _check(model: onnx.ModelProto, feed: dict[str, np.ndarray],
           jits: tuple[bool, ...] = (True, False)) -> None:
    expected = ReferenceEvaluator(model).run(None, feed)
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*feed.values())
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == e.dtype
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)


def _data(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_gathers_with_negative_indices():
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
             helper.make_node("GatherElements", ["x", "e"], ["ge"], axis=2),
             helper.make_node("GatherND", ["x", "n"], ["gn"], batch_dims=1)]
    constants = {"i": np.array([[-1, 0], [2, 1]], np.int64),
                 "e": np.array([[[0, -1], [3, 1], [2, 2]], [[1, 1], [0, -4], [3, 0]]],
                               np.int64),
                 "n": np.array([[[2, -1]], [[-3, 0]]], np.int64)}
    model = graph_model(nodes, {"x": (FLOAT, ["N", 3, 4])}, ["g", "ge", "gn"], constants)
    _check(model, {"x": _data(2, 3, 4)})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_reductions_with_repeated_indices(reduction):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1,
                            reduction=reduction)
    indices = np.array([[1, -1, 1], [0, 0, 2]], np.int64)
    if reduction == "none":
        indices = np.array([[1, -1, 0], [0, 3, 2]], np.int64)
    model = graph_model([node], {"x": (FLOAT, [2, 4]), "u": (FLOAT, [2, 3])}, ["y"],
                   {"i": indices})
    _check(model, {"x": _data(2, 4), "u": _data(2, 3)})


@pytest.mark.parametrize("reduction", ["add", "mul", "max"])
def test_scatter_nd_slices(reduction):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    model = graph_model([node], {"x": (FLOAT, [4, 2, 3]), "u": (FLOAT, [3, 2, 3])}, ["y"],
                   {"i": np.array([[1], [3], [1]], np.int64)})
    _check(model, {"x": _data(4, 2, 3), "u": _data(3, 2, 3)}, jits=(True,))


def test_tensor_scatter_circular():
    node = helper.make_node("TensorScatter", ["cache", "update", "at"], ["y"],
                            mode="circular", axis=2)
    model = graph_model([node], {"cache": (FLOAT, [2, 3, 5, 2]), "update": (FLOAT, [2, 3, 2, 2]),
                            "at": (INT64, [2])}, ["y"], opset=24)
    _check(model, {"cache": _data(2, 3, 5, 2), "update": _data(2, 3, 2, 2),
                   "at": np.array([4, 1], np.int64)})


def test_one_hot_negative_indices_new_axis_first():
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=0)
    model = graph_model([node], {"i": (INT64, [2, 3])}, ["y"],
                   {"depth": np.array(4, np.int64), "values": np.array([-1, 5], np.int32)})
    _check(model, {"i": np.array([[0, -1, 3], [5, -4, 2]], np.int64)})


@pytest.mark.parametrize(("largest", "axis"), [(1, -1), (0, 0)])
def test_top_k_ties_keep_the_lower_index_first(largest, axis):
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis,
                            largest=largest)
    model = graph_model([node], {"x": (FLOAT, [3, 4])}, ["values", "indices"],
                   {"k": np.array([2], np.int64)})
    _check(model, {"x": np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, 5, 1, 1]], np.float32)})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_extrema_last_index(op):
    nodes = [helper.make_node(op, ["x"], ["last"], axis=1, keepdims=0, select_last_index=1),
             helper.make_node(op, ["x"], ["first"], axis=-1)]
    model = graph_model(nodes, {"x": (FLOAT, ["N", 4])}, ["last", "first"])
    _check(model, {"x": np.array([[1, 3, 3, 0], [2, 2, 0, 0]], np.float32)})


@pytest.mark.parametrize(("axis", "ordered"), [(None, 0), (1, 1), (-2, 0)])
def test_unique(axis, ordered):
    """(ONNX's reference takes the unsorted values of a flattened input from the unflattened
    one: a 1-D input where no axis is given.)"""
    attributes = {} if axis is None else {"axis": axis}
    node = helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"],
                            sorted=ordered, **attributes)
    x = np.array([[2, 1, 2, 1], [0, 3, 0, 3], [2, 1, 2, 1]], np.float32)
    x = x.reshape(-1) if axis is None else x
    model = graph_model([node], {"x": (FLOAT, x.shape)}, node.output)
    _check(model, {"x": x}, jits=(True,))


def test_non_zero_at_run_time():
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = graph_model([node], {"x": (FLOAT, [2, 3])}, ["y"])
    _check(model, {"x": np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)})
