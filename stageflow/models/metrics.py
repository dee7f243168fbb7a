"""`sf.metrics`: streaming metrics whose running state lives in variables.

A metric accumulates with `update_state(...)`, reports with `result()` and starts over with
`reset_state()`; calling it does an update and returns the result, as in Keras. The running
`total` and `count` are (non-trainable) variables created with the metric, so a staged
function that updates a metric updates the live object, and `result()` works in both
contexts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from stageflow.core import dtypes
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones, zeros
from stageflow.frontend.ops.reductions import argmax, reduce_mean, reduce_sum
from stageflow.frontend.ops.shape import expand_dims, one_hot, reshape, squeeze
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models import losses
from stageflow.models.module import Module, camel_to_snake

__all__ = ["AUC", "Accuracy", "BinaryAccuracy", "BinaryCrossentropy", "CategoricalAccuracy",
           "CategoricalCrossentropy", "FalseNegatives", "FalsePositives", "KLDivergence",
           "Mean", "MeanAbsoluteError", "MeanMetricWrapper", "MeanSquaredError", "Metric",
           "Precision", "Recall", "RootMeanSquaredError", "SparseCategoricalAccuracy",
           "SparseCategoricalCrossentropy", "SparseTopKCategoricalAccuracy", "Sum",
           "TopKCategoricalAccuracy", "TrueNegatives", "TruePositives", "binary_accuracy",
           "get", "sparse_top_k_categorical_accuracy", "top_k_categorical_accuracy"]


class Metric(Module):
    """The base class: `update_state`, `result`, `reset_state`, and ``metric(...)``.

    Subclasses keep scalar state variables (`add_state`), fold batches in with `update_state`
    and report `result()`; calling a metric does both.

    >>> m = sf.metrics.Mean()
    >>> isinstance(m, sf.metrics.Metric)
    True
    >>> m([1.0, 3.0])
    sf.Tensor(2., shape=(), dtype=float32)
    >>> m.reset_state()
    >>> m.result()
    sf.Tensor(0., shape=(), dtype=float32)
    """

    _WALK_SORTED = False  # Keras' objects: their state in the order it was created

    def __init__(self, name: str | None = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(name)
        self.dtype = dtypes.as_dtype(dtype)

    def add_state(self, name: str) -> Variable:
        """A scalar accumulator variable, initially 0 (replicas of a distribution strategy
        add their sums to every copy: SUM aggregation)."""
        return Variable(zeros((), self.dtype), trainable=False, name=f"{self.name}/{name}",
                        aggregation="sum")

    def update_state(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def result(self) -> Tensor:
        raise NotImplementedError

    def reset_state(self) -> None:
        """Set every state variable back to 0."""
        for variable in self.variables:
            variable.assign(zeros(variable.shape, variable.dtype))

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        self.update_state(*args, **kwargs)
        return self.result()

    def __repr__(self) -> str:
        return f"<sf.metrics.{type(self).__name__} {self.name!r}>"


class Sum(Metric):
    """The (weighted) sum of all values seen.

    values: float tensor of any shape (or a Python number).

    >>> s = sf.metrics.Sum()
    >>> s.update_state([1.0, 2.0])
    >>> s.update_state(4.0)
    >>> s.result()
    sf.Tensor(7., shape=(), dtype=float32)
    """

    def __init__(self, name: str | None = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(name, dtype)
        self.total = self.add_state("total")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        values = _as(values, self.dtype)
        if sample_weight is not None:
            values = values * _weights(sample_weight, values, self.dtype)
        self.total.assign_add(reduce_sum(values))

    def result(self) -> Tensor:
        return self.total.read_value()


class Mean(Metric):
    """The (weighted) mean of all values seen: ``sum(w * x) / sum(w)``, 0 before any.

    values: float tensor of any shape; `sample_weight` broadcasts against it.

    >>> m = sf.metrics.Mean()
    >>> m.update_state([1.0, 2.0])
    >>> m.update_state([6.0], sample_weight=[2.0])
    >>> m.result()
    sf.Tensor(3.75, shape=(), dtype=float32)
    """

    def __init__(self, name: str | None = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(name, dtype)
        self.total = self.add_state("total")
        self.count = self.add_state("count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        values = _as(values, self.dtype)
        if sample_weight is None:
            self.total.assign_add(reduce_sum(values))
            self.count.assign_add(_size(values, self.dtype))
            return
        weights = _weights(sample_weight, values, self.dtype)
        self.total.assign_add(reduce_sum(values * weights))
        self.count.assign_add(reduce_sum(weights))

    def result(self) -> Tensor:
        total, count = self.total.read_value(), self.count.read_value()
        nonzero = ew.not_equal(count, 0.0)
        return ew.where(nonzero, total / ew.where(nonzero, count, 1.0), 0.0)


class Accuracy(Mean):
    """How often `y_pred` equals `y_true` (Keras' `Accuracy`: values compared as they are;
    for class scores use `SparseCategoricalAccuracy` or `CategoricalAccuracy`).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true and
    y_pred: tensors of one shape, compared for equality.

    >>> acc = sf.metrics.Accuracy()
    >>> acc.update_state([1, 2, 3, 4], [1, 2, 0, 4])
    >>> acc.result()
    sf.Tensor(0.75, shape=(), dtype=float32)
    """

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_true, y_pred = convert_to_tensor(y_true), convert_to_tensor(y_pred)
        matches = ew.equal(y_true, ew.cast(y_pred, y_true.dtype))
        super().update_state(matches, sample_weight)


class SparseCategoricalAccuracy(Mean):
    """How often ``argmax(y_pred, -1)`` equals the integer label `y_true`.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: int
    labels [batch]; y_pred: scores [batch, classes].

    >>> acc = sf.metrics.SparseCategoricalAccuracy()
    >>> acc.update_state([1, 0], [[0.1, 0.9], [0.2, 0.8]])
    >>> acc.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_true, y_pred = convert_to_tensor(y_true), convert_to_tensor(y_pred)
        if y_true.ndim == y_pred.ndim and y_true.ndim > 0 and y_true.shape[-1] == 1:
            y_true = squeeze(y_true, -1)
        predicted = ew.cast(argmax(y_pred, axis=-1), y_true.dtype)
        super().update_state(ew.equal(y_true, predicted), sample_weight)


