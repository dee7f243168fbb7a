"""Keras' squared and categorical hinge losses and its binary focal cross-entropy, as
functions (one value per example) and as `Loss` classes (`stageflow.models.losses`)."""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.math_ops import reduce_all
from stageflow.frontend.ops.normalization import sigmoid_cross_entropy_with_logits
from stageflow.frontend.ops.reductions import reduce_max, reduce_mean, reduce_sum
from stageflow.frontend.tensor import Tensor
from stageflow.models.losses import _EPSILON, Loss, _pair

__all__ = ["BinaryFocalCrossentropy", "CategoricalHinge", "SquaredHinge",
           "binary_focal_crossentropy", "categorical_hinge", "squared_hinge"]


def squared_hinge(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(max(1 - y_true * y_pred, 0)**2, axis=-1)`` for labels -1 or 1 (0 and 1
    taken as -1 and 1, as Keras does).

    >>> sf.losses.squared_hinge([[0.0, 1.0]], [[0.6, 0.4]])
    sf.Tensor([1.46], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    binary = reduce_all(ew.logical_or(ew.equal(y_true, 0.0), ew.equal(y_true, 1.0)))
    y_true = ew.where(binary, y_true * 2.0 - 1.0, y_true)
    return reduce_mean(ew.square(ew.maximum(1.0 - y_true * y_pred, 0.0)), -1)


def categorical_hinge(y_true: Any, y_pred: Any) -> Tensor:
    """``max(neg - pos + 1, 0)``: pos the score of the true class (one-hot labels), neg the
    highest score of another.

    >>> sf.losses.categorical_hinge([[0.0, 1.0]], [[0.6, 0.4]])
    sf.Tensor([1.2], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    positive = reduce_sum(y_true * y_pred, -1)
    negative = reduce_max((1.0 - y_true) * y_pred, -1)
    return ew.maximum(negative - positive + 1.0, 0.0)


def binary_focal_crossentropy(y_true: Any, y_pred: Any, apply_class_balancing: bool = False,
                              alpha: float = 0.25, gamma: float = 2.0,
                              from_logits: bool = False, label_smoothing: float = 0.0,
                              axis: int = -1) -> Tensor:
    """The binary cross-entropy of each entry times ``(1 - p_t)**gamma``, p_t the
    probability given to its label (times ``alpha`` for ones and ``1 - alpha`` for zeros with
    `apply_class_balancing`), averaged over `axis` (Lin et al.'s focal loss).

    >>> sf.losses.binary_focal_crossentropy([[0.0, 1.0]], [[0.6, 0.4]])
    sf.Tensor([0.32986468], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        entropy = sigmoid_cross_entropy_with_logits(y_true, y_pred)
        y_pred = ew.sigmoid(y_pred)
    else:
        p = ew.clip_by_value(y_pred, _EPSILON, 1.0 - _EPSILON)
        entropy = ew.negative(y_true * ew.log(p) + (1.0 - y_true) * ew.log(1.0 - p))
    p_t = y_true * y_pred + (1.0 - y_true) * (1.0 - y_pred)
    focal = ew.pow(1.0 - p_t, gamma) * entropy
    if apply_class_balancing:
        focal = focal * (y_true * alpha + (1.0 - y_true) * (1.0 - alpha))
    return reduce_mean(focal, axis)


class SquaredHinge(Loss):
    """`squared_hinge` as a loss object.

    >>> sf.losses.SquaredHinge()([[0.0, 1.0], [1.0, 0.0]], [[0.6, 0.4], [0.3, 0.8]])
    sf.Tensor(1.6624999, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str = "squared_hinge"):
        super().__init__(squared_hinge, reduction, name)


class CategoricalHinge(Loss):
    """`categorical_hinge` as a loss object.

    >>> sf.losses.CategoricalHinge()([[0.0, 1.0], [1.0, 0.0]], [[0.6, 0.4], [0.3, 0.8]])
    sf.Tensor(1.35, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size",
                 name: str = "categorical_hinge"):
        super().__init__(categorical_hinge, reduction, name)


class BinaryFocalCrossentropy(Loss):
    """`binary_focal_crossentropy` as a loss object.

    >>> loss = sf.losses.BinaryFocalCrossentropy()
    >>> round(float(loss([[0.0, 1.0], [1.0, 0.0]], [[0.6, 0.4], [0.3, 0.8]])), 5)
    0.56993
    """

    def __init__(self, apply_class_balancing: bool = False, alpha: float = 0.25,
                 gamma: float = 2.0, from_logits: bool = False, label_smoothing: float = 0.0,
                 axis: int = -1, reduction: str = "sum_over_batch_size",
                 name: str = "binary_focal_crossentropy"):
        super().__init__(binary_focal_crossentropy, reduction, name,
                         apply_class_balancing=apply_class_balancing, alpha=alpha, gamma=gamma,
                         from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)
