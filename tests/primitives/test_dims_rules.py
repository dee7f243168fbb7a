"""Each primitive's ``dims`` function on Python ints (`core.dims.PYTHON`) against its shape
rule and its kernel: on random operands the three agree, and with some operand dims unknown
the rule still gives the Python dims, every dim they know being the one the kernel gives.
(The LLVM interpretation is compared with eager results in test_shape_functions.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import shapes

from stageflow.core.dims import PYTHON, same_dims
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.primitives.elementwise import ElementwisePrimitive
from stageflow.primitives.prepacked import pack

Case = tuple[list[np.ndarray], dict[str, Any]]
F64, I64, C128 = np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.complex128)


def _array(shape: tuple[int, ...], dtype: np.dtype = F64) -> np.ndarray:
    """Ones: in every op's domain (no log of 0 or division by 0) and a valid index."""
    return np.ones(shape, dtype)


def _elementwise(name: str, draw: st.DrawFn) -> Case:
    primitive = REGISTRY[name]
    allowed = primitive.operand_dtypes
    dtype = next((d for d in (F64, C128, I64) if d in allowed), np.dtype(np.bool_))
    arity = 1 if primitive.dims is same_dims else 2
    operands = draw(hnp.mutually_broadcastable_shapes(num_shapes=arity, max_side=3)).input_shapes
    return [_array(shape, dtype) for shape in operands], {}


def _select(draw: st.DrawFn) -> Case:
    cond, x, y = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_side=3)).input_shapes
    return [_array(cond, np.dtype(np.bool_)), _array(x), _array(y)], {}


def _all_reduce(draw: st.DrawFn) -> Case:
    """One to four replicas' values of one shape (a collective does not broadcast)."""
    shape = draw(shapes())
    count = draw(st.integers(1, 4))
    reduction = draw(st.sampled_from(["sum", "mean", "max", "min"]))
    return [_array(shape) for _ in range(count)], {"reduction": reduction}


def _reduction(name: str, draw: st.DrawFn) -> Case:
    extremum = name in ("reduce_max", "reduce_min")
    shape = draw(shapes(min_side=1 if extremum else 0))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1))) if shape else ()))
    return [_array(shape)], {"axes": axes, "keepdims": draw(st.booleans())}


def _arg_reduction(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1, min_side=1))
    return [_array(shape)], {"axis": draw(st.integers(-len(shape), len(shape) - 1))}


def _matmul(name: str, draw: st.DrawFn) -> Case:
    batch_a, batch_b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2,
                                                              max_side=3)).input_shapes
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    transpose_a, transpose_b = draw(st.booleans()), draw(st.booleans())
    a = _array((*batch_a, *((k, m) if transpose_a else (m, k))))
    b = _array((*batch_b, *((n, k) if transpose_b else (k, n))))
    params = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    if name == "matmul":
        return [a, b], params
    product = np.broadcast_shapes(batch_a, batch_b) + (m, n)
    addend = tuple(1 if draw(st.booleans()) else d for d in product[draw(st.integers(0, 2)):])
    return [a, b, _array(addend)], {**params, "alpha": 2.0}


def _reshape(draw: st.DrawFn) -> Case:
    shape = draw(shapes())
    target = list(draw(st.permutations(shape))) if shape else []
    inferred = draw(st.integers(-1, len(target) - 1))
    if inferred >= 0 and 0 not in target[:inferred] + target[inferred + 1:]:
        target[inferred] = -1
    return [_array(shape)], {"shape": tuple(target)}


_BOUND = st.none() | st.integers(-5, 5)


def _slice(draw: st.DrawFn) -> Case:
    shape = draw(shapes())
    slices = tuple((draw(_BOUND), draw(_BOUND), draw(st.none() | st.sampled_from([-2, -1, 1, 3])))
                   for _ in shape)
    return [_array(shape)], {"slices": slices}


def _concat(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    operands = [_array(tuple(size if i == axis % len(shape) else d for i, d in enumerate(shape)))
                for size in sizes]
    return operands, {"axis": axis}


def _gather(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1, min_side=1))
    indices = draw(shapes(max_dims=2))
    return ([_array(shape), np.zeros(indices, I64)],
            {"axis": draw(st.integers(-len(shape), len(shape) - 1))})


def _update_index(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1, min_side=1))
    index = np.asarray(draw(st.integers(-shape[0], shape[0] - 1)), I64)
    return [_array(shape), _array(shape[1:]), index], {}


def _scan(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1))
    return [_array(shape)], {"axis": draw(st.integers(0, len(shape) - 1)),
                             "exclusive": draw(st.booleans()), "reverse": draw(st.booleans())}


def _sort(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1))
    payloads = draw(st.integers(0, 2))
    return [_array(shape) for _ in range(1 + payloads)], {
        "axis": draw(st.integers(0, len(shape) - 1)), "descending": draw(st.booleans())}


