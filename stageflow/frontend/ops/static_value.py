"""`sf.get_static_value`: a tensor's value when it is known without running a graph (an
eager tensor, a constant, a Python or NumPy value), else None: what ops whose output shape
depends on values (`bincount`, `sequence_mask`...) read to fix that shape."""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.errors import StagingError
from stageflow.frontend.ops.convert import is_tensor

__all__ = ["get_static_value"]


def get_static_value(tensor: Any, partial: bool = False) -> np.ndarray | None:
    """The NumPy value of `tensor` if it is known now, else None (TensorFlow's
    ``tf.get_static_value``): eagerly always; a tensor of a function being traced has no
    value yet, and gives None. `partial` is accepted for TensorFlow's signature.

    >>> sf.get_static_value(sf.constant([1, 2]))
    array([1, 2], dtype=int32)
    """
    del partial
    if not is_tensor(tensor):
        return None if tensor is None else np.asarray(tensor)
    try:
        return np.asarray(tensor.numpy())
    except StagingError:
        return None