class CategoricalAccuracy(Mean):
    """How often ``argmax(y_pred, -1)`` equals ``argmax(y_true, -1)`` (one-hot labels).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: one-
    hot [batch, classes]; y_pred: scores of that shape.

    >>> acc = sf.metrics.CategoricalAccuracy()
    >>> acc.update_state([[0.0, 1.0], [1.0, 0.0]], [[0.1, 0.9], [0.6, 0.4]])
    >>> acc.result()
    sf.Tensor(1., shape=(), dtype=float32)
    """

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        matches = ew.equal(argmax(y_true, axis=-1), argmax(y_pred, axis=-1))
        super().update_state(matches, sample_weight)


class MeanSquaredError(Mean):
    """The mean of ``(y_true - y_pred)**2`` over every element seen.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true and
    y_pred: float tensors [batch, n].

    >>> mse = sf.metrics.MeanSquaredError()
    >>> mse.update_state([[0.0, 1.0]], [[1.0, 1.0]])
    >>> mse.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_pred = _as(y_pred, self.dtype)
        super().update_state(ew.square(y_pred - _as(y_true, self.dtype)), sample_weight)


class MeanMetricWrapper(Mean):
    """The running mean of a function's per-example values, ``fn(y_true, y_pred,
    **kwargs)``, weighted by `sample_weight` (Keras' wrapper, which its metrics named
    after a loss or an accuracy are): a batch counts once per example.

    >>> m = sf.metrics.MeanMetricWrapper(sf.losses.mean_absolute_error, name="mae")
    >>> m.update_state([[0.0, 1.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 0.0]])
    >>> m.result()
    sf.Tensor(0.75, shape=(), dtype=float32)
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None,
                 dtype: Any = dtypes.float32, **kwargs: Any) -> None:
        super().__init__(name or getattr(fn, "__name__", None), dtype)
        self.fn, self.kwargs = fn, kwargs

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        super().update_state(self.fn(y_true, y_pred, **self.kwargs), sample_weight)


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> Tensor:
    """The fraction over the last axis of predictions on the label's side of `threshold`:
    ``mean(y_true == (y_pred > threshold), axis=-1)``.

    y_true: 0/1 labels [..., n]; y_pred: probabilities of that shape; returns float32 [...].

    >>> sf.metrics.binary_accuracy([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.2, 0.4, 0.6]])
    sf.Tensor([0.5], shape=(1,), dtype=float32)
    """
    y_pred = convert_to_tensor(y_pred)
    predicted = ew.cast(ew.greater(y_pred, ew.cast(threshold, y_pred.dtype)), dtypes.float32)
    return reduce_mean(ew.cast(ew.equal(_as(y_true, dtypes.float32), predicted),
                               dtypes.float32), -1)


