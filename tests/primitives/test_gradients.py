"""Gradient rules: every primitive has one (or is marked), and every rule agrees with finite
differences.

Each rule is called directly, `prim.vjp([cotangent], inputs, [output], **params)`, on eager
float64 tensors and compared with central differences of ``sum(cotangent * f(x))`` computed
from the primitive's NumPy kernel. Composites (softmax, cross-entropy, einsum, ...) and
second derivatives go through `sf.GradientTape`, which composes the same rules. Hypothesis
draws the shapes (broadcasting pairs, 0-d and size-1 dims) and a seed for the values, so
that values stay generic (no ties, no points where an op jumps).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import strategies
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core.primitive import REGISTRY
from stageflow.core.shapes import normalize_axes
from stageflow.primitives import (
    collective,
    conv,
    elementwise,
    functional,
    linalg,
    prepacked,
    reduction,
    scan,
    sorting,
)
from stageflow.primitives import nd_indexing as nd
from stageflow.primitives import structural as sv
from stageflow.primitives.autodiff import HANDLED_BY_TAPE
from stageflow.primitives.fused_conv import conv2d_fused_p

STEP = 1e-6
RTOL = ATOL = 1e-6
seeds = st.integers(0, 2**32 - 1)
# Tests of fixed shapes whose examples differ only in the seed of their values: a few
# examples, each running every case (tape gradients and finite differences).
SEEDS_ONLY = settings(max_examples=5)


# --------------------------------------------------------------------------- helpers


def numeric_vjp(f, arrays, i, cotangent):
    """Central differences of sum(cotangent * f(*arrays)) with respect to arrays[i]."""
    arrays = [np.array(a) for a in arrays]
    x = arrays[i]
    grad = np.zeros(x.shape)
    for j in np.ndindex(x.shape):
        saved = x[j]
        x[j] = saved + STEP
        plus = np.sum(cotangent * f(*arrays))
        x[j] = saved - STEP
        minus = np.sum(cotangent * f(*arrays))
        x[j] = saved
        grad[j] = (plus - minus) / (2 * STEP)
    return grad


def check_rule(primitive, arrays, rng, params=None, wrt=None):
    """The rule's operand cotangents have the operands' shapes and dtypes and match finite
    differences of the kernel; operands not in `wrt` (default: all floats) get None."""
    params = params or {}
    inputs = [sf.constant(a) for a in arrays]
    output = primitive.bind(*inputs, **params)
    cotangent = rng.standard_normal(output.shape)
    grads = primitive.vjp([sf.constant(cotangent)], inputs, [output], **params)
    assert len(grads) == len(inputs)
    if wrt is None:
        wrt = [i for i, a in enumerate(arrays) if np.asarray(a).dtype.kind == "f"]

    def f(*values):
        return np.asarray(primitive.kernel(*values, **params), dtype=np.float64)

    for i, (array, grad) in enumerate(zip(arrays, grads, strict=True)):
        if i not in wrt:
            assert grad is None, f"{primitive.name}: operand {i} should get no gradient"
            continue
        assert grad.shape == np.shape(array), (primitive.name, i, grad.shape, np.shape(array))
        assert grad.dtype == np.asarray(array).dtype
        expected = numeric_vjp(f, arrays, i, cotangent)
        np.testing.assert_allclose(grad.numpy(), expected, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{primitive.name}, operand {i}")


def tape_grad(f, *xs, cotangent=None):
    """d sum(cotangent * f(*xs)) / d xs through `sf.GradientTape`."""
    xs = [sf.constant(x) for x in xs]
    with sf.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
        if cotangent is not None:
            y = y * sf.constant(cotangent)
    return tape.gradient(y, xs)


def check_composite(f, arrays, rng, wrt=None):
    """Tape gradients of a composite match finite differences of the composite itself."""
    out = f(*[sf.constant(a) for a in arrays])
    cotangent = rng.standard_normal(out.shape)
    grads = tape_grad(f, *arrays, cotangent=cotangent)
    wrt = range(len(arrays)) if wrt is None else wrt

    def numpy_f(*values):
        return f(*[sf.constant(v) for v in values]).numpy()

    for i in wrt:
        expected = numeric_vjp(numpy_f, arrays, i, cotangent)
        np.testing.assert_allclose(grads[i].numpy(), expected, rtol=RTOL, atol=ATOL)


def check_second_order(f, arrays, rng):
    """Differentiate the first derivative again (nested tapes) vs its finite differences."""
    out = f(*[sf.constant(a) for a in arrays])
    cotangent = rng.standard_normal(out.shape)
    directions = [rng.standard_normal(np.shape(a)) for a in arrays]

    def first(*values):  # sum_i <direction_i, d sum(cotangent * f) / d x_i>
        xs = [sf.convert_to_tensor(v) for v in values]
        with sf.GradientTape() as inner:
            inner.watch(xs)
            y = sf.reduce_sum(f(*xs) * sf.constant(cotangent))
        grads = inner.gradient(y, xs)
        total = sf.constant(0.0, sf.float64)
        for g, d in zip(grads, directions, strict=True):
            if g is not None:
                total = total + sf.reduce_sum(g * sf.constant(d))
        return total

    xs = [sf.constant(a) for a in arrays]
    with sf.GradientTape() as outer:
        outer.watch(xs)
        value = first(*xs)
    seconds = outer.gradient(value, xs)

    def numpy_first(*values):
        return first(*values).numpy()

    for i, second in enumerate(seconds):
        expected = numeric_vjp(numpy_first, arrays, i, np.float64(1.0))
        got = np.zeros(np.shape(arrays[i])) if second is None else second.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def normal(rng, shape, lo=None, hi=None):
    if lo is None:
        return rng.standard_normal(shape)
    return rng.uniform(lo, hi, shape)


# --------------------------------------------------------------------------- completeness


def test_every_primitive_has_a_rule_or_is_marked():
    missing = [name for name, p in REGISTRY.items()
               if p.vjp is None and p.differentiable and name not in HANDLED_BY_TAPE]
    assert not missing, f"no gradient rule for {missing}"
    both = [name for name, p in REGISTRY.items() if p.vjp is not None and not p.differentiable]
    assert not both, f"marked nondifferentiable but given a rule: {both}"
    assert HANDLED_BY_TAPE <= set(REGISTRY)


UNARY_DOMAINS = {
    "negative": None, "abs": None, "sign": None, "relu": None, "exp": None, "expm1": None,
    "log": (0.5, 3.0), "log1p": (-0.5, 3.0), "log2": (0.5, 3.0), "sqrt": (0.5, 3.0),
    "rsqrt": (0.5, 3.0),
    "reciprocal": (0.5, 3.0),
    "sin": None, "cos": None, "tanh": None, "logistic": None, "erf": None,
    "floor": "fractional", "ceil": "fractional", "round": "fractional",
    "atan": None, "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "erfinv": (-0.9, 0.9),
    "lgamma": (0.5, 6.0), "digamma": (0.5, 6.0),
}
BINARY = ["add", "subtract", "multiply", "divide", "pow", "maximum", "minimum", "floordiv",
          "mod", "atan2"]
OTHERS = ["select", "cast", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "matmul",
          "matmul_add",
          "broadcast_to", "reshape", "transpose", "slice", "concat", "pad", "gather",
          "update_index", "cumsum", "cumprod", "gather_nd", "scatter_nd_add",
          "scatter_nd_update", "conv2d", "conv2d_input_gradient", "conv2d_filter_gradient",
          "depthwise_conv2d", "conv2d_prepacked", "sort", "reduce_window",
          "max_pool_gradient", "device_copy"]
# Rules that build regions, checked against finite differences in
# tests/frontend/test_control_gradients.py.
CONTROL = ["cond", "while", "py_func"]
# Factorizations, checked against finite differences through sf.linalg in
# tests/frontend/test_linalg_functions.py.
FACTORIZATIONS = ["inv", "solve", "triangular_solve", "cholesky", "eigh", "qr", "svd",
                  "slogdet"]
# The complex parts, checked against finite differences on both parts (with complex
# operands of the rules above) in tests/primitives/test_complex.py.
COMPLEX = ["real", "imag", "conj", "complex"]
# The collective, checked against finite differences for each reduction, ties included, in
# tests/primitives/test_collective.py.
COLLECTIVE = ["all_reduce"]


# Rules that refuse to differentiate (a clear error, not a silent zero), checked below.
REFUSED = {"trigamma", "conv2d_fused"}


def test_every_rule_is_checked_here():
    with_rules = {name for name, p in REGISTRY.items() if p.vjp is not None}
    assert with_rules == (set(UNARY_DOMAINS) | set(BINARY) | set(OTHERS) | set(CONTROL)
                          | set(FACTORIZATIONS) | set(COMPLEX) | set(COLLECTIVE) | REFUSED)


def test_the_derivative_of_trigamma_is_refused_not_zero():
    """Once the second derivative of digamma came back as None (trigamma had no rule)."""
    x = sf.constant(1.5, sf.float64)
    with sf.GradientTape() as outer:
        outer.watch(x)
        with sf.GradientTape() as inner:
            inner.watch(x)
            y = sf.math.digamma(x)
        first = inner.gradient(y, x)
    np.testing.assert_allclose(first.numpy(), 0.9348022005446793)  # trigamma(1.5)
    with pytest.raises(NotImplementedError, match="derivative of trigamma"):
        outer.gradient(first, x)


def test_the_compilers_fused_convolution_refuses_to_be_differentiated():
    """conv2d_fused is made by the fuse-conv pass from a step already differentiated; bound
    by hand under a tape, its gradient is an error naming what to differentiate instead."""
    x = sf.constant(np.ones((1, 3, 3, 2)))
    w = sf.constant(np.ones((1, 1, 2, 4)))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = conv2d_fused_p.bind(x, w, filter_shape=(1, 1, 2, 4), strides=(1, 1),
                                padding=((0, 0), (0, 0)), dilations=(1, 1), packed=False,
                                scale=False, shift=False, residual=False, activation="relu")
    np.testing.assert_array_equal(y.numpy(), np.full((1, 3, 3, 4), 2.0))
    with pytest.raises(NotImplementedError, match="differentiate the conv2d"):
        tape.gradient(y, x)


# --------------------------------------------------------------------------- elementwise


def unary_values(name, rng, shape):
    domain = UNARY_DOMAINS[name]
    if domain == "fractional":  # away from the jumps of floor, ceil and round
        return rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.4, shape)
    return normal(rng, shape, *(domain or (None, None)))


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
@given(shape=strategies.shapes(max_dims=3), seed=seeds)
def test_unary_rule(name, shape, seed):
    rng = np.random.default_rng(seed)
    check_rule(REGISTRY[name], [unary_values(name, rng, shape)], rng)


def binary_values(name, rng, shapes):
    a, b = shapes
    if name == "divide":
        return rng.standard_normal(a), rng.choice([-1, 1], b) * rng.uniform(0.5, 2, b)
    if name == "pow":
        return rng.uniform(0.5, 2, a), rng.standard_normal(b)
    if name in ("floordiv", "mod"):
        x, y = 3 * rng.standard_normal(a), rng.choice([-1, 1], b) * rng.uniform(0.5, 2, b)
        q = np.broadcast_arrays(x / y)[0]
        assume(np.all(np.abs(q - np.round(q)) > 1e-3))  # no jump within the step
        return x, y
    return rng.standard_normal(a), rng.standard_normal(b)


@pytest.mark.parametrize("name", BINARY)
@given(shapes=strategies.broadcast_shapes(2, max_dims=3), seed=seeds)
def test_binary_rule_broadcasting(name, shapes, seed):
    rng = np.random.default_rng(seed)
    check_rule(REGISTRY[name], list(binary_values(name, rng, shapes)), rng)


@given(shapes=strategies.broadcast_shapes(3, max_dims=3), seed=seeds)
def test_select_rule(shapes, seed):
    rng = np.random.default_rng(seed)
    cond = rng.random(shapes[0]) < 0.5
    x, y = rng.standard_normal(shapes[1]), rng.standard_normal(shapes[2])
    check_rule(elementwise.select_p, [cond, x, y], rng, wrt=[1, 2])


@pytest.mark.parametrize("primitive", [elementwise.add_p, elementwise.multiply_p,
                                       elementwise.maximum_p, elementwise.divide_p])
def test_integer_operands_get_no_gradient(primitive):
    x, y = sf.constant([1, 2, 3]), sf.constant([2, 1, 3])
    out = primitive.bind(x, y)
    assert primitive.vjp([sf.ones_like(out)], [x, y], [out]) == [None, None]


def test_cast_rule():
    x64 = sf.constant([1.5, -2.0], sf.float64)
    out = elementwise.cast_p.bind(x64, dtype=sf.float32)
    (g,) = elementwise.cast_p.vjp([sf.constant([0.25, 3.0])], [x64], [out], dtype=sf.float32)
    assert g.dtype == sf.float64 and g.numpy().tolist() == [0.25, 3.0]
    x32 = sf.constant([1.5, 2.5])
    out = elementwise.cast_p.bind(x32, dtype=sf.float64)
    (g,) = elementwise.cast_p.vjp([sf.constant([1.0, 2.0], sf.float64)], [x32], [out],
                                  dtype=sf.float64)
    assert g.dtype == sf.float32
    to_int = elementwise.cast_p.bind(x32, dtype=sf.int32)
    assert elementwise.cast_p.vjp([sf.ones_like(to_int)], [x32], [to_int],
                                  dtype=sf.int32) == [None]
    ints = sf.constant([1, 2])
    to_float = elementwise.cast_p.bind(ints, dtype=sf.float32)
    assert elementwise.cast_p.vjp([sf.ones_like(to_float)], [ints], [to_float],
                                  dtype=sf.float32) == [None]
    assert tape_grad(lambda x: sf.cast(sf.cast(x, sf.int32), sf.float64), [1.5])[0] is None


def test_ties_and_kinks():
    """max/min split ties evenly; abs, sign and relu give 0 at 0; floor & co give zeros."""
    gx, gy = tape_grad(sf.maximum, [1.0, 2.0, 3.0], [1.0, 1.0, 4.0])
    assert gx.numpy().tolist() == [0.5, 1.0, 0.0] and gy.numpy().tolist() == [0.5, 0.0, 1.0]
    gx, gy = tape_grad(sf.minimum, [1.0, 2.0], [1.0, 1.0])
    assert gx.numpy().tolist() == [0.5, 0.0] and gy.numpy().tolist() == [0.5, 1.0]
    assert tape_grad(sf.abs, [-2.0, 0.0, 3.0])[0].numpy().tolist() == [-1.0, 0.0, 1.0]
    assert tape_grad(sf.nn.relu, [-1.0, 0.0, 2.0])[0].numpy().tolist() == [0.0, 0.0, 1.0]
    for f in (sf.sign, sf.floor, sf.ceil, sf.round):
        assert tape_grad(f, [-1.5, 0.0, 2.5])[0].numpy().tolist() == [0.0, 0.0, 0.0]


def test_pow_at_zero_and_negative_bases():
    gx, gy = tape_grad(sf.pow, [0.0, 0.0, -2.0, 2.0], [2.0, 0.0, 3.0, 0.0])
    np.testing.assert_allclose(gx.numpy(), [0.0, 0.0, 12.0, 0.0])
    np.testing.assert_allclose(gy.numpy(), [0.0, 0.0, 0.0, math.log(2.0)])


def test_nondifferentiable_ops_stop_gradients():
    def f(x):
        bits = sf.cast(sf.greater(x, 0.0), sf.float64)
        return bits * sf.cast(sf.argmax(x), sf.float64)

    assert tape_grad(f, [1.0, -1.0])[0] is None
    assert all(not REGISTRY[n].differentiable for n in (
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
        "logical_or", "logical_not", "shift_right_logical", "argmax", "argmin", "iota",
        "random_bits", "constant", "print"))


# --------------------------------------------------------------------------- reductions


@st.composite
def reduction_cases(draw, min_side=0):
    shape = draw(strategies.shapes(max_dims=3, min_side=min_side))
    axis = draw(strategies.axes(len(shape)))
    axes = normalize_axes((axis,) if isinstance(axis, int) else axis, len(shape))
    return shape, {"axes": axes, "keepdims": draw(st.booleans())}


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_min"])
@given(case=reduction_cases(min_side=1), seed=seeds)
def test_reduction_rule(name, case, seed):
    (shape, params), rng = case, np.random.default_rng(seed)
    check_rule(REGISTRY[name], [rng.standard_normal(shape)], rng, params)


@given(case=reduction_cases(), seed=seeds, zeros=st.integers(0, 2))
def test_reduce_prod_rule_with_zeros(case, seed, zeros):
    (shape, params), rng = case, np.random.default_rng(seed)
    x = rng.choice([-1, 1], shape) * rng.uniform(0.5, 1.5, shape)
    x.reshape(-1)[: min(zeros, x.size)] = 0.0  # none, one or two exact zeros
    check_rule(reduction.reduce_prod_p, [x], rng, params)


def test_reduce_max_splits_ties():
    (g,) = tape_grad(lambda x: sf.reduce_max(x, 1), [[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    assert g.numpy().tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]


# --------------------------------------------------------------------------- matmul


@st.composite
def matmul_cases(draw):
    batch_a, batch_b = draw(strategies.broadcast_shapes(2, max_dims=2, max_side=3))
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = batch_a + ((k, m) if ta else (m, k))
    b = batch_b + ((n, k) if tb else (k, n))
    return a, b, {"transpose_a": ta, "transpose_b": tb}


@given(case=matmul_cases(), seed=seeds)
def test_matmul_rule(case, seed):
    a, b, params = case
    rng = np.random.default_rng(seed)
    check_rule(linalg.matmul_p, [rng.standard_normal(a), rng.standard_normal(b)], rng, params)


@given(case=matmul_cases(), alpha=st.sampled_from([1.0, -0.5, 2.0]), bias=st.booleans(),
       seed=seeds)
def test_matmul_add_rule(case, alpha, bias, seed):
    a, b, params = case
    rng = np.random.default_rng(seed)
    product = np.broadcast_shapes(a[:-2], b[:-2]) + (
        a[-1] if params["transpose_a"] else a[-2], b[-2] if params["transpose_b"] else b[-1])
    c = product[-1:] if bias else product
    check_rule(linalg.matmul_add_p, [rng.standard_normal(s) for s in (a, b, c)], rng,
               {**params, "alpha": alpha})


# --------------------------------------------------------------------------- structural


@given(shapes=strategies.broadcast_shapes(2, max_dims=3), seed=seeds)
def test_broadcast_to_rule(shapes, seed):
    rng = np.random.default_rng(seed)
    target = np.broadcast_shapes(*shapes)
    check_rule(sv.broadcast_to_p, [rng.standard_normal(shapes[0])], rng, {"shape": target})


@given(shape=strategies.shapes(max_dims=3), seed=seeds, kind=st.integers(0, 3))
def test_reshape_rule(shape, seed, kind):
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    target = [(size,), (-1,), tuple(reversed(shape)), (1, *shape, 1)][kind]
    check_rule(sv.reshape_p, [rng.standard_normal(shape)], rng, {"shape": target})


@given(shape=strategies.shapes(max_dims=4), seed=seeds, data=st.data())
def test_transpose_rule(shape, seed, data):
    rng = np.random.default_rng(seed)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check_rule(sv.transpose_p, [rng.standard_normal(shape)], rng, {"perm": perm})


@given(shape=strategies.shapes(max_dims=3), seed=seeds)
def test_device_copy_rule(shape, seed):
    """A copy to a logical device (the suite has four): the cotangent is copied back."""
    rng = np.random.default_rng(seed)
    check_rule(functional.device_copy_p, [rng.standard_normal(shape)], rng,
               {"device": "/device:CPU:1"})
    x = sf.constant(rng.standard_normal(shape))
    [grad] = functional.device_copy_p.vjp([sf.ones_like(x).to("cpu:1")], [x],
                                          [x.to("cpu:1")], device="/device:CPU:1")
    assert grad.device == "/device:CPU:0"


bounds = st.none() | st.integers(-6, 6)


@given(shape=strategies.shapes(max_dims=3, max_side=5), seed=seeds, data=st.data())
def test_slice_rule(shape, seed, data):
    rng = np.random.default_rng(seed)
    slices = tuple(
        (data.draw(bounds), data.draw(bounds), data.draw(st.none() | st.sampled_from(
            [-3, -2, -1, 1, 2, 3]))) for _ in shape)
    check_rule(sv.slice_p, [rng.standard_normal(shape)], rng, {"slices": slices})


@given(shape=strategies.shapes(min_dims=1, max_dims=3), seed=seeds, data=st.data())
def test_concat_rule(shape, seed, data):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    arrays = [rng.standard_normal(shape[:axis] + (n,) + shape[axis + 1 :]) for n in sizes]
    check_rule(sv.concat_p, arrays, rng, {"axis": axis})


@given(shape=strategies.shapes(min_dims=1, max_dims=3), seed=seeds, data=st.data())
def test_pad_rule(shape, seed, data):
    rng = np.random.default_rng(seed)
    pads = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
    check_rule(sv.pad_p, [rng.standard_normal(shape)], rng, {"pads": pads, "value": 1.5})


@given(shape=strategies.shapes(min_dims=1, max_dims=3, min_side=1),
       indices=strategies.shapes(max_dims=2), seed=seeds, data=st.data())
def test_gather_rule(shape, indices, seed, data):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    index = rng.integers(-shape[axis], shape[axis], indices)  # repeats and negatives
    check_rule(sv.gather_p, [rng.standard_normal(shape), index], rng, {"axis": axis},
               wrt=[0])


@given(shape=strategies.shapes(min_dims=1, max_dims=3, min_side=1), seed=seeds, data=st.data())
def test_update_index_rule(shape, seed, data):
    rng = np.random.default_rng(seed)
    index = np.int32(data.draw(st.integers(-shape[0], shape[0] - 1)))
    check_rule(sv.update_index_p, [rng.standard_normal(shape), rng.standard_normal(shape[1:]),
                                   index], rng, {}, wrt=[0, 1])


@given(shape=strategies.shapes(min_dims=1, max_dims=3, min_side=1), seed=seeds,
       exclusive=st.booleans(), reverse=st.booleans(), product=st.booleans(), data=st.data())
def test_scan_rules(shape, seed, exclusive, reverse, product, data):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    primitive = scan.cumprod_p if product else scan.cumsum_p
    values = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    check_rule(primitive, [values], rng, {"axis": axis, "exclusive": exclusive,
                                          "reverse": reverse})


@given(shape=strategies.shapes(min_dims=1, max_dims=3, min_side=1), seed=seeds,
       descending=st.booleans(), data=st.data())
def test_sort_rule(shape, seed, descending, data):
    """Keys and a payload: each cotangent goes back to where its element came from (keys
    distinct, so the order does not change within a finite-difference step)."""
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    keys = rng.permutation(np.prod(shape)).reshape(shape) + rng.uniform(0, 0.5, shape)
    payload = rng.standard_normal(shape)
    params = {"axis": axis, "descending": descending}
    inputs = [sf.constant(keys), sf.constant(payload)]
    outputs = sorting.sort_p.bind(*inputs, **params)
    g_keys, g_payload = rng.standard_normal(shape), rng.standard_normal(shape)
    grads = sorting.sort_p.vjp([sf.constant(g_keys), None, sf.constant(g_payload)], inputs,
                               outputs, **params)

    def f(k, p):
        values, _, moved = sorting.sort_p.kernel(k, p, **params)
        return np.sum(values * g_keys) + np.sum(moved * g_payload)

    for i, (array, grad) in enumerate(zip([keys, payload], grads, strict=True)):
        expected = numeric_vjp(lambda *v: np.asarray(f(*v)), [keys, payload], i,
                               np.float64(1.0))
        np.testing.assert_allclose(grad.numpy(), expected, rtol=RTOL, atol=ATOL)
        assert grad.shape == array.shape


@given(shape=strategies.shapes(min_dims=1, max_dims=3, min_side=1), seed=seeds, data=st.data())
def test_nd_indexing_rules(shape, seed, data):
    rng = np.random.default_rng(seed)
    width = data.draw(st.integers(1, len(shape)))
    count = data.draw(st.integers(1, 4))
    tuples = np.stack([rng.integers(-d, d, count) for d in shape[:width]], -1)
    check_rule(nd.gather_nd_p, [rng.standard_normal(shape), tuples], rng, {"width": width},
               wrt=[0])
    updates = rng.standard_normal((count, *shape[width:]))
    check_rule(nd.scatter_nd_add_p, [rng.standard_normal(shape), tuples, updates], rng,
               {"width": width}, wrt=[0, 2])
    unique = np.unique(np.where(tuples < 0, tuples + np.array(shape[:width]), tuples), axis=0)
    check_rule(nd.scatter_nd_update_p, [rng.standard_normal(shape), unique,
                                        rng.standard_normal((len(unique), *shape[width:]))],
               rng, {"width": width}, wrt=[0, 2])


# --------------------------------------------------------------------------- windows

pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))
pad_pairs = st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)),
                      st.tuples(st.integers(0, 2), st.integers(0, 2)))


def fits(size, window, stride, pad, dilation=1):
    return size + pad[0] + pad[1] >= (window - 1) * dilation + 1


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d", "conv2d_prepacked"])
@given(size=pairs, kernel=pairs, strides=pairs, dilations=st.tuples(st.integers(1, 2),
       st.integers(1, 2)), padding=pad_pairs, channels=pairs, seed=seeds)
def test_conv2d_rules(name, size, kernel, strides, dilations, padding, channels, seed):
    """conv2d's, a depthwise conv's (filters [kh, kw, C, M]) and a prepacked conv's (the
    panels' padding columns get no gradient)."""
    size = (size[0] + 2, size[1] + 2)
    assume(all(fits(*args) for args in zip(size, kernel, strides, padding, dilations,
                                           strict=True)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, *size, channels[0]))
    w = rng.standard_normal((*kernel, *channels))
    params = {"strides": strides, "padding": padding, "dilations": dilations}
    if name == "conv2d_prepacked":
        params["filter_shape"], w = w.shape, prepacked.pack(w)
    check_rule(REGISTRY[name], [x, w], rng, params)


