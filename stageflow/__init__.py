"""stageflow: eager by default, staged on demand — an ML DSL compiled through MLIR-style IR.

`import stageflow as sf`; the names here are the public API. What eager execution needs
(tensors, the op set, tapes, devices) is imported with the package; the names that live
above the compiler (`sf.function`, the model layer, `sf.data`, `sf.aot`, ...) are imported
the first time they are read (`_LAZY`, through the module's `__getattr__`), so that
`import stageflow` and eager ops load neither xDSL nor LLVM.

Documentation: the guides in the repository's ``docs/guides/`` (getting started, staging,
control flow, devices, checkpoints, ...) and the API reference generated from these
docstrings, built together as a site by ``mkdocs build`` (``pip install stageflow[docs]``);
``help(sf.GradientTape)`` and the other docstrings here are the same reference.
"""

import importlib as _importlib
from types import ModuleType as _ModuleType
from typing import Any as _Any

from stageflow import (
    debugging,
    dtypes,
    experimental,
    image,
    io,
    linalg,
    math,
    nest,
    nn,
    ragged,
    random,
    signal,
    sparse,
    strings,
    test,
    version,
)
from stageflow.core import config, errors
from stageflow.core import dtypes as _dtypes
from stageflow.core.context import executing_eagerly, init_scope
from stageflow.core.devices import device
from stageflow.core.dtypes import (
    as_dtype,
    bfloat16,
    complex64,
    complex128,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    string,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend import control_gradients as _control_gradients  # noqa: F401 - rules
from stageflow.frontend.composite_specs import RaggedTensorSpec, SparseTensorSpec
from stageflow.frontend.dlpack import from_dlpack
from stageflow.frontend.functional_ops import foldl, foldr, map_fn, scan
from stageflow.frontend.ops import operators as _operators  # noqa: F401 - installs operators
from stageflow.frontend.ops.broadcast_shapes import (
    broadcast_dynamic_shape,
    broadcast_static_shape,
    ensure_shape,
)
from stageflow.frontend.ops.casting import saturate_cast
from stageflow.frontend.ops.complex_numbers import complex
from stageflow.frontend.ops.control import (
    cond,
    fori_loop,
    numpy_function,
    py_func,
    py_function,
    switch_case,
    while_loop,
)
from stageflow.frontend.ops.convert import constant, convert_to_tensor, is_tensor
from stageflow.frontend.ops.counting import histogram_fixed_width
from stageflow.frontend.ops.creation import (
    diag,
    eye,
    fill,
    linspace,
    ones,
    ones_like,
    range,
    zeros,
    zeros_like,
)
from stageflow.frontend.ops.debug import print
from stageflow.frontend.ops.elementwise import (
    abs,
    acos,
    add,
    asin,
    atan,
    atan2,
    cast,
    ceil,
    clip_by_value,
    cos,
    divide,
    equal,
    erf,
    exp,
    expm1,
    floor,
    floordiv,
    greater,
    greater_equal,
    less,
    less_equal,
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
    where,
)
from stageflow.frontend.ops.linalg import einsum, matmul, tensordot
from stageflow.frontend.ops.math_ops import (
    add_n,
    clip_by_global_norm,
    clip_by_norm,
    cumprod,
    cumsum,
    global_norm,
    meshgrid,
    reduce_all,
    reduce_any,
    reverse,
    roll,
)
from stageflow.frontend.ops.matrix import norm
from stageflow.frontend.ops.nd_indexing import (
    gather_nd,
    scatter_nd,
    tensor_scatter_nd_add,
    tensor_scatter_nd_sub,
    tensor_scatter_nd_update,
    unsorted_segment_sum,
)
from stageflow.frontend.ops.ranking import searchsorted
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
from stageflow.frontend.ops.scatter_extrema import tensor_scatter_nd_max, tensor_scatter_nd_min
from stageflow.frontend.ops.selection import boolean_mask, nonzero, unique
from stageflow.frontend.ops.sequences import reverse_sequence, sequence_mask
from stageflow.frontend.ops.shape import (
    broadcast_to,
    concat,
    dynamic_update_index,
    expand_dims,
    gather,
    identity,
    one_hot,
    pad,
    reshape,
    split,
    squeeze,
    stack,
    tile,
    transpose,
)
from stageflow.frontend.ops.shape_of import rank, shape, size
from stageflow.frontend.ops.slicing import slice
from stageflow.frontend.ops.sorting import argsort, sort
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.ops.strided_slice import strided_slice
from stageflow.frontend.ops.tensor_lists import (
    dynamic_partition,
    dynamic_stitch,
    identity_n,
    shape_n,
    unstack,
)
from stageflow.frontend.ragged_tensor import RaggedTensor
from stageflow.frontend.scopes import (
    case,
    control_dependencies,
    name_scope,
    no_gradient,
    recompute_grad,
    timestamp,
)
from stageflow.frontend.sparse_tensor import SparseTensor
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tape import (
    GradientTape,
    UnconnectedGradients,
    custom_gradient,
    grad,
    stop_gradient,
    value_and_grad,
)
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tensor_array import TensorArray
from stageflow.frontend.variables import Variable, VariableAggregation, variable_creator_scope
from stageflow.frontend.vectorize import vectorized_map
from stageflow.models import backward_runner as _backward_runner  # noqa: F401 - installs it
from stageflow.models.module import Module
from stageflow.runtime import eager as _eager  # noqa: F401 - installs the eager executor
from stageflow.runtime.devices import list_devices

bool = _dtypes.bool_  # noqa: A001 - sf.bool, as tf.bool
double, half = float64, float16  # tf.double, tf.half
newaxis = None

__version__ = config.VERSION

# Public names imported on first read: name -> (module, attribute or None for the module).
_LAZY: dict[str, tuple[str, str | None]] = {
    "function": ("stageflow.staging.function", "function"),
    "Function": ("stageflow.staging.function", "Function"),
    "RetracingWarning": ("stageflow.staging.function", "RetracingWarning"),
    "ConcreteFunction": ("stageflow.staging.concrete", "ConcreteFunction"),
    **{name: (f"stageflow.{name}", None) for name in (
        "aot", "autograph", "data", "distribute", "keras", "layers", "losses", "metrics",
        "onnx", "optimizers", "profiler", "saved", "saved_model", "summary", "train")},
}


def __getattr__(name: str) -> _Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'stageflow' has no attribute {name!r}") from None
    value = _importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


# The public namespaces among the modules imported above; the others (`core`, `frontend`,
# `runtime`...) are the implementation, reachable by name but out of `dir(sf)`. The lazy
# names are listed by `dir` but left out of `__all__`: ``import *`` would import them all.
_NAMESPACES = ("config", "debugging", "dtypes", "errors", "experimental", "image", "io",
               "linalg", "math", "nest", "nn", "ragged", "random", "signal", "sparse",
               "strings", "test", "version")
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and (not isinstance(value, _ModuleType)
                                                  or name in _NAMESPACES))


def __dir__() -> list[str]:
    return sorted({*__all__, *_LAZY, *(name for name in globals() if name.startswith("__"))})
