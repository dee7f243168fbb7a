"""`conv2d_fused`, compiled: a convolution whose gemm tiles and direct loops apply its
epilogue (per-channel scale and shift, a second scale and shift, residual, ReLU) to the
sums before storing them.

On every path the convolution takes (the direct loops, im2col and the gemm, a pointwise
gemm split by pixels or by filters, long sums over several of the gemm's chunks and of
the filter rows, feature groups, packed filters) and for every subset of the epilogue,
the fused op gives the numbers of the compiled convolution followed by the epilogue's
NumPy ops bit for bit (each step is the same IEEE operation in the same order), and its
compiled code ran (status 0). Staged, the `fuse-conv` pass makes it of a convolution and
its elementwise ops, and the function's numbers are those of the unfused ops, compiled and
interpreted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.primitives.elementwise import relu_p
from stageflow.primitives.fused_conv import EPILOGUE_OPERANDS, EPILOGUE_STEPS
from stageflow.primitives.prepacked import pack

FLOATS = [np.float32, np.float64]
_compiled: dict[tuple, CompiledOp] = {}


def call(name: str, arrays: list[np.ndarray], **params) -> tuple[int, np.ndarray]:
    """Op `name` compiled alone (every dim unknown) on `arrays`: its status and result."""
    inputs = tuple(ShapedType((None,) * a.ndim, a.dtype) for a in arrays)
    shape = REGISTRY[name].shape_rule(*(ShapedType(a.shape, a.dtype) for a in arrays),
                                      **params).shape
    spec = OpSpec(name, inputs, (ShapedType((None,) * len(shape), arrays[0].dtype),), params)
    if spec.key not in _compiled:
        _compiled[spec.key] = compile_ops([spec])[0]
    out = np.full(shape, np.nan, arrays[0].dtype)
    return _compiled[spec.key].call(arrays, [out]), out


def run(name: str, arrays: list[np.ndarray], **params) -> np.ndarray:
    """The result of op `name` compiled alone, once the status says the compiled code
    computed it (not the NumPy kernel it falls back to)."""
    status, out = call(name, arrays, **params)
    assert status == 0
    return out


def fused_and_unfused(x: np.ndarray, w: np.ndarray, flags: dict[str, bool], relu: bool,
                      packed: bool, seed: int = 0, **geometry) -> tuple[np.ndarray, ...]:
    """The compiled conv2d_fused's result, and the compiled convolution's (conv2d, or
    conv2d_prepacked where `packed`) followed by the epilogue's NumPy ops."""
    groups = geometry.get("feature_group_count", 1)
    filters = pack(w, groups) if packed else w
    plain = run("conv2d_prepacked", [x, filters], filter_shape=w.shape, **geometry) \
        if packed else run("conv2d", [x, w], **geometry)
    rng = np.random.default_rng(seed)
    operands = {name: rng.standard_normal(w.shape[3] if per_channel else plain.shape
                                          ).astype(x.dtype)
                for name, (_, per_channel) in EPILOGUE_STEPS.items()}
    extras = [operands[name] for name in EPILOGUE_OPERANDS if flags[name]]
    fused = run("conv2d_fused", [x, filters, *extras], filter_shape=w.shape, packed=packed,
                activation=relu_p.name if relu else "none", **flags, **geometry)
    want = plain
    for name in EPILOGUE_OPERANDS:
        if flags[name]:
            want = EPILOGUE_STEPS[name][0](want, operands[name])
    if relu:
        want = relu_p.kernel(want)
    return fused, want


epilogues = st.fixed_dictionaries({name: st.booleans() for name in EPILOGUE_OPERANDS})


