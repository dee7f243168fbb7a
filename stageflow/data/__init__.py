"""`sf.data`: input pipelines (`Dataset`) whose iterators checkpoints save and restore."""

from stageflow.core.exports import public_dir
from stageflow.data.dataset import AUTOTUNE, Dataset, Iterator

__all__ = ["AUTOTUNE", "Dataset", "Iterator"]
__dir__ = public_dir(globals())  # not the submodules `dataset`, `elements`, `sources`
