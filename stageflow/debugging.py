"""`sf.debugging`: checks of tensor values, eagerly and when staged functions run, and of
shapes, ranks and dtypes.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.debugging` and
`stageflow.frontend.ops.debugging_shapes`, where they are defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.debugging import *  # noqa: F403
from stageflow.frontend.ops.debugging import __all__ as _debugging
from stageflow.frontend.ops.debugging_shapes import *  # noqa: F403
from stageflow.frontend.ops.debugging_shapes import __all__ as _shapes

__all__ = sorted([*_debugging, *_shapes])
__dir__ = _public_dir(globals())
