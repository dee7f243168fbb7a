"""ONNX control flow: If, Loop and Scan become sf.cond and sf.while_loop regions, read the
enclosing graph's values, and agree with onnxruntime compiled, interpreted and with the
condition known at import. onnxruntime is the reference here: ONNX's NumPy reference stacks
a Loop's scalar scan outputs as [N, 1] (np.vstack) and scans along axis 0 only."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import stageflow as sf

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "control", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(proto: onnx.ModelProto, *feeds: np.ndarray, jit: bool = True) -> None:
    names = [i.name for i in proto.graph.input]
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    expected = session.run(None, dict(zip(names, feeds, strict=True)))
    got = sf.onnx.load(proto, jit=jit)(*feeds)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-6)


def if_model() -> onnx.ModelProto:
    """y = If(sum(x) > 0) then x * w else x - w, both branches reading outer x and w."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"], name="times")],
                             "then", [], [vi("t", F, [3])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"], name="minus")],
                              "else", [], [vi("e", F, [3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then,
                              else_branch=other)]
    return model(nodes, [vi("x", F, [3])], [vi("y", F, [3])],
                 [numpy_helper.from_array(np.array([2, 3, 4], np.float32), "w"),
                  numpy_helper.from_array(np.float32(0), "zero")])


@pytest.mark.parametrize("jit", [True, False])
def test_if_takes_the_branch_of_the_run_time_condition(jit):
    proto = if_model()
    check(proto, np.array([1, 2, 3], np.float32), jit=jit)
    check(proto, np.array([-1, -2, 0], np.float32), jit=jit)


def test_if_is_one_cond_op_with_the_branches_node_names():
    text = sf.onnx.load(if_model()).get_concrete_function().ir("traced")
    assert "sf.cond" in text
    assert 'loc("times"' in text and 'loc("minus"' in text


def test_an_if_known_at_import_runs_its_branch_alone():
    """A condition from initializers folds: no cond op, branches of different shapes."""
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [vi("t", F, [2, 3])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)],
                              "else", [], [vi("e", F, [])])
    proto = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                  [vi("x", F, [2, 3])], [vi("y", F, None)],
                  [numpy_helper.from_array(np.array([False]), "c")])
    loaded = sf.onnx.load(proto)
    assert "sf.cond" not in loaded.get_concrete_function().ir("traced")
    check(proto, np.arange(6, dtype=np.float32).reshape(2, 3))


def loop_model(with_trip_count: bool, with_condition: bool) -> onnx.ModelProto:
    """Loop: state = state * 2 + x (outer) while state's sum < limit, for at most M
    iterations; scan outputs the state and the iteration number."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["state_in", "two"], ["doubled"]),
         helper.make_node("Add", ["doubled", "x"], ["state_out"], name="step"),
         helper.make_node("ReduceSum", ["state_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["i"], ["i_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("state_in", F, [2])],
        [vi("cond_out", B, []), vi("state_out", F, [2]), vi("scan_state", F, [2]),
         vi("i_out", I64, [])])
    body.node.append(helper.make_node("Identity", ["state_out"], ["scan_state"]))
    nodes = [helper.make_node("Loop", ["M" if with_trip_count else "",
                                       "cond" if with_condition else "", "start"],
                              ["final", "states", "steps"], body=body)]
    inputs = [vi("x", F, [2]), vi("start", F, [2])]
    if with_trip_count:
        inputs.append(vi("M", I64, []))
    if with_condition:
        inputs.append(vi("cond", B, []))
    return model(nodes, inputs, [vi("final", F, [2]), vi("states", F, None),
                                 vi("steps", I64, None)],
                 [numpy_helper.from_array(np.float32(2), "two"),
                  numpy_helper.from_array(np.float32(100), "limit")])


@pytest.mark.parametrize("jit", [True, False])
def test_loop_stops_at_its_trip_count_or_condition(jit):
    x, start = np.array([1, 2], np.float32), np.array([0.5, 0], np.float32)
    proto = loop_model(with_trip_count=True, with_condition=True)
    check(proto, x, start, np.array(3), np.array(True), jit=jit)  # the trip count ends it
    check(proto, x, start, np.array(50), np.array(True), jit=jit)  # the condition ends it
    check(proto, x, start, np.array(50), np.array(False), jit=jit)  # no iteration


def test_loop_without_trip_count_runs_while_its_condition_holds():
    check(loop_model(with_trip_count=False, with_condition=True),
          np.array([1, 2], np.float32), np.array([0.5, 0], np.float32), np.array(True))


def test_loop_is_one_while_op():
    loaded = sf.onnx.load(loop_model(with_trip_count=True, with_condition=False))
    text = loaded.get_concrete_function().ir("traced")
    assert text.count("sf.while") == 1 and 'loc("step"' in text


def scan_model(directions: tuple[int, int], output_axis: int) -> onnx.ModelProto:
    """Scan: a running sum over the rows of x (scan axis 1 of a [2, 4, 3] input) and the
    row products with the outer w, in the given input and output directions."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "row"], ["sum_out"]),
         helper.make_node("Mul", ["row", "w"], ["scaled"])],
        "body", [vi("sum_in", F, [2, 3]), vi("row", F, [2, 3])],
        [vi("sum_out", F, [2, 3]), vi("scaled", F, [2, 3])])
    node = helper.make_node("Scan", ["initial", "x"], ["total", "rows"], body=body,
                            num_scan_inputs=1, scan_input_axes=[1],
                            scan_input_directions=[directions[0]],
                            scan_output_directions=[directions[1]],
                            scan_output_axes=[output_axis])
    return model([node], [vi("initial", F, [2, 3]), vi("x", F, [2, 4, 3])],
                 [vi("total", F, [2, 3]), vi("rows", F, None)],
                 [numpy_helper.from_array(np.array([1, -1, 2], np.float32), "w")])


@pytest.mark.parametrize(("directions", "output_axis"), [((0, 0), 0), ((1, 0), 2),
                                                         ((0, 1), -1)])
def test_scan_over_an_axis_in_each_direction(directions, output_axis):
    rng = np.random.default_rng(0)
    check(scan_model(directions, output_axis), rng.normal(size=(2, 3)).astype(np.float32),
          rng.normal(size=(2, 4, 3)).astype(np.float32))


def test_scan_interpreted():
    rng = np.random.default_rng(1)
    check(scan_model((0, 0), 0), rng.normal(size=(2, 3)).astype(np.float32),
          rng.normal(size=(2, 4, 3)).astype(np.float32), jit=False)


def test_if_branches_of_different_ranks_are_a_clear_error():
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [vi("t", F, [2, 3])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)],
                              "else", [], [vi("e", F, [])])
    proto = model([helper.make_node("If", ["c"], ["y"], name="ranks", then_branch=then,
                                    else_branch=other)],
                  [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F, None)])
    with pytest.raises(sf.onnx.OnnxError, match=r"'ranks' \(If, opset 17\).*same dtypes"):
        sf.onnx.load(proto).get_concrete_function()
