"""`conv2d_fused` in bfloat16: the epilogue a layer under the ``mixed_bfloat16`` policy puts
after its convolution (float32 per-channel steps between a cast up and a cast back, a
bfloat16 residual, the ReLU), applied by the bfloat16 gemm as it stores its results
(`gemm_bf16.fused_gemm_function`).

Compiled alone, on every path the bfloat16 convolution takes (a pointwise conv read in
place, windows copied, a tile of fewer rows than whole, output channels past a panel,
sums over several of the gemm's chunks of k), the fused op gives the compiled
convolution's result followed by the unfused ops' NumPy numbers (ml_dtypes' rounding)
bit for bit, special values included. Staged, `fuse-conv` makes it of the cast, the batch
norm's or a bias's steps, the skip and the ReLU, and the function's numbers are those of
the same function with the pass switched off. On a CPU without AVX-512 BF16 the rule
declines and the op's NumPy kernel runs, to the same numbers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.compile import OpSpec, compile_ops, rule_for
from stageflow.codegen.lowered.conv.bfloat16 import Conv2dBfloat16
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.passes import fuse_conv
from stageflow.primitives.elementwise import relu_p
from stageflow.primitives.fused_conv import EPILOGUE_OPERANDS, EPILOGUE_STEPS

BF16 = np.dtype(ml_dtypes.bfloat16)
HAS_BF16 = gemm_bf16.host_available()
GEOMETRY = {"strides": (1, 1), "dilations": (1, 1)}


def compiled_call(name: str, arrays: list[np.ndarray], **params) -> np.ndarray:
    """Op `name` compiled alone on `arrays` (its dims as they are): its result, once its
    status says the compiled code computed it; where the CPU lacks AVX-512 BF16, the
    rule declines and the op's NumPy kernel gives the result."""
    inputs = tuple(ShapedType(a.shape, a.dtype) for a in arrays)
    spec = OpSpec(name, inputs, (REGISTRY[name].shape_rule(*inputs, **params),), params)
    if not HAS_BF16:
        assert rule_for(spec) is None
        return np.asarray(REGISTRY[name].kernel(*arrays, **params))
    assert isinstance(rule_for(spec), Conv2dBfloat16)
    out = np.full(spec.outputs[0].shape, np.nan, BF16)
    assert compile_ops([spec])[0].call(arrays, [out]) == 0
    return out


def mixed_epilogue(y: np.ndarray, operands: dict[str, np.ndarray], relu: bool) -> np.ndarray:
    """The unfused ops on a bfloat16 conv's result `y`: cast up, the float32 per-channel
    steps, cast back, the bfloat16 residual's sum, the ReLU."""
    value = y.astype(np.float32)
    with np.errstate(all="ignore"):  # the special values' infinities and NaNs
        for name in EPILOGUE_OPERANDS[:4]:
            if name in operands:
                value = EPILOGUE_STEPS[name][0](value, operands[name])
        value = value.astype(BF16)
        if "residual" in operands:
            value = value + operands["residual"]
    return relu_p.kernel(value) if relu else value