@settings(max_examples=8, deadline=None)  # each example compiles its ops
@given(batch=st.integers(1, 2), size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       channels=st.integers(1, 12), out_channels=st.sampled_from([8, 16, 24, 40, 64, 65, 100]),
       window=st.sampled_from([(1, 1), (3, 3), (2, 3)]), stride=st.integers(1, 2),
       groups=st.integers(1, 2), packed=st.booleans(), flags=epilogues, relu=st.booleans(),
       dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_every_epilogue_on_every_path_is_the_unfused_ops_bit_for_bit(
        batch, size, channels, out_channels, window, stride, groups, packed, flags, relu,
        dtype, seed):
    assume(out_channels % groups == 0 and window[0] <= size[0] + 2 and window[1] <= size[1] + 1)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *size, channels * groups)).astype(dtype)
    w = rng.standard_normal((*window, channels, out_channels)).astype(dtype)
    geometry = {"strides": (stride, stride), "padding": ((1, 1), (1, 0)),
                "dilations": (1, 1)}
    if groups > 1:
        geometry["feature_group_count"] = groups
    fused, want = fused_and_unfused(x, w, flags, relu, packed, seed, **geometry)
    np.testing.assert_array_equal(fused, want)


ALL = dict.fromkeys(EPILOGUE_OPERANDS, True)


# float32 on every shape, float64 (panels and chunks of half as many columns) on the one
# whose k runs past a chunk: each case compiles its ops.
@pytest.mark.parametrize(("dtype", "x_shape", "w_shape", "padding"), [
    (np.float32, (1, 7, 7, 40), (1, 1, 40, 300), ((0, 0), (0, 0))),   # few pixels: split
    (np.float32, (2, 6, 5, 600), (1, 1, 600, 48), ((0, 0), (0, 0))),  # k past one chunk
    (np.float32, (3, 12, 12, 16), (10, 10, 16, 4), ((1, 0), (0, 1))),  # filter-row chunks
    (np.float64, (2, 6, 5, 600), (1, 1, 600, 48), ((0, 0), (0, 0))),
])
@pytest.mark.parametrize("packed", [False, True])
def test_the_epilogue_is_applied_once_after_the_last_term(dtype, x_shape, w_shape, padding,
                                                          packed):
    """Where a sum runs over several chunks (the gemm's, of k; im2col's, of filter rows),
    only the last one's store goes through the epilogue; where the cores split the
    filters, each its own columns of the scales, shifts and residual."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    fused, want = fused_and_unfused(x, w, ALL, True, packed, strides=(1, 1),
                                    padding=padding, dilations=(1, 1))
    np.testing.assert_array_equal(fused, want)


def test_no_terms_and_an_epilogue_run_the_kernel():
    """A convolution of no input channels has no terms: with an epilogue its compiled
    code declines (a status), and the op's kernel gives the epilogue of zeros."""
    x = np.ones((1, 3, 3, 0), np.float32)
    w = np.ones((1, 1, 0, 8), np.float32)
    shift = np.arange(8, dtype=np.float32)
    params = {"filter_shape": w.shape, "strides": (1, 1), "padding": ((0, 0), (0, 0)),
              "dilations": (1, 1), "packed": False, "scale": False, "shift": True,
              "residual": False, "activation": "none"}
    status, _ = call("conv2d_fused", [x, w, shift], **params)
    assert status != 0
    np.testing.assert_array_equal(REGISTRY["conv2d_fused"].kernel(x, w, shift, **params),
                                  np.broadcast_to(shift, (1, 3, 3, 8)))


