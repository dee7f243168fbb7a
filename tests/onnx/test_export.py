"""`sf.onnx.export`: staged functions written as ONNX models that ONNX's checker accepts
(``full_check``) and ONNX Runtime runs to stageflow's numbers, control flow included; what
cannot be exported is refused naming the op and the user's line. Random programs of the
differential campaign are a slice of `python -m stageflow.testing.onnx_export`.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings

import stageflow as sf
from stageflow.core.primitive import REGISTRY
from stageflow.onnx.export_ops import RULES
from stageflow.onnx.exporter import DEFAULT_OPSET
from stageflow.primitives.collective import all_reduce_p
from stageflow.primitives.elementwise import ElementwisePrimitive
from stageflow.testing.onnx_export import check_program, session
from stageflow.testing.random_programs import campaign_programs

onnxruntime.set_default_logger_severity(3)


def run(function, specs, *args, **options):
    """Export `function` for `specs`, check the model, run it on `args` with ONNX Runtime
    and compare each result with stageflow's (the same dtype, close values)."""
    model = sf.onnx.export(function, specs, **options)
    onnx.checker.check_model(model, full_check=True)
    runner = session(model)
    got = runner.run(None, {i.name: np.asarray(a) for i, a in zip(runner.get_inputs(), args,
                                                                   strict=True)})
    want = function(*args)
    want = want if isinstance(want, tuple | list) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return model


def test_layers_and_structure_with_unknown_batch(tmp_path):
    v = sf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
    w = np.linspace(-1, 1, 3 * 3 * 3 * 2, dtype=np.float32).reshape(3, 3, 3, 2)

    @sf.function
    def f(x, images, labels):
        y = sf.nn.softmax(sf.matmul(x, v) + 1.0) * sf.cast(labels[:, None], sf.float32)
        picked = sf.gather(y, sf.argsort(labels), axis=0)
        features = sf.nn.max_pool2d(sf.nn.conv2d(images, w, 1, "SAME"), 2, 2, "VALID")
        return sf.reverse(picked, [1])[::2], sf.reduce_max(features, axis=(1, 2)), \
            sf.cumsum(labels, reverse=True), sf.reshape(x, [-1])

    specs = [sf.TensorSpec([None, 4], sf.float32), sf.TensorSpec([None, 4, 4, 3], sf.float32),
             sf.TensorSpec([None], sf.int32)]
    rng = np.random.default_rng(0)
    x, images = rng.normal(size=(5, 4)).astype(np.float32), \
        rng.normal(size=(5, 4, 4, 3)).astype(np.float32)
    run(f, specs, x, images, np.array([3, -1, 3, 0, 2], np.int32))
    sf.onnx.export(f, specs, tmp_path / "f.onnx")
    model = onnx.load(tmp_path / "f.onnx")
    assert model.opset_import[0].version == DEFAULT_OPSET
    assert [i.name for i in model.graph.input] == ["x", "images", "labels"]
    named = sf.function(f.python_function, input_signature=[
        sf.TensorSpec([None, 4], sf.float32, name="features"), *specs[1:]])
    assert sf.onnx.export(named).graph.input[0].name == "features"


def test_value_dependent_shapes_scatters_and_special_functions():
    @sf.function
    def f(x, codes):
        values, positions = sf.unique(codes)
        picked = sf.boolean_mask(x, x > 0)
        added = sf.tensor_scatter_nd_add(x, sf.constant([[0], [0], [-1]]), x[:3] * 2)
        return values, positions, picked, sf.gather_nd(added, sf.constant([[0, 1], [-1, 2]])), \
            sf.math.lgamma(sf.abs(x) + 0.5), sf.math.atan2(x, x[::-1])

    x = np.linspace(-2, 2, 12).reshape(4, 3)
    run(f, [sf.TensorSpec([None, 3], sf.float64), sf.TensorSpec([None], sf.int32)], x,
        np.array([3, 1, 3, 0, 1], np.int32))