def fused_and_unfused(x: np.ndarray, w: np.ndarray, names: tuple[str, ...], relu: bool,
                      padding, seed: int = 0, special: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The compiled fused op's result and the compiled conv2d's followed by the unfused
    ops; `special` puts infinities, NaNs, zeros of both signs and subnormals among the
    epilogue's operands, and makes channel 0's results subnormal."""
    plain = compiled_call("conv2d", [x, w], padding=padding, **GEOMETRY)
    rng = np.random.default_rng(seed)
    operands = {}
    for name in names:
        per_channel = EPILOGUE_STEPS[name][1]
        shape = w.shape[3] if per_channel else plain.shape
        values = rng.standard_normal(shape).astype(np.float32)
        if special:
            picks = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -3e-39, 3e38])
            where = rng.random(shape) < 0.2
            values[where] = rng.choice(picks, int(where.sum()))
        if special:  # channel 0 ends subnormal: 0 * y + 1e-40, then * 1 and + -0.0
            values[..., 0] = {"scale": 0.0, "shift": 1e-40, "second_scale": 1.0}.get(name, -0.0)
        operands[name] = values if per_channel else values.astype(BF16)
    flags = {name: name in names for name in EPILOGUE_OPERANDS}
    fused = compiled_call("conv2d_fused", [x, w, *operands.values()], filter_shape=w.shape,
                          packed=False, activation=relu_p.name if relu else "none",
                          padding=padding, **flags, **GEOMETRY)
    return fused, mixed_epilogue(plain, operands, relu)


def bits(array: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns of `array`, every NaN as one (which of two NaN operands a
    sum passes on is the compiler's choice: IEEE leaves it open)."""
    patterns = np.asarray(array, BF16).view(np.uint16).copy()
    patterns[np.isnan(np.asarray(array, np.float32))] = 0x7FC0
    return patterns


subsets = st.lists(st.sampled_from(EPILOGUE_OPERANDS), unique=True).map(
    lambda chosen: tuple(name for name in EPILOGUE_OPERANDS if name in chosen))


@settings(max_examples=10, deadline=None)  # each example compiles its ops
@given(batch=st.integers(1, 2), size=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       channels=st.integers(1, 20), out_channels=st.sampled_from([1, 8, 16, 33, 64, 70]),
       window=st.sampled_from([(1, 1), (3, 3)]), names=subsets, relu=st.booleans(),
       seed=st.integers(0, 2**16))
def test_every_epilogue_on_every_path_is_the_unfused_ops_bit_for_bit(
        batch, size, channels, out_channels, window, names, relu, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *size, channels)).astype(BF16)
    w = rng.standard_normal((*window, channels, out_channels)).astype(BF16)
    padding = ((0, 0), (0, 0)) if window == (1, 1) else ((1, 1), (1, 1))
    fused, want = fused_and_unfused(x, w, names, relu, padding, seed)
    np.testing.assert_array_equal(bits(fused), bits(want))


@pytest.mark.parametrize(("x_shape", "w_shape", "padding"), [
    ((1, 3, 4, 40), (1, 1, 40, 70), ((0, 0), (0, 0))),      # a tile of fewer rows
    ((2, 6, 5, 1100), (1, 1, 1100, 48), ((0, 0), (0, 0))),  # k past one of the gemm's chunks
    ((2, 9, 9, 24), (3, 3, 24, 100), ((1, 1), (1, 1))),     # windows, a partial panel
])
def test_special_values_and_long_sums_are_the_unfused_ops_bit_for_bit(x_shape, w_shape,
                                                                      padding):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(BF16)
    w = (rng.standard_normal(w_shape) * 0.2).astype(BF16)
    fused, want = fused_and_unfused(x, w, EPILOGUE_OPERANDS, True, padding, special=True)
    magnitude = np.abs(want.astype(np.float32))
    assert ((magnitude > 0) & (magnitude < np.finfo(np.float32).tiny)).any()  # subnormals
    assert np.isnan(magnitude).any() and np.isinf(magnitude).any()
    np.testing.assert_array_equal(bits(fused), bits(want))


