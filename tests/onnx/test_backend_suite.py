"""ONNX's own backend tests (`onnx.backend.test.BackendTest`) on stageflow's backend: a fixed,
representative slice of its node, simple and PyTorch cases, compiled, with the cases of
`stageflow/onnx/exclusions.txt` left out; and a few cases compiled ahead of time into
libraries a C program calls, as the campaign's ``--aot`` mode does. The whole suite is the
campaign's (``python -m stageflow.testing.onnx_suite``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import onnx.backend.test
import pytest
from onnx.backend.test.case.test_case import TestCase

import stageflow as sf
from stageflow.onnx.backend import StageflowBackend
from stageflow.testing.onnx_suite import KINDS, cases, exclusion, exclusions, run_case

# A case per family: elementwise and broadcasting, matmul, convolution and pooling,
# normalisation, shape and indexing, reductions, control flow (If, Scan, a Loop in a function
# body, a Loop slicing at its counter), casts and quantization to and from the narrow types,
# and the model kinds kept in files. test_equal_string is excluded (strings).
SLICE = (
    "test_add", "test_equal_string", "test_where_example", "test_matmul_2d",
    "test_conv_with_strides_padding", "test_maxpool_2d_default", "test_batchnorm_example",
    "test_reshape_reordered_all_dims", "test_slice", "test_reduce_sum_keepdims_example",
    "test_if", "test_scan9_sum", "test_loop11",
    "test_range_float_type_positive_delta_expanded",
    "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ", "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0", "test_castlike_INT4_to_FLOAT_expanded",
    "test_quantizelinear_int4", "test_dequantizelinear_e4m3fn_float16",
    "test_single_relu_model", "test_Conv2d",
)

# The module's tests run in one process, which makes ONNX's cases once.
pytestmark = [pytest.mark.xdist_group("onnx-backend-suite"), pytest.mark.slow]


@functools.cache
def all_cases() -> list[TestCase]:
    """Every case of the installed onnx. Made on first use, not at collection: generating
    ONNX's node cases takes seconds, which each of the suite's processes would pay."""
    return cases(KINDS, None)


@functools.cache
def backend_tests() -> dict[str, Callable[[], None]]:
    """ONNX's backend tests (`onnx.backend.test.BackendTest`) on stageflow's backend, by
    name (the case's and the device's: ``test_add_cpu``), each a call that runs it."""
    suite = onnx.backend.test.BackendTest(StageflowBackend, __name__).test_cases
    return {name: getattr(case(name), name) for case in suite.values() for name in vars(case)
            if name.startswith("test_")}


@pytest.mark.parametrize("case", [c for c in SLICE if exclusion(c) is None])
def test_the_case_passes_on_stageflows_backend(case):
    backend_tests()[f"{case}_cpu"]()


def test_the_slice_is_onnxs_and_its_excluded_case_is_not_run():
    assert {f"{case}_cpu" for case in SLICE} <= set(backend_tests())
    assert exclusion("test_equal_string") is not None


@pytest.mark.parametrize("pattern", [p for p, _ in exclusions()], ids=lambda p: p.pattern)
def test_each_exclusion_has_a_reason_and_matches_cases(pattern):
    """An exclusion that matches no case of the installed onnx is stale."""
    assert any(pattern.search(case.name) for case in all_cases())


def test_exclusions_are_for_missing_types_and_out_of_scope_domains():
    reasons = {reason for _, reason in exclusions()}
    assert all(re.search(r"stageflow has no( \w+)? (tensors|values)|: out of scope$", r)
               for r in reasons), reasons


@pytest.mark.parametrize("name", ["test_Conv2d", "test_maxpool_2d_default",
                                  "test_quantizelinear_e4m3fn", "test_cast_FLOAT_to_UINT4"])
def test_cases_compiled_ahead_of_time_and_called_from_c(name):
    [case] = [c for c in all_cases() if c.name == name]
    outcome = run_case(case, mode="aot")
    assert outcome.outcome == "passed", outcome.detail


@pytest.mark.slow
@pytest.mark.parametrize("target", ["aarch64-linux-gnu", "wasm32"])
def test_a_light_model_compiled_for_another_machine(target, aarch64_tools, wasm_tools):
    """ONNX's light SqueezeNet compiled for aarch64 (run under qemu) and for WebAssembly
    (under Node.js) reproduces its reference output, as `--kind real --aot --target T`
    checks every light model."""
    [case] = [c for c in all_cases() if c.name == "test_squeezenet"]
    outcome = run_case(case, mode="aot", target=target)
    assert outcome.outcome == "passed", outcome.detail


@pytest.mark.parametrize("name", ["test_shufflenet", "test_inception_v1"])
def test_a_light_model_placed_on_the_gpu_reproduces_its_reference(name):
    """ONNX's light ShuffleNet (grouped and depthwise convolutions, channel shuffles,
    concats) and Inception v1 (concats of branches, pooling, local response
    normalisation) placed on the suite's first GPU, as `--kind real --gpu` runs every
    light model."""
    [case] = [c for c in all_cases() if c.name == name]
    sf.config.reset_statistics()
    outcome = run_case(case, mode="gpu")
    assert outcome.outcome == "passed", outcome.detail
    assert sf.config.statistics()["host_fallbacks"] == 0  # every op on the GPU's kernels
