"""`sf.nn`: activations, dropout, convolution, pooling, cross-entropy losses.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.nn`, where they are defined and
documented: the implementation module's imports and helpers stay out of `dir(sf.nn)`.
"""

from stageflow.frontend.ops.nn import *  # noqa: F403
from stageflow.frontend.ops.nn import __all__  # noqa: F401
