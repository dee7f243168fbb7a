"""Lowered `conv2d`, its two gradients, `reduce_window` and max pooling's gradient against
their NumPy kernels and
direct references: shapes, strides, padding, dilations and dtypes drawn by hypothesis,
compiled alone (the status code says the compiled code ran, not the kernel it falls back
to) and inside whole programs with static and unknown dims; the direct loops (conv2d and
its stride-1 input gradient) forced on varied shapes and the rule that picks them;
gradients of a staged conv +
pool + relu step against the eager tape and finite differences; bad dims refused cleanly."""

from __future__ import annotations

import ctypes
import os
import time
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from llvmlite import binding as llvm
from llvmlite import ir

import stageflow as sf
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.lowered import matmul, worker_pool
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops, rule_for
from stageflow.codegen.lowered.conv import direct as direct_loops
from stageflow.codegen.lowered.conv import families, windowed
from stageflow.codegen.targets import cpu
from stageflow.core import config
from stageflow.core.config_threading import openblas_libraries
from stageflow.core.primitive import REGISTRY, ShapedType

FLOATS = [np.float32, np.float64]
_compiled: dict[tuple, CompiledOp] = {}


def spec_for(name: str, arrays: list[np.ndarray], unknown: bool, **params) -> OpSpec:
    """The op's spec for these inputs (every input dim unknown if `unknown`)."""
    inputs = tuple(ShapedType(tuple(None if unknown else d for d in a.shape), a.dtype)
                   for a in arrays)
    return OpSpec(name, inputs, (REGISTRY[name].shape_rule(*inputs, **params),), params)


def compiled(spec: OpSpec) -> CompiledOp:
    if spec.key not in _compiled:
        op = compile_ops([spec])[0]
        assert op is not None, f"no lowering for {spec}"
        _compiled[spec.key] = op
    return _compiled[spec.key]


def run_compiled(name: str, arrays: list[np.ndarray], unknown: bool, **params) -> np.ndarray:
    """The compiled op's result, asserting that the compiled code (not the NumPy kernel it
    falls back to) computed it."""
    want_shape = REGISTRY[name].kernel(*arrays, **params).shape
    out = np.full(want_shape, np.nan if arrays[0].dtype.kind == "f" else 7, arrays[0].dtype)
    assert compiled(spec_for(name, arrays, unknown, **params)).call(arrays, [out]) == 0
    return out


def values(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def tolerance(dtype) -> float:
    return 1e-5 if dtype == np.float32 else 1e-12


# -- references ---------------------------------------------------------------------------


def conv_reference(x, w, strides, padding, dilations):
    """Tap by tap: out += x[taps] @ w[a, b], in float64 over the zero-padded input."""
    kh, kw, _, o = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), padding[0], padding[1], (0, 0)))
    (sh, sw), (dh, dw) = strides, dilations
    ho = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], ho, wo, o))
    for a in range(kh):
        for b in range(kw):
            taps = xp[:, a * dh: a * dh + (ho - 1) * sh + 1: sh,
                      b * dw: b * dw + (wo - 1) * sw + 1: sw, :]
            out += taps @ w[a, b].astype(np.float64)
    return out


def pool_reference(x, kind, window, strides, padding):
    """Window by window, skipping the padding (the reduction's identity)."""
    n, h, w, c = x.shape
    (sh, sw), (top, left) = strides, (padding[0][0], padding[1][0])
    ho = (h + sum(padding[0]) - window[0]) // sh + 1
    wo = (w + sum(padding[1]) - window[1]) // sw + 1
    if kind == "sum":
        out = np.zeros((n, ho, wo, c), x.dtype)
    else:
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        out = np.full((n, ho, wo, c), lowest, x.dtype)
    for i in range(ho):
        for j in range(wo):
            rows = slice(max(i * sh - top, 0), max(i * sh - top + window[0], 0))
            cols = slice(max(j * sw - left, 0), max(j * sw - left + window[1], 0))
            part = x[:, rows, cols, :]
            if part.size:
                reduce = np.sum if kind == "sum" else np.max
                combine = np.add if kind == "sum" else np.maximum
                out[:, i, j, :] = combine(out[:, i, j, :], reduce(part, axis=(1, 2)))
    return out


def max_pool_gradient_reference(x, pooled, g, window, strides, padding):
    """Window by window, channel by channel: the cotangent to the window's first element
    inside the input (row-major) equal to its maximum."""
    dx = np.zeros_like(x)
    (sh, sw), (top, left) = strides, (padding[0][0], padding[1][0])
    for n, i, j, c in np.ndindex(*pooled.shape):
        taps = [(r, q) for r in range(i * sh - top, i * sh - top + window[0])
                for q in range(j * sw - left, j * sw - left + window[1])
                if 0 <= r < x.shape[1] and 0 <= q < x.shape[2]]
        chosen = next(((r, q) for r, q in taps if x[n, r, q, c] == pooled[n, i, j, c]), None)
        if chosen is not None:
            dx[n, chosen[0], chosen[1], c] += g[n, i, j, c]
    return dx


# -- conv2d -------------------------------------------------------------------------------

pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))
pads = st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)),
                 st.tuples(st.integers(0, 2), st.integers(0, 2)))


@settings(max_examples=8, deadline=None)  # each example compiles its own conv
@given(batch=st.integers(1, 3), size=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       channels=st.integers(1, 4), out_channels=st.integers(1, 5), window=pairs,
       strides=pairs, dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=pads, dtype=st.sampled_from(FLOATS), unknown=st.booleans())
