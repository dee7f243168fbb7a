"""Weight regularizers, for the `kernel_regularizer=` / `bias_regularizer=` /
`activity_regularizer=` arguments of layers (Keras' classes, names and formulas).

A regularizer maps a tensor to a scalar penalty. A layer given one adds the penalty of its
weights (or of its outputs, for an activity regularizer) to its `losses`; a model's
`losses` are its layers', and `fit` adds their sum to the loss it minimises, as Keras does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.tensor import Tensor

__all__ = ["L1", "L1L2", "L2", "Regularizer", "get", "l1", "l1_l2", "l2"]


class Regularizer:
    """The base of regularizers: ``regularizer(x)`` is a scalar penalty of tensor `x`.
    A plain function of one tensor serves as well.

    >>> isinstance(sf.keras.regularizers.L2(0.1), sf.keras.regularizers.Regularizer)
    True
    """

    def __call__(self, x: Any) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, float]:
        return {}


class L1L2(Regularizer):
    """``l1 * sum(|x|) + l2 * sum(x ** 2)``.

    >>> sf.keras.regularizers.L1L2(l1=0.5, l2=0.25)(sf.constant([1.0, -2.0]))
    sf.Tensor(2.75, shape=(), dtype=float32)
    """

    def __init__(self, l1: float = 0.0, l2: float = 0.0) -> None:
        self.l1 = float(l1)
        self.l2 = float(l2)

    def __call__(self, x: Any) -> Tensor:
        x = convert_to_tensor(x)
        penalty = convert_to_tensor(0.0, x.dtype)
        if self.l1:
            penalty = penalty + self.l1 * reduce_sum(ew.abs(x))
        if self.l2:
            penalty = penalty + self.l2 * reduce_sum(ew.square(x))
        return penalty

    def get_config(self) -> dict[str, float]:
        return {"l1": self.l1, "l2": self.l2}

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value}" for key, value in self.get_config().items())
        return f"{type(self).__name__}({fields})"


class L1(L1L2):
    """``l1 * sum(|x|)`` (Keras' default factor 0.01).

    >>> sf.keras.regularizers.L1(0.1)(sf.constant([1.0, -2.0]))
    sf.Tensor(0.3, shape=(), dtype=float32)
    """

    def __init__(self, l1: float = 0.01) -> None:
        super().__init__(l1=l1)

    def get_config(self) -> dict[str, float]:
        return {"l1": self.l1}


class L2(L1L2):
    """``l2 * sum(x ** 2)`` (Keras' default factor 0.01).

    >>> sf.keras.regularizers.L2(0.1)(sf.constant([1.0, -2.0]))
    sf.Tensor(0.5, shape=(), dtype=float32)
    """

    def __init__(self, l2: float = 0.01) -> None:
        super().__init__(l2=l2)

    def get_config(self) -> dict[str, float]:
        return {"l2": self.l2}


def l1(l1: float = 0.01) -> L1:  # noqa: E741 - Keras' name
    """`L1` by Keras' function name.

    >>> sf.keras.regularizers.l1(0.2)
    L1(l1=0.2)
    """
    return L1(l1)


def l2(l2: float = 0.01) -> L2:
    """`L2` by Keras' function name.

    >>> sf.keras.regularizers.l2(0.2)
    L2(l2=0.2)
    """
    return L2(l2)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> L1L2:  # noqa: E741 - Keras' name
    """`L1L2` by Keras' function name (both factors 0.01 by default).

    >>> sf.keras.regularizers.l1_l2()
    L1L2(l1=0.01, l2=0.01)
    """
    return L1L2(l1, l2)


_BY_NAME: dict[str, Callable[[], Regularizer]] = {"l1": L1, "l2": L2, "l1_l2": l1_l2,
                                                   "l1l2": l1_l2}


def get(identifier: Any) -> Callable[[Any], Tensor] | None:
    """A regularizer from a layer argument: None, a name (``"l2"``), a regularizer or a
    function of one tensor.

    >>> sf.keras.regularizers.get("l2")
    L2(l2=0.01)
    """
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown regularizer {identifier!r}: a Regularizer, a function of one "
                     f"tensor, or one of {sorted(_BY_NAME)}")
