"""`sf.layers`: Keras-style layers.

Exactly the public names (`__all__`) of `stageflow.frontend.layers`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.layers)`.
"""

from stageflow.frontend.layers import *  # noqa: F403
from stageflow.frontend.layers import __all__  # noqa: F401
