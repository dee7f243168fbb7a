"""Object detection's NonMaxSuppression (opset 11 on).

Greedy suppression, per batch and class: the boxes in descending score order (ties by
index), each kept unless a kept box overlaps it by more than `iou_threshold` or the class
holds `max_output_boxes_per_class` already. The overlaps of every pair of boxes are one
(batch, boxes, boxes) tensor; the greedy pass is an `sf.while_loop` over the score ranks,
all batches and classes at once, marking the kept ranks in a (batch, class, rank) mask.
How many boxes are kept depends on the data, so the output's rows are `sf.nonzero` of that
mask (row-major: batch, class, then rank, ONNX's order), their ranks mapped back to box
indices: an int64 (kept, 3) tensor whose first dim is known only when the model runs.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.core.dtypes import is_floating
from stageflow.onnx.converters import Node, Value, converts


def _scalar(node: Node, value: Value, what: str) -> Value:
    """A one-element input (ONNX allows shape [1] or a scalar) as a scalar."""
    if value.shape and (len(value.shape) != 1 or value.shape[0] not in (1, None)):
        raise node.error(f"{what} must hold one element, got shape {tuple(value.shape)}")
    return sf.reshape(value, ())


def _corners(boxes: Value, center_point_box: int) -> tuple[Value, Value, Value, Value]:
    """(x min, x max, y min, y max) of (..., 4) boxes: [y1, x1, y2, x2] of any two opposite
    corners, or [x center, y center, width, height]."""
    if center_point_box:
        x, y, half_w, half_h = (boxes[..., 0], boxes[..., 1], boxes[..., 2] / 2,
                                boxes[..., 3] / 2)
        return x - half_w, x + half_w, y - half_h, y + half_h
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return (sf.minimum(x1, x2), sf.maximum(x1, x2), sf.minimum(y1, y2),
            sf.maximum(y1, y2))


def _overlaps(boxes: Value, center_point_box: int, threshold: Value) -> Value:
    """(batch, boxes, boxes) bool: box i suppresses box j (their IoU exceeds `threshold`,
    both boxes and their intersection having a positive area)."""
    x_min, x_max, y_min, y_max = _corners(boxes, center_point_box)
    zero = np.zeros((), np.dtype(boxes.dtype))

    def pair(low: Value, high: Value) -> tuple[Value, Value]:
        """The intersection's extent along an axis, (batch, boxes, boxes)."""
        start = sf.maximum(sf.expand_dims(low, 2), sf.expand_dims(low, 1))
        end = sf.minimum(sf.expand_dims(high, 2), sf.expand_dims(high, 1))
        return end - start, sf.greater(end, start)

    width, across = pair(x_min, x_max)
    height, along = pair(y_min, y_max)
    intersection = width * height
    area = (x_max - x_min) * (y_max - y_min)
    union = sf.expand_dims(area, 2) + sf.expand_dims(area, 1) - intersection
    positive = sf.greater(area, zero)
    valid = sf.logical_and(
        sf.logical_and(sf.logical_and(across, along), sf.greater(intersection, zero)),
        sf.logical_and(sf.logical_and(sf.expand_dims(positive, 2),
                                      sf.expand_dims(positive, 1)),
                       sf.greater(union, zero)))
    safe = sf.where(valid, union, sf.ones_like(union))
    return sf.logical_and(valid, sf.greater(intersection / safe, threshold))


@converts("NonMaxSuppression")
def non_max_suppression(node: Node, boxes: Value, scores: Value,
                        max_output_boxes_per_class: Value | None = None,
                        iou_threshold: Value | None = None,
                        score_threshold: Value | None = None) -> Value:
    """The selected (batch, class, box) index triples, int64 (selected, 3)."""
    center = node.attr("center_point_box", 0)
    if center not in (0, 1):
        raise node.error(f"center_point_box must be 0 or 1, got {center}")
    if boxes.ndim != 3 or boxes.shape[2] not in (4, None) or scores.ndim != 3:
        raise node.error(f"boxes must be (batch, boxes, 4) and scores (batch, classes, "
                         f"boxes), got {tuple(boxes.shape)} and {tuple(scores.shape)}")
    if not is_floating(np.dtype(boxes.dtype)) or not is_floating(np.dtype(scores.dtype)):
        raise node.error(f"boxes and scores must be floating, got {np.dtype(boxes.dtype)} "
                         f"and {np.dtype(scores.dtype)}")
    if max_output_boxes_per_class is None or 0 in max_output_boxes_per_class.shape:
        return np.zeros((0, 3), np.int64)
    limit = sf.cast(_scalar(node, max_output_boxes_per_class, "max_output_boxes_per_class"),
                    sf.int64)
    dtype = np.dtype(boxes.dtype)
    iou = np.zeros((), dtype) if iou_threshold is None else \
        sf.cast(_scalar(node, iou_threshold, "iou_threshold"), dtype)
    suppresses = _overlaps(boxes, center, iou)  # (batch, boxes, boxes)
    order = sf.cast(sf.argsort(scores, axis=-1, direction="DESCENDING", stable=True),
                    sf.int64)  # (batch, classes, boxes): the box at each rank
    candidates = sf.ones_like(scores, dtype=sf.bool)
    if score_threshold is not None:
        threshold = sf.cast(_scalar(node, score_threshold, "score_threshold"),
                            scores.dtype)
        candidates = sf.greater(sf.sort(scores, axis=-1, direction="DESCENDING"), threshold)
    count = sf.reduce_sum(sf.ones_like(order[0, 0]))  # the boxes, known or not
    ranks = sf.cumsum(sf.ones_like(order[0, 0]), exclusive=True)  # 0, 1, ... boxes - 1
    batch = sf.cumsum(sf.ones_like(order[:, :, 0]), axis=0, exclusive=True)  # (batch, cls)
    none = sf.zeros_like(scores, dtype=sf.bool)

    def more(rank: Value, kept: Value, chosen: Value) -> Value:
        return sf.less(rank, count)

    def step(rank: Value, kept: Value, chosen: Value) -> tuple[Value, Value, Value]:
        """Rank `rank`'s box, of each batch and class, kept or not; `kept` marks the kept
        boxes by box index, `chosen` by rank."""
        box = sf.gather(order, rank, axis=2)  # (batch, classes)
        rows = sf.gather_nd(suppresses, sf.stack([batch, box], axis=-1))  # (b, c, boxes)
        overlapped = sf.reduce_any(sf.logical_and(rows, kept), axis=-1)
        room = sf.less(sf.reduce_sum(sf.cast(chosen, sf.int64), axis=-1), limit)
        take = sf.logical_and(sf.logical_and(sf.gather(candidates, rank, axis=2), room),
                              sf.logical_not(overlapped))
        take = sf.expand_dims(take, -1)
        at_box = sf.equal(ranks, sf.expand_dims(box, -1))
        kept = sf.logical_or(kept, sf.logical_and(at_box, take))
        chosen = sf.logical_or(chosen, sf.logical_and(sf.equal(ranks, rank), take))
        return rank + 1, kept, chosen

    _, _, chosen = sf.while_loop(more, step, (sf.constant(np.int64(0)), none, none))
    selected = sf.nonzero(chosen)  # (kept, 3): batch, class, rank
    return sf.concat([selected[:, :2], sf.expand_dims(sf.gather_nd(order, selected), -1)],
                     axis=1)
