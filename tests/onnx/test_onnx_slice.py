"""ONNX Slice whose starts, ends or steps are graph inputs, known only when the model runs,
against ONNX's NumPy reference, compiled and interpreted: one import serves every bound,
negative, out of range, INT64_MAX/INT64_MIN and negative steps included; and a Loop whose
body slices at its counter (ONNX's test_loop11), whose scan rows have run-time dims."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from node_check import graph_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
BIG, SMALL = np.iinfo(np.int64).max, np.iinfo(np.int64).min
RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 5, 6)).astype(np.float32)


def _runs(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> None:
    """Each feed through one import, compiled and interpreted, equals the reference."""
    reference = ReferenceEvaluator(model)
    for jit in (True, False):
        imported = sf.onnx.load(model, jit=jit)
        for feed in feeds:
            expected, = reference.run(None, feed)
            got = np.asarray(imported(*feed.values()))
            assert got.shape == expected.shape, (jit, feed)
            np.testing.assert_array_equal(got, expected)


def _bounds(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_starts_and_ends_at_run_time():
    """Axes 0 and -1 (2): in range, negative, past either end, INT64_MAX and INT64_MIN, an
    empty range, on a constant step and axes."""
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    model = graph_model([node], {"x": (FLOAT, [4, 5, 6]), "starts": (INT64, [2]),
                                 "ends": (INT64, [2])}, ["y"],
                        {"axes": _bounds(0, -1), "steps": _bounds(1, 2)})
    pairs = [((1, 0), (3, 5)), ((-3, -5), (-1, BIG)), ((-100, 2), (100, -1)),
             ((SMALL, 7), (BIG, 100)), ((3, 4), (1, 2)), ((4, 6), (4, 6))]
    _runs(model, [{"x": X, "starts": _bounds(*s), "ends": _bounds(*e)} for s, e in pairs])


def test_steps_at_run_time_negative_ones_clamp_to_the_last_element():
    """Steps as an input too: negative steps count down from starts clamped to dim - 1, to
    ends clamped to -1 (INT64_MIN: through element 0)."""
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    model = graph_model([node], {"x": (FLOAT, [4, 5, 6]), "starts": (INT64, [2]),
                                 "ends": (INT64, [2]), "steps": (INT64, [2])}, ["y"],
                        {"axes": _bounds(2, 1)})
    cases = [((BIG, -1), (SMALL, -6), (-1, -1)), ((5, 100), (0, -100), (-2, -3)),
             ((-1, 0), (-7, 5), (-4, 2)), ((0, 2), (5, 2), (-1, 1)), ((2, 3), (5, 1), (3, -1))]
    _runs(model, [{"x": X, "starts": _bounds(*s), "ends": _bounds(*e), "steps": _bounds(*d)}
                  for s, e, d in cases])


def test_default_axes_on_a_dim_unknown_at_import():
    """No axes (the first len(starts) axes), int32 bounds, the first dim unknown at import."""
    node = helper.make_node("Slice", ["x", "starts", "ends"], ["y"])
    model = graph_model([node], {"x": (FLOAT, ["N", 5, 6]), "starts": (TensorProto.INT32, [2]),
                                 "ends": (TensorProto.INT32, [2])}, ["y"])
    feeds = [{"x": RNG.standard_normal((n, 5, 6)).astype(np.float32),
              "starts": np.array(s, np.int32), "ends": np.array(e, np.int32)}
             for n, s, e in [(3, (1, -2), (-1, 5)), (6, (-4, 0), (100, 3)), (2, (2, 1), (0, 4))]]
    _runs(model, feeds)


def test_constant_bounds_stay_one_static_slice():
    """Bounds known at import keep their static slice: no nonzero, no unknown dim."""
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])
    model = graph_model([node], {"x": (FLOAT, [4, 5, 6])}, ["y"],
                        {"starts": _bounds(-3), "ends": _bounds(BIG), "axes": _bounds(1)})
    traced = sf.onnx.load(model).get_concrete_function().ir("traced")
    assert "sf.slice" in traced and "sf.nonzero" not in traced
    assert "-> tensor<4x3x6xf32>" in traced
    _runs(model, [{"x": X}])


def test_an_unknown_dim_sliced_beside_an_empty_one():
    """The positions along a dim unknown at import are read from the input, which here
    holds no element (its other dim 0 at run time)."""
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])
    model = graph_model([node], {"x": (FLOAT, ["N", "M"]), "starts": (INT64, [1]),
                                 "ends": (INT64, [1])}, ["y"], {"axes": _bounds(0)})
    _runs(model, [{"x": np.zeros((4, 0), np.float32), "starts": _bounds(1),
                   "ends": _bounds(-1)},
                  {"x": X[0], "starts": _bounds(-2), "ends": _bounds(BIG)}])


def test_a_step_of_zero_at_run_time_is_an_error_naming_the_node():
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"],
                            name="cut")
    model = graph_model([node], {"x": (FLOAT, [4, 5, 6]), "starts": (INT64, [1]),
                                 "ends": (INT64, [1]), "steps": (INT64, [1])}, ["y"],
                        {"axes": _bounds(0)})
    for jit in (True, False):
        with pytest.raises(sf.errors.InvalidArgumentError, match="'cut' \\(Slice\\): a step is 0"):
            sf.onnx.load(model, jit=jit)(X, _bounds(0), _bounds(3), _bounds(0))
    known = graph_model([node], {"x": (FLOAT, [4, 5, 6]), "starts": (INT64, [1]),
                                 "ends": (INT64, [1])}, ["y"],
                        {"axes": _bounds(0), "steps": _bounds(0)})
    with pytest.raises(OnnxError, match="a step is 0"):
        sf.onnx.load(known)(X, _bounds(0), _bounds(3))


def _loop_model() -> onnx.ModelProto:
    """ONNX's test_loop11: the body adds x[i:i+1] of a constant x to y and scans y."""
    node = helper.make_node
    body = helper.make_graph(
        [node("Identity", ["cond_in"], ["cond_out"]),
         node("Constant", [], ["x"], value=onnx.numpy_helper.from_array(
             np.array([1, 2, 3, 4, 5], np.float32))),
         node("Constant", [], ["one"], value=onnx.numpy_helper.from_array(np.int64(1))),
         node("Add", ["iter_count", "one"], ["end"]),
         node("Unsqueeze", ["iter_count", "zero"], ["slice_start"]),
         node("Unsqueeze", ["end", "zero"], ["slice_end"]),
         node("Slice", ["x", "slice_start", "slice_end"], ["slice_out"]),
         node("Add", ["y_in", "slice_out"], ["y_out"]),
         node("Identity", ["y_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("iter_count", INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", FLOAT, [1]),
         helper.make_tensor_value_info("scan_out", FLOAT, [1])])
    loop = node("Loop", ["trip_count", "cond", "y"], ["res_y", "res_scan"], body=body)
    return graph_model([loop], {"trip_count": (INT64, []), "cond": (TensorProto.BOOL, []),
                                "y": (FLOAT, [1])}, ["res_y", "res_scan"],
                       {"zero": _bounds(0)})


@pytest.mark.parametrize("trips", [1, 3, 5])
def test_a_loop_slicing_at_its_counter_scans_rows_of_run_time_dims(trips):
    model = _loop_model()
    feed = {"trip_count": np.array(trips, np.int64), "cond": np.array(True),
            "y": np.array([-2.0], np.float32)}
    expected = ReferenceEvaluator(model).run(None, feed)
    for jit in (True, False):
        got = sf.onnx.load(model, jit=jit)(*feed.values())
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).shape == e.shape
            np.testing.assert_array_equal(np.asarray(g), e)
