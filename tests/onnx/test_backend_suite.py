"""ONNX's own backend tests (`onnx.backend.test.BackendTest`) on stageflow's backend: a fixed,
representative slice of its node, simple and PyTorch cases, compiled, with the cases of
`stageflow/onnx/exclusions.txt` left out; and a few cases compiled ahead of time into
libraries a C program calls, as the campaign's ``--aot`` mode does. The whole suite is the
campaign's (``python -m stageflow.testing.onnx_suite``)."""

from __future__ import annotations

import re

import onnx.backend.test
import pytest

from stageflow.onnx.backend import StageflowBackend
from stageflow.testing.onnx_suite import KINDS, cases, exclusion, exclusions, run_case

# A case per family: elementwise and broadcasting, matmul, convolution and pooling,
# normalisation, shape and indexing, reductions, control flow (If, Scan, a Loop in a function
# body), and the model kinds kept in files. test_equal_string is excluded (strings).
SLICE = (
    "test_add", "test_equal_string", "test_where_example", "test_matmul_2d",
    "test_conv_with_strides_padding", "test_maxpool_2d_default", "test_batchnorm_example",
    "test_reshape_reordered_all_dims", "test_slice", "test_reduce_sum_keepdims_example",
    "test_if", "test_scan9_sum", "test_range_float_type_positive_delta_expanded",
    "test_single_relu_model", "test_Conv2d",
)

ALL_CASES = cases(KINDS, None)


def _selected(test: str) -> bool:
    """Whether the suite's test `test` (the case's name and the device's) runs here."""
    case, _, device = test.rpartition("_")
    return device == "cpu" and case in SLICE and exclusion(case) is None


backend_test = onnx.backend.test.BackendTest(StageflowBackend, __name__)
SUITE = backend_test.test_cases
for _case in SUITE.values():  # the slice alone, not thousands of skipped tests
    for _test in [t for t in vars(_case) if t.startswith("test_") and not _selected(t)]:
        delattr(_case, _test)
globals().update(SUITE)


def test_the_excluded_case_of_the_slice_is_not_run():
    generated = {name for case in SUITE.values() for name in vars(case)
                 if name.startswith("test_")}
    assert "test_equal_string_cpu" not in generated
    assert generated == {f"{name}_cpu" for name in SLICE} - {"test_equal_string_cpu"}


@pytest.mark.parametrize("pattern", [p for p, _ in exclusions()], ids=lambda p: p.pattern)
def test_each_exclusion_has_a_reason_and_matches_cases(pattern):
    """An exclusion that matches no case of the installed onnx is stale."""
    assert any(pattern.search(case.name) for case in ALL_CASES)


def test_exclusions_are_for_missing_types_and_out_of_scope_domains():
    reasons = {reason for _, reason in exclusions()}
    assert all(re.search(r"stageflow has no( \w+)? (tensors|values)|: out of scope$", r)
               for r in reasons), reasons



@pytest.mark.parametrize("name", ["test_Conv2d", "test_maxpool_2d_default"])
def test_cases_compiled_ahead_of_time_and_called_from_c(name):
    [case] = [c for c in ALL_CASES if c.name == name]
    outcome = run_case(case, mode="aot")
    assert outcome.outcome == "passed", outcome.detail
