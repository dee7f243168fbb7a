"""`sf.nest`: TensorFlow's `tf.nest` names, for nested lists, tuples, namedtuples and dicts.

Exactly the public names; they are defined and documented in `stageflow.core.structures`,
over the flattening `sf.function` uses for its arguments (dict values in sorted key order,
None a leaf).
"""

from stageflow.core.structures import (
    assert_same_structure,
    flatten,
    flatten_with_joined_string_paths,
    is_nested,
    map_structure,
    pack_sequence_as,
)

__all__ = ["assert_same_structure", "flatten", "flatten_with_joined_string_paths",
           "is_nested", "map_structure", "pack_sequence_as"]
