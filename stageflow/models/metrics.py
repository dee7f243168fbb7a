"""`sf.metrics`: streaming metrics whose running state lives in variables.

A metric accumulates with `update_state(...)`, reports with `result()` and starts over with
`reset_state()`; calling it does an update and returns the result, as in Keras. The running
`total` and `count` are (non-trainable) variables created with the metric, so a staged
function that updates a metric updates the live object, and `result()` works in both
contexts.
"""

from __future__ import annotations

import math
from typing import Any

from stageflow.core import dtypes
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones, zeros
from stageflow.frontend.ops.reductions import argmax, reduce_sum
from stageflow.frontend.ops.shape import expand_dims, reshape, squeeze
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models.module import Module

__all__ = ["AUC", "Accuracy", "CategoricalAccuracy", "Mean", "MeanSquaredError", "Metric",
           "Precision", "Recall", "SparseCategoricalAccuracy", "Sum"]


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
        """A scalar accumulator variable, initially 0."""
        return Variable(zeros((), self.dtype), trainable=False, name=f"{self.name}/{name}")

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


class _Confusion(Metric):
    """Counts of true/false positives/negatives at `thresholds` (a prediction is positive
    when greater than the threshold), one count per threshold."""

    def __init__(self, thresholds: Any, name: str | None, dtype: Any) -> None:
        super().__init__(name, dtype)
        self.thresholds = [float(t) for t in thresholds]
        shape = (len(self.thresholds),)
        self.counts = {kind: Variable(zeros(shape, self.dtype), trainable=False,
                                      name=f"{self.name}/{kind}")
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
