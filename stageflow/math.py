"""`sf.math`: TensorFlow's `tf.math` names for stageflow's elementwise math, reductions and
tests (most are also top-level `sf` names).

Exactly the public names (`__all__`); they are defined and documented in
`stageflow.frontend.ops` (elementwise, reductions, math_ops).
"""

from stageflow.frontend.ops.complex_numbers import angle, conj, imag, real
from stageflow.frontend.ops.elementwise import (
    abs,
    acos,
    add,
    asin,
    atan,
    atan2,
    ceil,
    cos,
    digamma,
    divide,
    equal,
    erf,
    erfinv,
    exp,
    expm1,
    floor,
    floordiv,
    greater,
    greater_equal,
    less,
    less_equal,
    lgamma,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    pow,
    reciprocal,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    subtract,
    tanh,
)
from stageflow.frontend.ops.math_ops import (
    cosh,
    cumprod,
    cumsum,
    is_finite,
    is_inf,
    is_nan,
    reduce_all,
    reduce_any,
    sinh,
    tan,
)
from stageflow.frontend.ops.reductions import (
    argmax,
    argmin,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)
from stageflow.frontend.ops.sorting import top_k

__all__ = [
    "abs", "acos", "add", "angle", "argmax", "argmin", "asin", "atan", "atan2", "ceil",
    "conj", "cos", "cosh", "cumprod", "cumsum", "digamma", "divide", "equal", "erf",
    "erfinv", "exp", "expm1", "floor", "floordiv", "greater", "greater_equal", "imag",
    "is_finite", "is_inf", "is_nan", "less", "less_equal", "lgamma", "log", "log1p",
    "logical_and", "logical_not", "logical_or", "maximum", "minimum", "mod", "multiply",
    "negative", "not_equal", "pow", "real", "reciprocal", "reduce_all", "reduce_any",
    "reduce_logsumexp", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod",
    "reduce_sum", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "square",
    "subtract", "tan", "tanh", "top_k",
]
