"""Eager elementwise ops and Python operators against NumPy.

Every unary and binary op runs on hypothesis-drawn shapes (0-d and zero-size included),
broadcast-compatible shape pairs and dtypes, on both eager dispatch paths (the NumPy fast
path and `Primitive.bind`), and must match NumPy in value, shape and dtype.
"""

from __future__ import annotations

import math
import operator
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special
from strategies import (
    ALL,
    BOOL,
    FLOATS,
    INTS,
    NUMERIC,
    PATHS,
    arrays,
    assert_matches,
    broadcast_shapes,
    dispatch,
    elements,
    shapes,
)

import stageflow as sf
from stageflow.primitives import elementwise as ew

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _wide(fn):
    """A reference computed in float64 and rounded to the operand's dtype."""

    def reference(x):
        return np.asarray(fn(np.asarray(x, np.float64))).astype(x.dtype)

    return reference


def _wide2(fn):
    def reference(x, y):
        return np.asarray(fn(np.asarray(x, np.float64), np.asarray(y, np.float64))).astype(
            x.dtype)

    return reference


# name -> (NumPy reference, operand dtypes, (lo, hi) of the operand values)
UNARY = {
    "negative": (np.negative, NUMERIC, (-10, 10)),
    "abs": (np.abs, NUMERIC, (-10, 10)),
    "sign": (np.sign, NUMERIC, (-10, 10)),
    "relu": (lambda x: np.maximum(x, 0), NUMERIC, (-10, 10)),
    "exp": (np.exp, FLOATS, (-10, 10)),
    "expm1": (np.expm1, FLOATS, (-10, 10)),
    "log": (np.log, FLOATS, (0.01, 100)),
    "log1p": (np.log1p, FLOATS, (-0.9, 100)),
    "log2": (np.log2, FLOATS, (0.01, 100)),
    "sqrt": (np.sqrt, FLOATS, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), FLOATS, (0.01, 100)),
    "reciprocal": (lambda x: 1 / x, FLOATS, (0.01, 100)),
    "square": (np.square, NUMERIC, (-10, 10)),
    "sin": (np.sin, FLOATS, (-10, 10)),
    "cos": (np.cos, FLOATS, (-10, 10)),
    "tanh": (np.tanh, FLOATS, (-10, 10)),
    "sigmoid": (_wide(lambda x: 1 / (1 + np.exp(-x))), FLOATS, (-10, 10)),
    "erf": (_wide(_erf), FLOATS, (-4, 4)),
    "floor": (np.floor, FLOATS, (-10, 10)),
    "ceil": (np.ceil, FLOATS, (-10, 10)),
    "round": (np.round, FLOATS, (-10, 10)),
    "logical_not": (np.logical_not, (BOOL,), (0, 1)),
    "atan": (_wide(np.arctan), FLOATS, (-100, 100)),
    "asin": (_wide(np.arcsin), FLOATS, (-1, 1)),
    "acos": (_wide(np.arccos), FLOATS, (-1, 1)),
    "erfinv": (_wide(special.erfinv), FLOATS, (-0.999, 0.999)),
    "lgamma": (_wide(special.gammaln), FLOATS, (-9.9, 50)),
    "digamma": (_wide(special.psi), FLOATS, (0.01, 50)),
}

# name -> (NumPy reference, operand dtypes, lhs/rhs element strategies by dtype)
_ANY = {"lo": -10, "hi": 10}
_NONZERO = {"lo": -10, "hi": 10, "nonzero": True}


def _pow_args(dtype):
    if dtype.kind == "f":
        return {"lo": 0.1, "hi": 5}, {"lo": -3, "hi": 3}
    return {"lo": -5, "hi": 5}, {"lo": 0, "hi": 4}


