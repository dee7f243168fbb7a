"""Libraries for other machines: aarch64 programs, cross-compiled against the generated
header and run under qemu, get the numbers this machine's Python gets; libraries built
without OpenBLAS (every other target, and ``self_contained`` ones here) multiply with our
own gemm, checked here natively over every layout the BLAS took."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.targets import platform
from stageflow.testing.c_program import build, read_output, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import resnet  # noqa: E402 - the examples' models
import transformer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_aot import mlp_forward  # noqa: E402

AARCH64 = "aarch64-linux-gnu"
RNG = np.random.default_rng(0)


def compare(tmp_path: Path, function, spec: sf.TensorSpec, x: np.ndarray, *, rtol: float,
            atol: float, **options) -> None:
    """`function` compiled with `options`, called from C on `x` (its first dim unknown),
    against the function called here."""
    static = options.pop("static", False)
    library = sf.aot.compile(function, spec, name="model", **options)
    executable = build(tmp_path, library, [x], static=static)
    assert run(executable, x.shape[0])[0] == "rc 0"
    expected = function(sf.constant(x))
    expected = expected if isinstance(expected, tuple) else (expected,)
    for index, want in enumerate(t.numpy() for t in expected):
        got = read_output(tmp_path, index, want.dtype, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def models():
    cifar, encoder = resnet.cifar_resnet(), transformer.Transformer()
    images = RNG.standard_normal((3, 32, 32, 3)).astype(np.float32)
    tokens = RNG.integers(0, transformer.VOCAB, (2, transformer.LENGTH)).astype(np.int32)
    return {
        "mlp": (mlp_forward(), sf.TensorSpec([None, 784], sf.float32),
                RNG.standard_normal((5, 784)).astype(np.float32)),
        "resnet": (sf.function(lambda x: cifar(x, training=False)),
                   sf.TensorSpec([None, 32, 32, 3], sf.float32), images),
        "transformer": (sf.function(encoder), sf.TensorSpec([None, transformer.LENGTH],
                                                            sf.int32), tokens),
    }


@pytest.mark.parametrize("model", ["mlp", "resnet", "transformer"])
def test_models_run_under_qemu_with_this_machines_numbers(tmp_path, aarch64_tools, models,
                                                          model):
    function, spec, x = models[model]
    compare(tmp_path, function, spec, x, rtol=1e-4, atol=1e-5, target=AARCH64)


def test_a_static_object_links_into_an_aarch64_program(tmp_path, aarch64_tools, models):
    function, spec, x = models["resnet"]
    compare(tmp_path, function, spec, x, rtol=1e-4, atol=1e-5, target=AARCH64, static=True)
    assert (tmp_path / "main").read_bytes()[18] == 0xB7  # an aarch64 ELF executable
    assert not (tmp_path / "libmodel.so").exists()


def disassembly(library, folder: Path) -> str:
    path = library.save(folder / "code.o")
    return subprocess.run(["aarch64-linux-gnu-objdump", "-d", path], capture_output=True,
                          text=True, check=True).stdout


def test_vectors_are_the_targets(tmp_path, aarch64_tools, models):
    """The baseline CPU's loops use NEON's vectors (fmla on v registers); cpu= picks the
    instructions: Neoverse V1's SVE (z registers), which runs under qemu's emulated CPU."""
    function, spec, x = models["mlp"]
    neon = disassembly(sf.aot.compile(function, spec, target=AARCH64), tmp_path)
    assert re.search(r"fmla\s+v\d+\.4s", neon)
    assert not re.search(r"\bz\d+\.s\b", neon)
    sve = disassembly(sf.aot.compile(function, spec, target=AARCH64, cpu="neoverse-v1"),
                      tmp_path)
    assert re.search(r"\bz\d+\.s\b", sve)
    compare(tmp_path, function, spec, x, rtol=1e-4, atol=1e-6, target=AARCH64,
            cpu="neoverse-v1")


@pytest.mark.parametrize("transpose_a, transpose_b",
                         list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_own_gemm_over_every_layout(tmp_path, transpose_a, transpose_b, dtype):
    """A self-contained library (no OpenBLAS: our gemm) multiplies transposed operands, a
    batch against one matrix, a single row (where OpenBLAS took its gemv) and odd sizes
    that leave partial tiles and vectors."""
    m, k, n = 37, 45, 29
    a = RNG.standard_normal((3, k, m) if transpose_a else (3, m, k)).astype(dtype)
    w = sf.constant(RNG.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype))
    c = sf.constant(RNG.standard_normal((m, n)).astype(dtype))

    @sf.function
    def products(x):
        product = sf.matmul(x, w, transpose_a=transpose_a, transpose_b=transpose_b)
        row = sf.matmul(x[:, :1, :] if not transpose_a else x[:, :, :1], w,
                        transpose_a=transpose_a, transpose_b=transpose_b)
        return product + c, row * 2.0

    library = sf.aot.compile(products, sf.TensorSpec([None, *a.shape[1:]], dtype),
                             name="products", self_contained=True)
    assert not library.libraries
    executable = build(tmp_path, library, [a])
    assert run(executable, 3)[0] == "rc 0"
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for index, want in enumerate(t.numpy() for t in products(sf.constant(a))):
        np.testing.assert_allclose(read_output(tmp_path, index, dtype, want.shape), want,
                                   rtol=tolerance, atol=tolerance)


def test_own_gemm_splits_a_large_product_over_the_cores(tmp_path):
    """A product of millions of multiply-adds runs its rows as tasks on the worker pool:
    the same numbers, on every row (an odd count of them, not a multiple of the tile's)."""
    w = sf.constant(RNG.standard_normal((300, 211)).astype(np.float32))

    @sf.function
    def product(x):
        return sf.matmul(x, w)

    x = RNG.standard_normal((203, 300)).astype(np.float32)
    library = sf.aot.compile(product, sf.TensorSpec(x.shape), name="product",
                             self_contained=True)
    assert b"sf.cblas.rows.float32" in library.object_code  # the task, compiled in
    executable = build(tmp_path, library, [x])
    assert run(executable)[0] == "rc 0"
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (203, 211)),
                               x @ w.numpy(), rtol=1e-4, atol=1e-4)


