"""The `sf` op set: every primitive with its shape rule and eager kernel, by family."""

from stageflow.frontend.primitives import (  # noqa: F401 - importing registers the primitives
    conv,
    elementwise,
    functional,
    linalg,
    random,
    reduction,
    state,
    structural,
)
from stageflow.frontend.primitives.base import REGISTRY, Primitive, ShapedType

__all__ = ["REGISTRY", "Primitive", "ShapedType"]