def _nd_indexing(name: str, draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1, min_side=1))
    width = draw(st.integers(1, len(shape)))
    positions = draw(shapes(max_dims=2))
    tuples = np.zeros((*positions, width), I64)
    if name == "gather_nd":
        return [_array(shape), tuples], {"width": width}
    return [_array(shape), tuples, _array((*positions, *shape[width:]))], {"width": width}


def _broadcast_to(draw: st.DrawFn) -> Case:
    target = draw(shapes())
    own = target[draw(st.integers(0, len(target))):]
    shape = tuple(1 if draw(st.booleans()) else d for d in own)
    return [_array(shape)], {"shape": target}


def _iota(draw: st.DrawFn) -> Case:
    shape = draw(shapes(min_dims=1))
    return [], {"shape": shape, "dtype": I64,
                "dimension": draw(st.integers(0, len(shape) - 1))}


def _windows(draw: st.DrawFn, dilated: bool) -> tuple[tuple[int, ...], dict[str, Any]]:
    """An NHWC shape and the window params of a window that fits it."""
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6)),
             draw(st.integers(1, 3)))
    params = {"strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
              "padding": tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2)))
                               for _ in range(2))}
    if dilated:
        params["dilations"] = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    window = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    for axis in (0, 1):
        dilation = params["dilations"][axis] if dilated else 1
        assume(shape[1 + axis] + sum(params["padding"][axis]) >= (window[axis] - 1) * dilation + 1)
    return shape, {**params, "window": window}


def _conv2d(draw: st.DrawFn) -> Case:
    shape, params = _windows(draw, dilated=True)
    window = params.pop("window")
    filters = (*window, shape[3], draw(st.integers(1, 3)))
    return [_array(shape), _array(filters)], params


def _grouped_conv2d(draw: st.DrawFn) -> Case:
    """conv2d's operands and params, of one to three feature groups (the param left out
    for one group now and then, as code binding it before groups existed did)."""
    shape, params = _windows(draw, dilated=True)
    window = params.pop("window")
    groups = draw(st.integers(1, 3))
    x = _array((*shape[:3], shape[3] * groups))
    w = _array((*window, shape[3], draw(st.integers(1, 3)) * groups))
    if groups > 1 or draw(st.booleans()):
        params["feature_group_count"] = groups
    return [x, w], params


def _conv2d_prepacked(draw: st.DrawFn) -> Case:
    """conv2d's operands, the filters packed (`primitives.prepacked`)."""
    (x, w), params = _grouped_conv2d(draw)
    return [x, pack(w, params.get("feature_group_count", 1))], {**params,
                                                                 "filter_shape": w.shape}


def _conv2d_fused(draw: st.DrawFn) -> Case:
    """conv2d's operands, the filters packed or not, then those of a drawn epilogue."""
    (x, w), params = _grouped_conv2d(draw)
    packed = draw(st.booleans())
    flags = {name: draw(st.booleans()) for name in ("scale", "shift", "residual")}
    y = REGISTRY["conv2d"].kernel(x, w, **params)
    extras = [_array(y.shape if name == "residual" else (w.shape[3],))
              for name, present in flags.items() if present]
    filters = pack(w, params.get("feature_group_count", 1)) if packed else w
    return [x, filters, *extras], {**params, **flags, "filter_shape": w.shape,
                                   "packed": packed,
                                   "activation": draw(st.sampled_from(["none", "relu"]))}


def _conv2d_gradient(draw: st.DrawFn, name: str) -> Case:
    """The operands of conv2d's input or filter gradient: a conv's cotangent and its
    filters, or its input and cotangent."""
    (x, w), params = _grouped_conv2d(draw)
    g = _array(REGISTRY["conv2d"].kernel(x, w, **params).shape)
    if name == "conv2d_input_gradient":
        return [g, w], {**params, "input_size": x.shape[1:3]}
    return [x, g], {**params, "filter_size": w.shape[:2]}


def _reduce_window(draw: st.DrawFn) -> Case:
    shape, params = _windows(draw, dilated=False)
    return [_array(shape)], {**params, "kind": draw(st.sampled_from(["max", "sum"]))}


def _max_pool_gradient(draw: st.DrawFn) -> Case:
    """An input, its max pooling and a cotangent of the pooling's shape."""
    shape, params = _windows(draw, dilated=False)
    pooled = REGISTRY["reduce_window"].kernel(_array(shape), kind="max", **params)
    return [_array(shape), pooled, _array(pooled.shape)], params


def _one_operand(draw: st.DrawFn, **params: Any) -> Case:
    return [_array(draw(shapes()))], params


def _transpose(draw: st.DrawFn) -> Case:
    shape = draw(shapes())
    return [_array(shape)], {"perm": tuple(draw(st.permutations(range(len(shape)))))}


def _pad(draw: st.DrawFn) -> Case:
    shape = draw(shapes())
    pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    return [_array(shape)], {"pads": pads, "value": 0.0}