def test_the_kernel_is_the_unfused_ops():
    """The op's NumPy kernel (the interpreter's, and the fallback's) rounds where the
    unfused ops do: once after the float32 steps, once after the residual."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 4, 4, 8)).astype(BF16)
    w = rng.standard_normal((1, 1, 8, 16)).astype(BF16)
    scale, shift = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    residual = rng.standard_normal((1, 4, 4, 16)).astype(BF16)
    conv = REGISTRY["conv2d"].kernel(x, w, padding=((0, 0), (0, 0)), **GEOMETRY)
    got = REGISTRY["conv2d_fused"].kernel(
        x, w, scale, shift, residual, filter_shape=w.shape, packed=False, scale=True,
        shift=True, residual=True, activation=relu_p.name, padding=((0, 0), (0, 0)),
        **GEOMETRY)
    want = mixed_epilogue(np.asarray(conv, BF16),
                          {"scale": scale, "shift": shift, "residual": residual}, True)
    assert got.dtype == BF16
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.fixture
def mixed_policy():
    """The mixed policy for one test, then the default again (`None`: the global state is
    shared with the rest of the process's tests)."""
    sf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    sf.keras.mixed_precision.set_global_policy(None)


def unfused(monkeypatch, block):
    """`block` staged with the `fuse-conv` pass switched off."""
    monkeypatch.setattr(fuse_conv.FuseConv, "apply", lambda self, ctx, op: None)
    function = sf.function(block)
    return function


def image_ops(ir: str, shape: str) -> list[str]:
    return [line for line in ir.splitlines() if " = sf." in line and f"-> tensor<{shape}" in line]


@pytest.mark.parametrize("out_channels", [32, 96])
def test_a_mixed_precision_residual_block_is_two_fused_convolutions(out_channels,
                                                                     mixed_policy,
                                                                     monkeypatch):
    """Keras-style layers under ``mixed_bfloat16``: a conv and batch norm (variables read
    per call, float32) with ReLU, then a conv with a bias (cast to bfloat16 per call), the
    skip and ReLU. Every op of the image's size is a conv2d_fused; the numbers are the
    unfused ops', bit for bit, and a new value of a variable is seen by the next call."""
    rng = np.random.default_rng(7)
    conv = sf.layers.Conv2D(out_channels, 3, 1, "same", use_bias=False)
    norm = sf.layers.BatchNormalization()
    second = sf.layers.Conv2D(out_channels, 1)
    x = rng.standard_normal((2, 6, 6, out_channels)).astype(BF16)
    second(norm(conv(x)))
    for variable in (norm.gamma, norm.beta, norm.moving_mean, second.bias):
        variable.assign(rng.standard_normal(out_channels).astype(np.float32))
    norm.moving_variance.assign(rng.uniform(0.5, 2.0, out_channels).astype(np.float32))

    def block(x):
        y = sf.nn.relu(norm(conv(x), training=False))
        return sf.nn.relu(second(y) + y)

    compiled = sf.function(block)
    optimized = compiled.get_concrete_function(x).ir(stage="optimized")
    image = image_ops(optimized, f"2x6x6x{out_channels}xbf16")
    assert len(image) == 2 and all("sf.conv2d_fused" in line for line in image), optimized
    got = compiled(x).numpy()
    plain = unfused(monkeypatch, block)
    assert "sf.conv2d_fused" not in plain.get_concrete_function(x).ir(stage="optimized")
    np.testing.assert_array_equal(bits(got), bits(plain(x).numpy()))
    monkeypatch.undo()
    norm.beta.assign(norm.beta.numpy() + 1.0)
    again = compiled(x).numpy()
    assert not np.array_equal(bits(again), bits(got))
    np.testing.assert_array_equal(bits(again), bits(plain(x).numpy()))
    interpreted = sf.function(block, jit=False)(x).numpy().astype(np.float32)
    np.testing.assert_allclose(again.astype(np.float32), interpreted, rtol=0.05, atol=0.05)


def test_a_chain_that_ends_in_float32_stops_at_its_last_bfloat16_value(monkeypatch):
    """A bfloat16 conv whose result is cast up, scaled and returned in float32: the scale
    is not the fused op's (its result would be float32); a ReLU before the cast up is,
    and the numbers are the unfused ops'."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((3, 3, 8, 16)).astype(BF16)
    scale = rng.standard_normal(16).astype(np.float32)
    x = rng.standard_normal((1, 5, 5, 8)).astype(BF16)

    def block(x):
        y = sf.nn.relu(sf.nn.conv2d(x, sf.constant(w), 1, "SAME"))
        return sf.cast(y, sf.float32) * sf.constant(scale)

    compiled = sf.function(block)
    optimized = compiled.get_concrete_function(x).ir(stage="optimized")
    assert "sf.conv2d_fused" in optimized and 'activation = "relu"' in optimized
    assert "scale = false" in optimized
    got = compiled(x).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, unfused(monkeypatch, block)(x).numpy())
