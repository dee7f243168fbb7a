"""`sf.linalg`: TensorFlow's `tf.linalg` names (matrix functions over the last two dims,
batched over the leading ones).

Exactly the public names; they are defined and documented in `stageflow.frontend.ops.matrix`
(factorizations, solvers and their composites), `stageflow.frontend.ops.matrix_composites`
(bands, products, diagonals), `stageflow.frontend.ops.matrix_diag` (`diag`) and with the
general op set (`matmul`,
`einsum`, `tensordot`, `eye`).
"""

from stageflow.frontend.ops.creation import eye
from stageflow.frontend.ops.linalg import einsum, matmul, tensordot
from stageflow.frontend.ops.math_ops import global_norm
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
from stageflow.frontend.ops.matrix_composites import (
    adjoint,
    band_part,
    cross,
    logdet,
    matvec,
    normalize,
    set_diag,
)
from stageflow.frontend.ops.matrix_diag import diag
from stageflow.frontend.ops.normalization import l2_normalize

__all__ = [
    "adjoint", "band_part", "cholesky", "cholesky_solve", "cross", "det", "diag", "diag_part",
    "eigh", "eigvalsh", "einsum", "eye", "global_norm", "inv", "l2_normalize", "logdet",
    "matmul", "matrix_transpose", "matvec", "norm", "normalize", "qr", "set_diag", "slogdet",
    "solve", "svd", "tensordot", "trace", "triangular_solve",
]