def test_conv2d_matches_the_kernel_and_a_direct_reference(batch, size, channels,
                                                           out_channels, window, strides,
                                                           dilations, padding, dtype,
                                                           unknown):
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, channels), dtype)
    w = values((*window, channels, out_channels), dtype, seed=1)
    params = {"strides": strides, "padding": padding, "dilations": dilations}
    got = run_compiled("conv2d", [x, w], unknown, **params)
    want = REGISTRY["conv2d"].kernel(x, w, **params)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tolerance(dtype), atol=tolerance(dtype))
    np.testing.assert_allclose(got, conv_reference(x, w, strides, padding, dilations),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_pointwise_conv_is_one_gemm_and_a_large_one_spans_blocks(dtype):
    """1x1, stride 1, unpadded: the input is the gemm's matrix; 3x3 over 8 images of 32x32
    takes several im2col blocks (the last one short)."""
    x = values((3, 5, 7, 6), dtype)
    w = values((1, 1, 6, 4), dtype, seed=1)
    params = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    for unknown in (False, True):
        np.testing.assert_allclose(run_compiled("conv2d", [x, w], unknown, **params),
                                   REGISTRY["conv2d"].kernel(x, w, **params),
                                   rtol=tolerance(dtype), atol=tolerance(dtype))
    x = values((8, 33, 31, 16), dtype)
    w = values((3, 3, 16, 8), dtype, seed=1)
    params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    np.testing.assert_allclose(run_compiled("conv2d", [x, w], True, **params),
                               REGISTRY["conv2d"].kernel(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))


@settings(max_examples=10, deadline=None)  # unknown dims: one compile per dtype
@given(pixels=st.integers(1, 420), channels=st.sampled_from([1, 7, 40, 300]),
       out_channels=st.integers(1, 70), dtype=st.sampled_from(FLOATS))
def test_the_gemm_serves_every_count_of_rows(pixels, channels, out_channels, dtype):
    """A pointwise conv is one gemm of the image's pixels: any count of rows (tiles and the
    rows left after them, in one block of rows or several, split over the cores or not),
    of columns and of k (one chunk or two that accumulate) gives the kernel's numbers."""
    x = values((1, pixels, 1, channels), dtype)
    w = values((1, 1, channels, out_channels), dtype, seed=1)
    params = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    rounding = 4 * tolerance(dtype) * np.sqrt(channels)  # sums of unit normal terms
    np.testing.assert_allclose(run_compiled("conv2d", [x, w], True, **params),
                               REGISTRY["conv2d"].kernel(x, w, **params),
                               rtol=rounding, atol=rounding)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("window, channels, out_channels, padding", [
    (1, 300, 1000, 0),  # pointwise: whole blocks, one vector and a masked rest; two k chunks
    (3, 32, 37, 1),  # im2col: a block, no single vector, a masked rest
    (10, 16, 40, 4),  # im2col in chunks of filter rows that accumulate
])
def test_every_output_channel_sums_in_the_same_order(dtype, window, channels, out_channels,
                                                     padding):
    """Equal filters give bitwise equal channels wherever a channel lies among the others
    (OpenBLAS's kernels sum a panel's edge columns in another order: a softmax over logits
    near 1e9 then answered differently), and the result matches the kernel."""
    x = values((2, 13, 11, channels), dtype)
    w = np.repeat(values((window, window, channels, 1), dtype, seed=1), out_channels, axis=3)
    params = {"strides": (1, 1), "padding": ((padding, padding), (padding, padding)),
              "dilations": (1, 1)}
    got = run_compiled("conv2d", [x, w], True, **params)
    assert np.array_equal(got, np.repeat(got[..., :1], out_channels, axis=3))
    np.testing.assert_allclose(got, conv_reference(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_filters_are_split_into_chunks_of_filter_rows(dtype):
    """Filters of a filter gradient's shape (huge kh*kw*C, few output rows) exceed the
    scratch: chunks of filter rows accumulate onto each other."""
    x = values((3, 12, 12, 16), dtype)
    w = values((10, 10, 16, 4), dtype, seed=1)
    params = {"strides": (1, 1), "padding": ((1, 0), (0, 1)), "dilations": (1, 1)}
    np.testing.assert_allclose(run_compiled("conv2d", [x, w], False, **params),
                               conv_reference(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))


_direct: dict[tuple, CompiledOp] = {}


def run_direct(x: np.ndarray, w: np.ndarray, name: str = "conv2d", **params) -> np.ndarray:
    """conv2d (or its input gradient of cotangent `x`) compiled with the direct loops
    chosen for every O (C) a multiple of the vector's lanes (up to 64 here, beyond the
    default rule's 32), every dim unknown."""
    spec = spec_for(name, [x, w], True, **params)
    if spec.key not in _direct:
        saved = direct_loops.DIRECT_MAX_OUT_CHANNELS
        direct_loops.DIRECT_MAX_OUT_CHANNELS = 64
        try:
            op = compile_ops([spec])[0]
        finally:
            direct_loops.DIRECT_MAX_OUT_CHANNELS = saved
        assert op is not None and ".direct" in op.llvm_ir
        _direct[spec.key] = op
    out = np.full(REGISTRY[name].kernel(x, w, **params).shape, np.nan, x.dtype)
    assert _direct[spec.key].call([x, w], [out]) == 0
    return out


@settings(max_examples=10, deadline=None)
@given(batch=st.integers(1, 3), size=st.tuples(st.integers(1, 13), st.integers(1, 13)),
       channels=st.integers(1, 40), out_channels=st.sampled_from([8, 16, 24, 32, 64]),
       window=pairs, strides=pairs, row_dilation=st.integers(1, 2), padding=pads,
       dtype=st.sampled_from(FLOATS))
def test_the_direct_loops_match_a_direct_reference(batch, size, channels, out_channels,
                                                     window, strides, row_dilation, padding,
                                                     dtype):
    """Tiles of 6, 7 or 8 pixels over rows narrower than a tile, odd widths (the last tile
    moved back), taps clipped at every border, channel blocks of 64, 32, 16 and 8 floats
    (32, 16, 8 and 4 doubles; 64 and 32 only with AVX-512), any strides and filter-row
    dilation."""
    dilations = (row_dilation, 1)
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, channels), dtype)
    w = values((*window, channels, out_channels), dtype, seed=1)
    got = run_direct(x, w, strides=strides, padding=padding, dilations=dilations)
    np.testing.assert_allclose(got, conv_reference(x, w, strides, padding, dilations),
                               rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("out_channels", [8, 16, 32, 48, 64])
@pytest.mark.parametrize("stride", [1, 2])
def test_the_direct_loops_cover_every_row_width_with_each_tile_width(out_channels, stride):
    """Rows of 1 to 30 output pixels: each call's tile width (`direct.NARROW_TILES` for
    blocks of up to two vectors with AVX-512, `DIRECT_TILE` else), rows narrower than a
    tile, the last tile moved back, the first and last clipped by the padding."""
    w = values((3, 3, 5, out_channels), np.float32, seed=1)
    padding = ((1, 1), (1, 1))
    for width in range(1, 31):
        x = values((1, 3, width * stride, 5), np.float32)
        got = run_direct(x, w, strides=(stride, stride), padding=padding, dilations=(1, 1))
        np.testing.assert_allclose(got, conv_reference(x, w, (stride, stride), padding, (1, 1)),
                                   rtol=1e-4, atol=1e-4, err_msg=f"{width} pixels a row")


def test_a_call_takes_the_tile_width_that_computes_fewest_pixels():
    """Rows of 7, 14, 28 take tiles of 7; of 8, 16, 32, 56, 112 of 8 (ties go to the
    wider); of 6 the 7-wide tile clipped, since no narrower one is compiled."""
    module = ir.Module()
    function = ir.Function(module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), "w")
    b = ir.IRBuilder(function.append_basic_block())
    b.ret(direct_loops._tile_width(b, function.args[0], direct_loops.NARROW_TILES))
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    chosen = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(engine.get_function_address("w"))
    assert {wo: chosen(wo) for wo in (6, 7, 8, 13, 14, 16, 27, 28, 32, 55, 56, 112)} == {
        6: 7, 7: 7, 8: 8, 13: 7, 14: 7, 16: 8, 27: 7, 28: 7, 32: 8, 55: 8, 56: 8, 112: 8}


@settings(max_examples=8, deadline=None)
@given(batch=st.integers(1, 2), size=st.tuples(st.integers(1, 11), st.integers(1, 11)),
       channels=st.sampled_from([8, 16, 24, 32, 64]), out_channels=st.integers(1, 24),
       window=st.tuples(st.integers(1, 4), st.integers(1, 4)), row_dilation=st.integers(1, 2),
       padding=st.tuples(st.tuples(st.integers(0, 4), st.integers(0, 4)),
                         st.tuples(st.integers(0, 4), st.integers(0, 4))),
       dtype=st.sampled_from(FLOATS))
def test_the_direct_input_gradient_matches_the_kernel(batch, size, channels, out_channels,
                                                      window, row_dilation, padding, dtype):
    """Stride 1: the cotangent convolved with the flipped, transposed filters, padded by
    the filter's span less the conv's padding (negative where the padding is wider than the
    filter: the rows and columns past it are cropped)."""
    dilations = (row_dilation, 1)
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    w = values((*window, channels, out_channels), dtype, seed=1)
    params = {"strides": (1, 1), "padding": padding, "dilations": dilations}
    ho, wo = REGISTRY["conv2d"].kernel(values((1, *size, channels), dtype), w,
                                       **params).shape[1:3]
    g = values((batch, ho, wo, out_channels), dtype, seed=2)
    params["input_size"] = size
    got = run_direct(g, w, "conv2d_input_gradient", **params)
    want = REGISTRY["conv2d_input_gradient"].kernel(g, w, **params)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("images", "channels", "out_channels"),
                         [((1, 1, 1), 3, 1), ((1, 60, 40), 64, 33), ((3, 7, 9), 100, 130),
                          ((2, 28, 28), 256, 64)])
