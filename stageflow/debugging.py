"""`sf.debugging`: checks of tensor values, eagerly and when staged functions run.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.debugging`, where they are
defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.debugging import *  # noqa: F403
from stageflow.frontend.ops.debugging import __all__ as _debugging

__all__ = sorted(_debugging)
__dir__ = _public_dir(globals())
