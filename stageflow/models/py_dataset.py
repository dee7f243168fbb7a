"""Keras' `PyDataset` (formerly `Sequence`): a dataset of batches by index, which `fit`,
`evaluate` and `predict` take as they take any iterable of batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from stageflow.core import nest
from stageflow.frontend.ops.convert import convert_to_tensor

__all__ = ["PyDataset"]


def _tensor(value: Any) -> Any:
    """A batch's array as a tensor, float64 as float32 (Keras' floatx), as `fit` takes
    arrays; None stays None."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) or np.isscalar(value):
        array = np.asarray(value)
        return convert_to_tensor(array.astype(np.float32) if array.dtype == np.float64
                                 else array)
    return value


def _tensors(structure: Any) -> Any:
    leaves, treedef = nest.flatten(structure)
    return nest.unflatten(treedef, [_tensor(leaf) for leaf in leaves])


class PyDataset:
    """Batches by index: subclass it with `__len__` (the batches in an epoch) and
    `__getitem__` (batch `index`, as ``(x, y)``, ``(x, y, sample_weight)`` or ``x``);
    `on_epoch_end` runs after each pass. ``workers``, ``use_multiprocessing`` and
    ``max_queue_size`` are Keras' and accepted; batches are read in order, on this thread.

    >>> class Pairs(sf.keras.utils.PyDataset):
    ...     def __len__(self):
    ...         return 2
    ...     def __getitem__(self, index):
    ...         x = np.full((4, 1), float(index), np.float32)
    ...         return x, 2 * x
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(1,))])
    >>> model.compile("sgd", "mse")
    >>> len(model.fit(Pairs(), epochs=2, verbose=0).history["loss"])
    2
    """

    def __init__(self, workers: int = 1, use_multiprocessing: bool = False,
                 max_queue_size: int = 10) -> None:
        self.workers = workers
        self.use_multiprocessing = use_multiprocessing
        self.max_queue_size = max_queue_size

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}: define __len__ (the batches)")

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__}: define __getitem__(index)")

    @property
    def num_batches(self) -> int | None:
        """The batches in an epoch (`__len__`)."""
        return len(self)

    def on_epoch_end(self) -> None:
        """Called after each pass over the batches (to reshuffle, say)."""

    def __iter__(self) -> Iterator[Any]:
        for index in range(len(self)):
            batch = self[index]
            if isinstance(batch, tuple):
                yield tuple(_tensors(part) for part in batch)
            else:
                yield _tensors(batch)
        self.on_epoch_end()