def test_a_pointwise_input_gradient_is_one_gemm_over_the_pixels(dtype, images, channels,
                                                               out_channels):
    """A 1x1 filter at stride 1 without padding: the cotangent's pixels times the filters
    transposed, written straight over the result (it starts as NaNs here), the pixels of
    one image split over the cores where there are enough of them."""
    w = values((1, 1, channels, out_channels), dtype, seed=1)
    g = values((*images, out_channels), dtype, seed=2)
    params = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1),
              "input_size": images[1:]}
    got = run_compiled("conv2d_input_gradient", [g, w], True, **params)
    want = g.astype(np.float64) @ w[0, 0].T.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=10 * tolerance(dtype),
                               atol=10 * tolerance(dtype) * np.sqrt(out_channels))


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_direct_loops_serve_the_small_resnets_shapes(dtype):
    """3x3 "SAME" convs of 3 and 16 channels into 16 over 32x32 images (the rows split over
    the cores), and a 1x1 stride-2 projection, against the reference."""
    for c, o, k, s, pad in [(3, 16, 3, 1, (1, 1)), (16, 16, 3, 1, (1, 1)),
                            (16, 32, 3, 2, (0, 1)), (16, 32, 1, 2, (0, 0))]:
        x = values((4, 32, 32, c), dtype)
        w = values((k, k, c, o), dtype, seed=1)
        params = {"strides": (s, s), "padding": (pad, pad), "dilations": (1, 1)}
        np.testing.assert_allclose(run_direct(x, w, **params), conv_reference(x, w, **params),
                                   rtol=1e-4, atol=1e-4)


_spies: list = []  # the gemm spies' callbacks, alive as long as the code calling them


def spy_on_gemms(monkeypatch) -> list[int]:
    """The m of every gemm that convolutions compiled from now on call, the BLAS's (the
    gradients') or their own (conv2d's), in place of it (computing nothing): im2col calls
    gemms, the direct loops none."""
    calls: list[int] = []
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    for module, kind in ((windowed, "blas"), (families, "own")):
        names = {}
        for dtype, real in ((np.dtype(np.float32), ctypes.c_float),
                            (np.dtype(np.float64), ctypes.c_double)):
            if kind == "blas":
                signature = ctypes.CFUNCTYPE(None, *[ctypes.c_int32] * 3, size, size, size,
                                             real, pointer, size, pointer, size, real,
                                             pointer, size)
                spy = signature(lambda *arguments: calls.append(arguments[3]))
            else:
                signature = ctypes.CFUNCTYPE(None, size, size, size, pointer, size, pointer,
                                             size, pointer, size, ctypes.c_bool)
                spy = signature(lambda *arguments: calls.append(arguments[0]))
            _spies.append(spy)
            names[dtype] = f"test.gemm.spy.{kind}.{dtype.name}"
            llvm.add_symbol(names[dtype], ctypes.cast(spy, ctypes.c_void_p).value)

        def spying(module_, dtype, gemm=module.gemm_function, names=names):
            signature = gemm(module_, dtype).function_type
            return declare(module_, names[dtype], signature.return_type, list(signature.args))

        monkeypatch.setattr(module, "gemm_function", spying)
    return calls


