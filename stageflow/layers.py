"""`sf.layers`: Keras-style layers.

Exactly the public names (`__all__`) of `stageflow.frontend.layers`, `.attention`,
`.normalization_layers` and `.recurrent` (in `stageflow.frontend`), where they are defined
and documented: the implementation modules' imports and helpers stay out of
`dir(sf.layers)`.
"""

from stageflow.frontend.attention import *  # noqa: F403
from stageflow.frontend.attention import __all__ as _attention
from stageflow.frontend.layers import *  # noqa: F403
from stageflow.frontend.layers import __all__ as _layers
from stageflow.frontend.normalization_layers import *  # noqa: F403
from stageflow.frontend.normalization_layers import __all__ as _normalization
from stageflow.frontend.recurrent import *  # noqa: F403
from stageflow.frontend.recurrent import __all__ as _recurrent

__all__ = sorted([*_attention, *_layers, *_normalization, *_recurrent])
