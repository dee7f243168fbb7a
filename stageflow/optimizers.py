"""`sf.optimizers`: optimizers with Keras' update rules.

Exactly the public names (`__all__`) of `stageflow.frontend.optimizers`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.optimizers)`.
"""

from stageflow.frontend import schedules
from stageflow.frontend.optimizers import *  # noqa: F403
from stageflow.frontend.optimizers import __all__ as _optimizers

__all__ = [*_optimizers, "schedules"]
