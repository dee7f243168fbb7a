"""`sf.keras.callbacks`: the hooks of `Model.fit`, under Keras' names.

Exactly the public names of `stageflow.models.callbacks` (the base class, the history, the
progress bar, early stopping, schedules, CSV logs) and `stageflow.models.checkpoint_callbacks`
(`ModelCheckpoint`, `BackupAndRestore`), `stageflow.models.summary_callbacks`
(`TensorBoard`) and `stageflow.models.plateau_and_nan_callbacks` (`ReduceLROnPlateau`,
`TerminateOnNaN`), where they are defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models.callbacks import *  # noqa: F403
from stageflow.models.callbacks import __all__ as _base
from stageflow.models.checkpoint_callbacks import *  # noqa: F403
from stageflow.models.checkpoint_callbacks import __all__ as _checkpoints
from stageflow.models.plateau_and_nan_callbacks import *  # noqa: F403
from stageflow.models.plateau_and_nan_callbacks import __all__ as _plateau_and_nan
from stageflow.models.summary_callbacks import *  # noqa: F403
from stageflow.models.summary_callbacks import __all__ as _summaries

__all__ = [*_base, *_checkpoints, *_plateau_and_nan, *_summaries]
__dir__ = _public_dir(globals())
