"""bfloat16 convolutions on the CPU's bfloat16 dot products (`codegen.lowered.conv.bfloat16`):
conv2d and its two gradients, compiled alone, against float64 references of the same
bfloat16 operands, through every path (a pointwise conv read in place, windows copied with
padding, strides and dilations, chunks of positions and of filter rows, odd channels,
batches); the checks that fail before writing; staged and eager runs agreeing to the bit.

On a CPU without AVX-512 BF16 there is no such lowering: the tests then check that the
rules decline and NumPy's kernel (float32 copies) runs instead; that branch is also forced
here by taking the instructions away (`test_without_the_instructions_numpy_runs`)."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops, rule_for
from stageflow.codegen.lowered.conv.bfloat16 import (
    Conv2dBfloat16,
    Conv2dFilterGradientBfloat16,
    Conv2dInputGradientBfloat16,
)
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.runtime.eager_kernels import KERNELS

BF16 = np.dtype(ml_dtypes.bfloat16)
HAS_BF16 = gemm_bf16.host_available()
LOWERINGS = {"conv2d": Conv2dBfloat16, "conv2d_input_gradient": Conv2dInputGradientBfloat16,
             "conv2d_filter_gradient": Conv2dFilterGradientBfloat16}
_compiled: dict[tuple, CompiledOp] = {}


def spec_for(name: str, arrays: list[np.ndarray], **params) -> OpSpec:
    inputs = tuple(ShapedType(a.shape, a.dtype) for a in arrays)
    return OpSpec(name, inputs, (REGISTRY[name].shape_rule(*inputs, **params),), params)


def compiled(spec: OpSpec) -> CompiledOp:
    if spec.key not in _compiled:
        op = compile_ops([spec])[0]
        assert op is not None, f"no lowering for {spec}"
        _compiled[spec.key] = op
    return _compiled[spec.key]


def values(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(BF16)


def run(name: str, arrays: list[np.ndarray], **params) -> np.ndarray:
    """The op compiled alone and called on `arrays`; its status must be 0 (it ran, not the
    NumPy kernel it would fall back to)."""
    spec = spec_for(name, arrays, **params)
    assert isinstance(rule_for(spec), LOWERINGS[name])
    out = np.empty(spec.outputs[0].shape, BF16)
    assert compiled(spec).call(arrays, [out]) == 0
    return out


def assert_rounded(name: str, got: np.ndarray, arrays: list[np.ndarray], terms: int,
                   **params) -> None:
    """`got` against the op in float64 of the same bfloat16 operands: within bfloat16's
    rounding of the result (2**-8 relative) plus the float32 sums' rounding (terms *
    2**-22 of the sum of the terms' magnitudes, the op on the operands' absolute values);
    the input gradient rounds each window's contribution once more before adding them."""
    kernel = REGISTRY[name].kernel
    want = kernel(*[a.astype(np.float64) for a in arrays], **params)
    spread = kernel(*[np.abs(a.astype(np.float64)) for a in arrays], **params)
    extra = 2**-8 if name == "conv2d_input_gradient" else 0.0
    assert got.dtype == BF16 and got.shape == want.shape
    error = np.abs(got.astype(np.float64) - want)
    bound = 2**-8 * np.abs(want) + (terms * 2**-22 + extra) * spread + 1e-30
    assert (error <= bound).all(), float((error / bound).max())


