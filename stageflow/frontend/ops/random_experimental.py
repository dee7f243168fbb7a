"""`sf.random.experimental`: TensorFlow's `tf.random.experimental` seed ops.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.random_stateless` (`Generator` is `sf.random.Generator`).
"""

from stageflow.frontend.ops.random import Generator
from stageflow.frontend.ops.random_stateless import (
    create_rng_state,
    stateless_fold_in,
    stateless_split,
)

__all__ = ["Generator", "create_rng_state", "stateless_fold_in", "stateless_split"]
