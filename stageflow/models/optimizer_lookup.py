"""`sf.optimizers.get`: Keras' lookup of an optimizer by name or config."""

from __future__ import annotations

from typing import Any

from stageflow.models import optimizers

__all__ = ["get"]


def get(identifier: Any) -> optimizers.Optimizer:
    """An optimizer from its class's name in any case (``"adam"``, ``"Adam"``: made with
    its defaults), a ``{"class_name": ..., "config": {...}}`` config, or an optimizer
    (returned).

    >>> sf.optimizers.get("adam")
    <...Adam...>
    >>> float(sf.optimizers.get({"class_name": "SGD", "config": {"learning_rate": 0.5}})
    ...       .learning_rate)
    0.5
    """
    if isinstance(identifier, optimizers.Optimizer):
        return identifier
    classes = {name.lower(): getattr(optimizers, name) for name in optimizers.__all__
               if name != "Optimizer"}
    config: dict[str, Any] = {}
    name = identifier
    if isinstance(identifier, dict):
        name, config = identifier.get("class_name"), dict(identifier.get("config") or {})
        config.pop("name", None)
    if isinstance(name, str) and name.lower() in classes:
        return classes[name.lower()](**config)
    raise ValueError(f"sf.optimizers.get: unknown optimizer {identifier!r} (one of "
                     f"{', '.join(sorted(classes))}, or an optimizer)")
