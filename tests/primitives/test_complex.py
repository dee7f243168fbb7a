"""complex64 and complex128 tensors, as TensorFlow and NumPy have them.

Each op that takes complex tensors runs four ways against NumPy: eagerly, staged op by op
(each op a verified graph function, interpreted), as an interpreted `sf.function` and as a
compiled one, which must be one program (no op left to Python steps). Gradients follow
TensorFlow's convention (the gradient of a real loss with respect to z = x + iy is
dL/dx + i dL/dy) and are checked against central differences on the real and imaginary
parts, eagerly, interpreted and compiled. The ops with no meaning for complex numbers
refuse them with a TypeError naming the op and the dtype.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from staged_modes import stage_each_op
from strategies import COMPLEX, arrays, assert_matches, axes, broadcast_shapes, shapes

import stageflow as sf
from stageflow.codegen.lowered.compile import rule_for
from stageflow.codegen.lowered.rule import OpSpec
from stageflow.core.primitive import REGISTRY, ShapedType

C64, C128 = COMPLEX
MODES = ("eager", "staged", "interpreted", "compiled")
# Shapes the compiled tests run on: 0-d, empty, a vector, a matrix, an empty middle dim.
SHAPES = [(), (0,), (7,), (3, 4), (2, 0, 3)]


def run(mode: str, f: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """`f` of tensors holding `arrays`, run in `mode`; a compiled function must be one
    compiled program (no interpreter fallback, no Python steps)."""
    if mode == "eager":
        return f(*map(sf.constant, arrays))
    if mode == "staged":
        with stage_each_op():
            return f(*map(sf.constant, arrays))
    function = sf.function(f, jit=mode == "compiled")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "runs interpreted: ..."
        result = function(*arrays)
    if mode == "compiled":
        concrete = function.get_concrete_function(*arrays)
        assert concrete.jit and concrete.stats()["steps_reasons"] == {}
    return result


def complex_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
                  low: float = 0.5, high: float = 2.0) -> np.ndarray:
    """Values of modulus in [low, high] at any angle (away from 0 and the overflow range)."""
    modulus = rng.uniform(low, high, shape)
    return (modulus * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))).astype(dtype)


# -- making and converting complex tensors ---------------------------------------------------


def test_complex_tensors_from_numpy_and_python() -> None:
    z = sf.constant(np.array([1 + 2j, -3j], np.complex64))
    assert z.dtype == sf.complex64 == np.complex64 and z.shape == (2,)
    np.testing.assert_array_equal(z.numpy(), [1 + 2j, -3j])
    assert repr(z) == "sf.Tensor([ 1.+2.j, -0.-3.j], shape=(2,), dtype=complex64)"
    assert sf.constant(np.complex128(1j)).dtype == sf.complex128
    # Python complex numbers become complex64 (float32 parts, as Python floats do).
    assert sf.constant([1 + 2j, 3]).dtype == sf.complex64
    assert sf.constant(1j, sf.complex128).dtype == sf.complex128
    assert sf.constant([1.5, 2], dtype="complex64").numpy().tolist() == [1.5 + 0j, 2 + 0j]
    assert complex(sf.constant(2 - 1j)) == 2 - 1j
    assert sf.zeros((2,), sf.complex128).dtype == sf.complex128


def test_python_scalars_combine_with_complex_tensors() -> None:
    z = sf.constant([1 + 2j, -1j])
    for got, want in [(z + 1, [2 + 2j, 1 - 1j]), (2.0 * z, [2 + 4j, -2j]),
                      (z * 1j, [-2 + 1j, 1]), (1j - z, [-1 - 1j, 2j]), (z / 2, [0.5 + 1j, -0.5j])]:
        assert_matches(got, np.array(want, np.complex64))
    with pytest.raises(TypeError, match="Python complex"):
        sf.constant([1.0, 2.0]) + 1j
    with pytest.raises(TypeError, match="complex"):
        sf.constant(1 + 2j, sf.float32)


def test_complex_is_a_dtype_everywhere() -> None:
    assert sf.TensorSpec([None], sf.complex64).dtype == sf.complex64
    z = np.array([1 + 1j], np.complex64)
    text = sf.function(lambda x: x * x).get_concrete_function(z).ir("traced")
    assert "tensor<1xcomplex<f32>>" in text


# -- elementwise ops, eagerly and staged ------------------------------------------------------

# name -> (the op, its NumPy reference, whether the operand must be away from 0)
UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], bool]] = {
    "negative": (sf.negative, np.negative, False),
    "abs": (sf.abs, np.abs, False),
    "exp": (sf.exp, np.exp, False),
    "log": (sf.math.log, np.log, True),
    "sqrt": (sf.sqrt, np.sqrt, False),
    "square": (sf.square, np.square, False),
    "reciprocal": (sf.math.reciprocal, np.reciprocal, True),
    "real": (sf.math.real, np.real, False),
    "imag": (sf.math.imag, np.imag, False),
    "conj": (sf.math.conj, np.conj, False),
    "angle": (sf.math.angle, np.angle, False),
}
BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (sf.add, np.add),
    "subtract": (sf.subtract, np.subtract),
    "multiply": (sf.multiply, np.multiply),
    "divide": (sf.divide, np.divide),
    "equal": (sf.equal, np.equal),
    "not_equal": (sf.not_equal, np.not_equal),
}
# Each case is one op, one dtype and one mode: its examples only vary the shapes and values
# the op runs on.
ELEMENTWISE_EXAMPLES = settings(max_examples=10)
# Few distinct values, so that == and != find equal pairs.
FEW = st.sampled_from([0j, 1 + 0j, 1j, -1 - 1j, complex(0.5, -2)])


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
@ELEMENTWISE_EXAMPLES
@given(data=st.data())
def test_unary_ops_match_numpy(name: str, dtype: np.dtype, mode: str, data) -> None:
    op, reference, nonzero = UNARY[name]
    x = data.draw(arrays(dtype, lo=-4, hi=4, nonzero=nonzero))
    assert_matches(run(mode, op, x), reference(x))


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
@ELEMENTWISE_EXAMPLES
@given(data=st.data())
def test_binary_ops_broadcast_and_match_numpy(name: str, dtype: np.dtype, mode: str,
                                              data) -> None:
    op, reference = BINARY[name]
    x_shape, y_shape = data.draw(broadcast_shapes())
    if name in ("equal", "not_equal"):
        x, y = (data.draw(hnp.arrays(dtype, s, elements=FEW)) for s in (x_shape, y_shape))
    else:
        x = data.draw(arrays(dtype, x_shape))
        y = data.draw(arrays(dtype, y_shape, nonzero=name == "divide"))
    assert_matches(run(mode, op, x, y), reference(x, y), rtol=1e-5 if dtype == C64 else None)


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("parts", [np.float32, np.float64], ids=str)
@given(data=st.data())
def test_complex_of_parts_broadcasts(parts: type, mode: str, data) -> None:
    x_shape, y_shape = data.draw(broadcast_shapes())
    x, y = data.draw(arrays(parts, x_shape)), data.draw(arrays(parts, y_shape))
    want = (x + 1j * y).astype(np.complex64 if parts == np.float32 else np.complex128)
    assert_matches(run(mode, sf.complex, x, y), want)


def test_real_imag_conj_angle_of_real_tensors_follow_tensorflow() -> None:
    x = sf.constant([-2.0, 0.0, 3.0])
    assert sf.math.real(x) is x and sf.math.conj(x) is x
    assert_matches(sf.math.imag(x), np.zeros(3, np.float32))
    assert_matches(sf.math.angle(x), np.array([np.pi, 0, 0], np.float32))
    assert_matches(sf.math.angle(sf.constant([-1.0], sf.float64)), np.array([np.pi]))
    assert_matches(sf.complex(1.0, 2.0), np.complex64(1 + 2j))


@pytest.mark.parametrize("mode", MODES)
def test_casts_between_complex_and_real(mode: str) -> None:
    z = np.array([1.7 - 2j, -2.5 + 0.5j, 0j, 1j], np.complex128)

    def casts(z):
        return (sf.cast(z, sf.float32), sf.cast(z, sf.float64), sf.cast(z, sf.int32),
                sf.cast(z, sf.bool), sf.cast(z, sf.complex64),
                sf.cast(sf.cast(z, sf.float16), sf.complex64))

    want = (z.real.astype(np.float32), z.real, z.real.astype(np.int32), z != 0,
            z.astype(np.complex64), z.real.astype(np.float16).astype(np.complex64))
    for got, expected in zip(run(mode, casts, z), want, strict=True):
        assert_matches(got, expected)


# -- reductions, products, structural ops ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", ["reduce_sum", "reduce_mean", "reduce_prod"])
@given(data=st.data())
def test_reductions_match_numpy(name: str, dtype: np.dtype, mode: str, data) -> None:
    x = data.draw(arrays(dtype, shapes(max_side=3), lo=-1.5, hi=1.5))
    axis, keepdims = data.draw(axes(x.ndim)), data.draw(st.booleans())
    numpy_axis = tuple(axis) if isinstance(axis, list) else axis
    reference = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_prod": np.prod}[name]
    if x.size == 0 and name == "reduce_mean":
        return  # NumPy's mean of nothing warns and is NaN; sf's too (tested with floats)
    got = run(mode, lambda t: getattr(sf, name)(t, axis=axis, keepdims=keepdims), x)
    want = np.asarray(reference(x, axis=numpy_axis, keepdims=keepdims)).astype(dtype)
    assert_matches(got, want, rtol=1e-5, atol=1e-5)


def _reductions(z, w):
    return (sf.reduce_sum(z), sf.reduce_sum(z * w, axis=-1), sf.reduce_sum(z * w, axis=0),
            sf.reduce_prod(z, axis=-1, keepdims=True), sf.reduce_mean(z, axis=[0, 1]),
            sf.reduce_prod(z[:, :0], axis=1))


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("shape", [(3, 4), (1, 37), (0, 5), (5, 1)], ids=str)
def test_compiled_reductions_match_numpy(shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Of inputs (a lowered reduction) and inside kernels (the kernel ends in it), along the
    rows and across them."""
    rng = np.random.default_rng(5)
    z, w = complex_array(rng, shape, dtype), complex_array(rng, shape[-1:], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing is NaN
        want = (z.sum(), (z * w).sum(-1), (z * w).sum(0), z.prod(-1, keepdims=True),
                z.mean((0, 1)), z[:, :0].prod(1))
    for got, expected in zip(run("compiled", _reductions, z, w), want, strict=True):
        assert_matches(got, np.asarray(expected, dtype), rtol=1e-5, atol=1e-6)


def test_compiled_complex64_sums_of_long_rows_stay_accurate() -> None:
    """Rows are summed in complex128 and rounded once, by the lowered reduction and by a
    kernel ending in one (as NumPy's pairwise sums, far better than float32 in order)."""
    rng = np.random.default_rng(6)
    z = complex_array(rng, (2, 50_000), C64) + np.complex64(1 + 1j)
    exact = z.astype(np.complex128).sum(-1)
    sums = run("compiled", lambda z: (sf.reduce_sum(z, -1), sf.reduce_sum(z * 1j, -1)), z)
    for got, want in zip(sums, (exact, exact * 1j), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-7)


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_every_reduction_taking_complex_compiles_it(dtype: np.dtype) -> None:
    """A reduction whose shape rule takes complex operands has a compiled loop for them
    (else a function using it would run as Python steps)."""
    x, params = ShapedType((2, 3), dtype), {"axes": (1,), "keepdims": False}
    taking = []
    for name, primitive in sorted(REGISTRY.items()):
        if primitive.reduction is None:
            continue
        try:
            result = primitive.shape_rule(x, **params)
        except TypeError:
            continue
        taking.append(name)
        assert dtype in primitive.reduction.native_dtypes, name
        assert rule_for(OpSpec(name, (x,), (result,), params)) is not None, name
    assert taking == ["reduce_prod", "reduce_sum"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_matmul_matches_numpy(dtype: np.dtype, mode: str) -> None:
    rng = np.random.default_rng(1)
    a, b = complex_array(rng, (2, 3, 4), dtype), complex_array(rng, (4, 5), dtype)

    def products(a, b):
        return (sf.matmul(a, b), sf.matmul(b, a, transpose_a=True, transpose_b=True),
                a[:, :, :0] @ b[:0], sf.einsum("bij,jk->bk", a, b))

    want = (a @ b, np.swapaxes(a @ b, -1, -2), np.zeros((2, 3, 5), dtype),
            np.einsum("bij,jk->bk", a, b))
    for got, expected in zip(run(mode, products, a, b), want, strict=True):
        assert_matches(got, expected, rtol=1e-5, atol=1e-5)


def _structural(z, w, index):
    return (sf.reshape(z, (-1,)), sf.transpose(z), sf.concat([z, z[:1]], axis=0),
            z[::-1, 1::2], sf.gather(z, index, axis=1), sf.broadcast_to(w, (3, 4)),
            sf.where(sf.math.real(z) > 0.0, z, w), sf.pad(z, [[1, 0], [0, 2]]),
            sf.stack([w, w]), sf.tile(w, [2]), sf.gather_nd(z, [[0, 1], [2, 3]]),
            sf.tensor_scatter_nd_add(z, [[1]], sf.expand_dims(w, 0)), sf.squeeze(z[:1]),
            sf.one_hot([1, 3], 4, dtype=sf.complex64) * 1j)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_structural_ops_move_complex_elements(dtype: np.dtype, mode: str) -> None:
    rng = np.random.default_rng(2)
    z, w = complex_array(rng, (3, 4), dtype), complex_array(rng, (4,), dtype)
    index = np.array([3, 0, 3], np.int32)
    scattered = z.copy()
    scattered[1] += w
    want = (z.reshape(-1), z.T, np.concatenate([z, z[:1]]), z[::-1, 1::2], z[:, index],
            np.broadcast_to(w, (3, 4)), np.where(z.real > 0, z, w),
            np.pad(z, [[1, 0], [0, 2]]), np.stack([w, w]), np.tile(w, 2),
            z[[0, 2], [1, 3]], scattered, z[0], np.eye(4, dtype=np.complex64)[[1, 3]] * 1j)
    for got, expected in zip(run(mode, _structural, z, w, index), want, strict=True):
        assert_matches(got, expected)


# -- compiled: every op in one program -------------------------------------------------------


def _all_unary(x):
    return tuple(op(x) for op, _, _ in UNARY.values())


def _all_binary(x, y):
    return tuple(op(x, y) for op, _ in BINARY.values())


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_compiled_elementwise_ops_match_numpy(shape: tuple[int, ...], dtype: np.dtype) -> None:
    rng = np.random.default_rng(len(shape))
    x, y = complex_array(rng, shape, dtype), complex_array(rng, shape[-1:], dtype)
    if x.size and y.size:
        y.flat[0] = x.flat[0]  # one equal pair
    with np.errstate(all="ignore"):
        unary = [reference(x) for _, reference, _ in UNARY.values()]
        binary = [reference(x, y) for _, reference in BINARY.values()]
    rtol = 2e-6 if dtype == C64 else 1e-12
    for got, want in zip(run("compiled", _all_unary, x), unary, strict=True):
        assert_matches(got, want, rtol=rtol)
    for got, want in zip(run("compiled", _all_binary, x, y), binary, strict=True):
        assert_matches(got, want, rtol=rtol)


def test_compiled_kernels_give_c99_special_values() -> None:
    """Zeros, infinities and NaN parts as NumPy's complex functions give them."""
    parts = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan]
    grid = np.array([complex(a, b) for a in parts for b in parts], np.complex128)
    got = run("compiled", _all_unary, grid)
    for (name, (_, reference, _)), value in zip(UNARY.items(), got, strict=True):
        with np.errstate(all="ignore"):
            want = np.asarray(reference(grid))
        have = value.numpy()
        for part in (np.real, np.imag):
            np.testing.assert_allclose(part(have), part(want), rtol=1e-12, equal_nan=True,
                                       err_msg=name)


def test_complex_ops_run_on_a_gpu_device() -> None:
    """The elementwise kernels and reductions of a GPU device (emulated in the suite: the
    PTX kernels' LLVM IR run on the CPU) take complex tensors too."""
    z = np.array([1 + 2j, 3 - 1j, -0.5j], np.complex64)
    with sf.device("/gpu:0"):
        y = sf.exp(sf.constant(z)) * z - sf.math.conj(sf.constant(z))
        total = sf.reduce_sum(y)
    want = np.exp(z) * z - np.conj(z)
    assert_matches(y.cpu(), want)
    assert_matches(total.cpu(), want.sum(), rtol=1e-6)


# -- gradients ----------------------------------------------------------------------------


def numeric_gradient(loss: Callable[[np.ndarray], float], z: np.ndarray,
                     eps: float = 1e-6) -> np.ndarray:
    """dL/dx + i dL/dy of a real `loss` of complex128 `z`, by central differences."""
    grad = np.zeros_like(z)
    for index in np.ndindex(z.shape):
        for unit in (1, 1j):
            up, down = z.copy(), z.copy()
            up[index] += eps * unit
            down[index] -= eps * unit
            grad[index] += unit * (loss(up) - loss(down)) / (2 * eps)
    return grad


def _real_loss(f: Callable[..., Any], weights: list[np.ndarray]) -> Callable[..., Any]:
    """A real loss of `f`'s results: sum(Re(result * weight)), each result weighted by a
    fixed random array (so that every element and both parts count)."""

    def loss(*args):
        outputs = f(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        total = 0.0
        for y, w in zip(outputs, weights, strict=True):
            total = total + sf.reduce_sum(sf.math.real(y * sf.cast(w, y.dtype)))
        return total

    return loss


def _gradient(loss: Callable[..., Any], count: int) -> Callable[..., Any]:
    def gradient(*args):
        with sf.GradientTape() as tape:
            tape.watch(list(args[:count]))
            value = loss(*args)
        return tape.gradient(value, list(args[:count]))

    return gradient


# name -> (function of complex128 operands, operand shapes, result shapes)
GRADIENTS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], list[tuple[int, ...]]]] = {
    **{name: (op, [(2, 3)], [(2, 3)]) for name, (op, _, _) in UNARY.items()},
    **{name: (op, [(2, 3), (3,)], [(2, 3)]) for name, (op, _) in BINARY.items()
       if name not in ("equal", "not_equal")},
    "reduce_sum": (lambda z: sf.reduce_sum(z, axis=0), [(2, 3)], [(3,)]),
    "reduce_mean": (lambda z: sf.reduce_mean(z, axis=1), [(2, 3)], [(2,)]),
    "reduce_prod": (lambda z: sf.reduce_prod(z, axis=1, keepdims=True), [(2, 3)], [(2, 1)]),
    "matmul": (sf.matmul, [(2, 3), (3, 4)], [(2, 4)]),
    "cast": (lambda z: (sf.cast(z, sf.float64), sf.cast(sf.math.imag(z), sf.complex128)),
             [(2, 3)], [(2, 3), (2, 3)]),
    "structural": (lambda z: (sf.transpose(z)[::2], sf.gather(z, [2, 0, 2], axis=1),
                              sf.concat([z, z[:1]], 0), sf.where([True, False, True], z, 2j),
                              sf.pad(z, [[0, 1], [1, 0]]), sf.broadcast_to(z[:1], (4, 3))),
                   [(2, 3)], [(2, 2), (2, 3), (3, 3), (2, 3), (3, 4), (4, 3)]),
    "chain": (lambda z, w: sf.abs(sf.exp(z) * w - sf.math.conj(z) / (w + 3.0)) ** 2.0,
              [(2, 3), (2, 3)], [(2, 3)]),
}


