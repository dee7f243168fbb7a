"""Lowered single ops (`codegen.lowered`) against their NumPy kernels: reductions, data
movement, random bits (bit-identical), matmul; strided inputs, unknown dims, bad shapes;
and staged functions compiled with them against eager execution."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops, rule_for
from stageflow.codegen.lowered.rule import generic_spec
from stageflow.codegen.lowered.small_matmul import SmallMatmul
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY, ShapedType

DTYPES = [np.float32, np.float64, np.int32, np.int64]
# Reduced natively by max, min, argmax and argmin only (in float32, exactly).
HALVES = [dtypes.float16, dtypes.bfloat16]
EXTREMA = ["reduce_max", "reduce_min"]
_compiled: dict[tuple, CompiledOp | None] = {}


def spec_for(name: str, arrays: list[np.ndarray], unknown: bool = False, **params) -> OpSpec:
    """The op's spec for these inputs: their types (every dim unknown if `unknown`), the
    result types from the shape rule."""
    inputs = tuple(ShapedType(tuple(None if unknown else d for d in a.shape), a.dtype)
                   for a in arrays)
    outputs = REGISTRY[name].shape_rule(*inputs, **params)
    return OpSpec(name, inputs, outputs if isinstance(outputs, tuple) else (outputs,), params)


def compiled(spec: OpSpec) -> CompiledOp:
    if spec.key not in _compiled:
        _compiled[spec.key] = compile_ops([spec])[0]
    op = _compiled[spec.key]
    assert op is not None, f"no lowering for {spec}"
    return op


def check(name: str, arrays: list[np.ndarray], unknown: bool = False, exact: bool = False,
          **params) -> None:
    """The compiled op gives the NumPy kernel's results (to rounding unless `exact`)."""
    got = compiled(spec_for(name, arrays, unknown, **params))(*arrays)
    want = REGISTRY[name].kernel(*arrays, **params)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert isinstance(g, np.ndarray) and g.flags.c_contiguous and g.flags.writeable
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype in HALVES:  # max and min, exact; NaN equals NaN in float32 (not in
            # ml_dtypes' types), zeros of either sign are equal
            np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))
        elif exact or g.dtype.kind != "f":
            np.testing.assert_array_equal(g, w)
        else:
            tolerance = 1e-5 if g.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


def values(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if is_float(dtype):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def is_float(dtype) -> bool:
    return np.dtype(dtype) in dtypes.FLOATING


def with_specials(x: np.ndarray, data: st.DataObject) -> np.ndarray:
    """`x` with some elements (drawn) set to infinities, zeros of both signs and NaN."""
    flat = x.reshape(-1)
    for special in data.draw(st.lists(st.sampled_from([np.inf, -np.inf, 0.0, -0.0, np.nan]),
                                      max_size=3)):
        flat[data.draw(st.integers(0, flat.size - 1))] = special
    return x


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


# -- reductions -------------------------------------------------------------------------


@settings(max_examples=40)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data(),
       name=st.sampled_from(["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"]),
       keepdims=st.booleans(), unknown=st.booleans())
def test_reductions(shape, dtype, data, name, keepdims, unknown):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    x = values(shape, dtype)
    check(name, [x], unknown, axes=axes, keepdims=keepdims)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@settings(max_examples=40)
@given(shape=shapes, dtype=st.sampled_from(HALVES), data=st.data(), name=st.sampled_from(EXTREMA),
       keepdims=st.booleans(), unknown=st.booleans())
def test_half_float_max_min_compile_and_are_exact(shape, dtype, data, name, keepdims, unknown):
    """float16 and bfloat16 max and min are compiled (combined in float32, stored back
    exactly): NumPy's results, NaN propagating, infinities kept, over any axes, of strided
    views too."""
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    x = with_specials(values(shape, dtype), data)
    assert rule_for(spec_for(name, [x], unknown, axes=axes, keepdims=keepdims)) is not None
    check(name, [x], unknown, axes=axes, keepdims=keepdims)
    for view in (x[..., ::-1], x.T, x[..., 1:]):
        view_axes = tuple(range(view.ndim)) if view.size else ()
        check(name, [view], True, axes=view_axes[-1:], keepdims=keepdims)
        check(name, [view], True, axes=view_axes, keepdims=keepdims)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@pytest.mark.parametrize("dtype", HALVES + [np.float32, np.float64])
