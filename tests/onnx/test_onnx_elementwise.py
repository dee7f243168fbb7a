"""sf.onnx's elementwise, bitwise and cast converters (`stageflow/onnx/ops/elementwise.py`,
`casts.py`) against ONNX's NumPy reference, compiled and interpreted: the integer semantics
ONNX and stageflow spell differently (truncating Div, Mod's fmod, shifts past the width),
the ops composed from others (bitwise, inverse hyperbolics, BitCast) over whole ranges."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(5)
BOTH = (True, False)


def _integers(dtype: type, *shape: int, nonzero: bool = False) -> np.ndarray:
    info = np.iinfo(dtype)
    values = RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return np.where(values == 0, 1, values).astype(dtype) if nonzero else values


def test_integer_div_truncates_and_mod_takes_each_sign():
    a = np.array([7, -7, 7, -7, 6, -6, 0, -128], np.int32)
    b = np.array([2, 2, -2, -2, 3, -3, 5, 3], np.int32)
    check(helper.make_node("Div", ["a", "b"], ["y"]), {"a": a, "b": b}, jits=BOTH)
    for fmod in (0, 1):
        check(helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod), {"a": a, "b": b},
              jits=BOTH)
    wide = {"a": _integers(np.int8, 64), "b": _integers(np.int8, 64, nonzero=True)}
    check(helper.make_node("Div", ["a", "b"], ["y"]), wide)
    check(helper.make_node("Mod", ["a", "b"], ["y"], fmod=1), wide)


def test_float_fmod_keeps_the_dividend_sign_at_the_edges():
    a = np.array([5.5, -5.5, -0.0, 1e-30, -1e-30, np.inf, 3.0, -3.0, np.nan], np.float32)
    b = np.array([2.0, 2.0, 3.0, 1.0, 1.0, 2.0, np.inf, np.inf, 1.0], np.float32)
    check(helper.make_node("Mod", ["a", "b"], ["y"], fmod=1), {"a": a, "b": b}, jits=BOTH,
          rtol=0, atol=0)


ALL_BITWISE = ("BitwiseAnd", "BitwiseOr", "BitwiseXor")


@pytest.mark.parametrize("dtype, ops, jits", [(np.int8, ALL_BITWISE, BOTH),
                                              (np.uint8, ALL_BITWISE, (True,)),
                                              (np.int32, ("BitwiseXor",), (True,))])
def test_bitwise_ops_over_the_whole_range(dtype, ops, jits):
    inputs = {"a": _integers(dtype, 3, 16), "b": _integers(dtype, 16)}
    for op in ops:
        check(helper.make_node(op, ["a", "b"], ["y"]), inputs, jits=jits)
    check(helper.make_node("BitwiseNot", ["a"], ["y"]), {"a": inputs["a"]}, jits=jits)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_of_signed_values_by_any_amount(direction):
    x = np.array([1, -1, 5, -128, 127, -3, 64, 7, -7, 3], np.int8)
    y = np.array([0, 1, 2, 7, 7, 8, -1, 9, 3, 6], np.int8)
    check(helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction),
          {"x": x, "y": y}, opset=28, jits=BOTH)
    x, y = _integers(np.uint32, 20), RNG.integers(0, 32, 20).astype(np.uint32)
    check(helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction),
          {"x": x, "y": y})


@pytest.mark.parametrize("base, exponent", [(np.int32, np.float32), (np.float32, np.int64),
                                            (np.int64, np.int64)])
def test_pow_of_mixed_types_keeps_the_base_type(base, exponent):
    x = np.array([1, 2, 3, 4, 5], base)
    y = np.array([3, 2, 0, 1, 2], exponent)
    check(helper.make_node("Pow", ["x", "y"], ["z"]), {"x": x, "y": y}, jits=BOTH)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_inverse_hyperbolic_functions_over_their_whole_domains(dtype):
    """Tiny, moderate and huge magnitudes (where x^2 overflows) to within a few ulps."""
    info = np.finfo(dtype)
    magnitudes = np.geomspace(float(info.tiny), float(info.max), 200)
    x = np.concatenate([magnitudes, -magnitudes, [0.0]]).astype(dtype)
    tolerance = {"rtol": 4 * float(info.eps), "atol": 0}
    check(helper.make_node("Asinh", ["x"], ["y"]), {"x": x}, **tolerance)
    check(helper.make_node("Acosh", ["x"], ["y"]), {"x": np.abs(x) + dtype(1)}, **tolerance)
    inside = np.tanh(x.astype(np.float64)).astype(dtype)
    check(helper.make_node("Atanh", ["x"], ["y"]), {"x": inside}, **tolerance)


def test_variadic_ops_broadcast_all_inputs():
    inputs = {"a": RNG.standard_normal((2, 1, 4)).astype(np.float32),
              "b": RNG.standard_normal((3, 1)).astype(np.float32),
              "c": RNG.standard_normal(4).astype(np.float32)}
    for op in ("Max", "Min", "Sum", "Mean"):  # (the NumPy reference's Mean cannot broadcast)
        check(helper.make_node(op, ["a", "b", "c"], ["y"]), inputs, runtime=True)


@pytest.mark.parametrize("negative, positive", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_is_inf_detects_the_signs_asked(negative, positive):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 1e38], np.float32)
    check(helper.make_node("IsInf", ["x"], ["y"], detect_negative=negative,
                           detect_positive=positive), {"x": x})


def test_clip_with_a_bound_omitted_and_known_bounds_fold():
    x = _integers(np.int8, 12)
    check(helper.make_node("Clip", ["x", "", "hi"], ["y"]), {"x": x},
          weights={"hi": np.array(10, np.int8)}, jits=BOTH)
    # All inputs initializers: the node is evaluated at import.
    check(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), {},
          weights={"x": x, "lo": np.array(-5, np.int8), "hi": np.array(5, np.int8)})


def test_where_and_logic_broadcast():
    cond = RNG.random((2, 3)) > 0.5
    check(helper.make_node("Where", ["c", "x", "y"], ["z"]),
          {"c": cond, "x": RNG.standard_normal(3), "y": RNG.standard_normal((2, 1))})
    check(helper.make_node("Xor", ["a", "b"], ["z"]), {"a": cond, "b": cond[:1]})


@pytest.mark.parametrize("to", [TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8,
                                TensorProto.UINT8, TensorProto.BOOL])
def test_cast_and_cast_like(to):
    x = np.array([0.0, -1.5, 2.75, 100.25, -0.0, 7.0], np.float32)
    check(helper.make_node("Cast", ["x"], ["y"], to=to), {"x": x}, jits=BOTH)
    like = np.zeros(1, helper.tensor_dtype_to_np_dtype(to))
    check(helper.make_node("CastLike", ["x", "t"], ["y"]), {"x": x}, weights={"t": like})


def test_cast_to_a_type_stageflow_lacks_is_refused():
    model = one_node_model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT6E2M3),
                           {"x": np.ones(2, np.float32)})
    with pytest.raises(OnnxError, match="FLOAT6E2M3, which stageflow has no tensors of"):
        sf.onnx.load(model)(np.ones(2, np.float32))


@pytest.mark.parametrize("floats, integers", [(np.float16, np.int16),
                                              (ml_dtypes.bfloat16, np.int16),
                                              (np.float32, np.int32), (np.float64, np.int64)])
def test_bit_cast_is_exact_both_ways(floats, integers):
    """Every 16-bit pattern, and random wider ones with the special values; NaNs come back
    as NaNs (their sign and payload are not kept)."""
    if np.dtype(integers).itemsize == 2:
        bits = np.arange(-(1 << 15), 1 << 15).astype(integers)
    else:
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.finfo(floats).smallest_subnormal,
                            np.finfo(floats).tiny, np.finfo(floats).max], floats)
        bits = np.concatenate([_integers(integers, 4000), special.view(integers)])
    values = bits.view(floats)
    nan = np.isnan(values.astype(np.float64))
    to_float = helper.np_dtype_to_tensor_dtype(np.dtype(floats))
    to_int = helper.np_dtype_to_tensor_dtype(np.dtype(integers))
    for jit in BOTH:
        decode = sf.onnx.load(one_node_model(helper.make_node("BitCast", ["x"], ["y"],
                                                               to=to_float), {"x": bits}),
                              jit=jit)
        got = np.asarray(decode(bits))
        np.testing.assert_array_equal(got[~nan].view(integers), bits[~nan])
        assert np.isnan(got[nan].astype(np.float64)).all()
        encode = sf.onnx.load(one_node_model(helper.make_node("BitCast", ["x"], ["y"],
                                                               to=to_int), {"x": values}),
                              jit=jit)
        np.testing.assert_array_equal(np.asarray(encode(values))[~nan], bits[~nan])


def test_bit_cast_between_integers_wraps():
    check(helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32),
          {"x": np.array([0, 1, 2**31, 2**32 - 1], np.uint32)}, opset=26)
    check(helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.UINT8),
          {"x": np.array([True, False])}, opset=26)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_casts_to_float8_e8m0_round_as_onnx_says(mode, saturate):
    """Powers of two by the float32's exponent, raised as `round_mode` says (the sign
    ignored, NaN and infinities NaN, the largest exponent kept where `saturate`): bytes equal
    to onnx's reference, compiled and interpreted."""
    x = np.float32([0.0, -0.0, 0.124, 0.25, 0.375, 0.75, 1.5, 3.0, -6.5, 1e-40, 3e38, 3.4e38,
                    np.inf, -np.inf, np.nan, 1.0, 2**-127, 5e-39])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0,
                            saturate=saturate, round_mode=mode)
    model = one_node_model(node, {"x": x}, opset=25)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    for jit in BOTH:
        got = np.asarray(sf.onnx.load(model, jit=jit)(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_an_unknown_round_mode_is_refused():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode="odd")
    model = one_node_model(node, {"x": np.ones(2, np.float32)}, opset=25)
    with pytest.raises(OnnxError, match="round_mode 'odd'; ONNX defines up, down and nearest"):
        sf.onnx.load(model)(np.ones(2, np.float32))