def test_gradients_of_a_convolution():
    def loss(x, w):
        return sf.reduce_sum(sf.tanh(sf.nn.conv2d(x, w, 2, "VALID", dilations=1)))

    f = sf.function(lambda x, w: sf.grad(loss, argnums=(0, 1))(x, w))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 8, 8, 3)).astype(np.float32)
    w = rng.normal(size=(3, 3, 3, 4)).astype(np.float32)
    model = sf.onnx.export(f, [sf.TensorSpec([None, 8, 8, 3], sf.float32),
                               sf.TensorSpec([3, 3, 3, 4], sf.float32)])
    got = session(model).run(None, {"x": x, "w": w})
    for g, want in zip(got, f(x, w), strict=True):
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("window", "strides", "padding"),
                         [(3, 2, "SAME"), (2, 2, "VALID"), (3, 1, "SAME"), (2, 3, "VALID")])
def test_the_gradient_of_max_pooling(window, strides, padding):
    """max_pool_gradient as ONNX ops, tap by tap: ties (integer values) go to the first
    maximal element, padding to none; onnxruntime gives stageflow's numbers."""
    def loss(x):
        return sf.reduce_sum(sf.nn.max_pool2d(x, window, strides, padding) ** 2)

    f = sf.function(lambda x: sf.grad(loss)(x))
    x = np.round(np.random.default_rng(2).normal(size=(2, 7, 8, 3)) * 2).astype(np.float32)
    model = sf.onnx.export(f, [sf.TensorSpec([None, 7, 8, 3], sf.float32)])
    (got,) = session(model).run(None, {"x": x})
    np.testing.assert_array_equal(got, f(x).numpy())


def test_a_grouped_convolution_and_its_input_gradient_keep_their_groups():
    """conv2d's feature groups are Conv's `group`, its input gradient's ConvTranspose's."""
    w = np.random.default_rng(2).normal(size=(3, 3, 2, 6)).astype(np.float32)

    def loss(x):
        return sf.reduce_sum(sf.tanh(sf.nn.conv2d(x, w, 2, "SAME")))

    f = sf.function(sf.grad(loss))
    model = sf.onnx.export(f, [sf.TensorSpec([None, 7, 7, 6], sf.float32)])
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(3).normal(size=(2, 7, 7, 6)).astype(np.float32)
    (got,) = session(model).run(None, {model.graph.input[0].name: x})
    np.testing.assert_allclose(got, f(x).numpy(), rtol=1e-4, atol=1e-4)
    groups = sorted((node.op_type, [a.i for a in node.attribute if a.name == "group"])
                    for node in model.graph.node if node.op_type in ("Conv", "ConvTranspose"))
    assert groups == [("Conv", [3]), ("ConvTranspose", [3])]


def test_control_flow_becomes_if_and_loop():
    @sf.function
    def f(x, n):
        y = sf.cond(sf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x - 1.0)
        _, y = sf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, sf.tanh(y) + x),
                             (sf.constant(0), y))
        return sf.switch_case(n, [lambda: y, lambda: y * 3.0, lambda: -y])

    specs = [sf.TensorSpec([None], sf.float32), sf.TensorSpec([], sf.int32)]
    model = None
    for n in (0, 1, 2, 7, -3):  # out of range, either way: the last branch
        for x in (np.array([1.0, -0.5], np.float32), np.array([-3.0], np.float32)):
            model = run(f, specs, x, np.array(n, np.int32))
    ops = {node.op_type for node in model.graph.node}
    assert {"If", "Loop"} <= ops
    (loop,) = (node for node in model.graph.node if node.op_type == "Loop")
    assert "test_export.py" in loop.doc_string and "sf.while_loop" in loop.doc_string


def test_broadcast_to_an_empty_shape():
    """ONNX Runtime's optimizer once kept a [1, 1] operand's Expand to [0, 0] at [1, 1]."""
    f = sf.function(lambda b: (sf.broadcast_to(b > 0, (0, 0)), sf.broadcast_to(b, (2, 0, 1))))
    run(f, [sf.TensorSpec([None, 1], sf.uint8)], np.ones((1, 1), np.uint8))