@pytest.mark.parametrize("name", EXTREMA)
def test_max_min_of_signed_zeros_and_infinities(dtype, name):
    """Zeros of both signs compare equal (NumPy's sign then depends on their order); the
    compiled loops give IEEE's maximum and minimum, +0 > -0. Infinities and NaN (in a long row
    and in a short one, before and after the vectorised part) are kept."""
    largest = name == "reduce_max"
    zeros = np.array([[-0.0, 0.0] * 20, [0.0, -0.0] * 20], dtype)
    got = compiled(spec_for(name, [zeros], axes=(1,), keepdims=False))(zeros)
    assert (got == 0).all() and (np.signbit(got.astype(np.float32)) == (not largest)).all()
    for n in (5, 70):
        x = values((6, n), dtype)
        x[0, -1], x[1, 0] = np.inf, -np.inf
        x[2, n // 2], x[3, :] = np.nan, np.inf if largest else -np.inf
        x[4, :], x[5, 1] = np.nan, -np.inf if largest else np.inf
        for axes in [(1,), (0,), (0, 1)]:
            check(name, [x], axes=axes, keepdims=False)


def test_long_float_sum_keeps_partial_sums():
    x = values((3, 10_001), np.float32)
    check("reduce_sum", [x], axes=(1,), keepdims=False)
    check("reduce_sum", [x], axes=(0, 1), keepdims=True)
    check("reduce_sum", [np.asarray(x.T)], axes=(0,), keepdims=False)


def test_reductions_read_strided_views_and_propagate_nan():
    x = values((6, 8), np.float64)
    x[2, 3] = np.nan
    for view in (x[::2, ::-3], x.T, x[1:, 2:7]):
        for name in ("reduce_sum", "reduce_max", "reduce_min"):
            check(name, [view], unknown=True, axes=(1,), keepdims=False)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@pytest.mark.parametrize(("dtype", "name"), [
    *((d, n) for d in DTYPES for n in ["reduce_sum", "reduce_prod", *EXTREMA]),
    *((d, n) for d in HALVES for n in EXTREMA)])
def test_leading_axes_of_a_large_input_reduce_on_every_core(dtype, name):
    """Reducing a leading prefix of a row-major input's axes (batch norm's statistics):
    rows split over the cores, each task's results combined at the end; sums and products
    fold blocks of a vector's columns over the rows in registers, the last columns in
    scalars; row counts not a multiple of the accumulators, widths not a multiple of the
    vector, widths of several axes (a product the tasks compute for themselves), and
    strided views (the general loop) all give NumPy's results."""
    rng = np.random.default_rng(7)
    for shape, axes in [((1031, 37), (0,)), ((33, 65, 48), (0, 1)), ((4099, 3), (0,)),
                        ((2, 70_000, 16), (0, 1)), ((40, 33, 70), (0,))]:
        x = values(shape, dtype, seed=shape[0])
        if name == "reduce_prod":  # near 1 (floats) or +-1 (integers): no overflow
            x = (1 + 0.001 * x if is_float(dtype)
                 else rng.choice([-1, 1], shape)).astype(dtype)
        if is_float(dtype):
            x.reshape(-1)[::977] = np.nan if name in ("reduce_max", "reduce_min") else 0
        for view in (x, x[::-1]):
            got = compiled(spec_for(name, [x], unknown=True, axes=axes, keepdims=False))(view)
            want = REGISTRY[name].kernel(view, axes=axes, keepdims=False)
            if dtype in HALVES:  # NaN equals NaN in float32 (not in ml_dtypes' types)
                got, want = got.astype(np.float32), want.astype(np.float32)
            if not is_float(dtype) or name in EXTREMA:
                np.testing.assert_array_equal(got, want)
            else:  # the sums' order differs; their error grows with the rows summed
                rows = np.prod([shape[a] for a in axes])
                tolerance = (1e-6 if dtype == np.float32 else 1e-14) * np.sqrt(rows)
                np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def test_large_static_reductions_compile_shape_generic_and_small_ones_stay_static():
    """Batch norm's statistics at three widths are one compiled function; a small
    reduction keeps its static dims (and the cheap levels of small code), as does one with
    an unknown dim."""
    wide = [values((8, 16, 16, c), np.float32, seed=c) for c in (16, 32, 64)]
    specs = [generic_spec(spec_for("reduce_sum", [x], axes=(0, 1, 2), keepdims=False))
             for x in wide]
    assert all(ty.shape == (None,) * ty.ndim for ty in specs[0].inputs + specs[0].outputs)
    assert len({spec.key for spec in specs}) == 1
    op = compiled(specs[0])
    for x in wide:
        np.testing.assert_allclose(op(x), x.sum((0, 1, 2)), rtol=1e-5, atol=1e-4)
    small = spec_for("reduce_sum", [np.zeros((4, 8), np.float32)], axes=(0,), keepdims=False)
    assert generic_spec(small) == small
    partly = OpSpec("reduce_sum", (ShapedType((None, 4096), np.dtype(np.float32)),),
                    (ShapedType((4096,), np.dtype(np.float32)),),
                    {"axes": (0,), "keepdims": False})
    assert generic_spec(partly) == partly


def test_large_concats_and_poolings_compile_shape_generic():
    """A DenseNet block's concats (the image so far and 32 new channels, its width growing
    layer by layer) are one compiled function, as are its poolings of one window at every
    size: each distinct shape compiled its own (58 concats of DenseNet-121, most of its
    first call)."""
    images = [values((1, 14, 14, c), np.float32, seed=c) for c in (256, 288, 320)]
    grown = values((1, 14, 14, 32), np.float32, seed=1)
    specs = [generic_spec(spec_for("concat", [x, grown], axis=3)) for x in images]
    assert len({spec.key for spec in specs}) == 1
    op = compiled(specs[0])
    for x in images:
        np.testing.assert_array_equal(op(x, grown), np.concatenate([x, grown], axis=3))
    window = {"kind": "max", "window": (3, 3), "strides": (2, 2), "padding": ((1, 1), (1, 1))}
    pools = [generic_spec(spec_for("reduce_window", [x], **window)) for x in images]
    assert len({spec.key for spec in pools}) == 1
    small = spec_for("concat", [np.zeros((2, 3), np.float32)] * 2, axis=0)
    assert generic_spec(small) == small


@pytest.mark.parametrize("dtype", [np.float32, *HALVES])
@pytest.mark.parametrize("name", EXTREMA)
def test_max_of_nothing_raises_as_eagerly(dtype, name):
    op = compiled(spec_for(name, [np.zeros((0, 3), dtype)], unknown=True,
                           axes=(0,), keepdims=False))
    with pytest.raises(ValueError, match="empty"):
        op(np.zeros((0, 3), dtype))
    assert op(np.zeros((2, 0), dtype)).shape == (0,)
    assert op(np.zeros((2, 0), dtype)).dtype == dtype


@settings(max_examples=25)
@given(shape=shapes,
       dtype=st.sampled_from(DTYPES + HALVES + [np.int8, np.uint16, np.uint32, np.uint64]),
       data=st.data(), name=st.sampled_from(["argmax", "argmin"]), unknown=st.booleans())
def test_argmax_argmin(shape, dtype, data, name, unknown):
    """The first index of the max (min), or of the first NaN, as NumPy's; ties (zeros of
    both signs among them) resolved to the first; in half floats too."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = values(shape, dtype) % 4 if not is_float(dtype) else values(shape, dtype)
    if is_float(dtype):
        x = with_specials(np.round(x), data)  # ties, among them -0 and +0
    check(name, [x.astype(dtype)], unknown, axis=axis)
    check(name, [x.astype(dtype)[..., ::-1]], True, axis=axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, *HALVES, np.int32, np.uint64])
def test_argmax_argmin_of_long_lines_along_any_axis(dtype):
    """Lines longer than a vector (the search's vectorised part and its tail), along the
    innermost axis and across rows (strided), NaN first, last or absent."""
    x = values((3, 203), dtype, seed=4)
    if is_float(dtype):
        x[1, 150], x[2, 7], x[2, 190] = np.nan, np.nan, np.nan
    for view in (x, x.T, x[:, ::-2]):
        for name in ("argmax", "argmin"):
            assert rule_for(spec_for(name, [view], True, axis=0)) is not None
            for axis in (0, 1):
                check(name, [view], True, axis=axis)


# -- data movement ----------------------------------------------------------------------


@settings(max_examples=30)
@given(shape=shapes, dtype=st.sampled_from(DTYPES + [np.bool_, np.float16]), data=st.data(),
       unknown=st.booleans())
def test_transpose_and_broadcast(shape, dtype, data, unknown):
    x = values(shape, np.float32).astype(dtype)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check("transpose", [x], unknown, perm=perm)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    target = tuple(lead) + tuple(d if d != 1 else data.draw(st.integers(1, 3)) for d in shape)
    check("broadcast_to", [x], shape=target)  # the rule wants the operand's dims known
    check("broadcast_to", [x.T], shape=tuple(lead) + x.T.shape)


@settings(max_examples=25)
@given(shape=st.lists(st.integers(1, 19), min_size=2, max_size=4).map(tuple),
       dtype=st.sampled_from(DTYPES + [np.bool_, np.float16, np.complex64]), data=st.data(),
       unknown=st.booleans(), reversed_rows=st.booleans())
def test_transposes_in_tiles_cover_every_element(shape, dtype, data, unknown, reversed_rows):
    """A transpose whose output rows read across the input's rows goes in square tiles:
    sides past one tile and between tiles, on strided views too (every second column of
    the input, reversed)."""
    x = values(shape, np.float32).astype(dtype)
    if reversed_rows:
        x = x[..., ::-2]
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check("transpose", [x], unknown, exact=True, perm=perm)


@pytest.mark.parametrize(("shape", "perm"), [
    ((1, 3, 224, 224), (0, 2, 3, 1)),  # an NCHW image into NHWC: 3 channels, row by row
    ((2, 12, 128, 64), (0, 1, 3, 2)),  # a batch of heads' keys, in tiles
    ((2, 128, 12, 64), (0, 2, 1, 3)),  # heads split apart: the last axis stays last
    ((96, 70, 9), (2, 0, 1)),  # the outer axis after the one across the input's rows
])
@pytest.mark.parametrize("view", [False, True])
def test_large_transposes_split_over_tasks(shape, perm, view):
    """Transposes of enough elements share their outer axes out over the cores, each task
    its own units in any order of those axes; inputs may be strided views."""
    x = values(shape, np.float32)
    if view:
        x = np.concatenate([x, x], axis=-1)[..., ::2]
    check("transpose", [x], exact=True, perm=perm)
    check("transpose", [x], unknown=True, exact=True, perm=perm)


bounds = st.one_of(st.none(), st.integers(-7, 7))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128])
def test_concat_of_images_along_their_channels_splits_its_rows_over_tasks(dtype):
    """Rows of 55 x 55 pixels share out over the cores, each a run of each image in turn:
    runs of whole vectors and a rest (37 channels), and a part of none."""
    parts = [values((2, 55, 55, channels), dtype, seed)
             for seed, channels in enumerate((64, 37, 0, 3))]
    check("concat", parts, exact=True, axis=-1)
    check("concat", parts[:2], unknown=True, exact=True, axis=3)


@settings(max_examples=50)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data(), unknown=st.booleans())
def test_slices(shape, dtype, data, unknown):
    slices = tuple(data.draw(st.tuples(bounds, bounds, st.sampled_from([None, 1, 2, 3, -1,
                                                                         -2, -3])))
                   for _ in shape)
    x = values(shape, dtype)
    check("slice", [x], unknown, slices=slices)
    check("slice", [x[..., ::-1]], unknown, slices=slices)


@settings(max_examples=25)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data(), unknown=st.booleans())
def test_concat_pad(shape, dtype, data, unknown):
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    parts = [values(shape[:axis] + (n,) + shape[axis + 1:], dtype, seed) for seed, n in
             enumerate(sizes)]
    check("concat", parts, unknown, axis=axis - len(shape))
    check("concat", [part[..., ::-1] for part in parts], unknown, axis=axis - len(shape))
    pads = tuple(data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2))) for _ in shape)
    value = data.draw(st.sampled_from([0.0, 1.5, -3.0]))
    check("pad", [values(shape, dtype)], unknown, pads=pads, value=value)


@settings(max_examples=25)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data(), unknown=st.booleans(),
       index_dtype=st.sampled_from([np.int32, np.int64]))
def test_gather(shape, dtype, data, unknown, index_dtype):
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    index_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    indices = np.asarray(data.draw(st.lists(st.integers(-n, n - 1),
                                            min_size=int(np.prod(index_shape)),
                                            max_size=int(np.prod(index_shape)))),
                         dtype=index_dtype).reshape(index_shape)
    check("gather", [values(shape, dtype), indices], unknown, axis=axis)


def test_gather_out_of_range_raises_as_eagerly():
    x, indices = values((4, 3), np.float32), np.array([0, 4], np.int64)
    op = compiled(spec_for("gather", [x, indices], axis=0))
    with pytest.raises(IndexError, match="out of range"):
        op(x, indices)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.float32, np.float64])
def test_iota(dtype):
    for dimension in range(3):
        check("iota", [], shape=(2, 3, 4), dtype=np.dtype(dtype), dimension=dimension)


# -- random bits ------------------------------------------------------------------------


@settings(max_examples=25)
@given(shape=st.lists(st.integers(0, 7), max_size=3).map(tuple),
       state=st.lists(st.integers(0, 2**32 - 1), min_size=4, max_size=4))
def test_random_bits_are_bit_identical(shape, state):
    check("random_bits", [np.array(state, np.uint32)], exact=True, shape=shape)


def test_random_bits_counter_wraps_like_eager():
    for state in ([1, 2, 0xFFFFFFFF, 0xFFFFFFFF], [7, 9, 0xFFFFFFFE, 3]):
        check("random_bits", [np.array(state, np.uint32)], exact=True, shape=(3, 5))


# -- matmul -----------------------------------------------------------------------------


@settings(max_examples=15)
@given(dtype=st.sampled_from([np.float32, np.float64]), data=st.data(),
       transpose_a=st.booleans(), transpose_b=st.booleans(), unknown=st.booleans())
def test_matmul(dtype, data, transpose_a, transpose_b, unknown):
    m, k, n = (data.draw(st.integers(0 if i == 1 else 1, 6)) for i in range(3))
    batch_a = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    batch_b = tuple(d if data.draw(st.booleans()) else 1 for d in batch_a)[
        data.draw(st.integers(0, len(batch_a))):]
    a = values(batch_a + ((k, m) if transpose_a else (m, k)), dtype, 1)
    b = values(batch_b + ((n, k) if transpose_b else (k, n)), dtype, 2)
    check("matmul", [a, b], unknown, transpose_a=transpose_a, transpose_b=transpose_b)


@settings(max_examples=15)
@given(dtype=st.sampled_from([np.float32, np.float64]), data=st.data(),
       transposes=st.tuples(st.booleans(), st.booleans()), unknown=st.booleans(),
       alpha=st.sampled_from([1.0, -0.01, 3.0]))
def test_matmul_add(dtype, data, transposes, unknown, alpha):
    m, k, n = (data.draw(st.integers(0 if i == 1 else 1, 6)) for i in range(3))
    batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    a = values(batch + ((k, m) if transposes[0] else (m, k)), dtype, 1)
    b = values((n, k) if transposes[1] else (k, n), dtype, 2)
    product = batch + (m, n)
    # the addend: any shape that broadcasts to the product's (a bias, a row, all of it)
    addend = tuple(d if data.draw(st.booleans()) else 1 for d in product)[
        data.draw(st.integers(0, len(product))):]
    check("matmul_add", [a, b, values(addend, dtype, 3)], unknown, alpha=alpha,
          transpose_a=transposes[0], transpose_b=transposes[1])


@settings(max_examples=25)
@given(dtype=st.sampled_from([np.float32, np.float64]), m=st.integers(1, 12),
       k=st.integers(1, 40), n=st.integers(1, 70), transpose_a=st.booleans(),
       alpha=st.sampled_from([1.0, -0.5]), add=st.booleans())
def test_small_static_matmul_in_vector_blocks(dtype, m, k, n, transpose_a, alpha, add):
    """Static shapes below `MAX_MULTIPLY_ADDS` take the generated vector code: blocks of
    16 (float32) or 8 (float64) columns, the last one's lanes past n masked; rows of
    fewer blocks than `CHAINS` advance together, in whole groups and the rows left."""
    a = values((k, m) if transpose_a else (m, k), dtype, 1)
    b = values((k, n), dtype, 2)
    params = {"transpose_a": transpose_a, "transpose_b": False}
    if add:
        spec = spec_for("matmul_add", [a, b, values((n,), dtype, 3)], alpha=alpha, **params)
        assert isinstance(rule_for(spec), SmallMatmul)
        check("matmul_add", [a, b, values((n,), dtype, 3)], False, alpha=alpha, **params)
    else:
        assert isinstance(rule_for(spec_for("matmul", [a, b], **params)), SmallMatmul)
        check("matmul", [a, b], False, **params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposes", [(False, False), (True, False), (False, True),
                                        (True, True)])
@pytest.mark.parametrize("k, n", [(1, 5), (300, 1), (70, 300), (1100, 2003)])
def test_one_row_products_are_matrix_vector_products(dtype, transposes, k, n):
    """A product of one row runs the BLAS's gemv (B read as stored, a's elements one or
    `lda` apart), single-threaded on parts of c over the pool where it is large
    (1100 x 2003), or, by a transposed B where our own gemm serves, its dot products:
    the numbers of NumPy's kernel, with the fused scaled addend too."""
    transpose_a, transpose_b = transposes
    # Sums of unit size, so that another summation order rounds within tolerance.
    a = values((k, 1) if transpose_a else (1, k), dtype, 1) / dtype(np.sqrt(k))
    b = values((n, k) if transpose_b else (k, n), dtype, 2)
    params = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    check("matmul", [a, b], True, **params)
    check("matmul_add", [a, b, values((n,), dtype, 3)], True, alpha=-0.5, **params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposes", [(False, False), (True, False), (False, True),
                                        (True, True)])