def test_the_rule_picks_the_direct_loops_only_for_few_output_channels_of_whole_vectors(
        monkeypatch):
    """O a multiple of 8 floats (4 doubles) up to 32, taps one column apart: direct (no
    gemm); up to 64 floats with AVX-512, and on other x86 CPUs in output rows of
    `WIDE_ROW` pixels or more; else only im2col and the gemm. The input gradient, with C
    for O, also at stride 1 only. Chosen at run time, by one copy of each family's code per
    dtype in a module, which every op of the family there calls with its strides, padding
    and dilations."""
    x = values((2, 7, 9, 5), np.float32)
    for o in (8, 12, 32, 40, 64):
        w = values((3, 3, 5, o), np.float32, seed=1)
        params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
        np.testing.assert_allclose(run_compiled("conv2d", [x, w], True, **params),
                                   conv_reference(x, w, **params), rtol=1e-4, atol=1e-4)

    calls = spy_on_gemms(monkeypatch)
    cases = []
    loops = direct_loops.DirectLoops(np.dtype(np.float32))
    wide = loops.own_max_out_channels == 64  # AVX-512
    wide_rows = loops.max_out_channels == 64  # x86
    for o, dtype, dilations, direct in [(16, np.float32, (1, 1), True),
                                        (4, np.float64, (1, 1), True),
                                        (16, np.float32, (1, 2), False),
                                        (8, np.float32, (1, 1), True),
                                        (12, np.float32, (1, 1), False),
                                        (32, np.float32, (2, 1), True),
                                        (40, np.float32, (1, 1), wide),
                                        (64, np.float32, (1, 1), wide),
                                        (72, np.float32, (1, 1), False),
                                        (40, np.float64, (1, 1), False)]:
        arrays = [values((1, 5, 5, 3), dtype), values((3, 3, 3, o), dtype)]
        cases.append(("conv2d", arrays, direct, {"strides": (1, 1), "dilations": dilations}))
    for width, o, direct in [(direct_loops.WIDE_ROW, 64, wide_rows),
                             (direct_loops.WIDE_ROW - 1, 64, wide),
                             (direct_loops.WIDE_ROW, 72, False)]:
        arrays = [values((1, 2, width, 3), np.float32), values((3, 3, 3, o), np.float32)]
        cases.append(("conv2d", arrays, direct, {"strides": (1, 1), "dilations": (1, 1)}))
    for stride, direct in ((1, True), (2, False)):
        arrays = [values((1, 4 - stride, 4 - stride, 4), np.float32),
                  values((3, 3, 16, 4), np.float32)]
        cases.append(("conv2d_input_gradient", arrays, direct, {
            "strides": (stride, stride), "dilations": (1, 1), "input_size": (3, 3)}))
    specs = [spec_for(name, arrays, True, padding=((1, 1), (1, 1)), **params)
             for name, arrays, _, params in cases]
    # the families' code and gemms in the module of these ops, calling the spies (the
    # JIT's shared copies are compiled once per process, `cpu.shared_function`, maybe
    # before the spies)
    with cpu.private():
        ops = compile_ops(specs)
    for op, (name, arrays, direct, params) in zip(ops, cases, strict=True):
        out = np.empty(REGISTRY[name].kernel(*arrays, padding=((1, 1), (1, 1)),
                                             **params).shape, arrays[0].dtype)
        calls.clear()
        assert op.call(arrays, [out]) == 0
        assert (not calls) == direct, (name, arrays[1].shape, params)
    text = ops[0].llvm_ir
    assert all(op.llvm_ir == text for op in ops)
    for shared in ("conv2d.float32", "conv2d.float64", "conv2d_input_gradient.float32",
                   "conv2d.direct.float32", "conv2d.direct.float64"):
        assert text.count(f'define internal i32 @"sf.{shared}"(') == 1


def test_conv2d_declines_strided_views_which_then_run_on_contiguous_copies(monkeypatch):
    x = values((2, 6, 8, 3), np.float32)
    w = values((3, 3, 3, 2), np.float32, seed=1)
    params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    op = compiled(spec_for("conv2d", [x, w], True, **params))
    view, flipped = x[:, ::-1, ::2], w[::-1]
    out = np.empty((2, 6, 4, 2), np.float32)
    assert op.call([view, w], [out]) == 1
    assert op.call([np.ascontiguousarray(x[:, :, :4]), flipped], [out]) == 2
    monkeypatch.setattr(op, "_numpy", lambda values: pytest.fail("NumPy's kernel ran"))
    np.testing.assert_allclose(op(view, flipped), conv_reference(view, flipped, (1, 1),
                                                                 ((1, 1), (1, 1)), (1, 1)),
                               rtol=1e-5, atol=1e-5)


def test_conv2d_refuses_bad_dims_with_a_status_code():
    """Codes are 1 + the argument at fault: channels that differ count against the filters,
    a window larger than the padded input against the input, wrong output dims against the
    output; nothing is written out of bounds."""
    x = values((2, 6, 6, 3), np.float32)
    w = values((3, 3, 3, 4), np.float32, seed=1)
    params = {"strides": (2, 1), "padding": ((0, 0), (1, 1)), "dilations": (1, 2)}
    op = compiled(spec_for("conv2d", [x, w], True, **params))
    out = np.empty((2, 2, 4, 4), np.float32)
    assert op.call([x, w], [out]) == 0
    assert op.call([np.ascontiguousarray(x[..., :2]), w], [out]) == 2
    short = np.ascontiguousarray(x[:, :2])
    assert op.call([short, w], [np.empty((2, 0, 4, 4), np.float32)]) == 1
    assert op.call([x, w], [np.empty((2, 2, 3, 4), np.float32)]) == 3
    with pytest.raises(ValueError):
        op(short, w)  # the NumPy kernel runs and raises its error


