"""The ops `sf.math` shows: each is marked where it is defined and documented (`math_op`),
and `stageflow/math.py` exports every op marked in this package's modules, so an op of
TensorFlow's `tf.math` is named once, by its definition."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MATH", "math_op"]

Op = TypeVar("Op", bound=Callable[..., Any])

MATH: dict[str, Callable[..., Any]] = {}  # sf.math's ops, by name


def math_op(op: Op) -> Op:
    """Enter `op` in `sf.math` under its ``__name__`` (a decorator, or a call around an op
    made by a factory); two ops of one name are an error."""
    existing = MATH.setdefault(op.__name__, op)
    if existing is not op:
        raise ValueError(f"two ops are named sf.math.{op.__name__}: {existing} and {op}")
    return op