def test_own_gemm_under_a_convolutions_gradients(tmp_path):
    """The convolutions' gradients call the gemm as they call the BLAS's: a
    self-contained library's gradients are Python's."""
    w = sf.constant(RNG.standard_normal((3, 3, 5, 12)).astype(np.float32) * 0.1)

    @sf.function
    def grads(x):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            loss = sf.reduce_sum(sf.square(sf.nn.conv2d(x, w, 2, "SAME")))
        return tape.gradient(loss, [x, w])

    x = RNG.standard_normal((2, 17, 15, 5)).astype(np.float32)
    library = sf.aot.compile(grads, sf.TensorSpec(x.shape), name="grads", self_contained=True)
    assert not library.libraries
    executable = build(tmp_path, library, [x])
    assert run(executable)[0] == "rc 0"
    for index, want in enumerate(t.numpy() for t in grads(sf.constant(x))):
        np.testing.assert_allclose(read_output(tmp_path, index, np.float32, want.shape), want,
                                   rtol=1e-4, atol=1e-4)


def test_lapack_is_refused_where_no_openblas_is_linked():
    @sf.function
    def inverse(a):
        return sf.linalg.inv(a)

    with pytest.raises(NotImplementedError, match=r"(?s)inv.*has no lowering.*this machine.*"
                                                  r"LAPACK, which a library for "
                                                  r"aarch64-linux-gnu does not carry"):
        sf.aot.compile(inverse, sf.TensorSpec([3, 3], sf.float64), target=AARCH64)
    sf.aot.compile(inverse, sf.TensorSpec([3, 3], sf.float64))  # here it compiles

    @sf.function
    def integers(a):
        return sf.matmul(a, a)

    with pytest.raises(NotImplementedError) as refused:  # no lowering here either
        sf.aot.compile(integers, sf.TensorSpec([3, 3], sf.int32), target=AARCH64)
    assert "matmul" in str(refused.value) and "does not carry" not in str(refused.value)


def test_unknown_targets_and_wrong_files_are_refused():
    with pytest.raises(ValueError, match="target must be one of .*aarch64-linux-gnu.*wasm32"):
        sf.aot.compile(lambda x: x + 1.0, sf.TensorSpec([2]), target="riscv64")
    library = sf.aot.compile(lambda x: x + 1.0, sf.TensorSpec([2]), target=AARCH64)
    assert library.target == AARCH64
    with pytest.raises(ValueError, match="write a .so or a .o for target aarch64"):
        library.save("model.wasm")


def test_the_host_target_is_this_machine():
    native = platform.for_target(platform.host_target())
    assert native == platform.host()
    assert native.blas and native.threads
    assert not platform.for_target(platform.host_target(), self_contained=True).blas


def test_the_compile_command_takes_a_target(tmp_path, aarch64_tools):
    source = tmp_path / "model.py"
    source.write_text("import stageflow as sf\n\n\ndef f(x):\n    return sf.tanh(x) * 2.0\n")
    command = [sys.executable, "-m", "stageflow.cli", "compile", f"{source}:f", "--arg",
               "f32[?,8]"]
    subprocess.run([*command, "--target", AARCH64, "--cpu", "cortex-a72", "-o",
                    str(tmp_path / "f.so")], check=True)
    assert (tmp_path / "f.so").read_bytes()[18] == 0xB7
    assert "int32_t f(" in (tmp_path / "f.h").read_text()
    refused = subprocess.run([*command, "--target", "sparc", "-o", str(tmp_path / "g.so")],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "target must be one of" in refused.stderr
    mixed = subprocess.run([*command, "--target", AARCH64, "-o", str(tmp_path / "g.wasm")],
                           capture_output=True, text=True)
    assert mixed.returncode != 0 and "is a wasm32 output" in mixed.stderr