@pytest.mark.parametrize("m, n", [(203, 97), (61, 203)])
def test_large_products_split_over_the_pool(dtype, transposes, m, n):
    """A product OpenBLAS would thread runs as single-threaded gemms on blocks of rows (or
    of columns, where C is wider), one task per core (`gemm_split`): NumPy's numbers
    everywhere, over a batch (one gemm of the stacked rows, or one per matrix), with the
    scaled addend, for any transposes."""
    transpose_a, transpose_b = transposes
    k = 180  # millions of multiply-adds a matrix: above the split's threshold
    a = values((2, k, m) if transpose_a else (2, m, k), dtype, 1) / dtype(np.sqrt(k))
    b = values((n, k) if transpose_b else (k, n), dtype, 2)  # sums of unit size: rounding
    params = {"transpose_a": transpose_a, "transpose_b": transpose_b}  # within tolerance
    check("matmul", [a, b], True, **params)
    check("matmul_add", [a, b, values((n,), dtype, 3)], True, alpha=-0.5, **params)


def test_matmul_reads_transposed_views_and_falls_back_on_other_strides():
    a, b = values((8, 5), np.float32), values((8, 6), np.float32)
    check("matmul", [a.T, b], unknown=True, transpose_a=False, transpose_b=False)
    check("matmul", [a[::2].T, b[::2]], unknown=True, transpose_a=False, transpose_b=False)
    assert rule_for(spec_for("matmul", [a.astype(np.int32), b.astype(np.int32)],
                             transpose_a=True, transpose_b=False)) is None