@pytest.mark.parametrize("out_channels", [64, 96])  # the direct loops, the gemm
def test_a_staged_block_fuses_and_keeps_the_unfused_numbers(out_channels, monkeypatch):
    """A residual block written with raw ops (conv, batch norm's scale and shift, the
    skip, ReLU), its weights constants as an imported model's are: the optimized IR
    holds conv2d_fused and no elementwise kernel after it; its numbers are those of the
    same function compiled with the pass switched off, bit for bit, and the interpreter's
    (NumPy's convolution, summing in another order) to rounding."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 3, out_channels, out_channels)).astype(np.float32) * 0.1
    scale = rng.standard_normal(out_channels).astype(np.float32)
    shift = rng.standard_normal(out_channels).astype(np.float32)
    x = rng.standard_normal((2, 10, 10, out_channels)).astype(np.float32)

    def block(x):
        y = sf.nn.conv2d(x, sf.constant(w), 1, "SAME")
        return sf.nn.relu(y * sf.constant(scale) + sf.constant(shift) + x)

    compiled = sf.function(block)
    optimized = compiled.get_concrete_function(x).ir(stage="optimized")
    assert "sf.conv2d_fused" in optimized and "_kernel" not in optimized
    got = compiled(x).numpy()
    np.testing.assert_allclose(got, sf.function(block, jit=False)(x).numpy(), rtol=1e-5,
                               atol=1e-5)
    from stageflow.passes import fuse_conv
    monkeypatch.setattr(fuse_conv.FuseConv, "apply", lambda self, ctx, op: None)
    unfused = sf.function(block)
    assert "sf.conv2d_fused" not in unfused.get_concrete_function(x).ir(stage="optimized")
    np.testing.assert_array_equal(got, unfused(x).numpy())


@pytest.mark.parametrize("out_channels", [64, 96])  # the direct loops, the gemm
def test_a_second_affine_map_after_the_batch_norm_joins_the_epilogue(out_channels,
                                                                     monkeypatch):
    """A batch norm's scale and shift, then another per-channel multiply and add (written
    as a subtraction), then a ReLU, as Inception v2's exporter wrote them: one
    conv2d_fused with both affine maps, no kernel after it, the unfused ops' numbers bit
    for bit. A third multiply is not a step of the epilogue and stays a kernel."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 3, out_channels, out_channels)).astype(np.float32) * 0.1
    s, t, s2, t2 = (rng.standard_normal(out_channels).astype(np.float32) for _ in range(4))
    x = rng.standard_normal((2, 9, 9, out_channels)).astype(np.float32)

    def block(x):
        y = sf.nn.conv2d(x, sf.constant(w), 1, "SAME") * s + t
        return sf.nn.relu(y * s2 - t2)

    def longer(x):
        return block(x) * s

    compiled, chained = sf.function(block), sf.function(longer)
    optimized = compiled.get_concrete_function(x).ir(stage="optimized")
    assert "second_scale = true" in optimized and "second_shift = true" in optimized
    assert "_kernel" not in optimized
    assert "_kernel" in chained.get_concrete_function(x).ir(stage="optimized")
    got = compiled(x).numpy()
    from stageflow.passes import fuse_conv
    monkeypatch.setattr(fuse_conv.FuseConv, "apply", lambda self, ctx, op: None)
    np.testing.assert_array_equal(got, sf.function(block)(x).numpy())
    np.testing.assert_allclose(got, sf.function(block, jit=False)(x).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_batch_norm_from_its_variables_is_the_epilogue_of_its_convolution(monkeypatch):
    """Inference through Keras-style layers whose weights are variables: the batch norm's
    scale and shift are computed per call from its variables, and still become the
    convolution's epilogue with the skip and the ReLU; the numbers are the unfused ops', bit
    for bit, and a new value of a variable is seen by the next call."""
    rng = np.random.default_rng(3)
    conv = sf.layers.Conv2D(32, 3, 1, "same", use_bias=False)
    norm = sf.layers.BatchNormalization()
    x = rng.standard_normal((2, 8, 8, 32)).astype(np.float32)
    conv(x)
    norm(conv(x))
    for variable in (norm.gamma, norm.beta, norm.moving_mean):
        variable.assign(rng.standard_normal(32).astype(np.float32))
    norm.moving_variance.assign(rng.uniform(0.5, 2.0, 32).astype(np.float32))

    def block(x):
        return sf.nn.relu(norm(conv(x), training=False) + x)

    compiled = sf.function(block)
    optimized = compiled.get_concrete_function(x).ir(stage="optimized")
    image_sized = [line for line in optimized.splitlines()
                   if " = sf." in line and "-> tensor<2x8x8x32xf32>" in line]
    assert image_sized and all("sf.conv2d_fused" in line for line in image_sized), optimized
    got = compiled(x).numpy()
    from stageflow.passes import fuse_conv
    monkeypatch.setattr(fuse_conv.FuseConv, "apply", lambda self, ctx, op: None)
    unfused = sf.function(block)
    assert "sf.conv2d_fused" not in unfused.get_concrete_function(x).ir(stage="optimized")
    np.testing.assert_array_equal(got, unfused(x).numpy())
    monkeypatch.undo()
    norm.beta.assign(norm.beta.numpy() + 1.0)
    np.testing.assert_array_equal(compiled(x).numpy(), unfused(x).numpy())
    assert not np.array_equal(compiled(x).numpy(), got)