@pytest.mark.parametrize("dtype", [sf.float8_e4m3fn, sf.float8_e4m3fnuz, sf.float8_e5m2,
                                   sf.float8_e5m2fnuz, sf.int4, sf.uint4, sf.int2, sf.uint2],
                         ids=lambda d: d.name)
def test_casts_to_narrow_dtypes_overflow_as_stageflows(dtype):
    """Out of range, float8 gives NaN or infinity (saturate=0), integers wrap into the
    narrow integers and floats give 0 (as ml_dtypes' casts do), as sf.cast does, though
    ONNX's default Cast clips (and onnxruntime's rounds to int4)."""
    x = np.concatenate([np.linspace(-300, 300, 97), [1e6, -1e6, np.inf, -np.inf, np.nan, 2.5,
                                                     -2.5, 7.9, -8.9, 0.0, -0.0]])
    x = x.astype(np.float32)
    f = sf.function(lambda v: [sf.cast(sf.cast(v, dtype), sf.float32),
                               sf.cast(sf.cast(sf.cast(v, sf.int64), dtype), sf.int64)])
    model = sf.onnx.export(f, [sf.TensorSpec([None], sf.float32)])
    onnx.checker.check_model(model, full_check=True)
    with np.errstate(invalid="ignore", over="ignore"):
        for got, want in zip(session(model).run(None, {"v": x}), f(x), strict=True):
            np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("dtype", [sf.int8, sf.uint8, sf.int32, sf.uint32, sf.int64],
                         ids=lambda d: d.name)
def test_bfloat16_casts_to_integers_give_zero_out_of_range_as_stageflows(dtype):
    x = np.array([-1e30, -2.0**63, -129.5, -128.7, -1.5, 0.0, 3.9, 255.9, 256.0, 2.0**32,
                  2.0**63, np.inf, -np.inf, np.nan], np.float32)
    f = sf.function(lambda v: sf.cast(sf.cast(v, sf.bfloat16), dtype))
    model = sf.onnx.export(f, [sf.TensorSpec([None], sf.float32)])
    onnx.checker.check_model(model, full_check=True)
    (got,) = session(model).run(None, {"v": x})
    np.testing.assert_array_equal(got, f(x).numpy())
    assert f(x).numpy()[-3:].tolist() == [0, 0, 0]


def test_a_narrow_type_older_opsets_lack_is_refused_naming_the_opset():
    f = sf.function(lambda v: sf.cast(sf.cast(v, sf.int4), sf.float32))
    with pytest.raises(sf.onnx.OnnxError, match="int4 needs opset 21 or later"):
        sf.onnx.export(f, [sf.TensorSpec([None], sf.float32)], opset=20)


def test_a_cast_to_float8_e8m0_is_refused_naming_the_cast_to_use():
    f = sf.function(lambda v: sf.cast(sf.cast(v, sf.float8_e8m0fnu), sf.float32))
    with pytest.raises(sf.onnx.OnnxError, match="float8_e8m0fnu.*cast to float32 instead"):
        sf.onnx.export(f, [sf.TensorSpec([None], sf.float32)])


def test_bfloat16_computes_in_float32_rounded_per_op():
    w = np.linspace(-1, 1, 12).reshape(3, 4).astype(sf.bfloat16)

    def f(x):
        y = sf.cast(x, sf.bfloat16)
        y = sf.nn.relu(sf.matmul(y, w)) + sf.exp(y[:, :1])
        return [sf.cast(t, sf.float32) for t in (sf.reduce_max(y, axis=1), sf.sort(y, axis=1),
                                                 sf.where(y > 1, y, -y))]

    x = np.linspace(-2, 2, 6).reshape(2, 3).astype(np.float32)
    model = sf.onnx.export(f, [sf.TensorSpec([None, 3], sf.float32)])
    for got, want in zip(session(model).run(None, {"x": x}), sf.function(f)(x),
                         strict=True):
        np.testing.assert_array_equal(got, want.numpy())


