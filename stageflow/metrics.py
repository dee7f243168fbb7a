"""`sf.metrics`: streaming metrics.

Exactly the public names (`__all__`) of `stageflow.models.metrics`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.metrics)`.
"""

from stageflow.models.metrics import *  # noqa: F403
from stageflow.models.metrics import __all__  # noqa: F401