@pytest.mark.parametrize("name", ["conv2d", "conv2d_prepacked", "conv2d_input_gradient",
                                  "conv2d_filter_gradient"])
@settings(max_examples=20)
@given(size=pairs, kernel=pairs, strides=pairs, padding=pad_pairs, channels=pairs,
       groups=st.integers(2, 3), seed=seeds)
def test_grouped_conv2d_rules(name, size, kernel, strides, padding, channels, groups, seed):
    """conv2d of feature groups (filters [kh, kw, C / G, O]), prepacked group by group,
    and its two gradients, whose rules keep the groups."""
    size = (size[0] + 2, size[1] + 2)
    assume(all(fits(*args) for args in zip(size, kernel, strides, padding, strict=True)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, *size, channels[0] * groups))
    w = rng.standard_normal((*kernel, channels[0], channels[1] * groups))
    geometry = {"strides": strides, "padding": padding, "dilations": (1, 1),
                "feature_group_count": groups}
    g = rng.standard_normal(conv.conv2d_p.kernel(x, w, **geometry).shape)
    operands = {"conv2d": ([x, w], {}),
                "conv2d_prepacked": ([x, prepacked.pack(w, groups)], {"filter_shape": w.shape}),
                "conv2d_input_gradient": ([g, w], {"input_size": size}),
                "conv2d_filter_gradient": ([x, g], {"filter_size": kernel})}
    arrays, extra = operands[name]
    check_rule(REGISTRY[name], arrays, rng, {**geometry, **extra})


