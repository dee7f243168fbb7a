"""`sf.losses`: Keras' loss classes and functions.

A loss function gives one value per example (the mean over the last axis for the
regression losses, the cross-entropy over the classes for the classification ones); a
loss class calls it and reduces the result: ``"sum_over_batch_size"`` (the mean, Keras'
default), ``"sum"``, or ``"none"`` (the per-example values), with optional per-example
`sample_weight`. All are composites of op functions, so they differentiate and compile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.nn import (
    softmax_cross_entropy_with_logits,
    sparse_softmax_cross_entropy_with_logits,
)
from stageflow.frontend.ops.normalization import sigmoid_cross_entropy_with_logits
from stageflow.frontend.ops.reductions import reduce_mean, reduce_sum
from stageflow.frontend.tensor import Tensor

__all__ = ["BinaryCrossentropy", "CategoricalCrossentropy", "Huber", "Loss",
           "MeanAbsoluteError", "MeanSquaredError", "SparseCategoricalCrossentropy",
           "binary_crossentropy", "categorical_crossentropy", "huber", "mean_absolute_error",
           "mean_squared_error", "sparse_categorical_crossentropy"]

REDUCTIONS = ("sum_over_batch_size", "sum", "none")
_EPSILON = 1e-7  # Keras' clipping of probabilities


def _pair(y_true: Any, y_pred: Any) -> tuple[Tensor, Tensor]:
    y_pred = convert_to_tensor(y_pred)
    return convert_to_tensor(y_true, y_pred.dtype), y_pred


def mean_squared_error(y_true: Any, y_pred: Any) -> Tensor:
    """``mean((y_true - y_pred)**2, axis=-1)``.

    y_true, y_pred: float tensors [..., n] of one shape; returns the per-example loss [...] of
    y_pred's dtype.

    >>> sf.losses.mean_squared_error([[0.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 0.0]])
    sf.Tensor([0.5, 0.5], shape=(2,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return reduce_mean(ew.square(y_pred - y_true), -1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(|y_true - y_pred|, axis=-1)``.

    y_true, y_pred: float tensors [..., n] of one shape; returns the per-example loss [...] of
    y_pred's dtype.

    >>> sf.losses.mean_absolute_error([[0.0, 1.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 0.0]])
    sf.Tensor([1. , 0.5], shape=(2,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return reduce_mean(ew.abs(y_pred - y_true), -1)


def huber(y_true: Any, y_pred: Any, delta: float = 1.0) -> Tensor:
    """``mean(0.5 e**2 if |e| <= delta else delta * (|e| - 0.5 delta), axis=-1)``.

    y_true, y_pred: float tensors [..., n] of one shape; returns the per-example loss [...] of
    y_pred's dtype.

    >>> sf.losses.huber([[0.0, 0.0]], [[0.5, 3.0]])
    sf.Tensor([1.3125], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    error = ew.abs(y_pred - y_true)
    quadratic = ew.minimum(error, delta)
    return reduce_mean(quadratic * quadratic * 0.5 + (error - quadratic) * delta, -1)


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Tensor:
    """The mean over the last axis of the binary cross-entropy of probabilities (clipped
    to [1e-7, 1 - 1e-7], as Keras does) or of logits.

    y_true: labels in [0, 1]; y_pred: float probabilities (or logits) of y_true's shape [...,
    n]; returns [...] of y_pred's dtype.

    >>> sf.losses.binary_crossentropy([[1.0, 0.0]], [[0.5, 0.5]])
    sf.Tensor([0.6931472], shape=(1,), dtype=float32)
    >>> sf.losses.binary_crossentropy([[1.0, 0.0]], [[0.0, 0.0]], from_logits=True)
    sf.Tensor([0.6931472], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    if from_logits:
        return reduce_mean(sigmoid_cross_entropy_with_logits(y_true, y_pred), -1)
    p = ew.clip_by_value(y_pred, _EPSILON, 1.0 - _EPSILON)
    terms = y_true * ew.log(p) + (1.0 - y_true) * ew.log(1.0 - p)
    return ew.negative(reduce_mean(terms, -1))


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False,
                             label_smoothing: float = 0.0) -> Tensor:
    """``-sum(y_true * log(y_pred), axis=-1)`` over one-hot (or soft) labels; with
    `label_smoothing` the labels move towards uniform by that fraction.

    y_true: float labels [..., classes]; y_pred: probabilities (or logits) of that shape;
    returns [...] of y_pred's dtype.

    >>> sf.losses.categorical_crossentropy([[0.0, 1.0], [1.0, 0.0]], [[0.5, 0.5], [0.9, 0.1]])
    sf.Tensor([0.6931472 , 0.10536055], shape=(2,), dtype=float32)
    >>> sf.losses.categorical_crossentropy([[0.0, 1.0]], [[0.0, 0.0]], from_logits=True)
    sf.Tensor([0.6931472], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        classes = y_pred.shape[-1]
        if classes is None:
            raise ValueError(f"categorical_crossentropy: label smoothing needs the number "
                             f"of classes known{describe_location()}")
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / classes
    if from_logits:
        return softmax_cross_entropy_with_logits(y_true, y_pred)
    p = y_pred / reduce_sum(y_pred, -1, keepdims=True)
    p = ew.clip_by_value(p, _EPSILON, 1.0 - _EPSILON)
    return ew.negative(reduce_sum(y_true * ew.log(p), -1))


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any,
                                    from_logits: bool = False) -> Tensor:
    """The cross-entropy of integer class labels (shape ``y_pred.shape[:-1]``).

    y_true: int labels [...]; y_pred: float probabilities (or logits) [..., classes]; returns
    [...] of y_pred's dtype.

    >>> sf.losses.sparse_categorical_crossentropy([1, 0], [[0.5, 0.5], [0.9, 0.1]])
    sf.Tensor([0.6931472 , 0.10536057], shape=(2,), dtype=float32)
    """
    y_pred = convert_to_tensor(y_pred)
    if from_logits:
        return sparse_softmax_cross_entropy_with_logits(y_true, y_pred)
    p = ew.clip_by_value(y_pred / reduce_sum(y_pred, -1, keepdims=True), _EPSILON,
                         1.0 - _EPSILON)
    # -log_softmax(log p)[label] is -log p[label] + log(sum(p)): p sums to one
    return sparse_softmax_cross_entropy_with_logits(y_true, ew.log(p))


class Loss:
    """A loss function with its reduction: ``loss(y_true, y_pred, sample_weight=None)``.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> loss = sf.losses.Loss(sf.losses.mean_absolute_error, reduction="sum")
    >>> loss([[0.0], [0.0]], [[1.0], [3.0]])
    sf.Tensor(4., shape=(), dtype=float32)
    >>> loss
    <sf.losses.Loss 'mean_absolute_error' reduction='sum'>
    """

    def __init__(self, function: Callable[..., Tensor],
                 reduction: str = "sum_over_batch_size", name: str | None = None,
                 **options: Any) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of "
                             f"{REDUCTIONS}, got {reduction!r}")
        self.function, self.reduction, self.options = function, reduction, options
        self.name = name or function.__name__

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Tensor:
        values = self.function(y_true, y_pred, **self.options)
        if sample_weight is not None:
            values = values * convert_to_tensor(sample_weight, values.dtype)
        if self.reduction == "none":
            return values
        total = reduce_sum(values)
        if self.reduction == "sum":
            return total
        return reduce_mean(values) if values.ndim else total

    def __repr__(self) -> str:
        return f"<sf.losses.{type(self).__name__} {self.name!r} reduction={self.reduction!r}>"


class MeanSquaredError(Loss):
    """`mean_squared_error` as a loss object, reduced over the batch.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> mse = sf.losses.MeanSquaredError()
    >>> mse([[0.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 0.0]])
    sf.Tensor(0.5, shape=(), dtype=float32)
    >>> sf.losses.MeanSquaredError(reduction="none")([[0.0, 1.0]], [[1.0, 1.0]])
    sf.Tensor([0.5], shape=(1,), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(mean_squared_error, reduction, name)


class MeanAbsoluteError(Loss):
    """`mean_absolute_error` as a loss object, reduced over the batch.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> mae = sf.losses.MeanAbsoluteError()
    >>> mae([[0.0, 1.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 0.0]], sample_weight=[1.0, 0.0])
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(mean_absolute_error, reduction, name)


class Huber(Loss):
    """`huber` as a loss object: quadratic within `delta`, linear beyond.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.Huber(delta=2.0)([[0.0, 0.0]], [[1.0, 4.0]])
    sf.Tensor(3.25, shape=(), dtype=float32)
    """

    def __init__(self, delta: float = 1.0, reduction: str = "sum_over_batch_size",
                 name: str | None = None):
        super().__init__(huber, reduction, name, delta=float(delta))


class BinaryCrossentropy(Loss):
    """`binary_crossentropy` as a loss object, of probabilities or (`from_logits`) logits.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> bce = sf.losses.BinaryCrossentropy(from_logits=True)
    >>> bce([[1.0], [0.0]], [[0.0], [0.0]])
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, from_logits: bool = False, reduction: str = "sum_over_batch_size",
                 name: str | None = None):
        super().__init__(binary_crossentropy, reduction, name, from_logits=from_logits)


class CategoricalCrossentropy(Loss):
    """`categorical_crossentropy` as a loss object, for one-hot or soft labels.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> cce = sf.losses.CategoricalCrossentropy()
    >>> cce([[0.0, 1.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]])
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0,
                 reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(categorical_crossentropy, reduction, name, from_logits=from_logits,
                         label_smoothing=float(label_smoothing))


class SparseCategoricalCrossentropy(Loss):
    """`sparse_categorical_crossentropy` as a loss object, for integer labels.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> scce = sf.losses.SparseCategoricalCrossentropy(from_logits=True)
    >>> scce([1, 0], [[0.0, 0.0], [0.0, 0.0]])
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, from_logits: bool = False, reduction: str = "sum_over_batch_size",
                 name: str | None = None):
        super().__init__(sparse_categorical_crossentropy, reduction, name,
                         from_logits=from_logits)
