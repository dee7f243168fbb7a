"""`sf.train`: object-graph checkpoints (the paper, section 4.3).

The public names of `stageflow.models.train.checkpoint` and `.reader`, where they are
defined and documented.
"""

from stageflow.models.train.checkpoint import (
    Checkpoint,
    CheckpointLoadStatus,
    CheckpointManager,
    NumpyState,
    PythonState,
    latest_checkpoint,
)
from stageflow.models.train.reader import (
    CheckpointReader,
    list_variables,
    load_checkpoint,
    load_variable,
)

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "CheckpointReader",
           "NumpyState", "PythonState", "latest_checkpoint", "list_variables",
           "load_checkpoint", "load_variable"]