def _factorization(name: str, draw: st.DrawFn) -> Case:
    """Batched matrices each factorization's kernel takes: symmetric positive definite
    (n I plus ones), square, or any m x n for qr and svd; right-hand sides for solvers."""
    batch = draw(shapes(max_dims=2))
    n = draw(st.integers(0, 3))
    if name in ("qr", "svd"):
        m = draw(st.integers(0, 3))
        return [_array((*batch, m, n))], {"full_matrices": draw(st.booleans())}
    matrix = _array((*batch, n, n)) + n * np.eye(n)
    if name in ("solve", "triangular_solve"):
        rhs = _array((*batch, n, draw(st.integers(0, 3))))
        if name == "solve":
            return [matrix, rhs], {}
        return [matrix, rhs], {"lower": draw(st.booleans()), "adjoint": draw(st.booleans())}
    return [matrix], {}


# Operands and params for each primitive, by name (`name` for families sharing a strategy).
CASES: dict[str, Callable[[st.DrawFn, str], Case]] = {
    "select": lambda draw, name: _select(draw),
    "all_reduce": lambda draw, name: _all_reduce(draw),
    "cast": lambda draw, name: _one_operand(draw, dtype=np.dtype(np.float32)),
    "stop_gradient": lambda draw, name: _one_operand(draw),
    "device_copy": lambda draw, name: _one_operand(draw, device="/device:CPU:1"),
    **dict.fromkeys(["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"],
                    lambda draw, name: _reduction(name, draw)),
    **dict.fromkeys(["argmax", "argmin"], lambda draw, name: _arg_reduction(draw)),
    **dict.fromkeys(["matmul", "matmul_add"], lambda draw, name: _matmul(name, draw)),
    "transpose": lambda draw, name: _transpose(draw),
    "reshape": lambda draw, name: _reshape(draw),
    "slice": lambda draw, name: _slice(draw),
    "concat": lambda draw, name: _concat(draw),
    "pad": lambda draw, name: _pad(draw),
    "gather": lambda draw, name: _gather(draw),
    "update_index": lambda draw, name: _update_index(draw),
    **dict.fromkeys(["cumsum", "cumprod"], lambda draw, name: _scan(draw)),
    "sort": lambda draw, name: _sort(draw),
    **dict.fromkeys(["gather_nd", "scatter_nd_add", "scatter_nd_update"],
                    lambda draw, name: _nd_indexing(name, draw)),
    "broadcast_to": lambda draw, name: _broadcast_to(draw),
    "iota": lambda draw, name: _iota(draw),
    "conv2d": lambda draw, name: _grouped_conv2d(draw),
    "depthwise_conv2d": lambda draw, name: _conv2d(draw),
    "conv2d_prepacked": lambda draw, name: _conv2d_prepacked(draw),
    "conv2d_fused": lambda draw, name: _conv2d_fused(draw),
    **dict.fromkeys(["conv2d_input_gradient", "conv2d_filter_gradient"], _conv2d_gradient),
    "reduce_window": lambda draw, name: _reduce_window(draw),
    "max_pool_gradient": lambda draw, name: _max_pool_gradient(draw),
    **dict.fromkeys(["inv", "cholesky", "eigh", "slogdet", "solve", "triangular_solve", "qr",
                     "svd"], lambda draw, name: _factorization(name, draw)),
}


@st.composite
def case(draw: st.DrawFn, name: str) -> Case:
    """Operands and params on which primitive `name`'s kernel succeeds."""
    if name in CASES:
        return CASES[name](draw, name)
    assert isinstance(REGISTRY[name], ElementwisePrimitive), name
    return _elementwise(name, draw)


def _with_dims() -> list[str]:
    return sorted(name for name, primitive in REGISTRY.items() if primitive.dims is not None)


@pytest.mark.parametrize("name", _with_dims())
@given(data=st.data())
def test_python_dims_agree_with_the_rule_and_the_kernel(name, data):
    primitive = REGISTRY[name]
    several = primitive.multiple_results  # then dims, rule and kernel give one per result

    def each(results):
        return list(results) if several else [results]

    operands, params = data.draw(case(name))
    expected = [np.shape(r) for r in each(primitive.kernel(*operands, **params))]
    shapes_ = [x.shape for x in operands]
    assert [tuple(d) for d in each(primitive.dims(PYTHON, shapes_, **params))] == expected
    rule = primitive.shape_rule(*(ShapedType(x.shape, x.dtype) for x in operands), **params)
    assert [r.shape for r in each(rule)] == expected

    masked = [tuple(None if data.draw(st.booleans()) else d for d in shape) for shape in shapes_]
    avals = [ShapedType(shape, x.dtype) for shape, x in zip(masked, operands, strict=True)]
    partial = [r.shape for r in each(primitive.shape_rule(*avals, **params))]
    assert partial == [tuple(d) for d in each(primitive.dims(PYTHON, masked, **params))]
    for shape, want in zip(partial, expected, strict=True):
        assert all(d is None or d == e for d, e in zip(shape, want, strict=True))


def test_every_primitive_with_dims_has_a_case():
    assert all(name in CASES or isinstance(REGISTRY[name], ElementwisePrimitive)
               for name in _with_dims())
