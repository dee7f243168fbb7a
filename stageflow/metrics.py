"""`sf.metrics`: streaming metrics.

Exactly the public names (`__all__`) of `stageflow.frontend.metrics`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.metrics)`.
"""

from stageflow.frontend.metrics import *  # noqa: F403
from stageflow.frontend.metrics import __all__  # noqa: F401
