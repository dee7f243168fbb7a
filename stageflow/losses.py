"""`sf.losses`: Keras' losses, as classes with reductions and as functions.

Exactly the public names (`__all__`) of `stageflow.models.losses`,
`stageflow.models.hinge_and_focal_losses` and `stageflow.models.loss_lookup`, where they are
defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models.hinge_and_focal_losses import *  # noqa: F403
from stageflow.models.hinge_and_focal_losses import __all__ as _hinge_and_focal
from stageflow.models.loss_lookup import get
from stageflow.models.losses import *  # noqa: F403
from stageflow.models.losses import __all__ as _losses

__all__ = [*_losses, *_hinge_and_focal, "get"]
__dir__ = _public_dir(globals())
