"""sf.onnx's NonMaxSuppression converter (`stageflow/onnx/ops/detection.py`) against ONNX's
NumPy reference: its output's length depends on the data, compiled and interpreted, with
the number of boxes unknown at import."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(11)


def _inputs(batches: int, classes: int, boxes: int, center: bool,
            limit: int) -> dict[str, np.ndarray]:
    """Random overlapping boxes (some of zero or negative extent) and scores with ties."""
    corner = RNG.uniform(0, 10, (batches, boxes, 2))
    extent = RNG.uniform(-1, 5, (batches, boxes, 2))
    coordinates = np.concatenate([corner, extent if center else corner + extent], -1)
    return {"boxes": coordinates.astype(np.float32),
            "scores": np.round(RNG.uniform(0, 1, (batches, classes, boxes)), 1)
            .astype(np.float32),
            "limit": np.array([limit], np.int64),
            "iou": np.array([0.3], np.float32),
            "score": np.array([0.25], np.float32)}


@pytest.mark.parametrize("center", [0, 1])
def test_random_boxes_compiled_and_interpreted(center: int) -> None:
    inputs = _inputs(2, 3, 9, bool(center), limit=3)
    node = helper.make_node("NonMaxSuppression", list(inputs), ["selected"],
                            center_point_box=center)
    check(node, inputs, opset=13, jits=(True, False), rtol=0, atol=0)


def test_without_score_threshold_and_unknown_box_count() -> None:
    """One compiled function for any number of boxes: each call keeps as many rows as the
    data selects."""
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou"],
                            ["selected"])
    inputs = _inputs(1, 2, 7, False, limit=10)
    del inputs["score"]
    model = one_node_model(node, inputs, opset=13,
                           shapes={"boxes": (1, "n", 4), "scores": (1, 2, "n")})
    function = sf.onnx.load(model)
    for boxes in (7, 12, 1):
        inputs = _inputs(1, 2, boxes, False, limit=10)
        del inputs["score"]
        expected, = ReferenceEvaluator(model).run(None, inputs)
        got = np.asarray(function(*inputs.values()))
        assert got.dtype == np.int64 and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_no_limit_selects_nothing() -> None:
    """max_output_boxes_per_class omitted (0 by default) selects no box."""
    inputs = _inputs(1, 1, 4, False, limit=1)
    boxes, scores = inputs["boxes"], inputs["scores"]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])
    model = one_node_model(node, {"boxes": boxes, "scores": scores}, opset=13)
    got = np.asarray(sf.onnx.load(model, jit=False)(boxes, scores))
    assert got.shape == (0, 3) and got.dtype == np.int64