BINARY = {
    "add": (np.add, NUMERIC, lambda d: (_ANY, _ANY)),
    "subtract": (np.subtract, NUMERIC, lambda d: (_ANY, _ANY)),
    "multiply": (np.multiply, NUMERIC, lambda d: (_ANY, _ANY)),
    "divide": (np.true_divide, NUMERIC, lambda d: (_ANY, _NONZERO)),
    "floordiv": (np.floor_divide, NUMERIC, lambda d: (_ANY, _NONZERO)),
    "mod": (np.remainder, NUMERIC, lambda d: (_ANY, _NONZERO)),
    "pow": (np.power, NUMERIC, _pow_args),
    "maximum": (np.maximum, NUMERIC, lambda d: (_ANY, _ANY)),
    "minimum": (np.minimum, NUMERIC, lambda d: (_ANY, _ANY)),
    "equal": (np.equal, ALL, lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "not_equal": (np.not_equal, ALL, lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "less": (np.less, NUMERIC, lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "less_equal": (np.less_equal, NUMERIC, lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "greater": (np.greater, NUMERIC, lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "greater_equal": (np.greater_equal, NUMERIC,
                      lambda d: ({"lo": -2, "hi": 2}, {"lo": -2, "hi": 2})),
    "logical_and": (np.logical_and, (BOOL,), lambda d: (_ANY, _ANY)),
    "logical_or": (np.logical_or, (BOOL,), lambda d: (_ANY, _ANY)),
    "atan2": (_wide2(np.arctan2), FLOATS, lambda d: (_ANY, _ANY)),
}

# Python operator -> the BINARY entry it shares its meaning and operand domain with
OPERATORS = {
    operator.add: "add",
    operator.sub: "subtract",
    operator.mul: "multiply",
    operator.truediv: "divide",
    operator.floordiv: "floordiv",
    operator.mod: "mod",
    operator.pow: "pow",
    operator.lt: "less",
    operator.le: "less_equal",
    operator.gt: "greater",
    operator.ge: "greater_equal",
    operator.eq: "equal",
    operator.ne: "not_equal",
}
_OP_IDS = [op.__name__ for op in OPERATORS]


@st.composite
def binary_case(draw, name: str, dtypes=None):
    """(x, y) arrays of one dtype with broadcast-compatible shapes, in `name`'s domain."""
    _, allowed, domain = BINARY[name]
    dtype = draw(st.sampled_from(dtypes or allowed))
    lhs, rhs = domain(np.dtype(dtype))
    shape_x, shape_y = draw(broadcast_shapes())
    return draw(arrays(dtype, shape_x, **lhs)), draw(arrays(dtype, shape_y, **rhs))


def op(name):
    """The public function of an op: top-level, else in `sf.math` (lgamma, erfinv, ...) or
    `sf.nn` (relu)."""
    return getattr(sf, name, None) or getattr(sf.math, name, None) or getattr(sf.nn, name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_op_matches_numpy(name, path, data):
    reference, dtypes, (lo, hi) = UNARY[name]
    dtype = data.draw(st.sampled_from(dtypes))
    x = data.draw(arrays(dtype, lo=lo, hi=hi))
    with dispatch(path):
        got = op(name)(sf.constant(x))
    assert_matches(got, reference(x))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_op_matches_numpy(name, path, data):
    x, y = data.draw(binary_case(name))
    with dispatch(path):
        got = op(name)(sf.constant(x), sf.constant(y))
    assert_matches(got, BINARY[name][0](x, y))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op_on_a_0d_result(name, path):
    """0-d results may hold NumPy scalars rather than arrays; ops must accept them too."""
    reference, dtypes, (lo, hi) = UNARY[name]
    for dtype in dtypes:
        value = np.asarray(True if dtype == BOOL else (lo + hi) / 3, dtype)
        scalar = sf.reduce_max(sf.constant(value[None]))
        with dispatch(path):
            assert_matches(op(name)(scalar), reference(value))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_on_0d_results(name, path):
    reference, dtypes, _ = BINARY[name]
    for dtype in dtypes:
        x = np.asarray(True if dtype == BOOL else 3, dtype)
        y = np.asarray(True if dtype == BOOL else 2, dtype)
        a, b = (sf.reduce_max(sf.constant(v[None])) for v in (x, y))
        with dispatch(path):
            assert_matches(op(name)(a, b), reference(x, y))
            pair = np.stack([y, y])
            assert_matches(op(name)(a, sf.constant(pair)), reference(x, pair))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin",
                                  "floor", "negative", "abs", "square"])
@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_unary_op_keeps_half_precision_dtype(name, dtype):
    x = np.array([[0.25, 0.5], [1.5, 3.0]], np.float64)
    reference = UNARY[name][0]
    got = getattr(sf, name)(sf.constant(x, dtype))
    assert got.dtype == dtype and got.shape == (2, 2)
    expected = reference(x)
    np.testing.assert_allclose(got.numpy().astype(np.float64), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_binary_op_keeps_half_precision_dtype(dtype):
    a = sf.constant([1.0, 2.0], dtype)
    b = sf.constant([0.5, 4.0], dtype)
    for got, expected in [(a + b, [1.5, 6.0]), (a * 2.0, [2.0, 4.0]), (a / b, [2.0, 0.5]),
                          (1 - a, [0.0, -1.0]), (sf.maximum(a, b), [1.0, 4.0])]:
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy().astype(np.float64), expected)
    assert (a < b).dtype == sf.bool


# ----------------------------------------------------------------------------- operators


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", OPERATORS, ids=_OP_IDS)
@given(data=st.data())
def test_operator_on_two_tensors(op, path, data):
    x, y = data.draw(binary_case(OPERATORS[op], NUMERIC))
    with dispatch(path):
        got = op(sf.constant(x), sf.constant(y))
    assert_matches(got, op(x, y))


def _python_scalar(dtype, domain):
    """A Python scalar of the kind that is allowed with a `dtype` tensor."""
    if np.dtype(dtype).kind == "f":
        return elements(np.float64, **domain).map(float)
    return elements(dtype, **domain).map(int)  # in the dtype's range, as NumPy requires


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", OPERATORS, ids=_OP_IDS)
@given(data=st.data())
def test_operator_with_python_scalar_takes_tensor_dtype(op, path, data):
    name = OPERATORS[op]
    dtype = np.dtype(data.draw(st.sampled_from(NUMERIC)))
    lhs, rhs = BINARY[name][2](dtype)
    x = data.draw(arrays(dtype, shapes(), **lhs))
    scalar = data.draw(_python_scalar(dtype, rhs))
    with dispatch(path):
        got = op(sf.constant(x), scalar)
    expected = op(x, np.asarray(scalar, dtype))
    assert_matches(got, expected)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", OPERATORS, ids=_OP_IDS)
@given(data=st.data())
def test_reflected_operator_with_python_scalar(op, path, data):
    name = OPERATORS[op]
    dtype = np.dtype(data.draw(st.sampled_from(NUMERIC)))
    lhs, rhs = BINARY[name][2](dtype)
    scalar = data.draw(_python_scalar(dtype, lhs))
    y = data.draw(arrays(dtype, shapes(), **rhs))
    with dispatch(path):
        got = op(scalar, sf.constant(y))
    assert_matches(got, op(np.asarray(scalar, dtype), y))


@pytest.mark.parametrize("op", OPERATORS, ids=_OP_IDS)
@given(data=st.data())
def test_numpy_array_on_the_left_gives_a_tensor(op, data):
    x, y = data.draw(binary_case(OPERATORS[op], NUMERIC))
    got = op(x, sf.constant(y))
    assert_matches(got, op(x, y))


@pytest.mark.parametrize("path", PATHS)
@given(data=st.data())
def test_unary_operators(path, data):
    x = data.draw(arrays(data.draw(st.sampled_from(NUMERIC))))
    t = sf.constant(x)
    with dispatch(path):
        assert_matches(-t, -x)
        assert_matches(abs(t), np.abs(x))
        assert_matches(+t, x)


@pytest.mark.parametrize("path", PATHS)
@given(data=st.data())
def test_bool_operators(path, data):
    x, y = data.draw(binary_case("logical_and"))
    a, b = sf.constant(x), sf.constant(y)
    with dispatch(path):
        assert_matches(a & b, x & y)
        assert_matches(a | b, x | y)
        assert_matches(~a, ~x)
        assert_matches(a == b, x == y)
        assert_matches(a != b, x != y)


def test_documented_examples():
    t = sf.constant([1.0, 2.0, 3.0])
    assert_matches(2.0 * t, np.array([2.0, 4.0, 6.0], np.float32))
    assert_matches(1 - t, np.array([0.0, -1.0, -2.0], np.float32))
    assert_matches(np.ones(3, np.float32) * t, np.array([1.0, 2.0, 3.0], np.float32))
    assert_matches(t ** 2, np.array([1.0, 4.0, 9.0], np.float32))
    assert_matches(2 ** t, np.array([2.0, 4.0, 8.0], np.float32))
    assert_matches(t < 2.0, np.array([True, False, False]))
    assert_matches(t == sf.constant([1.0, 0.0, 3.0]), np.array([True, False, True]))


# ------------------------------------------------------------------ dtype semantics


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("dtype", "scalar"),
    [
        (sf.float32, 2.0), (sf.float32, 2), (sf.float64, 2.0), (sf.float64, 3),
        (sf.float16, 2.0), (sf.bfloat16, 2.0), (sf.bfloat16, 2),
        (sf.int32, 1), (sf.int32, -3), (sf.int64, 7),
    ],
)
def test_python_scalar_takes_the_tensor_dtype(path, dtype, scalar):
    t = sf.constant([1, 2, 4], dtype)
    with dispatch(path):
        results = [t + scalar, scalar + t, t - scalar, scalar - t, t * scalar, scalar * t,
                   sf.maximum(t, scalar), sf.minimum(scalar, t), t // scalar, t % scalar]
        if not isinstance(scalar, int) or scalar >= 0:
            results.append(t ** abs(scalar))
        for result in results:
            assert result.dtype == dtype
            assert result.shape == (3,)
        for result in (t < scalar, scalar >= t, t == scalar, t != scalar):
            assert result.dtype == sf.bool
        quotient = t / scalar
        assert quotient.dtype == (dtype if dtype.kind == "f" or dtype == sf.bfloat16
                                  else sf.float64)
    expected = np.array([1, 2, 4], np.float64) * scalar
    np.testing.assert_allclose((t * scalar).numpy().astype(np.float64), expected)


def test_python_scalar_keeps_float32_and_int32():
    assert (sf.constant([1.0]) * 2.0).dtype == sf.float32
    assert (sf.constant([1]) + 1).dtype == sf.int32
    assert (sf.constant(1.0) * 2.0).dtype == sf.float32
    assert (sf.constant(1) + 1).dtype == sf.int32
    assert (sf.constant(np.float64(1.0)) + 1.0).dtype == sf.float64


MIXED = [
    (sf.float32, sf.float64),
    (sf.int32, sf.float32),
    (sf.int32, sf.int64),
    (sf.float16, sf.float32),
    (sf.int64, sf.float64),
    (sf.bool, sf.int32),
    (sf.uint64, sf.int64),  # NumPy would make float64 of them
]
_MIXED_IDS = [f"{a.name}-{b.name}" for a, b in MIXED]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("da", "db"), MIXED, ids=_MIXED_IDS)
@pytest.mark.parametrize(
    "fn",
    [operator.add, operator.sub, operator.mul, operator.truediv, operator.lt, operator.eq,
     sf.add, sf.maximum, sf.equal, sf.greater_equal, sf.pow, sf.floordiv],
    ids=lambda f: getattr(f, "__name__", str(f)),
)
def test_mixed_tensor_dtypes_raise_type_error(path, da, db, fn):
    a = sf.constant([1, 0], da)
    b = sf.constant([1, 1], db)
    with dispatch(path):
        with pytest.raises(TypeError) as info:
            fn(a, b)
        with pytest.raises(TypeError):
            fn(b, a)
    message = str(info.value)
    assert da.name in message and db.name in message


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "dtype_a", [np.float64, np.int64], ids=["float64", "int64"]
)
def test_numpy_array_with_other_dtype_raises_type_error(path, dtype_a):
    t = sf.constant([1.0, 2.0])
    with dispatch(path), pytest.raises(TypeError):
        np.ones(2, dtype_a) * t


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [sf.int32, sf.int64])
@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t + 1.5, lambda t: 1.5 + t, lambda t: t * 2.0, lambda t: 2.0 * t,
        lambda t: t - 0.5, lambda t: t / 2.0, lambda t: t < 0.5, lambda t: t == 1.0,
        lambda t: sf.maximum(t, 0.5), lambda t: sf.add(1.0, t),
        lambda t: sf.where(sf.constant([True, False]), t, 0.5),
    ],
)
def test_python_float_with_int_tensor_raises_type_error(path, dtype, fn):
    t = sf.constant([1, 2], dtype)
    with dispatch(path), pytest.raises(TypeError):
        fn(t)