@pytest.mark.parametrize("name", ["conv2d_input_gradient", "conv2d_filter_gradient"])
@given(size=pairs, kernel=pairs, strides=pairs, dilations=st.tuples(st.integers(1, 2),
       st.integers(1, 2)), padding=pad_pairs, channels=pairs, seed=seeds)
def test_conv2d_gradient_rules(name, size, kernel, strides, dilations, padding, channels,
                               seed):
    """The gradients of conv2d's gradients (for second derivatives): each is bilinear, and
    its rule is the other two ops."""
    size = (size[0] + 2, size[1] + 2)
    assume(all(fits(*args) for args in zip(size, kernel, strides, padding, dilations,
                                           strict=True)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, *size, channels[0]))
    w = rng.standard_normal((*kernel, *channels))
    geometry = {"strides": strides, "padding": padding, "dilations": dilations}
    g = rng.standard_normal(conv.conv2d_p.kernel(x, w, **geometry).shape)
    if name == "conv2d_input_gradient":
        check_rule(conv.conv2d_input_gradient_p, [g, w], rng,
                   {**geometry, "input_size": size})
    else:
        check_rule(conv.conv2d_filter_gradient_p, [x, g], rng,
                   {**geometry, "filter_size": kernel})


@pytest.mark.parametrize("kind", ["sum", "max"])
@given(size=pairs, window=pairs, strides=pairs, seed=seeds, data=st.data())
def test_reduce_window_rule(kind, size, window, strides, seed, data):
    size = (size[0] + 2, size[1] + 2)
    # A max window of padding only is -inf: no gradient, and no finite difference there.
    most = [2 if kind == "sum" else w - 1 for w in window]
    padding = tuple((data.draw(st.integers(0, m)), data.draw(st.integers(0, m))) for m in most)
    assume(all(fits(*args) for args in zip(size, window, strides, padding, strict=True)))
    rng = np.random.default_rng(seed)
    params = {"kind": kind, "window": window, "strides": strides, "padding": padding}
    check_rule(conv.reduce_window_p, [rng.standard_normal((2, *size, 2))], rng, params)