# (batch, height, width, channels, outputs, filter, strides, dilations, padding)
CASES = {
    "3x3 SAME": (2, 9, 7, 5, 6, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    "3x3/2 VALID, many outputs": (1, 10, 10, 3, 33, (3, 3), (2, 2), (1, 1), ((0, 0), (0, 0))),
    "uneven strides, dilations and padding": (3, 8, 11, 7, 17, (2, 3), (2, 1), (2, 1),
                                              ((1, 0), (2, 1))),
    "1x1 in place": (2, 6, 5, 9, 35, (1, 1), (1, 1), (1, 1), ((0, 0), (0, 0))),
    "1x1/2": (2, 6, 6, 9, 35, (1, 1), (2, 2), (1, 1), ((0, 0), (0, 0))),
    "5x5 over a 5x5 image": (1, 5, 5, 4, 4, (5, 5), (1, 1), (1, 1), ((2, 2), (2, 2))),
    "window wider than the image": (2, 3, 2, 1, 1, (3, 3), (1, 1), (1, 2), ((1, 1), (2, 2))),
    # Tasks over the cores, each several chunks of positions (conv2d, the input
    # gradient); on a few cores, a chunk per filter row (the filter gradient).
    "chunks": (4, 40, 40, 64, 40, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    "1x1 in place, in tasks": (4, 32, 32, 64, 40, (1, 1), (1, 1), (1, 1), ((0, 0), (0, 0))),
}


@pytest.mark.parametrize("case", CASES)
def test_the_three_ops_against_float64(case):
    batch, height, width, channels, outputs, window, strides, dilations, padding = CASES[case]
    geometry = {"strides": strides, "padding": padding, "dilations": dilations}
    x = values((batch, height, width, channels), 1)
    w = values((*window, channels, outputs), 2)
    forward = spec_for("conv2d", [x, w], **geometry)
    g = values(forward.outputs[0].shape, 3)
    ops = [("conv2d", [x, w], {}, window[0] * window[1] * channels),
           ("conv2d_input_gradient", [g, w], {"input_size": (height, width)},
            window[0] * window[1] * outputs),
           ("conv2d_filter_gradient", [x, g], {"filter_size": window},
            batch * g.shape[1] * g.shape[2])]
    for name, arrays, size, terms in ops:
        spec = spec_for(name, arrays, **size, **geometry)
        if not HAS_BF16:
            assert rule_for(spec) is None
            continue
        got = run(name, arrays, **size, **geometry)
        assert_rounded(name, got, arrays, terms, **size, **geometry)


def test_nan_reaches_the_windows_that_read_it():
    """A NaN in the input reaches the outputs whose windows read it (the copied windows,
    the gemm); one in the cotangent reaches the input pixels its window read (col2im's
    float32 sums, rounded to a bfloat16 NaN) and every filter tap (the filter
    gradient): where the float64 reference has them, and nowhere else."""
    x, w = values((2, 7, 6, 3), 1), values((3, 3, 3, 5), 2)
    geometry = {"strides": (2, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    g = values((2, 4, 6, 5), 3)
    x[1, 3, 2, 1] = np.nan
    g[0, 2, 4, 3] = np.nan
    ops = [("conv2d", [x, w], {}), ("conv2d_input_gradient", [g, w], {"input_size": (7, 6)}),
           ("conv2d_filter_gradient", [x, g], {"filter_size": (3, 3)})]
    for name, arrays, size in ops:
        if not HAS_BF16:
            assert rule_for(spec_for(name, arrays, **size, **geometry)) is None
            continue
        got = run(name, arrays, **size, **geometry).astype(np.float64)
        want = REGISTRY[name].kernel(*[a.astype(np.float64) for a in arrays], **size,
                                     **geometry)
        assert np.isnan(want).any() and not np.isnan(want).all()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_without_the_instructions_numpy_runs(monkeypatch):
    """Where the CPU lacks AVX-512 BF16 the rules decline bfloat16 (the float32 ones still
    lower) and a staged conv and its gradients run NumPy's kernels: their numbers, to the
    bit. (The compiled input gradient rounds each window's contribution to bfloat16 before
    adding them, NumPy's does not: where the instructions are, their results differ.)"""
    x, w = values((2, 7, 6, 3), 1), values((3, 2, 3, 4), 2)
    geometry = {"strides": (2, 1), "padding": ((1, 1), (0, 1)), "dilations": (1, 1)}
    g = values(REGISTRY["conv2d"].shape_rule(ShapedType(x.shape, BF16),
                                             ShapedType(w.shape, BF16), **geometry).shape, 3)
    ops = [("conv2d", [x, w], {}), ("conv2d_input_gradient", [g, w], {"input_size": (7, 6)}),
           ("conv2d_filter_gradient", [x, g], {"filter_size": (3, 2)})]
    numpy = [REGISTRY[name].kernel(*arrays, **size, **geometry) for name, arrays, size in ops]

    def step(x, w, g):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = sf.nn.conv2d(x, w, (2, 1), [[0, 0], [1, 1], [0, 1], [0, 0]])
        return [y, *tape.gradient(y, [x, w], output_gradients=g)]

    def staged() -> list[np.ndarray]:
        return [t.numpy() for t in sf.function(step)(*map(sf.constant, (x, w, g)))]

    if HAS_BF16:
        assert (staged()[1] != numpy[1]).any()
    monkeypatch.setattr(gemm_bf16, "available", lambda features: False)
    for name, arrays, size in ops:
        spec = spec_for(name, arrays, **size, **geometry)
        assert rule_for(spec) is None and compile_ops([spec]) == [None]
        as_float = spec_for(name, [a.astype(np.float32) for a in arrays], **size, **geometry)
        assert rule_for(as_float) is not None
    for got, want in zip(staged(), numpy, strict=True):
        np.testing.assert_array_equal(got, want)


def test_bad_operands_fail_with_a_status_code_before_writing():
    """Channels that differ, a cotangent of other positions, batches that differ, a
    strided view: the op returns the failing argument's 1-based index (so NumPy's kernel
    runs and raises) and leaves its output as it was."""
    x, w = values((2, 6, 6, 3), 1), values((3, 3, 3, 4), 2)
    geometry = {"strides": (2, 2), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    g = values((2, 3, 3, 4), 3)
    specs = {"conv2d": spec_for("conv2d", [x, w], **geometry),
             "conv2d_input_gradient": spec_for("conv2d_input_gradient", [g, w],
                                               input_size=(6, 6), **geometry),
             "conv2d_filter_gradient": spec_for("conv2d_filter_gradient", [x, g],
                                                filter_size=(3, 3), **geometry)}
    if not HAS_BF16:
        assert all(rule_for(spec) is None for spec in specs.values())
        return
    generic = {name: compile_ops([OpSpec(name, tuple(ShapedType((None,) * 4, BF16)
                                                     for _ in spec.inputs),
                                         (ShapedType((None,) * 4, BF16),), spec.params)])[0]
               for name, spec in specs.items()}
    failures = [("conv2d", [values((2, 6, 6, 5), 1), w], (2, 3, 3, 4), 2),
                ("conv2d", [x[:, :, ::2], w], (2, 3, 2, 4), 1),
                ("conv2d", [x, w], (2, 3, 4, 4), 3),
                ("conv2d_input_gradient", [values((2, 3, 4, 4), 3), w], (2, 6, 6, 3), 1),
                ("conv2d_input_gradient", [values((2, 3, 3, 5), 3), w], (2, 6, 6, 3), 2),
                ("conv2d_filter_gradient", [x, values((2, 3, 4, 4), 3)], (3, 3, 3, 4), 2),
                ("conv2d_filter_gradient", [x[:1].copy(), g], (3, 3, 3, 4), 2)]
    for name, arrays, shape, code in failures:
        out = np.full(shape, 7.0, BF16)
        assert generic[name].call(arrays, [out]) == code, name
        assert (out == 7.0).all()


def test_staged_and_eager_convolutions_agree():
    """Staged, a conv and its gradients are the compiled ops; eagerly, bfloat16
    convolutions large enough run the same compiled ops once they are ready: the same
    numbers, to the bit."""
    x, w = sf.constant(values((2, 12, 10, 8), 1)), sf.constant(values((3, 3, 8, 16), 2))
    g = sf.constant(values((2, 6, 5, 16), 3))

    def step(x, w, g):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = sf.nn.conv2d(x, w, 2, "SAME")
        return [y, *tape.gradient(y, [x, w], output_gradients=g)]

    staged = [t.numpy() for t in sf.function(step)(x, w, g)]
    step(x, w, g)  # the first calls start the eager ops' compiles
    KERNELS.settle()
    eager = [t.numpy() for t in step(x, w, g)]
    for s, e in zip(staged, eager, strict=True):
        assert s.dtype == BF16
        np.testing.assert_array_equal(e, s)
    if HAS_BF16:
        geometry = {"strides": (2, 2), "padding": ((0, 1), (0, 1)), "dilations": (1, 1)}
        arrays = [x.numpy(), w.numpy()]
        assert_rounded("conv2d", staged[0], arrays, 72, **geometry)


# A child process: the three ops compiled and run once, then run again with its address
# space capped just above what it uses (glibc's mmap threshold fixed, so that the ops'
# scratch is mapped afresh and the cap refuses it), then once more uncapped. Prints the
# status codes and whether the last results equal the first.
_NO_MEMORY_CHILD = r"""
import ctypes, resource
import ml_dtypes
import numpy as np
from stageflow.codegen.lowered.compile import OpSpec, compile_ops
from stageflow.core.primitive import REGISTRY, ShapedType

ctypes.CDLL(None).mallopt(-3, 1 << 17)  # M_MMAP_THRESHOLD
bf16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)
x, w = (rng.standard_normal(s).astype(bf16) for s in ((4, 64, 64, 32), (3, 3, 32, 32)))
g = rng.standard_normal((4, 64, 64, 32)).astype(bf16)
geometry = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
calls = []
for name, arrays, size in (("conv2d", [x, w], {}),
                           ("conv2d_input_gradient", [g, w], {"input_size": (64, 64)}),
                           ("conv2d_filter_gradient", [x, g], {"filter_size": (3, 3)})):
    unknown = tuple(ShapedType((None,) * 4, bf16) for _ in arrays)
    params = {**size, **geometry}
    spec = OpSpec(name, unknown, (ShapedType((None,) * 4, bf16),), params)
    shape = REGISTRY[name].shape_rule(*(ShapedType(a.shape, bf16) for a in arrays),
                                      **params).shape
    calls.append((compile_ops([spec])[0], arrays, shape))
first = []
for op, arrays, shape in calls:
    out = np.empty(shape, bf16)
    assert op.call(arrays, [out]) == 0
    first.append(out)
outs = [np.empty(shape, bf16) for _, _, shape in calls]
with open("/proc/self/status") as status:
    used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 20), hard))
capped = [op.call(arrays, [out]) for (op, arrays, _), out in zip(calls, outs)]
resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
again = [op.call(arrays, [out]) for (op, arrays, _), out in zip(calls, outs)]
print(capped, again, all((a.view(np.int16) == b.view(np.int16)).all()
                         for a, b in zip(first, outs)))
"""


def test_without_memory_the_ops_return_their_code_and_recover():
    """Where malloc fails (the scratch, the float32 sums, the gemm's packing), each op
    returns 1 + its argument count, having freed what it took; uncapped again, the same
    ops give the same results."""
    if not HAS_BF16:
        x = values((1, 4, 4, 2), 1)
        assert rule_for(spec_for("conv2d", [x, values((3, 3, 2, 2), 2)], strides=(1, 1),
                                 padding=((1, 1), (1, 1)), dilations=(1, 1))) is None
        return
    child = subprocess.run([sys.executable, "-c", _NO_MEMORY_CHILD], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split("\n")[-2] == "[4, 4, 4] [0, 0, 0] True"
