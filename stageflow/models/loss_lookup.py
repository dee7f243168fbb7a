"""`sf.losses.get`: Keras' lookup of a loss by name, config or callable."""

from __future__ import annotations

from typing import Any

from stageflow.models import hinge_and_focal_losses, losses, serializable

__all__ = ["get"]


def _table() -> dict[str, Any]:
    names = {}
    for module in (losses, hinge_and_focal_losses):
        names.update((name, getattr(module, name)) for name in module.__all__)
    return names


def get(identifier: Any) -> Any:
    """A loss from a name (a function's, ``"mse"``, or a class's, ``"MeanSquaredError"``,
    made with its defaults), a config (`sf.keras.saving.serialize_keras_object`'s), or a
    callable (returned); None for None.

    >>> sf.losses.get("mse") is sf.losses.mean_squared_error
    True
    >>> sf.losses.get("SquaredHinge")
    <sf.losses.SquaredHinge 'squared_hinge' reduction='sum_over_batch_size'>
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return serializable.deserialize(identifier)
    if isinstance(identifier, str):
        found = _table().get(identifier)
        if isinstance(found, type) and issubclass(found, losses.Loss) and found is not \
                losses.Loss:
            return found()
        if callable(found) and not isinstance(found, type):
            return found
        raise ValueError(f"sf.losses.get: unknown loss {identifier!r}")
    if callable(identifier):
        return identifier
    raise ValueError(f"sf.losses.get: cannot interpret {identifier!r} as a loss")