@given(size=pairs, window=pairs, strides=pairs, seed=seeds, data=st.data())
def test_max_pool_gradient_rule(size, window, strides, seed, data):
    """Max pooling's gradient is linear in the cotangent (its rule reads the cotangent back
    at each window's chosen element) and piecewise constant in the input and the pooled
    result, which get no gradient."""
    size = (size[0] + 2, size[1] + 2)
    padding = tuple((data.draw(st.integers(0, w - 1)), data.draw(st.integers(0, w - 1)))
                    for w in window)
    assume(all(fits(*args) for args in zip(size, window, strides, padding, strict=True)))
    rng = np.random.default_rng(seed)
    params = {"window": window, "strides": strides, "padding": padding}
    x = rng.standard_normal((2, *size, 2))
    pooled = conv.reduce_window_p.kernel(x, kind="max", **params)
    check_rule(conv.max_pool_gradient_p, [x, pooled, rng.standard_normal(pooled.shape)], rng,
               params, wrt=[2])


def test_max_pool_tie_goes_to_the_first_maximum():
    x = np.array([[1.0, 1.0], [1.0, 0.0]]).reshape(1, 2, 2, 1)
    (g,) = tape_grad(lambda t: sf.nn.max_pool2d(t, 2, 2, "VALID"), x)
    assert g.numpy().reshape(2, 2).tolist() == [[1.0, 0.0], [0.0, 0.0]]


