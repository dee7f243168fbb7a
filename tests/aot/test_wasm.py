"""Libraries compiled for WebAssembly (``target="wasm32"``), linked into a ``.wasm`` and
called through their generated ES module under Node.js and in headless Chromium, against
the same functions run here."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import pathlib
import subprocess

import llvmlite.binding as llvm
import numpy as np
import pytest
from test_aot import mlp_forward  # the same MLP as the native libraries

import stageflow as sf
from stageflow.aot import wasm
from stageflow.codegen.program.abi import OP_FAILED
from stageflow.testing import wasm_program

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def example(name: str):
    """The module examples/NAME.py (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mlp(wasm_tools):
    predict = mlp_forward()
    return predict, sf.aot.compile(predict, sf.TensorSpec([None, 784], sf.float32),
                                   target="wasm32", name="mlp")


def node(folder: pathlib.Path, script: str) -> str:
    """Run `script` as an ES module in `folder` under Node.js; its output."""
    (folder / "check.mjs").write_text(script)
    done = subprocess.run(["node", "check.mjs"], cwd=folder, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("batch", [1, 5])
def test_the_mlp_under_node_matches_python(tmp_path, mlp, batch):
    predict, library = mlp
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    result = wasm_program.run(tmp_path, library, [x], dims=[batch])
    assert result.code == 0 and result.state == []
    probabilities, labels = predict(sf.constant(x))
    np.testing.assert_allclose(result.outputs[0], probabilities.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(result.outputs[1], labels.numpy())


def test_the_module_is_self_contained(tmp_path, mlp):
    """No imports: the C library is linked in; the entry points, malloc/free, memory and the
    constructors' _initialize are exported."""
    _, library = mlp
    path = pathlib.Path(library.save(tmp_path / "mlp.wasm"))
    assert wasm.imports(path.read_bytes()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.h", "mlp.mjs", "mlp.wasm"]
    lines = node(tmp_path, """
import { Model } from "./mlp.mjs";
const module = new WebAssembly.Module((await import("node:fs")).readFileSync("mlp.wasm"));
console.log(WebAssembly.Module.exports(module).map((e) => e.name).sort().join(" "));
const model = await Model.load("mlp.wasm");  // a path, as well as the default URL
const [probabilities, labels] = model.call(new Float32Array(3 * 784));
model.release();
console.log(JSON.stringify([Model.inputs, probabilities.shape, labels.constructor.name]));
""").splitlines()
    assert lines[0].split() == sorted(["memory", "_initialize", "malloc", "free", "mlp",
                                       "mlp_output_dims", "mlp_release"])
    assert json.loads(lines[1]) == [
        [{"name": "input 0", "dtype": "float32", "shape": [None, 784], "array": "Float32Array"}],
        [3, 10], "BigInt64Array"]


@pytest.fixture(scope="module")
def resnet(wasm_tools):
    model = example("resnet").cifar_resnet()
    infer = sf.function(lambda x: model(x, training=False))
    return infer, sf.aot.compile(infer, sf.TensorSpec([None, 32, 32, 3], sf.float32),
                                 target="wasm32", name="resnet")


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 3])
def test_the_small_resnet_under_node_matches_python(tmp_path, resnet, batch):
    infer, library = resnet
    x = np.random.default_rng(batch).standard_normal((batch, 32, 32, 3)).astype(np.float32)
    result = wasm_program.run(tmp_path, library, [x], dims=[batch])
    assert result.code == 0
    np.testing.assert_allclose(result.outputs[0], infer(sf.constant(x)).numpy(), rtol=1e-4,
                               atol=1e-5)


@pytest.fixture(scope="module")
def transformer(wasm_tools):
    module = example("transformer")
    model = module.Transformer()
    infer = sf.function(lambda tokens: model(tokens))
    return module, infer, sf.aot.compile(infer, sf.TensorSpec([None, module.LENGTH], sf.int32),
                                         target="wasm32", name="transformer")


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4])
def test_the_transformer_under_node_matches_python(tmp_path, transformer, batch):
    module, infer, library = transformer
    rng = np.random.default_rng(batch)
    tokens = rng.integers(0, module.VOCAB, (batch, module.LENGTH)).astype(np.int32)
    result = wasm_program.run(tmp_path, library, [tokens], dims=[batch])
    assert result.code == 0
    assert result.outputs[0].shape == (batch, module.LENGTH, module.VOCAB)
    np.testing.assert_allclose(result.outputs[0], infer(sf.constant(tokens)).numpy(),
                               rtol=1e-4, atol=1e-5)