# -- conv2d's gradients -------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=6, deadline=None)  # each example compiles three ops
@given(batch=st.integers(1, 3), size=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       channels=st.integers(1, 4), out_channels=st.integers(1, 5), window=pairs,
       strides=pairs, dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=pads, dtype=st.sampled_from(FLOATS), unknown=st.booleans())
def test_conv2d_gradients_match_their_kernels_and_are_adjoint_to_the_conv(
        batch, size, channels, out_channels, window, strides, dilations, padding, dtype,
        unknown):
    """<conv2d(x, w), g> = <x, input_gradient(g, w)> = <w, filter_gradient(x, g)>, with
    every one of the three computed by its compiled lowering."""
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, channels), dtype)
    w = values((*window, channels, out_channels), dtype, seed=1)
    geometry = {"strides": strides, "padding": padding, "dilations": dilations}
    y = run_compiled("conv2d", [x, w], unknown, **geometry)
    g = values(y.shape, dtype, seed=2)
    dx = run_compiled("conv2d_input_gradient", [g, w], unknown, input_size=size, **geometry)
    dw = run_compiled("conv2d_filter_gradient", [x, g], unknown, filter_size=window,
                      **geometry)
    for name, got, args, params in (
            ("conv2d_input_gradient", dx, (g, w), {"input_size": size}),
            ("conv2d_filter_gradient", dw, (x, g), {"filter_size": window})):
        want = REGISTRY[name].kernel(*args, **params, **geometry)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=10 * tolerance(dtype),
                                   atol=10 * tolerance(dtype))
    inner = float(np.sum(y.astype(np.float64) * g))
    scale = 10 * tolerance(dtype) * max(1.0, float(np.sum(np.abs(y * g))))
    assert abs(float(np.sum(x.astype(np.float64) * dx)) - inner) <= scale
    assert abs(float(np.sum(w.astype(np.float64) * dw)) - inner) <= scale


@pytest.mark.parametrize("dtype", FLOATS)
def test_gradients_of_large_problems_span_blocks_and_chunks(dtype):
    """Many images (several blocks of positions; the filter gradient accumulates over them)
    and filters too large for the scratch (chunks of filter rows)."""
    for shape, window, stride in (((8, 33, 31, 16), (3, 3), (2, 2)),
                                  ((3, 12, 12, 16), (10, 10), (1, 1))):
        x = values(shape, dtype)
        w = values((*window, shape[3], 4), dtype, seed=1)
        geometry = {"strides": stride, "padding": ((1, 1), (1, 0)), "dilations": (1, 1)}
        g = values(REGISTRY["conv2d"].kernel(x, w, **geometry).shape, dtype, seed=2)
        for name, args, params in (("conv2d_input_gradient", [g, w],
                                    {"input_size": shape[1:3]}),
                                   ("conv2d_filter_gradient", [x, g], {"filter_size": window})):
            np.testing.assert_allclose(run_compiled(name, args, True, **params, **geometry),
                                       REGISTRY[name].kernel(*args, **params, **geometry),
                                       rtol=100 * tolerance(dtype), atol=100 * tolerance(dtype))


def test_conv2d_gradients_refuse_a_cotangent_of_other_positions():
    """A cotangent whose height or width is not the conv's result's, or whose channels are
    not the filters' outputs, gets a status code naming it; nothing is written."""
    x = values((2, 6, 6, 3), np.float32)
    w = values((3, 3, 3, 4), np.float32, seed=1)
    geometry = {"strides": (2, 2), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    g = values((2, 3, 3, 4), np.float32, seed=2)
    inputs = compiled(spec_for("conv2d_input_gradient", [g, w], True, input_size=(6, 6),
                               **geometry))
    filters = compiled(spec_for("conv2d_filter_gradient", [x, g], True, filter_size=(3, 3),
                                **geometry))
    dx, dw = np.empty((2, 6, 6, 3), np.float32), np.empty((3, 3, 3, 4), np.float32)
    assert inputs.call([g, w], [dx]) == 0 and filters.call([x, g], [dw]) == 0
    wide = values((2, 3, 4, 4), np.float32)
    assert inputs.call([wide, w], [dx]) == 1
    assert filters.call([x, wide], [dw]) == 2
    assert inputs.call([values((2, 3, 3, 5), np.float32), w], [dx]) == 2
    assert filters.call([x[:1].copy(), g], [dw]) == 2


# -- reduce_window ------------------------------------------------------------------------


@settings(deadline=None)
@given(batch=st.integers(1, 2), size=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       channels=st.integers(1, 37), window=pairs, strides=pairs, padding=pads,
       kind=st.sampled_from(["max", "sum"]),
       dtype=st.sampled_from([*FLOATS, np.int32, np.int64]), unknown=st.booleans())
def test_reduce_window_matches_the_kernel_and_a_direct_reference(batch, size, channels,
                                                                 window, strides, padding,
                                                                 kind, dtype, unknown):
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= window[axis])
    x = values((batch, *size, channels), dtype)
    params = {"kind": kind, "window": window, "strides": strides, "padding": padding}
    got = run_compiled("reduce_window", [x], unknown, **params)
    want = REGISTRY["reduce_window"].kernel(x, **params)
    assert got.dtype == want.dtype and got.shape == want.shape
    reference = pool_reference(x, kind, window, strides, padding)
    if kind == "max" or np.dtype(dtype).kind != "f":
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, reference)
    else:
        np.testing.assert_allclose(got, want, rtol=tolerance(dtype), atol=tolerance(dtype))
        np.testing.assert_allclose(got, reference, rtol=tolerance(dtype),
                                   atol=tolerance(dtype))


