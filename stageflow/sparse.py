"""`sf.sparse`: TensorFlow's `tf.sparse` names, for `sf.SparseTensor` (a tensor stored as
its entries' positions and values).

Exactly the public names; they are defined and documented in
`stageflow.frontend.sparse_ops` (`SparseTensor` in `stageflow.frontend.sparse_tensor`).
"""

from stageflow.frontend.sparse_ops import (
    add,
    concat,
    from_dense,
    map_values,
    reduce_max,
    reduce_sum,
    reorder,
    reshape,
    slice,
    sparse_dense_matmul,
    to_dense,
    transpose,
)
from stageflow.frontend.sparse_tensor import SparseTensor

__all__ = ["SparseTensor", "add", "concat", "from_dense", "map_values", "reduce_max",
           "reduce_sum", "reorder", "reshape", "slice", "sparse_dense_matmul", "to_dense",
           "transpose"]