def test_a_training_step_keeps_its_state_across_calls(tmp_path, wasm_tools):
    rng = np.random.default_rng(3)
    w = sf.Variable(np.zeros((3, 1), np.float32), name="w")
    b = sf.Variable(np.zeros(1, np.float32), name="b")
    x = rng.standard_normal((16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25).astype(np.float32)

    @sf.function
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.matmul(x, w) + b - y))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
        return loss

    library = sf.aot.compile(train_step, sf.TensorSpec([None, 3], sf.float32),
                             sf.TensorSpec([None, 1], sf.float32), target="wasm32",
                             name="train", freeze=False)
    result = wasm_program.run(tmp_path, library, [x, y], dims=[16, 16], steps=6)
    assert result.code == 0
    for _ in range(6):
        loss = train_step(sf.constant(x), sf.constant(y))
    np.testing.assert_allclose(result.state[0], w.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.state[1], b.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.outputs[0], loss.numpy(), rtol=1e-5)
    assert np.abs(w.numpy()).min() > 0.01  # it trained


def test_wrong_inputs_throw_errors_naming_them(tmp_path, wasm_tools):
    @sf.function
    def pair(a, b):
        return sf.exp(a) + b

    spec = sf.TensorSpec([None, 3], sf.float32)
    library = sf.aot.compile(pair, spec, spec, name="pair", target="wasm32")
    a = np.ones((4, 3), np.float32)
    # Two batch dims that do not broadcast: the add refuses, the call throws with its code.
    result = wasm_program.run(tmp_path, library, [a, np.ones((2, 3), np.float32)], dims=[4, 2])
    assert result.code >= OP_FAILED and result.outputs == []
    lines = node(tmp_path, """
import { Model } from "./pair.mjs";
const model = await Model.load();
const good = new Float32Array(6);
const attempts = [
  () => model.call(good),
  () => model.call(new Float64Array(6), good),
  () => model.call(good, new Float32Array(7)),
  () => model.call(good, { data: good, shape: [3, 2] }),
  () => model.call(good, new Float32Array(12)),
];
for (const attempt of attempts) {
  try { attempt(); console.log("no error"); } catch (error) { console.log(error.message); }
}
const [sum] = model.call({ data: good, shape: [2, 3] }, good);
console.log(JSON.stringify([Array.from(sum), sum.shape]));
""").splitlines()
    assert lines[0] == "pair: expected 2 inputs (float32 [?, 3]; float32 [?, 3]), given 1"
    assert lines[1] == ("pair: input 0 (float32 [?, 3], a Float32Array) must be a Float32Array, "
                        "given a Float64Array of 6 elements")
    assert lines[2] == ("pair: input 1 (float32 [?, 3], a Float32Array): 7 elements are not a "
                        "whole number of 3-element rows")
    assert lines[3] == "pair: input 1 (float32 [?, 3], a Float32Array): shape [3, 2] does not fit"
    assert lines[4].startswith(f"pair returned {OP_FAILED}: op 0 of the function refused its "
                               "operands")
    assert lines[5] == "[[1,1,1,1,1,1],[2,3]]"


def test_saving_without_the_linker_names_the_package(tmp_path, mlp, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"wasm-ld .*Debian's lld package"):
        mlp[1].save(tmp_path / "mlp.wasm")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "resnet", "transformer"])