@pytest.mark.parametrize("mode", ["eager", "interpreted", "compiled"])
@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_match_finite_differences(name: str, mode: str) -> None:
    f, operand_shapes, result_shapes = GRADIENTS[name]
    rng = np.random.default_rng(3)
    operands = [complex_array(rng, s, C128) for s in operand_shapes]
    weights = [rng.standard_normal(s) + 1j * rng.standard_normal(s) for s in result_shapes]
    loss = _real_loss(f, weights)
    grads = run(mode, _gradient(loss, len(operands)), *operands)
    for k, grad in enumerate(grads):
        def of_operand(z, k=k):
            args = [*operands[:k], z, *operands[k + 1:]]
            return float(loss(*map(sf.constant, args)))

        assert grad.dtype == sf.complex128 and grad.shape == operands[k].shape
        np.testing.assert_allclose(grad.numpy(), numeric_gradient(of_operand, operands[k]),
                                   rtol=1e-6, atol=1e-8, err_msg=f"operand {k}")


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_gradients_reach_real_parts_and_complex64(mode: str) -> None:
    """A real source made complex gets a real gradient (the real part of the complex one);
    complex64 gradients agree with complex128 ones to float32 precision."""
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def loss(x, y):
        z = sf.complex(x, y)
        return sf.reduce_sum(sf.abs(z * z + 1j))

    wide = run(mode, _gradient(loss, 2), x, y)
    narrow = run(mode, _gradient(loss, 2), x.astype(np.float32), y.astype(np.float32))
    for g64, g32 in zip(wide, narrow, strict=True):
        assert g64.dtype == sf.float64 and g32.dtype == sf.float32
        np.testing.assert_allclose(g32.numpy(), g64.numpy(), rtol=1e-5, atol=1e-5)
    z = x + 1j * y
    w = z * z + 1j  # |w|'s gradient: conj(dw/dz) w / |w|, its parts x's and y's
    expected = 2 * np.conj(z) * w / np.abs(w)
    np.testing.assert_allclose(wide[0].numpy(), expected.real, rtol=1e-10)
    np.testing.assert_allclose(wide[1].numpy(), expected.imag, rtol=1e-10)


