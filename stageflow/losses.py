"""`sf.losses`: Keras' losses, as classes with reductions and as functions.

Exactly the public names (`__all__`) of `stageflow.models.losses`, where they are defined
and documented.
"""

from stageflow.models.losses import *  # noqa: F403
from stageflow.models.losses import __all__  # noqa: F401
