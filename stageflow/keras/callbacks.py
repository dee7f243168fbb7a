"""`sf.keras.callbacks`: the hooks of `Model.fit`, under Keras' names.

Exactly the public names of `stageflow.models.callbacks` (the base class, the history, the
progress bar, early stopping, schedules, CSV logs) and `stageflow.models.checkpoint_callbacks`
(`ModelCheckpoint`, `BackupAndRestore`) and `stageflow.models.summary_callbacks`
(`TensorBoard`), where they are defined and documented.
"""

from stageflow.models.callbacks import *  # noqa: F403
from stageflow.models.callbacks import __all__ as _base
from stageflow.models.checkpoint_callbacks import *  # noqa: F403
from stageflow.models.checkpoint_callbacks import __all__ as _checkpoints
from stageflow.models.summary_callbacks import *  # noqa: F403
from stageflow.models.summary_callbacks import __all__ as _summaries

from stageflow.core.exports import public_dir as _public_dir

__all__ = [*_base, *_checkpoints, *_summaries]
__dir__ = _public_dir(globals())
