"""`sf.random`: seeds, generators and distributions.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.random`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.random)`.
"""

from stageflow.frontend.ops.random import *  # noqa: F403
from stageflow.frontend.ops.random import __all__  # noqa: F401