# --------------------------------------------------------------------------- composites

COMPOSITES = {
    "softmax": lambda x: sf.nn.softmax(x, -1),
    "log_softmax": lambda x: sf.nn.log_softmax(x, 0),
    "gelu": sf.nn.gelu,
    "gelu_tanh": lambda x: sf.nn.gelu(x, approximate=True),
    "softplus": sf.nn.softplus,
    "silu": sf.nn.silu,
    "elu": sf.nn.elu,
    "leaky_relu": sf.nn.leaky_relu,
    "logsumexp": lambda x: sf.reduce_logsumexp(x, -1),
    "logsumexp_keepdims": lambda x: sf.reduce_logsumexp(x, 0, keepdims=True),
    "reduce_mean": lambda x: sf.reduce_mean(x, 1),
    "clip": lambda x: sf.clip_by_value(x, -0.5, 0.7),
    "square_sum": lambda x: sf.reduce_sum(sf.square(x)),
    "indexing": lambda x: x[1:, ::-2] * x[:1, 1::2],
    "tile_stack": lambda x: sf.stack([sf.tile(x, [2, 1]), sf.tile(x, [2, 1]) * 2.0]),
    "matmul_vector": lambda x: sf.matmul(x, x[0]),
    "normalise": lambda x: x * sf.rsqrt(sf.reduce_mean(x * x, -1, keepdims=True) + 1e-3),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@SEEDS_ONLY
@given(seed=seeds)
def test_composite_gradients(name, seed):
    rng = np.random.default_rng(seed)
    check_composite(COMPOSITES[name], [rng.standard_normal((3, 4))], rng)


@SEEDS_ONLY
@given(seed=seeds)
def test_cross_entropy_gradients(seed):
    rng = np.random.default_rng(seed)
    logits, labels = rng.standard_normal((3, 4)), rng.dirichlet(np.ones(4), 3)
    check_composite(sf.nn.softmax_cross_entropy_with_logits, [labels, logits], rng)
    classes = sf.constant(rng.integers(0, 4, 3))
    check_composite(lambda z: sf.nn.sparse_softmax_cross_entropy_with_logits(classes, z),
                    [logits], rng)


@SEEDS_ONLY
@given(seed=seeds)
def test_tensordot_einsum_and_pooling_gradients(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 2))
    check_composite(lambda x, y: sf.tensordot(x, y, [[1, 2], [1, 0]]), [a, b], rng)
    check_composite(lambda x, y: sf.einsum("bij,jkb->ik", x, y), [a, b], rng)
    check_composite(lambda x, y: sf.einsum("bij,bjk->bik", x, sf.transpose(y, (2, 0, 1))),
                    [a, b], rng)
    c, square = rng.standard_normal((5, 2)), rng.standard_normal((3, 3))
    check_composite(lambda x, y, z: sf.einsum("bij,jkb,ab->ia", x, y, z), [a, b, c], rng)
    check_composite(lambda x: sf.einsum("ii->i", x) + sf.einsum("ii", x), [square], rng)
    image = rng.standard_normal((1, 5, 5, 2))
    check_composite(lambda x: sf.nn.avg_pool2d(x, 3, 2, "SAME"), [image], rng)
    check_composite(lambda x: sf.nn.max_pool2d(x, 2, 1, "SAME"), [image], rng)
    filters = rng.standard_normal((3, 3, 2, 3))
    check_composite(lambda x, w: sf.nn.conv2d(x, w, 2, "SAME"), [image, filters], rng)


