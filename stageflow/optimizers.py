"""`sf.optimizers`: optimizers with Keras' update rules.

Exactly the public names (`__all__`) of `stageflow.models.optimizers`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.optimizers)`.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import schedules
from stageflow.models.optimizers import *  # noqa: F403
from stageflow.models.optimizers import __all__ as _optimizers

__all__ = [*_optimizers, "schedules"]
__dir__ = _public_dir(globals())