# -- what refuses complex numbers -----------------------------------------------------------

REFUSED: dict[str, Callable[[Any], Any]] = {
    "less": lambda z: z < z,
    "greater_equal": lambda z: z >= z,
    "maximum": lambda z: sf.maximum(z, z),
    "minimum": lambda z: sf.minimum(z, 1.0),
    "floor": sf.floor,
    "round": sf.round,
    "sign": sf.sign,
    "pow": lambda z: z ** 2,
    "floordiv": lambda z: z // z,
    "mod": lambda z: z % z,
    "sin": sf.sin,
    "expm1": sf.math.expm1,
    "reduce_max": sf.reduce_max,
    "reduce_min": sf.reduce_min,
    "argmax": sf.argmax,
    "sort": sf.sort,
    "cumsum": sf.math.cumsum,
    "relu": sf.nn.relu,
    "softplus": sf.nn.softplus,
}


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_ops_without_complex_meaning_refuse_it(name: str, mode: str) -> None:
    z = np.array([1 + 1j, -2j], np.complex64)
    with pytest.raises(TypeError, match=rf"{name}\b.*complex64"):
        run(mode, REFUSED[name], z)


def test_a_complex_pad_value_is_refused() -> None:
    with pytest.raises(TypeError, match="pad: constant_values must be a real number"):
        sf.pad(sf.constant([1j]), [[1, 1]], constant_values=1j)


def test_operators_on_complex_tensors() -> None:
    z, w = sf.constant([1 + 2j, -1j]), sf.constant([2 + 0j, 1 + 1j])
    a, b = z.numpy(), w.numpy()
    for op in (operator.add, operator.sub, operator.mul, operator.truediv):
        assert_matches(op(z, w), op(a, b))
    assert_matches(-z, -a)
    assert_matches(abs(z), np.abs(a))
    assert_matches(z == w, a == b)
    assert_matches(z != z, np.zeros(2, bool))