@pytest.mark.parametrize("channel", [3, 63, 64, 90, 98])  # blocks of 64 and 16; one
@pytest.mark.parametrize("padding", [((0, 0), (0, 0)), ((1, 1), (1, 1))])
def test_max_pooling_of_many_channels_matches_the_kernel(channel, padding):
    """A pixel's channels in blocks of 256 bytes first (four registers), then narrower:
    each keeps its maximum and its NaN, inside the image and at its padded edges."""
    x = values((2, 7, 6, 99), np.float32)
    x[1, 0, 0, channel] = np.nan
    params = {"kind": "max", "window": (3, 3), "strides": (2, 2), "padding": padding}
    got = run_compiled("reduce_window", [x], False, **params)
    np.testing.assert_array_equal(got, REGISTRY["reduce_window"].kernel(x, **params))
    np.testing.assert_array_equal(got, pool_reference(x, "max", (3, 3), (2, 2), padding))
    assert np.isnan(got[1, 0, 0, channel]) and np.isnan(got).sum() == 1


@pytest.mark.parametrize("channel", [0, 17, 25, 28, 29])  # vector blocks of 16, 8, 4; one
def test_max_pooling_propagates_nan_and_refuses_a_window_too_large(channel):
    x = values((1, 4, 4, 30), np.float32)
    x[0, 1, 1, channel] = np.nan
    params = {"kind": "max", "window": (2, 2), "strides": (2, 2),
              "padding": ((0, 0), (0, 0))}
    got = run_compiled("reduce_window", [x], True, **params)
    np.testing.assert_array_equal(got, REGISTRY["reduce_window"].kernel(x, **params))
    assert np.isnan(got[0, 0, 0, channel]) and np.isnan(got).sum() == 1
    op = compiled(spec_for("reduce_window", [x], True, **params))
    assert op.call([np.ascontiguousarray(x[:, :1])], [np.empty((1, 0, 2, 30), np.float32)]) == 1


@settings(deadline=None)
@given(batch=st.integers(1, 3), size=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       channels=st.integers(1, 37), window=pairs, strides=pairs, padding=pads,
       dtype=st.sampled_from(FLOATS), unknown=st.booleans(), ties=st.booleans())
def test_max_pool_gradient_matches_the_kernel_and_a_direct_reference(
        batch, size, channels, window, strides, padding, dtype, unknown, ties):
    """Overlapping windows add into one element; with ties (integer values) the first
    maximal element in row-major order takes the cotangent, never the padding; every
    element of the result is written (it starts as NaNs)."""
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= window[axis])
        assume(padding[axis][0] < window[axis] and padding[axis][1] < window[axis])
    x = values((batch, *size, channels), dtype)
    if ties:
        x = np.round(x)
    params = {"window": window, "strides": strides, "padding": padding}
    pooled = REGISTRY["reduce_window"].kernel(x, kind="max", **params)
    g = values(pooled.shape, dtype, seed=1)
    got = run_compiled("max_pool_gradient", [x, pooled, g], unknown, **params)
    want = REGISTRY["max_pool_gradient"].kernel(x, pooled, g, **params)
    assert got.dtype == want.dtype and got.shape == want.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=tolerance(dtype), atol=tolerance(dtype))
    np.testing.assert_allclose(got, max_pool_gradient_reference(x, pooled, g, **params),
                               rtol=tolerance(dtype), atol=tolerance(dtype))


@pytest.mark.parametrize("channel", [0, 17, 25, 28, 29])  # vector blocks of 16, 8, 4; one
def test_a_window_whose_maximum_is_nan_passes_nothing_on_and_bad_dims_are_refused(channel):
    x = values((1, 4, 4, 30), np.float32)
    x[0, 1, 1, channel] = np.nan
    params = {"window": (2, 2), "strides": (2, 2), "padding": ((0, 0), (0, 0))}
    pooled = REGISTRY["reduce_window"].kernel(x, kind="max", **params)
    g = values(pooled.shape, np.float32, seed=1)
    got = run_compiled("max_pool_gradient", [x, pooled, g], True, **params)
    np.testing.assert_array_equal(got, REGISTRY["max_pool_gradient"].kernel(x, pooled, g,
                                                                          **params))
    assert not got[0, :2, :2, channel].any() and np.count_nonzero(got) == 4 * 30 - 1
    op = compiled(spec_for("max_pool_gradient", [x, pooled, g], True, **params))
    dx = np.empty_like(x)
    assert op.call([x, pooled[:, :1].copy(), g], [dx]) == 2  # the pooled result's dims
    assert op.call([x, pooled, g[..., :29].copy()], [dx]) == 3  # the cotangent's
    assert op.call([x, pooled, g], [dx[:, :3].copy()]) == 4  # the result's


def test_max_pooling_is_differentiated_with_unknown_height_and_width():
    """The gradient is one op of the input's dims, whatever they are at run time (the
    composite it replaced needed them static); staged, it gives the eager tape's."""
    def grad(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.nn.max_pool2d(x, 3, 2, "VALID") ** 2)
        return tape.gradient(y, x)

    staged = sf.function(grad, input_signature=[sf.TensorSpec([None, None, None, 5],
                                                              sf.float32)])
    for shape in [(2, 9, 7, 5), (1, 4, 11, 5)]:
        x = values(shape, np.float32)
        np.testing.assert_array_equal(staged(x).numpy(), grad(sf.constant(x)).numpy())


# -- whole programs -----------------------------------------------------------------------


def one_program(concrete) -> None:
    """The concrete function runs as one compiled program (no step plan, no reason)."""
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


def convnet(w1, w2):
    def forward(x):
        h = sf.nn.relu(sf.nn.conv2d(x, w1, 1, "SAME"))
        h = sf.nn.max_pool2d(h, 2, 2, "SAME")
        h = sf.nn.relu(sf.nn.conv2d(h, w2, 2, "VALID", dilations=1))
        return sf.nn.avg_pool2d(h, 2, 1, "VALID")

    return forward


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_convnet_is_one_program_with_static_and_unknown_batch(dtype):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((3, 3, 3, 4)).astype(dtype)
    w2 = rng.standard_normal((3, 3, 4, 5)).astype(dtype)
    forward = convnet(w1, w2)
    x = rng.standard_normal((2, 11, 10, 3)).astype(dtype)
    want = forward(sf.constant(x)).numpy()
    static = sf.function(forward)
    one_program(static.get_concrete_function(sf.constant(x)))
    dyn = sf.function(forward, input_signature=[sf.TensorSpec([None, 11, 10, 3], dtype)])
    one_program(dyn.get_concrete_function())
    for f in (static, dyn):
        np.testing.assert_allclose(f(x).numpy(), want, rtol=tolerance(dtype) * 10,
                                   atol=tolerance(dtype) * 10)
    five = rng.standard_normal((5, 11, 10, 3)).astype(dtype)
    np.testing.assert_allclose(dyn(five).numpy(), forward(sf.constant(five)).numpy(),
                               rtol=tolerance(dtype) * 10, atol=tolerance(dtype) * 10)