def sparse_top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> Tensor:
    """1 where the score of class `y_true` is among the `k` largest of `y_pred`, else 0
    (TensorFlow's `in_top_k`: a tie at the boundary counts as in, fewer than `k` higher
    scores are all it takes).

    y_true: int labels [batch] (or [batch, 1]); y_pred: scores [batch, classes]; returns
    float32 [batch].

    >>> sf.metrics.sparse_top_k_categorical_accuracy([2, 0], [[0.1, 0.3, 0.6], [0.1, 0.3, 0.6]],
    ...                                              k=2)
    sf.Tensor([1., 0.], shape=(2,), dtype=float32)
    """
    y_true, y_pred = convert_to_tensor(y_true), convert_to_tensor(y_pred)
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = squeeze(y_true, -1)
    classes = y_pred.shape[-1]
    target = reduce_sum(one_hot(y_true, classes, dtype=y_pred.dtype) * y_pred, -1,
                        keepdims=True)
    higher = reduce_sum(ew.cast(ew.greater(y_pred, target), dtypes.int32), -1)
    return ew.cast(ew.less(higher, int(k)), dtypes.float32)


def top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> Tensor:
    """`sparse_top_k_categorical_accuracy` of one-hot labels (their argmax).

    y_true: one-hot [batch, classes]; y_pred: scores of that shape; returns float32 [batch].

    >>> sf.metrics.top_k_categorical_accuracy([[0.0, 0.0, 1.0]], [[0.5, 0.3, 0.2]], k=2)
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    return sparse_top_k_categorical_accuracy(argmax(y_true, axis=-1), y_pred, k)


def _mean_squared(y_true: Any, y_pred: Any) -> Tensor:
    return ew.square(_as(y_pred, dtypes.float32) - _as(y_true, dtypes.float32))


class BinaryAccuracy(MeanMetricWrapper):
    """How often a probability is on its label's side of `threshold` (0.5): the running
    mean of `binary_accuracy` (each example's fraction over its last axis).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: 0/1
    labels [batch, n]; y_pred: probabilities of that shape.

    >>> acc = sf.metrics.BinaryAccuracy()
    >>> acc.update_state([[1.0], [1.0], [0.0], [0.0]], [[0.98], [0.4], [0.1], [0.6]])
    >>> acc.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "binary_accuracy", dtype: Any = dtypes.float32,
                 threshold: float = 0.5) -> None:
        super().__init__(binary_accuracy, name, dtype, threshold=float(threshold))


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label's class is among the `k` (5) highest scores.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true:
    one-hot [batch, classes]; y_pred: scores of that shape.

    >>> acc = sf.metrics.TopKCategoricalAccuracy(k=1)
    >>> acc.update_state([[0.0, 1.0], [1.0, 0.0]], [[0.2, 0.8], [0.3, 0.7]])
    >>> acc.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, k: int = 5, name: str = "top_k_categorical_accuracy",
                 dtype: Any = dtypes.float32) -> None:
        super().__init__(top_k_categorical_accuracy, name, dtype, k=int(k))


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label's class is among the `k` (5) highest scores.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: int
    labels [batch]; y_pred: scores [batch, classes].

    >>> acc = sf.metrics.SparseTopKCategoricalAccuracy(k=2)
    >>> acc.update_state([0, 1], [[0.5, 0.3, 0.2], [0.5, 0.1, 0.4]])
    >>> acc.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, k: int = 5, name: str = "sparse_top_k_categorical_accuracy",
                 dtype: Any = dtypes.float32) -> None:
        super().__init__(sparse_top_k_categorical_accuracy, name, dtype, k=int(k))


