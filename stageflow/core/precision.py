"""Precision policies (Keras' mixed precision): the dtype a layer computes in and the dtype
it keeps its variables in, the one global policy new layers take, and the autocast scope
that reads variables in a layer's compute dtype while its `call` runs.

``mixed_bfloat16`` computes in bfloat16 (half the memory traffic, AMX and tensor-core
matrix products) while the variables stay float32, so that small updates are not lost to
bfloat16's 8-bit mantissa: a variable is cast when read inside the layer, and the cast's
gradient brings the gradient back in float32 to the optimizer. The state lives here, in
`core`, so that `sf.config.set_precision_policy` (this layer) and the layers (the model
layer) share one global policy, and variable reads (`frontend`) see one autocast scope.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.source import describe_location

__all__ = ["Policy", "global_policy", "set_global_policy"]

# name -> (compute dtype, variable dtype), Keras' policy names.
_POLICIES: dict[str, tuple[str, str]] = {
    "float32": ("float32", "float32"),
    "float64": ("float64", "float64"),
    "bfloat16": ("bfloat16", "bfloat16"),
    "float16": ("float16", "float16"),
    "mixed_bfloat16": ("bfloat16", "float32"),
    "mixed_float16": ("float16", "float32"),
}


class Policy:
    """A layer's dtypes by Keras' policy name: ``compute_dtype`` (what its inputs are
    cast to and its outputs come out in) and ``variable_dtype`` (what its variables are
    kept in). The names: ``float32``, ``float64``, ``bfloat16``, ``float16`` (both dtypes
    the same), ``mixed_bfloat16`` and ``mixed_float16`` (float32 variables).

    >>> policy = sf.keras.mixed_precision.Policy("mixed_bfloat16")
    >>> policy.name, policy.compute_dtype, policy.variable_dtype
    ('mixed_bfloat16', 'bfloat16', 'float32')
    >>> sf.keras.mixed_precision.Policy("mixed_int8")
    Traceback (most recent call last):
    ...
    ValueError: Policy: unknown policy 'mixed_int8' (one of float32, float64, bfloat16, ...)
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or name not in _POLICIES:
            raise ValueError(f"Policy: unknown policy {name!r} (one of "
                             f"{', '.join(_POLICIES)}){describe_location()}")
        self._name = name
        compute, variable = _POLICIES[name]
        # As NumPy dtypes too, for the layers' casts (the names are Keras' attributes).
        self.compute = dtypes.as_dtype(compute)
        self.variable = dtypes.as_dtype(variable)

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        return dtypes.dtype_name(self.compute)

    @property
    def variable_dtype(self) -> str:
        return dtypes.dtype_name(self.variable)

    @property
    def mixed(self) -> bool:
        """Whether variables are read in another dtype than they are kept in."""
        return self.compute != self.variable

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f'<Policy "{self.name}">'


def as_policy(value: Any, taker: str = "set_global_policy") -> Policy:
    """A `Policy` for a policy, its name, or a floating dtype (``sf.float64``: that
    dtype's policy), as a layer's ``dtype=`` takes them; `taker` names the caller in the
    error for anything else."""
    if isinstance(value, Policy):
        return value
    if isinstance(value, str) and value in _POLICIES:
        return Policy(value)
    try:
        dtype = dtypes.as_dtype(value)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtypes.dtype_name(dtype) not in _POLICIES:
        raise ValueError(f"{taker}: expected a precision policy or its name (one of "
                         f"{', '.join(_POLICIES)}), got {value!r}{describe_location()}")
    return Policy(dtypes.dtype_name(dtype))


# None until set: layers then take their first input's floating dtype (stageflow's rule
# before policies, which float64 models rely on); `global_policy` reports Keras' default.
_global: Policy | None = None


def set_global_policy(policy: Policy | str | None) -> None:
    """The policy of the layers created from now on (those given no ``dtype=``), Keras'
    ``keras.mixed_precision.set_global_policy``; None restores the default, under which
    a layer takes its first input's floating dtype (float32 for other inputs).
    ``sf.config.set_precision_policy`` is the same setter.

    >>> sf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    >>> layer = sf.keras.layers.Dense(2)
    >>> layer(sf.ones((1, 3))).dtype.name, layer.kernel.dtype.name
    ('bfloat16', 'float32')
    >>> sf.keras.mixed_precision.set_global_policy(None)
    >>> sf.keras.mixed_precision.global_policy()
    <Policy "float32">
    """
    global _global
    _global = None if policy is None else as_policy(policy)


def global_policy() -> Policy:
    """The policy new layers take (Keras' ``keras.mixed_precision.global_policy``):
    ``float32`` until `set_global_policy` says otherwise.

    >>> sf.keras.mixed_precision.global_policy().name
    'float32'
    >>> sf.config.get_precision_policy().compute_dtype
    'float32'
    """
    return _global if _global is not None else Policy("float32")


def explicit_global_policy() -> Policy | None:
    """The global policy if one was set, else None (layers take their input's dtype)."""
    return _global


# --------------------------------------------------------------------------- autocast

class _Autocast(threading.local):
    def __init__(self) -> None:
        # The dtype floating variables are read in, per layer call in progress (innermost
        # last); None where reads keep the variables' dtype.
        self.stack: list[np.dtype | None] = []


_autocast = _Autocast()
context.inherit_list_in_threads(_autocast, "stack")


def autocast_dtype() -> np.dtype | None:
    """The dtype the layer call running on this thread reads floating variables in, or
    None outside layer calls and in those that read them as they are."""
    stack = _autocast.stack
    return stack[-1] if stack else None


def autocast_stack() -> list[np.dtype | None]:
    """This thread's autocast scopes: a layer call pushes its compute dtype and pops it."""
    return _autocast.stack
