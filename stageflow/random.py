"""`sf.random`: seeds, generators and distributions.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.random` and
`stageflow.frontend.ops.random_stateless`, where they are defined and documented, and the
`experimental` seed ops: the implementation modules' imports and helpers stay out of
`dir(sf.random)`.
"""

from stageflow.frontend.ops import random_experimental as experimental
from stageflow.frontend.ops.random import (
    Generator,
    RandomStreams,
    categorical,
    get_global_generator,
    normal,
    set_global_generator,
    set_seed,
    shuffle,
    stateless_normal,
    stateless_uniform,
    truncated_normal,
    uniform,
)
from stageflow.frontend.ops.random_stateless import (
    create_rng_state,
    fold_in,
    stateless_categorical,
    stateless_truncated_normal,
)

__all__ = ["Generator", "RandomStreams", "categorical", "create_rng_state", "experimental",
           "fold_in", "get_global_generator", "normal", "set_global_generator", "set_seed",
           "shuffle", "stateless_categorical", "stateless_normal", "stateless_truncated_normal",
           "stateless_uniform", "truncated_normal", "uniform"]