@pytest.mark.parametrize("path", PATHS)
def test_python_int_with_bool_tensor_raises_type_error(path):
    t = sf.constant([True, False])
    with dispatch(path), pytest.raises(TypeError):
        t + 1  # noqa: B018


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("name", "fn"),
    [("add", operator.add), ("subtract", sf.subtract), ("multiply", operator.mul),
     ("less", operator.lt), ("maximum", sf.maximum)],
)
def test_shape_mismatch_names_op_shapes_and_user_line(path, name, fn):
    a = sf.zeros((2, 3))
    b = sf.zeros((4,))
    with dispatch(path):
        line = sys._getframe().f_lineno + 2
        with pytest.raises(ValueError) as info:
            fn(a, b)
    message = str(info.value)
    assert name in message
    assert "(2, 3)" in message and "(4,)" in message
    assert f"test_elementwise.py:{line}" in message
    assert "stageflow/frontend" not in message and "stageflow/runtime" not in message


@pytest.mark.parametrize("path", PATHS)
def test_shape_mismatch_of_operator_points_at_the_operator_line(path):
    a = sf.ones((3, 2))
    b = sf.ones((3,))
    with dispatch(path):
        line = sys._getframe().f_lineno + 2
        with pytest.raises(ValueError) as info:
            a + b  # noqa: B018
    message = str(info.value)
    assert "add" in message and "(3, 2)" in message and "(3,)" in message
    assert f"test_elementwise.py:{line}" in message


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [sf.int32, sf.int64])
def test_integer_true_division_gives_float64(path, dtype):
    a = sf.constant([1, 7, -7], dtype)
    b = sf.constant([2, 2, 2], dtype)
    with dispatch(path):
        for got in (a / b, sf.divide(a, b), a / 2, 7 / b):
            assert got.dtype == sf.float64
        assert_matches(a / b, np.array([0.5, 3.5, -3.5]))
        assert_matches(a // b, np.array([0, 3, -4], dtype))
        assert_matches(a % b, np.array([1, 1, 1], dtype))


# --------------------------------------------------------------- where, cast, clip


@pytest.mark.parametrize("path", PATHS)
@given(data=st.data())
def test_where_matches_numpy(path, data):
    dtype = data.draw(st.sampled_from(ALL))
    shape_c, shape_x, shape_y = data.draw(broadcast_shapes(3))
    cond = data.draw(arrays(BOOL, shape_c))
    x = data.draw(arrays(dtype, shape_x))
    y = data.draw(arrays(dtype, shape_y))
    with dispatch(path):
        got = sf.where(sf.constant(cond), sf.constant(x), sf.constant(y))
    assert_matches(got, np.where(cond, x, y))


def test_where_with_python_scalars_and_lists():
    x = sf.constant([1.0, 2.0, 3.0])
    assert_matches(sf.where([True, False, True], x, 0.0), np.array([1.0, 0.0, 3.0], np.float32))
    assert_matches(sf.where(x > 1.5, 1.0, x), np.array([1.0, 1.0, 1.0], np.float32))
    assert_matches(sf.where([True, False], 1, 2), np.array([1, 2], np.int32))


def test_where_needs_a_bool_condition_and_matching_branches():
    x = sf.constant([1.0, 2.0])
    with pytest.raises(TypeError):
        sf.where(sf.constant([1, 0]), x, x)
    with pytest.raises(TypeError):
        sf.where(sf.constant([True, False]), x, sf.constant([1.0, 2.0], sf.float64))
    with pytest.raises(ValueError):
        sf.where(sf.constant([True, False, True]), x, x)


CASTABLE = NUMERIC + (BOOL,)


@pytest.mark.parametrize("path", PATHS)
@given(data=st.data())
def test_cast_matches_numpy_astype(path, data):
    source = data.draw(st.sampled_from(CASTABLE))
    target = data.draw(st.sampled_from(CASTABLE))
    x = data.draw(arrays(source, lo=-100, hi=100))
    with dispatch(path):
        got = sf.cast(sf.constant(x), target)
    assert_matches(got, x.astype(target))


def test_cast_accepts_dtype_names_and_half_precision():
    x = sf.constant([1.7, -1.7, 0.0])
    assert_matches(sf.cast(x, "int32"), np.array([1, -1, 0], np.int32))
    assert_matches(sf.cast(x, sf.bool), np.array([True, True, False]))
    half = sf.cast(x, sf.bfloat16)
    assert half.dtype == sf.bfloat16
    assert_matches(sf.cast(half, sf.float32), np.array([1.703125, -1.703125, 0.0], np.float32))
    assert sf.cast(x, sf.float32).dtype == sf.float32
    assert_matches(sf.cast(x, np.uint8), np.array([1, 255, 0], np.uint8))
    assert_matches(sf.cast(x, np.uint16), np.array([1, 65535, 0], np.uint16))
    with pytest.raises(TypeError):
        sf.cast(x, np.float128)


@pytest.mark.parametrize("path", PATHS)
@given(data=st.data())
def test_clip_by_value_matches_numpy(path, data):
    dtype = np.dtype(data.draw(st.sampled_from(NUMERIC)))
    x = data.draw(arrays(dtype))
    lo = data.draw(elements(dtype, -10, 0))
    hi = data.draw(elements(dtype, 0, 10))
    scalar = float if dtype.kind == "f" else int
    with dispatch(path):
        by_scalars = sf.clip_by_value(sf.constant(x), scalar(lo), scalar(hi))
        by_tensors = sf.clip_by_value(
            sf.constant(x), sf.constant(np.asarray(lo, dtype)), sf.constant(np.asarray(hi, dtype))
        )
    expected = np.clip(x, np.asarray(lo, dtype), np.asarray(hi, dtype))
    assert_matches(by_scalars, expected)
    assert_matches(by_tensors, expected)


def test_clip_by_value_broadcasts_tensor_bounds():
    x = sf.constant([[1, 5, 9], [-3, 4, 12]])
    got = sf.clip_by_value(x, sf.constant([0, 2, 4]), 8)
    assert_matches(got, np.array([[1, 5, 8], [0, 4, 8]], np.int32))


# --------------------------------------------------------------------- numerics


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_sigmoid_saturates_without_overflow(dtype):
    x = sf.constant([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype)
    got = sf.sigmoid(x).numpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got[[0, 2, 4]], [0.0, 0.5, 1.0])
    assert 0.0 <= got[1] < 1e-6 and got[3] == pytest.approx(1.0)


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_sigmoid_keeps_relative_precision_for_negative_inputs(dtype):
    x = np.array([-20.0, -40.0], dtype)
    got = sf.sigmoid(sf.constant(x)).numpy()
    expected = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(dtype)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_round_is_half_to_even():
    x = sf.constant([0.5, 1.5, 2.5, -0.5, -1.5])
    assert_matches(sf.round(x), np.array([0.0, 2.0, 2.0, -0.0, -2.0], np.float32))


def test_floordiv_and_mod_follow_python_signs():
    a = sf.constant([7, -7, 7, -7])
    b = sf.constant([2, 2, -2, -2])
    assert_matches(a // b, np.array([3, -4, -4, 3], np.int32))
    assert_matches(a % b, np.array([1, 1, -1, -1], np.int32))
    af = sf.cast(a, sf.float32)
    bf = sf.cast(b, sf.float32)
    assert_matches(af % bf, np.array([1.0, 1.0, -1.0, -1.0], np.float32))


def test_integer_pow_with_negative_exponent_raises():
    with pytest.raises(ValueError):
        sf.constant([2, 3]) ** -1  # noqa: B018


def test_float_ops_reject_integer_operands():
    with pytest.raises(TypeError):
        sf.exp(sf.constant([1, 2]))
    with pytest.raises(TypeError):
        sf.logical_and(sf.constant([1.0]), sf.constant([1.0]))
    with pytest.raises(TypeError):
        sf.logical_not(sf.constant([1]))


@given(data=st.data())
def test_integer_ops_stay_integer(data):
    x = data.draw(arrays(data.draw(st.sampled_from(INTS)), lo=-1000, hi=1000))
    t = sf.constant(x)
    with np.errstate(over="ignore"):  # 8- and 16-bit values wrap, as they do in stageflow
        assert_matches(t * 3 - 1, x * 3 - 1)
    assert_matches(sf.square(t), x * x)
    assert_matches(sf.sign(t), np.sign(x))
    assert_matches(abs(t), np.abs(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int8,
                                   np.bool_, np.complex64, np.complex128, "bfloat16"])
@pytest.mark.parametrize("operands", ["full", "zero", "scalar_x", "scalar_x_zero",
                                      "broadcast"])
def test_large_selects_blend_bits_exactly_as_numpy_where_selects(dtype, operands):
    """Above `BLEND_MIN_SIZE` the select kernel blends bits under a mask: bit for bit
    NumPy's where, NaN payloads, -0.0 and infinities included; a zero y (a relu's
    gradient) blends in the mask's memory, never in an operand's."""
    dtype = sf.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(4)
    shape = (ew.BLEND_MIN_SIZE // 64 + 3, 64)
    cond = rng.random(shape) < 0.5

    def draw(shape):
        values = rng.standard_normal(shape) * 100
        if np.dtype(dtype).kind in "fc":
            flat = values.reshape(-1)
            flat[:4] = [np.nan, -0.0, np.inf, -np.inf][: flat.size]
        return values.astype(dtype)

    x = draw(shape)
    y = {"full": draw(shape), "zero": np.zeros((), dtype), "scalar_x": draw(shape),
         "scalar_x_zero": np.zeros((), dtype), "broadcast": draw(shape[1:])}[operands]
    if operands.startswith("scalar_x"):
        x = np.asarray(np.float32(-0.0)).astype(dtype)
    before = x.copy(), y.copy()
    got = ew.select_p.kernel(cond, x, y)
    want = np.where(cond, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    assert not np.shares_memory(got, x) and not np.shares_memory(got, y)
    assert x.tobytes() == before[0].tobytes() and y.tobytes() == before[1].tobytes()


def test_python_lists_beside_a_tensor_take_its_dtype_as_tensorflow_converts_them():
    """``v.assign_add([1, 1, 1])`` on a float variable, ``sf.maximum(0., [1, -1])``:
    TensorFlow converts the Python values with the other operand's dtype."""
    v = sf.Variable([1.0, 2.0, 3.0])
    v.assign_add([1, 1, 1])
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0, 4.0])
    got = sf.maximum(0.0, [1, -1])
    assert got.dtype == sf.float32 and got.numpy().tolist() == [1.0, 0.0]
    assert (sf.constant([1, 2], sf.int64) + [[3], [4]]).dtype == sf.int64
    with pytest.raises(TypeError, match="list holding the Python float 1.5 with a int32"):
        sf.add(sf.constant([1, 2]), [1.5, 2])
    with pytest.raises(TypeError, match="Python float 2.5 with a int32"):
        sf.add([1, 2], 2.5)


def test_tensorflow_s_spellings_of_constants_and_formats():
    assert float(sf.constant(1.5, name="c")) == 1.5  # TensorFlow's name=, ignored
    assert f"{sf.constant(1.5):.2f}" == "1.50" and f"{sf.constant(2)}" == "2"
    assert f"{sf.constant([[1, 2]])}" == "[[1 2]]"  # TensorFlow's: the value as NumPy prints it
    with pytest.raises(TypeError, match="format.. needs a tensor with one element"):
        f"{sf.constant([1.0, 2.0]):.2f}"