class MeanAbsoluteError(MeanMetricWrapper):
    """The running mean of `sf.losses.mean_absolute_error` (per example, then over
    examples).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true and
    y_pred: float tensors [batch, n].

    >>> mae = sf.metrics.MeanAbsoluteError()
    >>> mae.update_state([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]])
    >>> mae.result()
    sf.Tensor(0.75, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "mean_absolute_error", dtype: Any = dtypes.float32) -> None:
        super().__init__(losses.mean_absolute_error, name, dtype)


class RootMeanSquaredError(Mean):
    """``sqrt(mean((y_true - y_pred)**2))`` over every element seen (the root of the
    running mean, not a mean of roots).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true and
    y_pred: float tensors [batch, n].

    >>> rmse = sf.metrics.RootMeanSquaredError()
    >>> rmse.update_state([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]])
    >>> rmse.result()
    sf.Tensor(0.8660254, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "root_mean_squared_error",
                 dtype: Any = dtypes.float32) -> None:
        super().__init__(name, dtype)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        super().update_state(_mean_squared(y_true, y_pred), sample_weight)

    def result(self) -> Tensor:
        return ew.sqrt(super().result())


class BinaryCrossentropy(MeanMetricWrapper):
    """The running mean of `sf.losses.binary_crossentropy` (of probabilities, or logits
    with `from_logits`).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: 0/1
    labels [batch, n]; y_pred: probabilities of that shape.

    >>> bce = sf.metrics.BinaryCrossentropy(from_logits=True)
    >>> bce.update_state([[1.0], [0.0]], [[0.0], [0.0]])
    >>> bce.result()
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "binary_crossentropy", dtype: Any = dtypes.float32,
                 from_logits: bool = False) -> None:
        super().__init__(losses.binary_crossentropy, name, dtype, from_logits=from_logits)


class CategoricalCrossentropy(MeanMetricWrapper):
    """The running mean of `sf.losses.categorical_crossentropy` (one-hot labels).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true:
    one-hot [batch, classes]; y_pred: probabilities of that shape.

    >>> cce = sf.metrics.CategoricalCrossentropy()
    >>> cce.update_state([[0.0, 1.0]], [[0.5, 0.5]])
    >>> cce.result()
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "categorical_crossentropy", dtype: Any = dtypes.float32,
                 from_logits: bool = False, label_smoothing: float = 0.0) -> None:
        super().__init__(losses.categorical_crossentropy, name, dtype,
                         from_logits=from_logits, label_smoothing=float(label_smoothing))


class SparseCategoricalCrossentropy(MeanMetricWrapper):
    """The running mean of `sf.losses.sparse_categorical_crossentropy` (integer labels).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: int
    labels [batch]; y_pred: probabilities [batch, classes].

    >>> scce = sf.metrics.SparseCategoricalCrossentropy()
    >>> scce.update_state([1, 0], [[0.5, 0.5], [0.5, 0.5]])
    >>> scce.result()
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    """

    def __init__(self, name: str = "sparse_categorical_crossentropy",
                 dtype: Any = dtypes.float32, from_logits: bool = False) -> None:
        super().__init__(losses.sparse_categorical_crossentropy, name, dtype,
                         from_logits=from_logits)


