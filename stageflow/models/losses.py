"""`sf.losses`: Keras' loss classes and functions.

A loss function gives one value per example (the mean over the last axis for the
regression losses, the cross-entropy over the classes for the classification ones); a
loss class calls it and reduces the result: ``"sum_over_batch_size"`` (the mean, Keras'
default), ``"sum"``, or ``"none"`` (the per-example values), with optional per-example
`sample_weight`. All are composites of op functions, so they differentiate and compile.

Loss classes compute in float32 what comes in float16 or bfloat16 (a mixed-precision
model's outputs), as Keras' do: a mean over a batch in bfloat16 keeps three digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from stageflow.core import dtypes, nest
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import reduce_all
from stageflow.frontend.ops.nn import (
    softmax_cross_entropy_with_logits,
    softplus,
    sparse_softmax_cross_entropy_with_logits,
)
from stageflow.frontend.ops.normalization import (
    l2_normalize,
    sigmoid_cross_entropy_with_logits,
)
from stageflow.frontend.ops.reductions import reduce_mean, reduce_sum
from stageflow.frontend.ops.shape import squeeze
from stageflow.frontend.tensor import Tensor

__all__ = ["KLD", "MAE", "MAPE", "MSE", "MSLE", "BinaryCrossentropy",
           "CategoricalCrossentropy", "CosineSimilarity", "Hinge", "Huber", "KLDivergence",
           "LogCosh", "Loss", "MeanAbsoluteError",
           "MeanAbsolutePercentageError", "MeanSquaredError", "MeanSquaredLogarithmicError",
           "Poisson", "Reduction", "SparseCategoricalCrossentropy", "binary_crossentropy",
           "categorical_crossentropy", "cosine_similarity", "hinge", "huber", "kl_divergence",
           "kld", "log_cosh", "logcosh", "mae", "mape", "mean_absolute_error",
           "mean_absolute_percentage_error", "mean_squared_error",
           "mean_squared_logarithmic_error", "mse", "msle", "poisson",
           "sparse_categorical_crossentropy"]

REDUCTIONS = ("sum_over_batch_size", "sum", "none", "auto")  # "auto": sum_over_batch_size


class Reduction:
    """The reductions a `Loss` takes, by TensorFlow's names (``tf.keras.losses.Reduction``;
    the values are the strings `Loss` takes).

    >>> sf.losses.MeanSquaredError(reduction=sf.losses.Reduction.NONE)([[0.0]], [[2.0]])
    sf.Tensor([4.], shape=(1,), dtype=float32)
    """

    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    AUTO = "auto"
_EPSILON = 1e-7  # Keras' clipping of probabilities (its `backend.epsilon()`)
_LOG_2 = math.log(2.0)


def full_precision(structure: Any) -> Any:
    """`structure` with its float16 and bfloat16 tensors cast to float32 (the dtype Keras
    computes losses and metrics in); other leaves as they are."""
    leaves, treedef = nest.flatten(structure)
    return nest.unflatten(treedef, [ew.cast(leaf, dtypes.float32)
                                    if isinstance(leaf, Tensor) and leaf.dtype in _HALF
                                    else leaf for leaf in leaves])


_HALF = (dtypes.float16, dtypes.bfloat16)


def _pair(y_true: Any, y_pred: Any) -> tuple[Tensor, Tensor]:
    """The labels in the predictions' dtype, as Keras casts them (bool or integer labels
    of a float model)."""
    y_pred = convert_to_tensor(y_pred)
    if not isinstance(y_true, Tensor):
        try:
            return convert_to_tensor(y_true, y_pred.dtype), y_pred
        except TypeError:  # a bool array, say: converted as it is, then cast
            y_true = convert_to_tensor(y_true)
    return (y_true if y_true.dtype == y_pred.dtype else ew.cast(y_true, y_pred.dtype)), y_pred


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

    y_true: int labels [...] (or [..., 1], as Keras takes them too); y_pred: float
    probabilities (or logits) [..., classes]; returns [...] of y_pred's dtype.

    >>> sf.losses.sparse_categorical_crossentropy([1, 0], [[0.5, 0.5], [0.9, 0.1]])
    sf.Tensor([0.6931472 , 0.10536057], shape=(2,), dtype=float32)
    >>> sf.losses.sparse_categorical_crossentropy([[1]], [[0.0, 0.0]], from_logits=True)
    sf.Tensor([0.6931472], shape=(1,), dtype=float32)
    """
    y_pred = convert_to_tensor(y_pred)
    y_true = convert_to_tensor(y_true)
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = squeeze(y_true, -1)
    if from_logits:
        return sparse_softmax_cross_entropy_with_logits(y_true, y_pred)
    p = ew.clip_by_value(y_pred / reduce_sum(y_pred, -1, keepdims=True), _EPSILON,
                         1.0 - _EPSILON)
    # -log_softmax(log p)[label] is -log p[label] + log(sum(p)): p sums to one
    return sparse_softmax_cross_entropy_with_logits(y_true, ew.log(p))