# --------------------------------------------------------------------------- second order


# digamma's derivative, trigamma, has no gradient of its own (lgamma differentiates twice).
@pytest.mark.parametrize("name", sorted(set(UNARY_DOMAINS) - {"digamma"}))
@SEEDS_ONLY
@given(seed=seeds)
def test_second_order_unary(name, seed):
    rng = np.random.default_rng(seed)
    primitive = REGISTRY[name]
    check_second_order(primitive.bind, [unary_values(name, rng, (2, 3))], rng)


@pytest.mark.parametrize("name", BINARY + ["select"])
@SEEDS_ONLY
@given(seed=seeds)
def test_second_order_binary(name, seed):
    rng = np.random.default_rng(seed)
    x, y = binary_values(name, rng, ((2, 3), (3,)))
    if name == "select":
        cond = sf.constant(rng.random((2, 3)) < 0.5)
        check_second_order(lambda a, b: sf.where(cond, a * a, b * b * b), [x, y], rng)
    else:
        check_second_order(REGISTRY[name].bind, [x, y], rng)


@pytest.mark.parametrize("transposes", [(False, False), (True, False), (False, True),
                                        (True, True)])
@SEEDS_ONLY
@given(seed=seeds)
def test_second_order_matmul(transposes, seed):
    rng = np.random.default_rng(seed)
    ta, tb = transposes
    a = rng.standard_normal((2, 3, 2) if ta else (2, 2, 3))
    b = rng.standard_normal((4, 3) if tb else (3, 4))

    def f(x, y):  # nonlinear in each operand, so that the second derivative is not zero
        return sf.matmul(x * x, y * sf.sin(y), transpose_a=ta, transpose_b=tb)

    check_second_order(f, [a, b], rng)


@SEEDS_ONLY
@given(seed=seeds)
def test_second_order_composites(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3))
    for f in (sf.nn.softmax, sf.nn.gelu, lambda t: sf.reduce_logsumexp(t, 1),
              lambda t: sf.reduce_prod(t * t + 1.0, 0), lambda t: sf.reduce_max(t * t, 1)):
        check_second_order(f, [x], rng)


def test_higher_order_listing():
    """The paper's listing 1: d2(x*x)/dx2 = 2, and a third derivative of sin."""
    x = sf.constant(3.0)
    with sf.GradientTape() as t1:
        with sf.GradientTape() as t2:
            t1.watch(x)
            t2.watch(x)
            y = x * x
        dy_dx = t2.gradient(y, x)
    assert float(dy_dx) == 6.0 and float(t1.gradient(dy_dx, x)) == 2.0
    x = sf.constant(0.5, sf.float64)
    with sf.GradientTape() as t1:
        t1.watch(x)
        with sf.GradientTape() as t2:
            t2.watch(x)
            with sf.GradientTape() as t3:
                t3.watch(x)
                y = sf.sin(x)
            d1 = t3.gradient(y, x)
        d2 = t2.gradient(d1, x)
    assert t1.gradient(d2, x).numpy() == pytest.approx(-math.cos(0.5))


