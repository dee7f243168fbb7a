"""`sf.onnx.load`: models from a path, bytes or a ModelProto, symbolic dims as unknown ones,
weights as variables a tape trains and a checkpoint keeps, external data files, node names
as IR locations, and a clear error (node, op, opset, what to do) for every bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info


def mlp(opset: int = 17, batch: str | int = "batch") -> onnx.ModelProto:
    """y = relu(x @ w + b) with x [batch, 4]: named nodes, weights as initializers."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
             helper.make_node("Add", ["h", "b"], ["z"], name="bias"),
             helper.make_node("Relu", ["z"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "mlp", [vi("x", F, [batch, 4])], [vi("y", F, [batch, 3])],
                              [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def inputs(batch: int = 5) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(batch, 4)).astype(np.float32)


def reference(proto: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ReferenceEvaluator(proto).run(None, {"x": x})[0]


def test_a_path_bytes_and_a_model_proto_load_the_same_model(tmp_path):
    proto = mlp()
    onnx.save(proto, tmp_path / "mlp.onnx")
    x = inputs()
    for source in (str(tmp_path / "mlp.onnx"), tmp_path / "mlp.onnx",
                   proto.SerializeToString(), proto):
        np.testing.assert_allclose(sf.onnx.load(source)(x).numpy(), reference(proto, x),
                                   rtol=1e-5, atol=1e-6)


def test_symbolic_dims_become_unknown_and_any_batch_runs():
    model = sf.onnx.load(mlp())
    assert [tuple(spec.shape) for spec in model.input_signature] == [(None, 4)]
    assert model.input_names == ("x",) and model.output_names == ("y",)
    for batch in (1, 7):
        x = inputs(batch)
        np.testing.assert_allclose(model(x).numpy(), reference(mlp(), x), rtol=1e-5, atol=1e-6)


def test_input_shapes_fix_a_symbolic_dim():
    model = sf.onnx.load(mlp(), input_shapes={"x": (2, 4)})
    assert [tuple(spec.shape) for spec in model.input_signature] == [(2, 4)]


def test_eager_interpreted_and_compiled_agree():
    x = inputs()
    compiled = sf.onnx.load(mlp())(x).numpy()
    interpreted = sf.onnx.load(mlp(), jit=False)(x).numpy()
    np.testing.assert_allclose(interpreted, compiled, rtol=1e-6, atol=1e-6)


def test_node_names_are_the_ir_locations():
    text = sf.onnx.load(mlp()).get_concrete_function().ir("traced")
    for name in ("dense", "bias", "act"):
        assert f'loc("{name}"("mlp.onnx"' in text


def test_weights_as_variables_fine_tune_and_checkpoint(tmp_path):
    model = sf.onnx.load(mlp(), weights="variables")
    assert sorted(v.name for v in model.trainable_variables) == ["b", "w"]
    x, target = inputs(), np.full((5, 3), 0.5, np.float32)
    optimizer = sf.optimizers.SGD(0.1)

    def loss() -> sf.Tensor:
        return sf.reduce_mean(sf.square(model(x) - target))

    before = float(loss())
    for _ in range(5):
        with sf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, model.trainable_variables)
        assert all(g is not None for g in grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    tuned = float(loss())
    assert tuned < before
    path = sf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    fresh = sf.onnx.load(mlp(), weights="variables")
    assert float(sf.reduce_mean(sf.square(fresh(x) - target))) == pytest.approx(before)
    sf.train.Checkpoint(model=fresh).restore(path).assert_consumed()
    np.testing.assert_allclose(fresh(x).numpy(), model(x).numpy(), rtol=1e-6)


def test_external_data_files_load(tmp_path):
    proto = mlp()
    onnx.save(mlp(), tmp_path / "big.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="big.weights", size_threshold=0)
    assert (tmp_path / "big.weights").exists()
    x = inputs()
    np.testing.assert_allclose(sf.onnx.load(tmp_path / "big.onnx")(x).numpy(),
                               reference(proto, x), rtol=1e-5, atol=1e-6)


# -- bad inputs: each a clear OnnxError, never a crash ---------------------------------------


def test_missing_external_data_names_the_file_and_what_to_do(tmp_path):
    onnx.save(mlp(), tmp_path / "big.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="big.weights", size_threshold=0)
    (tmp_path / "big.weights").unlink()
    with pytest.raises(sf.onnx.OnnxError, match=r"external data files.*beside the model"):
        sf.onnx.load(tmp_path / "big.onnx")


@pytest.mark.parametrize("content", [b"", b"\x08\x01\x12\x03abc" * 3, b"not a model at all"])
def test_foreign_files_are_not_models(tmp_path, content):
    path = tmp_path / "foreign.onnx"
    path.write_bytes(content)
    with pytest.raises(sf.onnx.OnnxError, match="is not an ONNX model"):
        sf.onnx.load(path)


def test_a_truncated_file_and_truncated_bytes(tmp_path):
    data = mlp().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(sf.onnx.OnnxError, match="not an ONNX model, or is truncated"):
        sf.onnx.load(path)
    with pytest.raises(sf.onnx.OnnxError, match="not an ONNX model, or are truncated"):
        sf.onnx.load(data[: len(data) // 2])


def test_a_missing_file():
    with pytest.raises(FileNotFoundError, match="no file"):
        sf.onnx.load("/nonexistent/model.onnx")


def single(node: onnx.NodeProto, opsets=(("", 17),), shapes=([3], [3])) -> onnx.ModelProto:
    inputs_ = [vi(name, F, shape) for name, shape in zip(node.input, shapes, strict=False)]
    graph = helper.make_graph([node], "bad", inputs_, [vi(node.output[0], F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_an_unknown_op_names_the_node_and_the_op_list():
    proto = single(helper.make_node("Frobnicate", ["x"], ["y"], name="mystery"))
    with pytest.raises(sf.onnx.OnnxError, match=r"'mystery' \(Frobnicate, opset 17\).*"
                                                r"no converter.*stageflow onnx-ops"):
        sf.onnx.load(proto).get_concrete_function()


def test_an_unknown_domain_says_it_holds_custom_ops():
    proto = single(helper.make_node("FusedGemm", ["x"], ["y"], name="fused",
                                    domain="com.microsoft"),
                   opsets=(("", 17), ("com.microsoft", 1)))
    with pytest.raises(sf.onnx.OnnxError, match=r"'fused' \(FusedGemm, opset 1\).*domain "
                                                r"'com.microsoft'.*standard ONNX ops"):
        sf.onnx.load(proto).get_concrete_function()


def test_a_too_new_opset_gives_the_range_imported():
    proto = single(helper.make_node("Relu", ["x"], ["y"]), opsets=(("", 99),))
    with pytest.raises(sf.onnx.OnnxError, match=r"opset 99; stageflow imports opsets 13 to "
                                                r"\d+.*export the model at opset"):
        sf.onnx.load(proto)


def test_inconsistent_shapes_name_the_node_and_the_shapes():
    proto = single(helper.make_node("Add", ["x", "z"], ["y"], name="sum"), shapes=([3, 4], [5]))
    with pytest.raises(sf.onnx.OnnxError, match=r"'sum' \(Add, opset 17\).*\(3, 4\) and "
                                                r"\(5,\).*check_model"):
        sf.onnx.load(proto).get_concrete_function()


def test_a_non_tensor_input_is_refused():
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "seq",
                              [helper.make_tensor_sequence_value_info("s", F, [3])],
                              [vi("y", F, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(sf.onnx.OnnxError, match="'s'.*sequence_type.*tensor inputs only"):
        sf.onnx.load(proto)


def test_a_type_stageflow_lacks_is_named():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "f6",
                              [vi("x", TensorProto.FLOAT6E2M3, [3])],
                              [vi("y", TensorProto.FLOAT6E2M3, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(sf.onnx.OnnxError, match="FLOAT6E2M3, which stageflow has no "
                                                "tensors of"):
        sf.onnx.load(proto)


def test_an_old_opset_is_converted_up():
    x = inputs()
    np.testing.assert_allclose(sf.onnx.load(mlp(opset=9))(x).numpy(), reference(mlp(), x),
                               rtol=1e-5, atol=1e-6)


def test_a_batched_scan_of_opset_8_names_the_opset_to_export_at():
    body = helper.make_graph([helper.make_node("Add", ["s", "row"], ["t"]),
                              helper.make_node("Identity", ["t"], ["out"])], "body",
                             [vi("s", F, [2]), vi("row", F, [2])],
                             [vi("t", F, [2]), vi("out", F, [2])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["", "initial", "x"], ["y", "z"], body=body,
                          num_scan_inputs=1)], "scan8",
        [vi("initial", F, [1, 2]), vi("x", F, [1, 3, 2])],
        [vi("y", F, [1, 2]), vi("z", F, [1, 3, 2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    with pytest.raises(sf.onnx.OnnxError, match="opset 8, whose Scan has a batch axis.*"
                                                "export the model at opset 9 or newer"):
        sf.onnx.load(proto)