class _Confusion(Metric):
    """Counts of true/false positives/negatives at `thresholds` (a prediction is positive
    when greater than the threshold), one count per threshold."""

    def __init__(self, thresholds: Any, name: str | None, dtype: Any) -> None:
        super().__init__(name, dtype)
        self.thresholds = [float(t) for t in thresholds]
        shape = (len(self.thresholds),)
        self.counts = {kind: Variable(zeros(shape, self.dtype), trainable=False,
                                      name=f"{self.name}/{kind}", aggregation="sum")
                       for kind in ("true_positives", "false_positives", "false_negatives",
                                    "true_negatives")}

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_true = ew.cast(ew.greater(_as(y_true, self.dtype), 0.5), self.dtype)
        y_pred = _as(y_pred, self.dtype)
        weights = (_weights(sample_weight, y_pred, self.dtype) if sample_weight is not None
                   else _ones_like(y_pred, self.dtype))
        flat = [reshape(v, (-1, 1)) for v in (y_true, y_pred, weights)]
        truth, score, weight = flat
        above = ew.cast(ew.greater(score, convert_to_tensor(self.thresholds, self.dtype)),
                        self.dtype)  # [elements, thresholds]
        below = 1.0 - above
        for kind, hits in (("true_positives", above * truth),
                           ("false_positives", above * (1.0 - truth)),
                           ("false_negatives", below * truth),
                           ("true_negatives", below * (1.0 - truth))):
            self.counts[kind].assign_add(reduce_sum(hits * weight, 0))

    def _ratio(self, numerator: str, other: str) -> Tensor:
        top = self.counts[numerator].read_value()
        bottom = top + self.counts[other].read_value()
        nonzero = ew.not_equal(bottom, 0.0)
        return ew.where(nonzero, top / ew.where(nonzero, bottom, 1.0), 0.0)