# --------------------------------------------------------------------------- staged


def test_rules_trace_into_ir_with_an_unknown_batch_dim():
    """Gradients inside `sf.function` with a None batch dim equal the eager ones."""

    def loss(x, w, b):
        h = sf.nn.relu(sf.matmul(x, w) + b)
        z = sf.reshape(h, [-1, 2, 2])
        parts = sf.concat([z[:, :1] * 2.0, z[:, 1:]], axis=1)
        return sf.reduce_sum(sf.nn.log_softmax(sf.reduce_max(parts, 1)) * sf.tanh(parts[:, 0]))

    def grads(x, w, b):
        with sf.GradientTape() as tape:
            tape.watch([x, w, b])
            value = loss(x, w, b)
        return tape.gradient(value, [x, w, b])

    spec = [sf.TensorSpec([None, 3], sf.float64), sf.TensorSpec([3, 4], sf.float64),
            sf.TensorSpec([4], sf.float64)]
    staged = sf.function(grads, input_signature=spec)
    rng = np.random.default_rng(0)
    args = [sf.constant(rng.standard_normal(s)) for s in ((5, 3), (3, 4), (4,))]
    for got, want in zip(staged(*args), grads(*args), strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


UNIT_DOMAIN = ("asin", "acos", "erfinv")  # defined on [-1, 1] only


def staged_cases(rng, dtype):
    """One representative call of every rule (strided, broadcasting, padded variants)."""

    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    def pos(*shape):
        return rng.uniform(0.5, 2.0, shape).astype(dtype)

    window = {"strides": (2, 1), "padding": ((1, 0), (0, 2))}
    pooling = r(2, 5, 5, 2)
    return [
        *[(REGISTRY[name], [pos(2, 3) * (0.45 if name in UNIT_DOMAIN else 1.0)], {})
          for name in sorted(UNARY_DOMAINS)],
        *[(REGISTRY[name], [pos(2, 3), pos(3)], {}) for name in BINARY],
        (elementwise.select_p, [rng.random((2, 1)) < 0.5, r(3), r(2, 3)], {}),
        (elementwise.cast_p, [r(3)], {"dtype": np.dtype(np.float16)}),
        *[(collective.all_reduce_p, [r(2, 3), r(2, 3), r(2, 3)], {"reduction": kind})
          for kind in ("sum", "mean", "max", "min")],
        *[(REGISTRY[name], [pos(2, 3, 2)], {"axes": (0, 2), "keepdims": keep})
          for name in ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
          for keep in (False, True)],
        (linalg.matmul_p, [r(2, 1, 3, 4), r(5, 2, 3)], {"transpose_a": True,
                                                        "transpose_b": True}),
        (sv.broadcast_to_p, [r(3, 1)], {"shape": (2, 3, 4)}),
        (sv.reshape_p, [r(2, 3, 2)], {"shape": (3, -1)}),
        (sv.transpose_p, [r(2, 3, 4)], {"perm": (2, 0, 1)}),
        (sv.slice_p, [r(5, 4, 3)], {"slices": ((1, None, 2), (None, None, -1), (0, 2, 1))}),
        (sv.concat_p, [r(2, 1), r(2, 3)], {"axis": 1}),
        (sv.pad_p, [r(2, 3)], {"pads": ((1, 0), (2, 1)), "value": 0.0}),
        (sv.gather_p, [r(4, 3), np.array([[3, -1], [0, 3]])], {"axis": 0}),
        (conv.conv2d_p, [r(2, 6, 5, 3), r(3, 2, 3, 2)], {**window, "dilations": (1, 2)}),
        (conv.conv2d_p, [r(2, 6, 5, 4), r(3, 2, 2, 6)], {**window, "dilations": (1, 2),
                                                         "feature_group_count": 2}),
        (conv.conv2d_input_gradient_p, [r(2, 3, 5, 2), r(3, 2, 3, 2)],
         {**window, "dilations": (1, 2), "input_size": (6, 5)}),
        (conv.conv2d_filter_gradient_p, [r(2, 6, 5, 3), r(2, 3, 5, 2)],
         {**window, "dilations": (1, 2), "filter_size": (3, 2)}),
        (conv.reduce_window_p, [r(2, 5, 5, 2)], {**window, "kind": "sum", "window": (3, 2)}),
        (conv.reduce_window_p, [r(2, 5, 5, 2)], {**window, "kind": "max", "window": (3, 3)}),
        (conv.max_pool_gradient_p, [pooling, conv.reduce_window_p.kernel(
            pooling, kind="max", window=(3, 3), **window), r(2, 2, 5, 2)],
         {**window, "window": (3, 3)}),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_rule_traces_into_ir(dtype):
    """Each rule staged inside `sf.function` gives the eager rule's result and dtypes (every
    rule in one function, each of its own operands)."""
    rng = np.random.default_rng(1)
    cases, args, expected = [], [], []
    for primitive, arrays, params in staged_cases(rng, dtype):
        inputs = [sf.constant(a) for a in arrays]
        output = primitive.bind(*inputs, **params)
        cotangent = sf.constant(rng.standard_normal(output.shape).astype(output.dtype))
        eager = primitive.vjp([cotangent], inputs, [output], **params)
        cases.append((primitive, params, len(inputs) + 1))
        args += [*inputs, cotangent]
        expected.append([(g, x) for g, x in zip(eager, inputs, strict=True) if g is not None])

    def rules(*flat):  # every case's rule, of its own operands, in one function
        results, at = [], 0
        for primitive, params, count in cases:
            *operands, g = flat[at:at + count]
            at += count
            out = primitive.bind(*operands, **params)
            grads = primitive.vjp([g], operands, [out], **params)
            results.append([x for x in grads if x is not None])
        return results

    staged = sf.function(rules)(*args)
    for (primitive, _, _), got_grads, want in zip(cases, staged, expected, strict=True):
        assert len(got_grads) == len(want) and want, primitive.name
        for got, (expected_grad, x) in zip(got_grads, want, strict=True):
            assert got.dtype == expected_grad.dtype == x.dtype, primitive.name
            np.testing.assert_allclose(got.numpy(), expected_grad.numpy(), rtol=1e-6,
                                       atol=1e-6, err_msg=primitive.name)


def test_rules_with_unknown_dims():
    """Rules traced with operands whose first dim is unknown (None) while tracing (every
    rule in one function, each of its own operands)."""
    rng = np.random.default_rng(2)

    def r(*shape):
        return rng.standard_normal(shape)

    full = (None, None, None)
    window = {"strides": (2, 2), "padding": ((1, 0), (0, 1))}
    cases = [  # primitive, operands, params, operands whose dim 0 is unknown
        (elementwise.add_p, [r(4, 3), r(1, 3)], {}, [0]),
        (elementwise.multiply_p, [r(4, 1), r(4, 3)], {}, [0, 1]),
        (elementwise.floor_p, [r(4, 3)], {}, [0]),
        (elementwise.select_p, [rng.random((4, 3)) < 0.5, r(4, 3), r(3)], {}, [0, 1]),
        (reduction.reduce_sum_p, [r(4, 3)], {"axes": (1,), "keepdims": False}, [0]),
        (reduction.reduce_sum_p, [r(4, 3)], {"axes": (0,), "keepdims": False}, [0]),
        (reduction.reduce_prod_p, [r(4, 3)], {"axes": (0, 1), "keepdims": True}, [0]),
        (reduction.reduce_max_p, [r(4, 3)], {"axes": (1,), "keepdims": False}, [0]),
        (linalg.matmul_p, [r(4, 3), r(3, 2)], {"transpose_a": False, "transpose_b": False},
         [0]),
        (sv.reshape_p, [r(4, 4)], {"shape": (-1, 2, 2)}, [0]),
        (sv.transpose_p, [r(4, 3)], {"perm": (1, 0)}, [0]),
        (sv.slice_p, [r(4, 5)], {"slices": ((1, None, None), (None, None, 2))}, [0]),
        (sv.slice_p, [r(4, 5)], {"slices": (full, (4, 0, -2))}, [0]),
        (sv.pad_p, [r(4, 3)], {"pads": ((1, 2), (0, 1)), "value": 0.0}, [0]),
        (sv.concat_p, [r(4, 1), r(4, 2)], {"axis": 1}, [0, 1]),
        (sv.gather_p, [r(4, 5), np.array([4, 0, -1])], {"axis": 1}, [0]),
        (conv.conv2d_p, [r(2, 5, 5, 2), r(2, 2, 2, 3)], {**window, "dilations": (1, 1)}, [0]),
        (conv.conv2d_input_gradient_p, [r(2, 3, 3, 3), r(2, 2, 2, 3)],
         {**window, "dilations": (1, 1), "input_size": (5, 5)}, [0]),
        (conv.conv2d_filter_gradient_p, [r(2, 5, 5, 2), r(2, 3, 3, 3)],
         {**window, "dilations": (1, 1), "filter_size": (2, 2)}, [0, 1]),
        (conv.reduce_window_p, [r(2, 5, 5, 2)], {**window, "kind": "max", "window": (2, 2)},
         [0]),
        (conv.reduce_window_p, [r(2, 5, 5, 2)], {**window, "kind": "sum", "window": (2, 3)},
         [0]),
    ]
    def rule(*operands, primitive, params):  # every operand gets a result
        out = primitive.bind(*operands, **params)
        grads = primitive.vjp([sf.sin(out)], list(operands), [out], **params)
        return [sf.zeros(()) if g is None else g for g in grads]

    def rules(*flat):  # every case's rule, of its own operands, in one function
        results, at = [], 0
        for primitive, arrays, params, _ in cases:
            results.append(rule(*flat[at:at + len(arrays)], primitive=primitive,
                                params=params))
            at += len(arrays)
        return results

    specs = [sf.TensorSpec((None, *np.shape(a)[1:]) if i in unknown else np.shape(a),
                           np.asarray(a).dtype)
             for _, arrays, _, unknown in cases for i, a in enumerate(arrays)]
    staged = sf.function(rules, input_signature=specs)(
        *[sf.constant(a) for _, arrays, _, _ in cases for a in arrays])
    for (primitive, arrays, params, _), results in zip(cases, staged, strict=True):
        inputs = [sf.constant(a) for a in arrays]
        for got, want in zip(results, rule(*inputs, primitive=primitive, params=params),
                             strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=primitive.name)


def test_gradients_of_empty_products_and_gathers():
    """Found by the random-gradients campaign: the batched matmul's rule and gather's
    reshaped with a row count inferred beside a 0 dim, which cannot be."""
    a, b = sf.constant(np.ones((1, 2, 1))), sf.constant(np.ones((1, 0)))
    with sf.GradientTape() as tape:
        tape.watch([a, b])
        y = sf.reduce_sum(a @ b)
    ga, gb = tape.gradient(y, [a, b])
    assert ga.shape == (1, 2, 1) and gb.shape == (1, 0)
    np.testing.assert_array_equal(ga.numpy(), np.zeros((1, 2, 1)))

    def gathered(x, i):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.gather(x, i, axis=2))
        return tape.gradient(y, x)

    staged = sf.function(gathered, input_signature=[sf.TensorSpec([None, 1, 1], sf.float64),
                                                    sf.TensorSpec([0, 3], sf.int64)])
    got = staged(np.ones((2, 1, 1)), np.zeros((0, 3), np.int64))
    np.testing.assert_array_equal(got.numpy(), np.zeros((2, 1, 1)))


def test_a_gradient_through_a_broadcast_unknown_dim_is_refused():
    """An operand dim unknown while tracing, broadcast against a known one, may have been 1
    at run time: the gradient (summed or not) depends on it. Once it silently took the
    result's shape ([1., 1., 1.] for an input of shape (1,))."""
    def grad(t):
        with sf.GradientTape() as tape:
            tape.watch(t)
            y = sf.reduce_sum(sf.broadcast_to(t, (3,)))
        return tape.gradient(y, t)

    staged = sf.function(grad, input_signature=[sf.TensorSpec([None], sf.float64)])
    with pytest.raises(NotImplementedError, match="give that dim in the input_signature"):
        staged(np.array([2.0]))
    np.testing.assert_array_equal(grad(sf.constant([2.0])).numpy(), [3.0])