def mean_squared_logarithmic_error(y_true: Any, y_pred: Any) -> Tensor:
    """``mean((log(1 + y_pred) - log(1 + y_true))**2, axis=-1)``, both clipped below at
    1e-7 first, as Keras does (so negative values count as zero).

    y_true, y_pred: float tensors [..., n] of one shape; returns [...] of y_pred's dtype.

    >>> sf.losses.mean_squared_logarithmic_error([[0.0, 1.0]], [[1.0, 1.0]])
    sf.Tensor([0.24022643], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    first = ew.log1p(ew.maximum(y_pred, _EPSILON))
    second = ew.log1p(ew.maximum(y_true, _EPSILON))
    return reduce_mean(ew.square(first - second), -1)


def mean_absolute_percentage_error(y_true: Any, y_pred: Any) -> Tensor:
    """``100 * mean(|y_true - y_pred| / max(|y_true|, 1e-7), axis=-1)`` (Keras' guard
    against zero targets).

    y_true, y_pred: float tensors [..., n] of one shape; returns [...] of y_pred's dtype.

    >>> sf.losses.mean_absolute_percentage_error([[2.0, 4.0]], [[1.0, 5.0]])
    sf.Tensor([37.5], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    ratio = ew.abs((y_true - y_pred) / ew.maximum(ew.abs(y_true), _EPSILON))
    return reduce_mean(ratio, -1) * 100.0


def kl_divergence(y_true: Any, y_pred: Any) -> Tensor:
    """``sum(y_true * log(y_true / y_pred), axis=-1)``, both clipped to [1e-7, 1] as
    Keras does (so zero probabilities add nothing rather than NaN).

    y_true, y_pred: probabilities [..., classes] of one shape; returns [...] of y_pred's
    dtype.

    >>> sf.losses.kl_divergence([[0.5, 0.5]], [[0.25, 0.75]])
    sf.Tensor([0.14384106], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = ew.clip_by_value(y_true, _EPSILON, 1.0)
    y_pred = ew.clip_by_value(y_pred, _EPSILON, 1.0)
    return reduce_sum(y_true * ew.log(y_true / y_pred), -1)


def log_cosh(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(log(cosh(y_pred - y_true)), axis=-1)``, computed as Keras does, as
    ``x + softplus(-2x) - log 2``, which does not overflow for large errors.

    y_true, y_pred: float tensors [..., n] of one shape; returns [...] of y_pred's dtype.

    >>> sf.losses.log_cosh([[0.0, 0.0]], [[1.0, -1.0]])
    sf.Tensor([0.43378085], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    x = y_pred - y_true
    return reduce_mean(x + softplus(x * -2.0) - _LOG_2, -1)


def poisson(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(y_pred - y_true * log(y_pred + 1e-7), axis=-1)``: the negative Poisson
    log-likelihood of counts `y_true` at rates `y_pred`, less its constant.

    y_true, y_pred: float tensors [..., n] of one shape; returns [...] of y_pred's dtype.

    >>> sf.losses.poisson([[1.0, 2.0]], [[1.0, 1.0]])
    sf.Tensor([0.9999998], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return reduce_mean(y_pred - y_true * ew.log(y_pred + _EPSILON), -1)


def cosine_similarity(y_true: Any, y_pred: Any, axis: int = -1) -> Tensor:
    """``-sum(l2_normalize(y_true) * l2_normalize(y_pred), axis)``: -1 for vectors
    pointing the same way, so that minimising it aligns them (Keras' sign); 0 where
    either is zero.

    y_true, y_pred: float tensors of one shape; returns their shape without `axis`.

    >>> sf.losses.cosine_similarity([[0.0, 1.0], [1.0, 1.0]], [[0.0, 2.0], [-1.0, -1.0]])
    sf.Tensor([-1.        ,  0.99999994], shape=(2,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return ew.negative(reduce_sum(l2_normalize(y_true, axis) * l2_normalize(y_pred, axis),
                                  axis))


def hinge(y_true: Any, y_pred: Any) -> Tensor:
    """``mean(max(1 - y_true * y_pred, 0), axis=-1)`` for labels -1 or 1; labels given as
    0 and 1 (every one of them) are taken as -1 and 1, as Keras does.

    y_true: labels [..., n]; y_pred: float scores of that shape; returns [...] of
    y_pred's dtype.

    >>> sf.losses.hinge([[0.0, 1.0]], [[0.5, 0.5]])
    sf.Tensor([1.], shape=(1,), dtype=float32)
    >>> sf.losses.hinge([[-1.0, 1.0]], [[0.5, 0.5]])
    sf.Tensor([1.], shape=(1,), dtype=float32)
    """
    y_true, y_pred = _pair(y_true, y_pred)
    binary = reduce_all(ew.logical_or(ew.equal(y_true, 0.0), ew.equal(y_true, 1.0)))
    y_true = ew.where(binary, y_true * 2.0 - 1.0, y_true)
    return reduce_mean(ew.maximum(1.0 - y_true * y_pred, 0.0), -1)


# Keras' short names of its loss functions (lower and upper case), the same functions.
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kl_divergence
logcosh = log_cosh


class Loss:
    """A loss function with its reduction: ``loss(y_true, y_pred, sample_weight=None)``.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none"),
    float32 for float16 and bfloat16 predictions, which it computes in float32.

    >>> loss = sf.losses.Loss(sf.losses.mean_absolute_error, reduction="sum")
    >>> loss([[0.0], [0.0]], [[1.0], [3.0]])
    sf.Tensor(4., shape=(), dtype=float32)
    >>> loss
    <sf.losses.Loss 'mean_absolute_error' reduction='sum'>
    >>> loss([[0.0]], sf.constant([[1.5]], sf.bfloat16))
    sf.Tensor(1.5, shape=(), dtype=float32)
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
        values = self.function(*full_precision((y_true, y_pred)), **self.options)
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

    def get_config(self) -> dict[str, Any]:
        """Keras' config: the name, the reduction and the function's options."""
        return {"name": self.name, "reduction": self.reduction, **self.options}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Loss:
        """A loss of this class from `get_config`'s config."""
        return cls(**config)


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


class MeanSquaredLogarithmicError(Loss):
    """`mean_squared_logarithmic_error` as a loss object, reduced over the batch.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.MeanSquaredLogarithmicError()([[0.0, 1.0]], [[1.0, 1.0]])
    sf.Tensor(0.24022643, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(mean_squared_logarithmic_error, reduction, name)


class MeanAbsolutePercentageError(Loss):
    """`mean_absolute_percentage_error` as a loss object, reduced over the batch.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.MeanAbsolutePercentageError()([[2.0], [4.0]], [[1.0], [5.0]])
    sf.Tensor(37.5, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(mean_absolute_percentage_error, reduction, name)


class KLDivergence(Loss):
    """`kl_divergence` as a loss object, reduced over the batch.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.KLDivergence()([[0.5, 0.5], [1.0, 0.0]], [[0.25, 0.75], [1.0, 0.0]])
    sf.Tensor(0.07192053, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(kl_divergence, reduction, name)


class LogCosh(Loss):
    """`log_cosh` as a loss object: quadratic for small errors, linear for large ones.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.LogCosh()([[0.0], [0.0]], [[1.0], [-1.0]])
    sf.Tensor(0.43378085, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(log_cosh, reduction, name)


class Poisson(Loss):
    """`poisson` as a loss object, for count data.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.Poisson()([[1.0, 2.0]], [[1.0, 1.0]])
    sf.Tensor(0.9999998, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(poisson, reduction, name)


class CosineSimilarity(Loss):
    """`cosine_similarity` over `axis` as a loss object (-1 when aligned).

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.CosineSimilarity()([[0.0, 1.0], [1.0, 0.0]], [[0.0, 3.0], [0.0, 1.0]])
    sf.Tensor(-0.5, shape=(), dtype=float32)
    """

    def __init__(self, axis: int = -1, reduction: str = "sum_over_batch_size",
                 name: str | None = None):
        super().__init__(cosine_similarity, reduction, name, axis=int(axis))


class Hinge(Loss):
    """`hinge` as a loss object, for labels -1/1 (or 0/1) and real-valued scores.

    Call it as ``loss(y_true, y_pred, sample_weight=None)`` with the arguments of its function;
    it returns a scalar of y_pred's dtype (the per-example values with reduction="none").

    >>> sf.losses.Hinge()([[1.0], [0.0]], [[2.0], [0.5]])
    sf.Tensor(0.75, shape=(), dtype=float32)
    """

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(hinge, reduction, name)
