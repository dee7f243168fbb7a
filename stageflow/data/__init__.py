"""`sf.data`: input pipelines (`Dataset`) whose iterators checkpoints save and restore."""

from stageflow.data.dataset import AUTOTUNE, Dataset, Iterator

__all__ = ["AUTOTUNE", "Dataset", "Iterator"]