# -- the C ABI never reaches outside the arrays -----------------------------------------


def test_wrong_dims_are_refused_before_any_write():
    x = values((4, 6), np.float32)
    op = compiled(spec_for("reduce_sum", [x], unknown=True, axes=(1,), keepdims=False))
    small = np.full(3, 7.0, np.float32)
    assert op.call([x], [small]) == 2
    np.testing.assert_array_equal(small, 7.0)
    concat = compiled(spec_for("concat", [x, x], unknown=True, axis=1))
    assert concat.call([x, x[:3]], [np.empty((4, 12), np.float32)]) == 2
    static = compiled(spec_for("transpose", [x], perm=(1, 0)))
    assert static.call([x[:3]], [np.empty((6, 3), np.float32)]) == 1


# -- staged functions -------------------------------------------------------------------


def structured(x, w, i):
    h = sf.concat([x @ w, sf.transpose(x)[:, ::-1][:3]], axis=0)
    padded = sf.pad(h, [(1, 0), (0, 2)], constant_values=0.5)
    return (sf.reduce_sum(padded, axis=1), sf.reduce_max(padded, axis=0, keepdims=True),
            sf.argmax(h, axis=1), sf.gather(padded, i, axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_staged_functions_use_lowered_ops_and_agree_with_eager(dtype):
    rng = np.random.default_rng(0)
    x = sf.constant(rng.standard_normal((5, 5)).astype(dtype))
    w = sf.constant(rng.standard_normal((5, 5)).astype(dtype))
    i = sf.constant(np.array([0, -1, 2], np.int32))
    eager = structured(x, w, i)
    staged = sf.function(structured)
    for e, c in zip(eager, staged(x, w, i), strict=True):
        assert e.dtype == c.dtype and e.shape == c.shape
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    steps = staged.get_concrete_function(x, w, i).program.plan.steps
    lowered = {step.kernel.spec.name for step in steps if isinstance(step.kernel, CompiledOp)}
    assert {"matmul", "concat", "pad", "reduce_sum", "reduce_max", "argmax",
            "gather"} <= lowered


def extrema(x):
    return (sf.reduce_max(x, axis=-1, keepdims=True), sf.reduce_min(x, axis=(0, 2)),
            sf.reduce_max(x[:, ::-2], axis=(0, 1, 2)), sf.argmax(x, axis=-1),
            sf.argmin(x, axis=1))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@pytest.mark.parametrize("dtype", HALVES)
def test_staged_half_float_extrema_are_lowered_and_equal_eager(dtype):
    """Staged half max, min, argmax and argmin run as lowered ops and give eager's numbers
    exactly; a bfloat16 softmax (its max lowered) equals eager's within bfloat16 rounding."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 37)).astype(dtype)
    x[1, 2, 5], x[2, :, 3], x[3, 1, 0], x[0, 0, 1] = np.nan, np.inf, -np.inf, -0.0
    staged = sf.function(extrema)
    for e, c in zip(extrema(sf.constant(x)), staged(x), strict=True):
        assert e.dtype == c.dtype and e.shape == c.shape
        np.testing.assert_array_equal(c.numpy().astype(np.float32),
                                      e.numpy().astype(np.float32))
    steps = staged.get_concrete_function(x).program.plan.steps
    lowered = {step.kernel.spec.name for step in steps if isinstance(step.kernel, CompiledOp)}
    assert {"reduce_max", "reduce_min", "argmax", "argmin"} <= lowered
    logits = (4 * rng.standard_normal((8, 12, 16, 16))).astype(dtype)
    eager = sf.nn.softmax(sf.constant(logits)).numpy().astype(np.float32)
    got = sf.function(sf.nn.softmax)(logits).numpy()
    assert got.dtype == dtype
    step = float(ml_dtypes.finfo(dtype).eps)  # one rounding of the quotient, one of exp and the sum
    np.testing.assert_allclose(got.astype(np.float32), eager, rtol=2 * step, atol=step / 64)


def test_staged_function_with_unknown_dims():
    @sf.function(input_signature=[sf.TensorSpec([None, 4])])
    def f(x):
        return sf.reduce_sum(sf.transpose(x)[::-2], axis=0), sf.reduce_min(x[1:], axis=1)

    for rows in (2, 1, 7):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        total, low = f(x)
        np.testing.assert_allclose(total.numpy(), x.T[::-2].sum(axis=0), rtol=1e-5)
        np.testing.assert_array_equal(low.numpy(), x[1:].min(axis=1))
    assert f.tracing_count == 1


def test_staged_random_bits_are_bit_identical():
    def draw(x):
        return sf.random.uniform(x.shape) * x

    x = sf.ones((3, 5))
    results = []
    for f in (draw, sf.function(draw)):
        sf.random.set_seed(3)
        results.append([f(x).numpy(), f(x).numpy()])
    for e, c in zip(*results, strict=True):
        np.testing.assert_array_equal(e, c)


@settings(max_examples=20)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int32]), data=st.data())
def test_update_index(dtype, data):
    shape = data.draw(shapes.filter(lambda s: s[0] > 0))
    index = np.int64(data.draw(st.integers(-shape[0], shape[0] - 1)))
    arrays = [values(shape, dtype, 1), values(shape[1:], dtype, 2), index]
    check("update_index", arrays, data.draw(st.booleans()), exact=True)


@settings(max_examples=25)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       name=st.sampled_from(["cumsum", "cumprod"]), exclusive=st.booleans(),
       reverse=st.booleans(), unknown=st.booleans(), data=st.data())
def test_scans(dtype, name, exclusive, reverse, unknown, data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    array = values(shape, dtype, 1)
    if np.dtype(dtype).kind == "i":
        array = np.clip(array, -3, 3)  # products of a few small integers stay exact
    check(name, [array], unknown, exact=np.dtype(dtype).kind == "i", axis=axis,
          exclusive=exclusive, reverse=reverse)


@settings(max_examples=25)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int32]), unknown=st.booleans(),
       data=st.data())
def test_nd_indexing(dtype, unknown, data):
    shape = data.draw(shapes)
    width = data.draw(st.integers(1, len(shape)))
    count = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    tuples = np.stack([rng.integers(-d, d, count) for d in shape[:width]], -1).astype(np.int64)
    updates = values((count, *shape[width:]), dtype, 2)
    check("gather_nd", [values(shape, dtype, 1), tuples], unknown, exact=True, width=width)
    check("scatter_nd_add", [values(shape, dtype, 1), tuples, updates], unknown,
          exact=np.dtype(dtype).kind == "i", width=width)
    unique = np.unique(np.where(tuples < 0, tuples + np.array(shape[:width]), tuples), axis=0)
    check("scatter_nd_update", [values(shape, dtype, 1), unique,
                                values((len(unique), *shape[width:]), dtype, 3)], unknown,
          exact=True, width=width)