def test_unknown_spatial_dims_and_bad_inputs_at_run_time():
    """With every dim unknown the program computes the dims at run time; an input smaller
    than the filters or with other channels raises the op's error, without a crash."""
    w = values((3, 3, 3, 4), np.float32, seed=1)

    @sf.function(input_signature=[sf.TensorSpec([None, None, None, 3], sf.float32)])
    def f(x):
        return sf.nn.max_pool2d(sf.nn.conv2d(x, w, 1, "VALID"), 2, 2, "VALID")

    one_program(f.get_concrete_function())
    for shape in [(2, 8, 8, 3), (1, 5, 9, 3)]:
        x = values(shape, np.float32)
        np.testing.assert_allclose(f(x).numpy(), convnet_eager(x, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="conv2d"):
        f(values((2, 2, 8, 3), np.float32))
    with pytest.raises(ValueError, match="expects"):
        f(values((2, 8, 8, 2), np.float32))


def convnet_eager(x, w):
    return sf.nn.max_pool2d(sf.nn.conv2d(x, w, 1, "VALID"), 2, 2, "VALID").numpy()


def train_step(w):
    def step(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            h = sf.nn.relu(sf.nn.conv2d(x, w, 2, "SAME"))
            pooled = (sf.nn.max_pool2d(h, 2, 2, "SAME")
                      + sf.nn.avg_pool2d(h, 3, 2, "SAME"))
            loss = sf.reduce_sum(pooled * pooled)
        dx, dw = tape.gradient(loss, [x, w])
        return loss, dx, dw

    return step


def test_gradients_of_a_staged_conv_pool_relu_step_are_one_program():
    """The gradient rules (the conv gradients, pads, slices, selects) all
    compile: the staged step equals the eager tape's, and finite differences."""
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.standard_normal((3, 3, 2, 3)))
    x = rng.standard_normal((2, 7, 6, 2))
    step = train_step(w)
    staged = sf.function(step)
    one_program(staged.get_concrete_function(sf.constant(x)))
    eager = [t.numpy() for t in step(sf.constant(x))]
    got = [t.numpy() for t in staged(x)]
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)

    def loss_at(xv, wv):
        w.assign(wv)
        return float(staged(xv)[0].numpy())

    w0, eps = w.numpy().copy(), 1e-6
    for position, (array, grad) in enumerate(((x, got[1]), (w0, got[2]))):
        for flat in rng.choice(array.size, 4, replace=False):
            index = np.unravel_index(flat, array.shape)
            moved = []
            for sign in (1, -1):
                shifted = array.copy()
                shifted[index] += sign * eps
                moved.append(loss_at(shifted, w0) if position == 0 else loss_at(x, shifted))
            numeric = (moved[0] - moved[1]) / (2 * eps)
            np.testing.assert_allclose(grad[index], numeric, rtol=1e-5, atol=1e-6)
    w.assign(w0)


def test_a_staged_step_under_an_eager_tape_compiles_its_backward(capsys, monkeypatch):
    """The forward and backward functions of a staged step under an eager tape are both
    programs: no function is logged as running as Python steps."""
    monkeypatch.setattr(config, "log", {"compiles"})
    rng = np.random.default_rng(1)
    w = sf.Variable(rng.standard_normal((3, 3, 2, 3)).astype(np.float32))
    forward = convnet(w, sf.constant(rng.standard_normal((3, 3, 3, 2)).astype(np.float32)))
    staged = sf.function(forward)
    x = sf.constant(rng.standard_normal((2, 12, 12, 2)).astype(np.float32))
    grads = []
    for f in (forward, staged):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.square(f(x)))
        grads.append(tape.gradient(loss, w).numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-4)
    log = capsys.readouterr().err
    assert "forward_vjp: compiled" in log and "Python steps" not in log


def blas_threads() -> int:
    library = ctypes.CDLL(openblas_libraries()[0])
    return library.scipy_openblas_get_num_threads64_()


