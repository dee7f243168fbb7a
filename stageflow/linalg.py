"""`sf.linalg`: TensorFlow's `tf.linalg` names (matrix functions over the last two dims,
batched over the leading ones).

Exactly the public names; they are defined and documented in `stageflow.frontend.ops.matrix`
(factorizations, solvers and their composites), `stageflow.frontend.ops.matrix_diag`
(`diag`) and with the general op set (`matmul`,
`einsum`, `tensordot`, `eye`).
"""

from stageflow.frontend.ops.creation import eye
from stageflow.frontend.ops.linalg import einsum, matmul, tensordot
from stageflow.frontend.ops.matrix import (
    cholesky,
    cholesky_solve,
    det,
    diag_part,
    eigh,
    eigvalsh,
    inv,
    matrix_transpose,
    norm,
    qr,
    slogdet,
    solve,
    svd,
    trace,
    triangular_solve,
)
from stageflow.frontend.ops.matrix_diag import diag

__all__ = [
    "cholesky", "cholesky_solve", "det", "diag", "diag_part", "eigh", "eigvalsh", "einsum", "eye",
    "inv", "matmul", "matrix_transpose", "norm", "qr", "slogdet", "solve", "svd",
    "tensordot", "trace", "triangular_solve",
]
