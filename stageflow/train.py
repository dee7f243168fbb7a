"""`sf.train`: object-graph checkpoints (the paper, section 4.3).

Exactly the public names of `stageflow.models.train.checkpoint`, where they are defined and
documented.
"""

from stageflow.models.train.checkpoint import (
    Checkpoint,
    CheckpointLoadStatus,
    CheckpointManager,
    NumpyState,
    PythonState,
    latest_checkpoint,
)

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "NumpyState",
           "PythonState", "latest_checkpoint"]
