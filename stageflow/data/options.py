"""`sf.data.Options`: the options TensorFlow programs set on a pipeline with
`Dataset.with_options`, and which of them stageflow acts on.

A distribution strategy reads `experimental_distribute.auto_shard_policy` when it
distributes the dataset: ``DATA`` (and ``AUTO``) split each global batch over the
replicas, ``OFF`` gives every replica the whole element; sharding by files (``FILE``) is
refused there, as stageflow's sources are not files. The other options describe how
TensorFlow's runtime may execute the pipeline (determinism, thread pools); stageflow's
pipeline keeps its order and its own threads whatever they say, which is what the options
allow.
"""

from __future__ import annotations

import enum
from typing import Any


class AutoShardPolicy(enum.Enum):
    """How a multi-replica strategy splits a dataset (TensorFlow's
    ``tf.data.experimental.AutoShardPolicy``).

    >>> sf.data.experimental.AutoShardPolicy.DATA
    <AutoShardPolicy.DATA: 2>
    """

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class _Group:
    """A group of options: only the names it was made with may be set."""

    def __init__(self, **defaults: Any) -> None:
        object.__setattr__(self, "_names", tuple(defaults))
        for name, value in defaults.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._names:
            raise AttributeError(f"{type(self).__name__} has no option {name!r}; its options "
                                 f"are {', '.join(self._names)}")
        object.__setattr__(self, name, value)

    def _merged(self, other: _Group) -> _Group:
        """These options, with those `other` sets (not None) in their place."""
        merged = type(self)()
        for name in self._names:
            value = getattr(other, name)
            setattr(merged, name, value if value is not None else getattr(self, name))
        return merged


class DistributeOptions(_Group):
    """``options.experimental_distribute``."""

    def __init__(self) -> None:
        super().__init__(auto_shard_policy=None, num_devices=None)


class ThreadingOptions(_Group):
    """``options.threading``."""

    def __init__(self) -> None:
        super().__init__(private_threadpool_size=None, max_intra_op_parallelism=None)


class OptimizationOptions(_Group):
    """``options.experimental_optimization``."""

    def __init__(self) -> None:
        super().__init__(apply_default_optimizations=None, map_parallelization=None,
                         parallel_batch=None, inject_prefetch=None)


class Options(_Group):
    """Options of a pipeline (TensorFlow's ``tf.data.Options``), set with
    `Dataset.with_options` and read with `Dataset.options`.

    >>> options = sf.data.Options()
    >>> options.experimental_distribute.auto_shard_policy = (
    ...     sf.data.experimental.AutoShardPolicy.DATA)
    >>> ds = sf.data.Dataset.range(4).with_options(options)
    >>> ds.options().experimental_distribute.auto_shard_policy
    <AutoShardPolicy.DATA: 2>
    """

    def __init__(self) -> None:
        super().__init__(deterministic=None, experimental_deterministic=None,
                         experimental_distribute=DistributeOptions(),
                         threading=ThreadingOptions(),
                         experimental_optimization=OptimizationOptions(),
                         experimental_slack=None, experimental_external_state_policy=None)

    def merge(self, other: Options) -> Options:
        """These options with those `other` sets in their place (TensorFlow's rule when
        `with_options` is applied twice in a pipeline)."""
        merged = Options()
        for name in self._names:
            mine, theirs = getattr(self, name), getattr(other, name)
            if isinstance(mine, _Group):
                value = mine._merged(theirs)
            else:
                value = theirs if theirs is not None else mine
            setattr(merged, name, value)
        return merged