def test_the_models_run_in_headless_chromium(tmp_path, request, chromium, model):
    """The same libraries in a browser: a page served from 127.0.0.1 imports the ES module,
    fetches the inputs and sends the outputs back (`wasm_program.run(browser=...)`)."""
    made = request.getfixturevalue(model)
    infer, library = made[-2:]
    rng = np.random.default_rng(7)
    x = (rng.integers(0, made[0].VOCAB, (2, made[0].LENGTH)).astype(np.int32)
         if model == "transformer" else
         rng.standard_normal((2, *library.signature.inputs[0].shape[1:])).astype(np.float32))
    result = wasm_program.run(tmp_path, library, [x], dims=[2], browser=chromium)
    assert result.code == 0
    expected = infer(sf.constant(x))
    for got, want in zip(result.outputs, expected if isinstance(expected, tuple)
                         else (expected,), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


def _float32_sample(rng: np.random.Generator) -> np.ndarray:
    """Every half as a float32, the midpoints between neighbouring halves (ties) and the
    floats just either side of them, the largest half's neighbourhood, and random bits."""
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(np.unique(halves[np.isfinite(halves)].astype(np.float64)))
    ties = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # exact in float32
    near = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)),
                           np.nextafter(ties, np.float32(-np.inf))])
    edges = np.array([65504, 65519.996, 65520, 65536, 1e30, np.inf, -np.inf, np.nan,
                      2.0 ** -24, 2.0 ** -25, 2.0 ** -26, 1e-30, 0.0, -0.0, 6.1e-5],
                     np.float32)
    noise = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(
        np.float32)
    return np.concatenate([halves.astype(np.float32), near, edges, -edges, noise])