def test_complex_values_are_their_parts():
    def f(x, y):
        z, w = sf.complex(x, y), sf.complex(y, x)
        q = sf.exp(z) * sf.math.conj(w) / (w * sf.math.conj(w) + 1.0)
        q = sf.where(x > 0, sf.log(q * sf.math.conj(q) + 1.0), q)
        return sf.abs(q), sf.reduce_sum(sf.math.imag(q), axis=-1), sf.transpose(q)

    x = np.linspace(-2, 2, 8).reshape(2, 4)
    model = sf.onnx.export(f, [sf.TensorSpec([None, 4], sf.float64), sf.TensorSpec([4],
                                                                                sf.float64)])
    y = x[0, ::-1].copy()
    got = session(model).run(None, {"x": x, "y": y})
    want = [w.numpy() for w in sf.function(f)(x, y)]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    # A complex output is its parts, [..., 2].
    np.testing.assert_allclose(got[2][..., 0] + 1j * got[2][..., 1], want[2], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128])
def test_all_reduce_folds_the_replicas_values_in_order(dtype):
    """Every reduction of its dtype, of one value and of three (int8 wrapping as NumPy)."""
    reductions = {np.int8: ["sum", "max", "min"], np.complex128: ["sum", "mean"]}.get(
        dtype, ["sum", "mean", "max", "min"])

    def f(x, y, z):
        return [all_reduce_p.bind(*xs, reduction=r) for r in reductions
                for xs in ((x,), (x, y, z))]

    rng = np.random.default_rng(3)
    values = [rng.integers(-100, 100, (2, 3)) * (1 + 1j if dtype == np.complex128 else 1)
              for _ in range(3)]
    args = [v.astype(dtype) for v in values]
    if dtype == np.complex128:  # complex inputs and outputs are their parts, [..., 2]
        parts = [np.stack([a.real, a.imag], axis=-1) for a in args]
        got = session(sf.onnx.export(f, [sf.TensorSpec([None, 3], dtype)] * 3)).run(
            None, dict(zip("xyz", parts, strict=True)))
        for g, w in zip(got, sf.function(f)(*args), strict=True):
            np.testing.assert_allclose(g[..., 0] + 1j * g[..., 1], w.numpy(), rtol=1e-12)
        return
    model = run(sf.function(f), [sf.TensorSpec([None, 3], dtype)] * 3, *args)
    assert {"Sum", "Mean"}.isdisjoint(node.op_type for node in model.graph.node)


@pytest.mark.parametrize("unknown", [False, True])
def test_slices_are_pythons(unknown):
    """ONNX's Slice clamps a negative start before the axis to element 0 where Python's
    slice is empty (a negative step), and reads an end of -1 as the last element."""
    x = np.arange(15, dtype=np.int32).reshape(5, 3)
    cases = [(-7, None, -1), (-2, -7, -2), (None, -6, -1), (6, -5, -3), (-1, 0, 1), (4, 6, 2)]
    f = sf.function(lambda x: [x[start:stop:step, ::-1] for start, stop, step in cases])
    run(f, [sf.TensorSpec([None if unknown else 5, 3], sf.int32)], x)


def test_nested_functions_are_written_inline():
    inner = sf.function(lambda x: sf.sqrt(sf.abs(x)) + 1)

    @sf.function
    def outer(x):
        return inner(x) * inner(-x)

    model = run(outer, [sf.TensorSpec([3], sf.float64)], np.array([1.0, -4.0, 9.0]))
    assert all(node.op_type != "Call" for node in model.graph.node)


def test_integer_dtypes_compute_as_numpy_wraps():
    def f(a, b):
        return a * b + a // sf.maximum(sf.abs(b), 1), sf.nn.relu(a) % 3, sf.reduce_sum(a, 0), \
            a // b, a % b  # NumPy's 0 where b is 0

    for dtype in (np.int8, np.uint8, np.int16):
        a = np.array([[100, 7], [3, 120]], dtype)
        b = np.array([[3, 2], [0, 4]], dtype)
        with np.errstate(divide="ignore"):
            run(sf.function(f), [sf.TensorSpec([2, 2], dtype)] * 2, a, b)