def test_convolutions_on_several_threads_leave_openblas_as_they_found_it():
    """A conv step large enough to split its windows over tasks runs them with OpenBLAS
    single-threaded and restores its thread count after, also when calls from two threads
    overlap; every call gets the numbers of the eager step."""
    rng = np.random.default_rng(3)
    w = sf.constant(rng.standard_normal((3, 3, 8, 16)).astype(np.float32) * 0.1)

    def step(x):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            loss = sf.reduce_sum(sf.square(sf.nn.conv2d(x, w, 1, "SAME")))
        return tape.gradient(loss, [x, w])

    staged = sf.function(step)
    images = [rng.standard_normal((8, 24, 24, 8)).astype(np.float32) for _ in range(2)]
    wants = [[t.numpy() for t in step(sf.constant(x))] for x in images]
    before = blas_threads()

    def check(index: int) -> bool:
        for _ in range(20):
            for got, want in zip(staged(images[index]), wants[index], strict=True):
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-3)
        return True

    with ThreadPoolExecutor(2) as pool:
        assert all(pool.map(check, [0, 1]))
    assert blas_threads() == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_a_fork_during_a_convolution_leaves_the_child_openblas_restored():
    """The guard as a region in another thread leaves it (count 1, OpenBLAS at 1 thread)
    is reset in a forked child: no region, the saved thread count back."""
    before = blas_threads()
    library = ctypes.CDLL(openblas_libraries()[0])
    lock, count, saved = list(matmul._guard)
    matmul._guard[1], matmul._guard[2] = 1, max(before, 2)
    library.scipy_openblas_set_num_threads64_(1)
    try:
        child = os.fork()
        if child == 0:
            ok = (matmul._guard[0], matmul._guard[1]) == (0, 0) and blas_threads() == max(
                before, 2)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(child, 0)
    finally:
        matmul._guard[0], matmul._guard[1], matmul._guard[2] = lock, count, saved
        library.scipy_openblas_set_num_threads64_(before)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_a_forked_child_splits_convolutions_on_a_pool_of_its_own():
    """The parent's pool of worker threads (started by its first split convolution) does
    not exist in a forked child: the child's calls start a pool of their own and give the
    same numbers, and neither process hangs."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 24, 24, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32) * 0.1
    conv = sf.function(lambda a, b: sf.nn.conv2d(a, b, 1, "SAME"))
    want = conv(x, w).numpy()  # the pool starts here
    child = os.fork()
    if child == 0:
        try:
            ok = all(np.allclose(conv(x, w).numpy(), want, rtol=1e-5, atol=1e-5)
                     for _ in range(5))
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        pytest.fail("the forked child hung on its first split convolution")
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_allclose(conv(x, w).numpy(), want, rtol=1e-5, atol=1e-5)


def pool_word(name: str) -> int:
    """A counter of the process's pool state (`worker_pool._state`)."""
    first = len(worker_pool._SYNC) * worker_pool._SYNC_WORDS
    return worker_pool._state[first + worker_pool._WORDS.index(name)]


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing is split")
def test_split_ops_of_every_module_share_the_process_pool():
    """Convolutions compiled into different modules (per signature, and staged) post their
    tasks to one pool: its workers start once per process, and a module's first split call
    starts no thread. Each call gets the reference's numbers."""
    params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    shapes = [((4, 24, 24, 8), (3, 3, 8, 16)), ((2, 20, 20, 16), (3, 3, 16, 32)),
              ((3, 16, 16, 24), (3, 3, 24, 8))]
    cases = [(values(s, np.float32), values(k, np.float32, seed=1) * 0.1) for s, k in shapes]
    run_compiled("conv2d", list(cases[0]), False, **params)  # the pool starts here, if not before
    started, threads = pool_word("started"), native_threads()
    assert started == min(len(os.sched_getaffinity(0)), worker_pool._MAX_WORKERS + 1)
    for x, w in cases[1:]:
        before = pool_word("jobs")
        staged = sf.function(lambda a, b: sf.nn.conv2d(a, b, 1, "SAME"))
        want = conv_reference(x, w, **params)
        np.testing.assert_allclose(run_compiled("conv2d", [x, w], False, **params), want,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(staged(x, w).numpy(), want, rtol=1e-4, atol=1e-4)
        assert pool_word("jobs") >= before + 2  # both calls' jobs went to the pool
    assert (pool_word("started"), native_threads()) == (started, threads)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@pytest.mark.parametrize("channels", [19, 83])
@pytest.mark.parametrize("dtype", [np.float16, sf.bfloat16])
def test_half_float_max_pooling_is_compiled_and_exact(dtype, channels):
    """Max pooling of half floats (combined in float32 vectors of 64, 16, 8 and 4 lanes,
    then one channel at a time, stored back exactly) gives the kernel's results, NaN and
    infinities kept in vector lanes and single channels, padding skipped; the largest
    and smallest normal and subnormal values are kept to the bit."""
    x = np.random.default_rng(2).standard_normal((2, 7, 6, channels)).astype(dtype)
    x[0, 1, 1, 0], x[1, 2, 3, 4], x[1, 6, 5, channels - 1] = np.nan, -np.inf, np.inf
    x[0, 3, 2, 70 % channels], x[1, 0, 0, 9] = np.nan, -np.nan
    info = ml_dtypes.finfo(dtype)
    x[0, 4, 4, :4] = [info.max, -info.max, info.tiny, info.smallest_subnormal]
    x[0, 5, 4, :4] = x[0, 4, 4, :4]  # the whole window agrees there
    x[0, 5, 5, :4] = x[0, 4, 4, :4]
    x[0, 4, 5, :4] = x[0, 4, 4, :4]
    params = {"kind": "max", "window": (3, 2), "strides": (2, 2),
              "padding": ((1, 1), (0, 1))}
    got = run_compiled("reduce_window", [x], True, **params)
    want = REGISTRY["reduce_window"].kernel(x, **params)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("channels", [19, 83])
@pytest.mark.parametrize("dtype", [np.float16, sf.bfloat16])
def test_half_float_max_pool_gradient_is_compiled_and_rounds_as_the_kernel(dtype, channels):
    """Max pooling's gradient of half floats runs compiled (float32 lanes of 64, 16, 8, 4
    channels, then one at a time): windows that do not overlap give the kernel's result
    bit for bit, ties (integer values) to the first maximal element; the stem's
    overlapping 3x3 windows of stride 2 add up to four cotangents into one element,
    each add rounded to the half float (in window order, where the kernel adds in tap
    order: the two agree to the half float's rounding of the sums)."""
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((2, 8, 6, channels)) * 2).astype(dtype)
    for window, strides, padding, exact in [((2, 2), (2, 2), ((0, 0), (0, 0)), True),
                                            ((3, 3), (2, 2), ((1, 1), (1, 1)), False)]:
        params = {"window": window, "strides": strides, "padding": padding}
        pooled = REGISTRY["reduce_window"].kernel(x, kind="max", **params)
        g = rng.standard_normal(pooled.shape).astype(dtype)
        spec = spec_for("max_pool_gradient", [x, pooled, g], True, **params)
        assert rule_for(spec) is not None
        got = run_compiled("max_pool_gradient", [x, pooled, g], True, **params)
        want = REGISTRY["max_pool_gradient"].kernel(x, pooled, g, **params)
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
        else:
            wide = x.astype(np.float64), pooled.astype(np.float64)
            reference = max_pool_gradient_reference(*wide, g.astype(np.float64), **params)
            spread = max_pool_gradient_reference(*wide, np.abs(g.astype(np.float64)),
                                                 **params)
            bound = 4 * float(ml_dtypes.finfo(dtype).eps) * spread
            assert (np.abs(got.astype(np.float64) - reference) <= bound).all()
            assert np.count_nonzero(got) == np.count_nonzero(want)