def _assert_same_floats(given: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit where the expected value is a number; a NaN where it is a NaN."""
    nan = np.isnan(expected.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(given.astype(np.float32)), nan)
    bits = np.dtype(f"u{given.dtype.itemsize}")
    np.testing.assert_array_equal(given[~nan].view(bits), expected[~nan].view(bits))


def test_half_and_bfloat16_conversions_are_exact(tmp_path, wasm_tools):
    """wasm32 has no half instructions: LLVM calls __extendhfsf2 and __truncsfhf2, which
    the library defines itself (the WASI C library has neither). Every half and bfloat16
    bit pattern to float32, and ties, their neighbours and random floats back, against
    NumPy's and ml_dtypes' round-to-nearest-even."""
    @sf.function
    def conversions(h, x, a, b, brain):
        return (sf.cast(h, sf.float32), sf.cast(x, sf.float16), a + b,
                sf.cast(brain, sf.float32), sf.cast(x, sf.bfloat16))

    vector = functools.partial(sf.TensorSpec, [None])
    library = sf.aot.compile(conversions, vector(sf.float16), vector(sf.float32),
                             vector(sf.float16), vector(sf.float16), vector(sf.bfloat16),
                             target="wasm32", name="conversions")
    rng = np.random.default_rng(0)
    every = np.arange(1 << 16, dtype=np.uint16)
    h, brain = every.view(np.float16), every.view(sf.bfloat16)
    x = _float32_sample(rng)
    a, b = (rng.integers(0, 1 << 16, 50_000, dtype=np.uint16).view(np.float16)
            for _ in range(2))
    result = wasm_program.run(tmp_path, library, [h, x, a, b, brain],
                              dims=[h.size, x.size, a.size, b.size, brain.size])
    assert result.code == 0
    widened, narrowed, sums, brain_widened, brain_narrowed = result.outputs
    with np.errstate(all="ignore"):  # NumPy's overflows to infinity, as the library's do
        _assert_same_floats(widened, h.astype(np.float32))
        _assert_same_floats(narrowed, x.astype(np.float16))
        _assert_same_floats(sums, a + b)
        _assert_same_floats(brain_widened, brain.astype(np.float32))
        _assert_same_floats(brain_narrowed, x.astype(brain.dtype))


def test_lapack_ops_are_refused_at_compile_time(wasm_tools):
    with pytest.raises(NotImplementedError, match=r"has no lowering .*LAPACK, which a "
                                                  r"library for wasm32 does not carry"):
        sf.aot.compile(lambda a: sf.linalg.inv(a), sf.TensorSpec([3, 3], sf.float32),
                       target="wasm32")


def test_a_frozen_library_folds_what_its_variables_alone_compute(tmp_path, wasm_tools):
    """Frozen, the variables are constants before the compiler's passes: the inverse of a
    variable folds at compile time, so a library for wasm32, which carries no LAPACK, is
    built and computes with the variables' values; unfrozen, the inverse stays an op and
    is refused."""
    v = sf.Variable(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32), name="v")
    project = sf.function(lambda x: sf.matmul(x, sf.linalg.inv(v)))
    spec = sf.TensorSpec([3, 2], sf.float32)
    library = sf.aot.compile(project, spec, target="wasm32", name="project")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    result = wasm_program.run(tmp_path, library, [x])
    assert result.code == 0
    np.testing.assert_allclose(result.outputs[0], x @ np.linalg.inv(v.numpy()), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="LAPACK"):
        sf.aot.compile(project, spec, target="wasm32", name="project", freeze=False)


def test_a_library_unfrozen_without_variables_is_called_as_its_header_says(tmp_path,
                                                                           wasm_tools):
    """freeze=False with no variables to keep: no state entries in the header, so none in
    the library either (its entry takes no state argument)."""
    library = sf.aot.compile(lambda x: x * 2.0, sf.TensorSpec([3], sf.float32),
                             target="wasm32", name="twice", freeze=False)
    assert "twice_state" not in library.header
    result = wasm_program.run(tmp_path, library, [np.arange(3, dtype=np.float32)])
    assert result.code == 0 and result.state == []
    np.testing.assert_array_equal(result.outputs[0], [0.0, 2.0, 4.0])


def test_large_splat_constants_are_filled_before_the_first_call(tmp_path, wasm_tools):
    """A splat of 64 KiB or more is written by the module's constructor, not stored: the ES
    module runs it once on load, before the state is created from the variables' values."""
    scale = sf.constant(np.full(20_000, 0.5, np.float32))
    offset = sf.Variable(np.full(20_000, 2.0, np.float32), name="offset")

    @sf.function
    def shift(x):
        offset.assign_add(x)
        return x * scale + offset

    library = sf.aot.compile(shift, sf.TensorSpec([20_000], sf.float32), target="wasm32",
                             name="shift", freeze=False)
    x = np.linspace(-1, 1, 20_000, dtype=np.float32)
    result = wasm_program.run(tmp_path, library, [x], steps=2)
    assert result.code == 0
    state = np.float32(2.0) + x + x
    np.testing.assert_allclose(result.state[0], state, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(result.outputs[0], x * np.float32(0.5) + state, rtol=1e-6,
                               atol=1e-6)


def test_a_link_failure_names_the_undefined_symbols(tmp_path, mlp):
    """Object code that calls a function neither it nor the C library defines."""
    _, library = mlp
    source = "\n".join([
        "declare i32 @sf_nowhere()",
        *(f"define i32 @{name}(ptr %a, ptr %b, ptr %c) {{\n  %r = call i32 @sf_nowhere()\n"
          f"  ret i32 %r\n}}" for name in ("mlp", "mlp_output_dims")),
        "define void @mlp_release() {\n  ret void\n}"])
    module = llvm.parse_assembly(source)
    module.triple = "wasm32-unknown-wasi"
    machine = llvm.Target.from_triple(module.triple).create_target_machine()
    broken = dataclasses.replace(library, object_code=bytes(machine.emit_object(module)))
    with pytest.raises(RuntimeError, match=r"the undefined symbols sf_nowhere are in neither"):
        broken.save(tmp_path / "mlp.wasm")
    assert not (tmp_path / "mlp.wasm").exists()


def test_a_dtype_without_a_typed_array_is_refused_before_linking(tmp_path, wasm_tools):
    library = sf.aot.compile(lambda z: z * 2.0, sf.TensorSpec([3], sf.complex64),
                             target="wasm32", name="twice")
    with pytest.raises(NotImplementedError, match=r"input 0 is complex64, which its "
                                                  r"JavaScript module has no typed array"):
        library.save(tmp_path / "twice.wasm")
    assert not (tmp_path / "twice.wasm").exists()
