"""`sf.data`: input pipelines (`Dataset`) whose iterators checkpoints save and restore."""

from stageflow.core.exports import public_dir
from stageflow.data import experimental
from stageflow.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    DatasetSpec,
    Iterator,
)
from stageflow.data.options import Options
from stageflow.data.text import TextLineDataset

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "DatasetSpec",
           "Iterator", "Options", "TextLineDataset", "experimental"]
__dir__ = public_dir(globals())  # not the submodules `dataset`, `elements`, `sources`, `text`
