"""`sf.nn`: activations, dropout, convolution, pooling, normalisation, cross-entropy losses.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.nn`,
`stageflow.frontend.ops.nn_composites` and `stageflow.frontend.ops.normalization`, where
they are defined and documented: the implementation modules' imports and helpers stay out
of `dir(sf.nn)`.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.nn import *  # noqa: F403
from stageflow.frontend.ops.nn import __all__ as _nn
from stageflow.frontend.ops.nn_composites import *  # noqa: F403
from stageflow.frontend.ops.nn_composites import __all__ as _nn_composites
from stageflow.frontend.ops.normalization import *  # noqa: F403
from stageflow.frontend.ops.normalization import __all__ as _normalization

__all__ = sorted([*_nn, *_nn_composites, *_normalization])
__dir__ = _public_dir(globals())