def test_variables_are_read_as_their_value_at_export():
    v = sf.Variable([1.0, 2.0])
    f = sf.function(lambda x: x * v)
    model = sf.onnx.export(f, [sf.TensorSpec([2], sf.float32)])
    v.assign([5.0, 5.0])
    (got,) = session(model).run(None, {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(got, [1.0, 2.0])


def test_refusals_name_the_op_and_the_line():
    v = sf.Variable(0.0)

    def assigns(x):
        v.assign(x)
        return x

    with pytest.raises(sf.onnx.OnnxError, match=r"assign_variable: an ONNX model holds no "
                                                r"state(.|\n)*v.assign\(x\)"):
        sf.onnx.export(assigns, [sf.TensorSpec([], sf.float32)])
    with pytest.raises(sf.onnx.OnnxError, match=r"cannot export inv(.|\n)*test_export.py"):
        sf.onnx.export(lambda a: sf.linalg.inv(a), [sf.TensorSpec([2, 2], sf.float64)])
    with pytest.raises(ValueError, match="opsets 18 to"):
        sf.onnx.export(lambda x: x + 1, [sf.TensorSpec([], sf.float32)], opset=13)


def test_an_older_opset():
    model = run(sf.function(lambda x: sf.reduce_sum(sf.pad(x, [[1, 0]]), axis=0)),
                [sf.TensorSpec([3], sf.float32)], np.ones(3, np.float32), opset=18)
    assert model.opset_import[0].version == 18


@settings(max_examples=12, deadline=None)
@given(campaign_programs(control=0.4))
def test_random_programs_run_to_stageflows_numbers(program):
    """Exported with unknown dims where the program marks them; a refusal is by design,
    and a runtime failure may only be a kernel ONNX Runtime lacks (float64 Erf, Asin)."""
    outcome = check_program(program, unknown_dims=True)
    assert outcome.kind in ("passed", "refused", "runtime"), outcome.reason
    if outcome.kind == "runtime":
        assert "NOT_IMPLEMENTED" in outcome.reason, outcome.reason


ELEMENTWISE_EXPORTS = sorted(p.name for p in RULES if isinstance(p, ElementwisePrimitive))


@pytest.mark.parametrize("name", ELEMENTWISE_EXPORTS)
def test_every_exported_elementwise_op_runs_to_stageflows_numbers(name):
    """Each op once, on values inside every op's domain (floats in (0.1, 0.9); booleans
    for the logical ops, integers for the shift), whatever the random programs drew."""
    primitive = REGISTRY[name]
    dtype = (np.bool_ if name.startswith("logical_") else
             np.int32 if name == "shift_right_logical" else np.float32)
    rng = np.random.default_rng(len(name))
    arity = primitive.shape_rule.__code__.co_argcount
    args = [rng.uniform(0.1, 0.9, 7).astype(dtype) if dtype == np.float32 else
            rng.integers(0, 2 if dtype == np.bool_ else 9, 7).astype(dtype)
            for _ in range(arity)]
    run(sf.function(lambda *xs: primitive.bind(*xs)),
        [sf.TensorSpec([None], dtype)] * arity, *args)


def test_a_reshape_to_dims_read_at_run_time_a_transpose_and_a_broadcast():
    def f(x):  # the unknown batch dim: the new shape reads it from x when the model runs
        return (sf.transpose(sf.expand_dims(x, 1), [0, 2, 1]),
                sf.broadcast_to(sf.reduce_sum(x, axis=0), [3, 6]))

    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    model = run(sf.function(f), [sf.TensorSpec([None, 6], sf.float32)], x)
    ops = {node.op_type for node in model.graph.node}
    assert {"Reshape", "Shape", "Transpose", "Expand"} <= ops, ops
