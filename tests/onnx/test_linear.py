"""sf.onnx's matrix product converters (`stageflow/onnx/ops/linear.py`) against ONNX's
NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper

import stageflow as sf

RNG = np.random.default_rng(11)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("known_weights", [True, False])
def test_gemm_with_every_attribute(known_weights):
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=-2.0, transA=1,
                            transB=1)
    weights = {"b": _normal(5, 4), "c": _normal(5)}
    if known_weights:
        check(node, {"a": _normal(4, 3)}, weights, jits=(True, False))
    else:
        check(node, {"a": _normal(4, 3), **weights})


def test_gemm_without_bias():
    check(helper.make_node("Gemm", ["a", "b"], ["y"]), {"a": _normal(2, 3), "b": _normal(3, 4)})


@pytest.mark.parametrize(("a", "b"), [((3,), (2, 3, 4)), ((2, 1, 3, 4), (5, 4, 2)),
                                      ((2, 3, 4), (4,))])
def test_matmul_broadcasts_and_takes_vectors(a, b):
    check(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": _normal(*a), "b": _normal(*b)})


def test_matmul_integer_with_zero_points():
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    check(node, {"a": RNG.integers(0, 255, (3, 4)).astype(np.uint8),
                 "b": RNG.integers(-128, 127, (4, 2)).astype(np.int8),
                 "az": np.array(200, np.uint8), "bz": np.array([-5, 7], np.int8)})


def test_matmul_integer_with_a_zero_point_per_row():
    """ONNX's spec allows one per row of A; neither ONNX's reference nor ONNX Runtime do."""
    a = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, (4, 2)).astype(np.uint8)
    points = np.array([3, 0, 200], np.uint8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])
    y = sf.onnx.load(one_node_model(node, {"a": a, "b": b, "az": points}))(a, b, points)
    expected = (a.astype(np.int32) - points[:, None].astype(np.int32)) @ b.astype(np.int32)
    np.testing.assert_array_equal(np.asarray(y), expected)


@pytest.mark.parametrize(("equation", "shapes"), [
    ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij,j", [(3, 4), (4,)]),
])
def test_einsum(equation, shapes):
    operands = {f"x{i}": _normal(*shape) for i, shape in enumerate(shapes)}
    check(helper.make_node("Einsum", list(operands), ["y"], equation=equation), operands,
          rtol=1e-4)
