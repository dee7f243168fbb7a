"""`sf.optimizers`: optimizers with Keras' update rules.

Exactly the public names (`__all__`) of `stageflow.models.optimizers`, where they are defined and
documented, its `schedules`, and `get` (`stageflow.models.optimizer_lookup`): the
implementation modules' imports and helpers stay out of `dir(sf.optimizers)`.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import schedules
from stageflow.models.optimizer_lookup import get
from stageflow.models.optimizers import *  # noqa: F403
from stageflow.models.optimizers import __all__ as _optimizers

__all__ = [*_optimizers, "get", "schedules"]
__dir__ = _public_dir(globals())