class Precision(_Confusion):
    """``true positives / predicted positives`` (a prediction above `threshold`, 0.5 by
    default, is positive; labels above 0.5 are positive).

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: 0/1
    labels; y_pred: probabilities of that shape.

    >>> p = sf.metrics.Precision()
    >>> p.update_state([1, 0, 1, 0], [0.9, 0.8, 0.2, 0.1])
    >>> p.result()
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, threshold: float = 0.5, name: str | None = None,
                 dtype: Any = dtypes.float32) -> None:
        super().__init__([threshold], name, dtype)

    def result(self) -> Tensor:
        return self._ratio("true_positives", "false_positives")[0]


class Recall(_Confusion):
    """``true positives / actual positives`` at `threshold`.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: 0/1
    labels; y_pred: probabilities of that shape.

    >>> r = sf.metrics.Recall()
    >>> r.update_state([1, 0, 1, 1], [0.9, 0.8, 0.2, 0.7])
    >>> r.result()
    sf.Tensor(0.6666667, shape=(), dtype=float32)
    """

    def __init__(self, threshold: float = 0.5, name: str | None = None,
                 dtype: Any = dtypes.float32) -> None:
        super().__init__([threshold], name, dtype)

    def result(self) -> Tensor:
        return self._ratio("true_positives", "false_negatives")[0]


class AUC(_Confusion):
    """The area under the ROC curve, Keras' way: the confusion counts at `num_thresholds`
    evenly spaced thresholds in [0, 1] (with -eps and 1 + eps at the ends), the curve
    integrated by the trapezoidal rule.

    `update_state` takes batches (labels [batch, ...] and predictions of the shapes below);
    `result()` is a float32 scalar over every batch since the last `reset_state`. y_true: 0/1
    labels; y_pred: probabilities of that shape.

    >>> auc = sf.metrics.AUC()
    >>> auc.update_state([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> auc.result()
    sf.Tensor(0.75, shape=(), dtype=float32)
    """

    def __init__(self, num_thresholds: int = 200, name: str | None = None,
                 dtype: Any = dtypes.float32) -> None:
        if int(num_thresholds) < 2:
            raise ValueError(f"AUC: num_thresholds must be at least 2, got {num_thresholds!r}")
        inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        super().__init__([-1e-7, *inner, 1.0 + 1e-7], name, dtype)

    def result(self) -> Tensor:
        recall = self._ratio("true_positives", "false_negatives")  # true positive rate
        fallout = self._ratio("false_positives", "true_negatives")  # false positive rate
        widths = fallout[:-1] - fallout[1:]
        heights = (recall[:-1] + recall[1:]) * 0.5
        return reduce_sum(widths * heights)


class _Count(_Confusion):
    """One of the confusion counts at `thresholds` (0.5 when None; a scalar for one
    threshold, else one count per threshold), as Keras' `TruePositives` and its kin."""

    _KIND = "true_positives"

    def __init__(self, thresholds: Any = None, name: str | None = None,
                 dtype: Any = dtypes.float32) -> None:
        self._single = thresholds is None or isinstance(thresholds, int | float)
        values = [0.5 if thresholds is None else thresholds] if self._single else thresholds
        super().__init__(values, name or camel_to_snake(type(self).__name__), dtype)

    def result(self) -> Tensor:
        counts = self.counts[self._KIND].read_value()
        return counts[0] if self._single else counts


class TruePositives(_Count):
    """The (weighted) count of positive labels predicted above the threshold.

    >>> tp = sf.metrics.TruePositives()
    >>> tp([0, 1, 1, 1], [1, 0, 1, 1])
    sf.Tensor(2., shape=(), dtype=float32)
    """


class FalsePositives(_Count):
    """The (weighted) count of negative labels predicted above the threshold.

    >>> sf.metrics.FalsePositives()([0, 1, 0, 0], [0, 0, 1, 1])
    sf.Tensor(2., shape=(), dtype=float32)
    """

    _KIND = "false_positives"


class TrueNegatives(_Count):
    """The (weighted) count of negative labels predicted at or below the threshold.

    >>> sf.metrics.TrueNegatives()([0, 1, 0, 0], [1, 1, 0, 0])
    sf.Tensor(2., shape=(), dtype=float32)
    """

    _KIND = "true_negatives"


class FalseNegatives(_Count):
    """The (weighted) count of positive labels predicted at or below the threshold.

    >>> sf.metrics.FalseNegatives(thresholds=[0.3, 0.7])([1, 1], [0.5, 0.9])
    sf.Tensor([0., 1.], shape=(2,), dtype=float32)
    """

    _KIND = "false_negatives"


class KLDivergence(MeanMetricWrapper):
    """The running mean of `sf.losses.kl_divergence`.

    >>> kl = sf.metrics.KLDivergence()
    >>> round(float(kl([[0.0, 1.0]], [[0.5, 0.5]])), 5)
    0.69315
    """

    def __init__(self, name: str = "kl_divergence", dtype: Any = dtypes.float32) -> None:
        super().__init__(losses.kl_divergence, name=name, dtype=dtype)


def get(identifier: Any) -> Metric:
    """A metric from what Keras' ``metrics=[...]`` takes: a metric object (itself), a
    function of ``(y_true, y_pred)`` (its running mean), one of Keras' metric names
    (``"mae"``, ``"binary_accuracy"``, ``"top_k_categorical_accuracy"``, ...; the metric is
    named as given, the history's key) or a metric class's name (``"AUC"``). ``"accuracy"``
    is not one: its kind follows the loss, which `Model.compile` knows.

    >>> sf.metrics.get("mae")
    <sf.metrics.MeanAbsoluteError 'mae'>
    >>> sf.metrics.get("Precision")
    <sf.metrics.Precision 'precision'>
    """
    if isinstance(identifier, Metric):
        return identifier
    if callable(identifier) and not isinstance(identifier, type):
        return MeanMetricWrapper(identifier)
    if isinstance(identifier, str):
        factory = _BY_NAME.get(identifier.lower())
        if factory is not None:
            return factory(identifier)
        kind = globals().get(identifier) if identifier in __all__ else None
        if isinstance(kind, type) and issubclass(kind, Metric) and kind not in (
                Metric, MeanMetricWrapper):
            return kind(name=camel_to_snake(identifier))  # Keras' default name
    raise ValueError(f"unknown metric {identifier!r}: give a metric object or class name, a "
                     f"function of (y_true, y_pred), or one of {', '.join(map(repr, _BY_NAME))}")


def _mean_of(function: Callable[..., Tensor]) -> Callable[[str], Metric]:
    return lambda name: MeanMetricWrapper(function, name=name)


def _cosine_similarity(y_true: Any, y_pred: Any) -> Tensor:
    """Keras' metric is the similarity itself, the loss its negative."""
    return ew.negative(losses.cosine_similarity(y_true, y_pred))


# Keras' metric names, each made under the name it was asked for.
_BY_NAME: dict[str, Callable[[str], Metric]] = {
    "binary_accuracy": lambda name: BinaryAccuracy(name=name),
    "categorical_accuracy": lambda name: CategoricalAccuracy(name=name),
    "sparse_categorical_accuracy": lambda name: SparseCategoricalAccuracy(name=name),
    "top_k_categorical_accuracy": lambda name: TopKCategoricalAccuracy(name=name),
    "sparse_top_k_categorical_accuracy":
        lambda name: SparseTopKCategoricalAccuracy(name=name),
    "mse": lambda name: MeanSquaredError(name=name),
    "mean_squared_error": lambda name: MeanSquaredError(name=name),
    "mae": lambda name: MeanAbsoluteError(name=name),
    "mean_absolute_error": lambda name: MeanAbsoluteError(name=name),
    "rmse": lambda name: RootMeanSquaredError(name=name),
    "root_mean_squared_error": lambda name: RootMeanSquaredError(name=name),
    "mape": _mean_of(losses.mean_absolute_percentage_error),
    "mean_absolute_percentage_error": _mean_of(losses.mean_absolute_percentage_error),
    "msle": _mean_of(losses.mean_squared_logarithmic_error),
    "mean_squared_logarithmic_error": _mean_of(losses.mean_squared_logarithmic_error),
    "binary_crossentropy": _mean_of(losses.binary_crossentropy),
    "categorical_crossentropy": _mean_of(losses.categorical_crossentropy),
    "sparse_categorical_crossentropy": _mean_of(losses.sparse_categorical_crossentropy),
    "kld": _mean_of(losses.kl_divergence),
    "kl_divergence": _mean_of(losses.kl_divergence),
    "logcosh": _mean_of(losses.log_cosh),
    "poisson": _mean_of(losses.poisson),
    "hinge": _mean_of(losses.hinge),
    "cosine_similarity": _mean_of(_cosine_similarity),
}


def _as(values: Any, dtype: Any) -> Tensor:
    values = convert_to_tensor(values)
    return values if values.dtype == dtype else ew.cast(values, dtype)


def _ones_like(values: Tensor, dtype: Any) -> Tensor:
    """Ones of the values' shape; also when a dim is unknown while tracing (every element
    is either equal or unequal to itself, NaN included)."""
    if None not in values.shape:
        return ones(values.shape, dtype)
    return ew.cast(ew.logical_or(ew.equal(values, values), ew.not_equal(values, values)), dtype)


def _size(values: Tensor, dtype: Any) -> Tensor:
    """The number of elements: a constant, unless a dim is unknown while tracing."""
    if None not in values.shape:
        return convert_to_tensor(math.prod(values.shape), dtype)
    return reduce_sum(_ones_like(values, dtype))


def _weights(sample_weight: Any, values: Tensor, dtype: Any) -> Tensor:
    """Sample weights cast and broadcast to the values' shape (trailing 1s added, so
    per-sample weights ``[batch]`` fit values ``[batch, ...]``)."""
    weights = _as(sample_weight, dtype)
    while 0 < weights.ndim < values.ndim:
        weights = expand_dims(weights, -1)
    return weights * _ones_like(values, dtype)
