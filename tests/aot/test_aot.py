"""Ahead-of-time libraries: C programs built with the system's ``cc`` against the generated
header and library get the numbers Python gets, wrong dims return error codes, a
``freeze=False`` library keeps training state, and ptxas accepts the PTX artefact."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.program.abi import OP_FAILED
from stageflow.codegen.program.embedded import is_splat
from stageflow.codegen.targets.ptx import ptxas_path
from stageflow.testing.c_program import CC, build, read_output, run


def mlp_forward():
    rng = np.random.default_rng(0)
    w1 = sf.Variable(rng.standard_normal((784, 64)).astype(np.float32) * 0.05, name="w1")
    b1 = sf.Variable(rng.standard_normal(64).astype(np.float32) * 0.1, name="b1")
    w2 = sf.Variable(rng.standard_normal((64, 10)).astype(np.float32) * 0.1, name="w2")
    b2 = sf.Variable(np.zeros(10, np.float32), name="b2")

    @sf.function
    def predict(x):
        h = sf.nn.relu(sf.matmul(x, w1) + b1)
        return sf.nn.softmax(sf.matmul(h, w2) + b2), sf.argmax(h, axis=1)

    return predict


@pytest.mark.parametrize("batch", [1, 7])
def test_mlp_forward_with_an_unknown_batch_dim(tmp_path, batch):
    predict = mlp_forward()
    library = sf.aot.compile(predict, sf.TensorSpec([None, 784], sf.float32), name="mlp")
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    executable = build(tmp_path, library, [x])
    assert run(executable, batch)[0] == "rc 0"
    probabilities, labels = predict(sf.constant(x))
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (batch, 10)),
                               probabilities.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(read_output(tmp_path, 1, labels.numpy().dtype, (batch,)),
                                  labels.numpy())
    header = (tmp_path / "mlp.h").read_text()
    assert "int32_t mlp(const void *const *inputs" in header
    assert "float [?, 784]" in header and "input 0 dim 0" in header


def test_wrong_dims_return_error_codes(tmp_path):
    @sf.function
    def pair(a, b):
        return sf.exp(a) + b

    spec = sf.TensorSpec([None, 3], sf.float32)
    library = sf.aot.compile(pair, spec, spec, name="pair")
    a = np.ones((4, 3), np.float32)
    executable = build(tmp_path, library, [a, a])
    assert run(executable, 4, 4)[0] == "rc 0"
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (4, 3)), np.e + 1,
                               rtol=1e-6)
    assert run(executable, -1, 4)[0] == "output_dims 1"  # a negative dim: input 0
    lines = run(executable, 4, 2)  # two batch dims that do not broadcast: the add refuses
    assert lines[0].startswith("rc ") and int(lines[0][3:]) >= OP_FAILED


def test_unfrozen_variables_keep_training_state(tmp_path):
    rng = np.random.default_rng(3)
    w = sf.Variable(np.zeros((3, 1), np.float32), name="w")
    x = rng.standard_normal((16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)

    @sf.function
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.matmul(x, w) - y))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    library = sf.aot.compile(train_step, sf.TensorSpec([16, 3], sf.float32),
                             sf.TensorSpec([16, 1], sf.float32), name="train", freeze=False)
    executable = build(tmp_path, library, [x, y], steps=20, state_sizes=[w.numpy().nbytes])
    assert run(executable)[:20] == ["rc 0"] * 20
    initial = w.numpy().copy()
    for _ in range(20):
        loss = train_step(sf.constant(x), sf.constant(y))
    np.testing.assert_allclose(np.fromfile(tmp_path / "state0.bin", np.float32).reshape(3, 1),
                               w.numpy(), rtol=1e-5)
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, ()), loss.numpy(),
                               rtol=1e-5)
    assert not np.allclose(w.numpy(), initial)


def test_a_null_state_is_refused_not_dereferenced(tmp_path):
    """``NAME_state_free(NULL)`` does nothing, as free(NULL) does, and
    ``NAME_state_variable(NULL, 0)`` is NULL: in a child process, which a dereference
    would kill."""
    w = sf.Variable(np.zeros(2, np.float32))

    @sf.function
    def bump(x):
        w.assign_add(x)
        return w.read_value()

    path = tmp_path / "libbump.so"
    sf.aot.compile(bump, sf.TensorSpec([2], sf.float32), name="bump", freeze=False).save(
        path, header=tmp_path / "bump.h")
    script = ("import ctypes, sys\n"
              f"lib = ctypes.CDLL({str(path)!r})\n"
              "lib.bump_state_free.argtypes = [ctypes.c_void_p]\n"
              "lib.bump_state_variable.argtypes = [ctypes.c_void_p, ctypes.c_int32]\n"
              "lib.bump_state_variable.restype = ctypes.c_void_p\n"
              "lib.bump_state_free(None)\n"
              "sys.exit(0 if lib.bump_state_variable(None, 0) is None else 3)\n")
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 0


def test_frozen_libraries_refuse_variable_writes():
    v = sf.Variable(np.zeros(2, np.float32))

    @sf.function
    def bump(x):
        v.assign_add(x)
        return v.read_value()

    with pytest.raises(ValueError, match="freeze=False"):
        sf.aot.compile(bump, sf.TensorSpec([2], sf.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_saved_ptx(tmp_path, arch):
    @sf.function
    def gelu_affine(x, w, b):
        return sf.nn.gelu(x * w + b, approximate=True) * 0.5 + x

    spec = sf.TensorSpec([None, 64], sf.float32)
    artefact = sf.aot.compile(gelu_affine, spec, sf.TensorSpec([64], sf.float32),
                              sf.TensorSpec([64], sf.float32), target="ptx", arch=arch)
    path = artefact.save(tmp_path / "gelu.ptx")
    assert ".entry" in Path(path).read_text()
    manifest = (tmp_path / "gelu.json").read_text()
    assert '"launch"' in manifest and '"role": "output"' in manifest
    ptxas = ptxas_path()
    assert ptxas is not None, "ptxas (pip nvidia-cuda-nvcc) is part of the test extra"
    subprocess.run([str(ptxas), f"-arch={arch}", path, "-o", str(tmp_path / "gelu.cubin")],
                   check=True, capture_output=True)


def test_the_compile_command(tmp_path):
    source = tmp_path / "model.py"
    source.write_text("import stageflow as sf\n\n\ndef f(x):\n    return sf.tanh(x) * 2.0\n")
    command = [sys.executable, "-m", "stageflow.cli"]
    subprocess.run([*command, "compile", f"{source}:f", "--arg", "f32[?,8]", "-o",
                    str(tmp_path / "f.so"), "--header", str(tmp_path / "f.h")], check=True)
    assert (tmp_path / "f.so").exists() and "int32_t f(" in (tmp_path / "f.h").read_text()
    result = subprocess.run([*command, "compile", f"{source}:f", "--arg", "f32[?,8]", "-o",
                             str(tmp_path / "f.txt")], capture_output=True, text=True)
    assert result.returncode != 0 and "write OUT.so, OUT.o, OUT.wasm or OUT.ptx" in result.stderr


def test_a_loop_and_a_branch_in_a_c_program(tmp_path):
    """A recurrence over a trip count given at run time, with a branch in its body: the
    library's one program runs the loop, as the JIT's does."""
    w = sf.constant(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32) * 0.5)

    @sf.function
    def recur(h, n):
        def body(i, h):
            h = sf.tanh(sf.matmul(h, w))
            return i + 1, sf.cond(i % 2 == 0, lambda: h * 2.0, lambda: h)
        return sf.while_loop(lambda i, h: i < n, body, (0, h))[1]

    library = sf.aot.compile(recur, sf.TensorSpec([1, 4]), sf.TensorSpec([], sf.int32),
                             name="recur")
    h = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)
    n = np.array(5, np.int32)
    executable = build(tmp_path, library, [h, n])
    assert run(executable)[0] == "rc 0"
    want = recur(sf.constant(h), sf.constant(n)).numpy()
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (1, 4)), want, rtol=1e-6)


def test_unsigned_integers_in_a_c_program(tmp_path):
    """uint16 and uint64 through the C ABI: the header's C types, NumPy's numbers (values
    from 2**63 up too, where signed and unsigned conversions differ)."""

    @sf.function
    def mixed(x, y):
        return x // 3 + sf.cast(y, sf.uint64), sf.cast(x, sf.float64), sf.maximum(y, 7)

    library = sf.aot.compile(mixed, sf.TensorSpec([4], sf.uint64), sf.TensorSpec([4], sf.uint16),
                             name="mixed")
    x = np.array([0, 5, 2**63 + 5, 2**64 - 1], np.uint64)
    y = np.array([0, 6, 9, 2**16 - 1], np.uint16)
    executable = build(tmp_path, library, [x, y])
    assert run(executable)[0] == "rc 0"
    for index, want in enumerate(mixed(sf.constant(x), sf.constant(y))):
        got = read_output(tmp_path, index, want.dtype, (4,))
        np.testing.assert_array_equal(got, want.numpy())
    header = (tmp_path / "mixed.h").read_text()
    assert "uint64_t [4]" in header and "uint16_t [4]" in header


def test_a_py_func_cannot_be_compiled_ahead_of_time():
    @sf.function
    def calls_python(x):
        return sf.numpy_function(np.sort, [x], sf.TensorSpec([3]))

    with pytest.raises(NotImplementedError, match=r"calls_python holds a py_func \(at .*"
                                                  r"test_aot.py:\d+"):
        sf.aot.compile(calls_python, sf.TensorSpec([3]))


NULL_CALLS = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
P, I64 = ctypes.c_void_p, ctypes.c_int64
entry, dims_of = lib.scaled, lib.scaled_output_dims
entry.argtypes, dims_of.argtypes = [P, P, P], [P, P]
buffer = (ctypes.c_float * 64)()
inputs = (P * 1)(ctypes.addressof(buffer))
outputs = (P * 1)(ctypes.addressof(buffer))
dims = (I64 * 1)(4)
out = (I64 * 2)()
null_input = (P * 1)(None)
huge = [(I64 * 1)(2**62 + 1), (I64 * 1)(2**63 - 1), (I64 * 1)(2**61)]
codes = [
    entry(None, dims, outputs), entry(inputs, None, outputs), entry(inputs, dims, None),
    entry(null_input, dims, outputs), entry(inputs, dims, null_input),
    dims_of(None, out), dims_of(dims, None),
    *(entry(inputs, d, outputs) for d in huge), *(dims_of(d, out) for d in huge),
    entry(inputs, dims, outputs),
]
print(" ".join(map(str, codes)))
"""


def test_null_pointers_and_overflowing_dims_return_codes(tmp_path):
    """Called from C with NULL pointers or dims whose bytes overflow an int64, the library
    returns its documented codes (once: segfaults, or 0 and writes out of bounds)."""
    from stageflow.codegen.program.abi import NULL_POINTER

    @sf.function
    def scaled(x):
        return x * 2.0

    library = sf.aot.compile(scaled, sf.TensorSpec([None, 4], sf.float32), name="scaled")
    library.save(str(tmp_path / "scaled.so"))
    script = tmp_path / "calls.py"
    script.write_text(NULL_CALLS)
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "scaled.so")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    codes = [int(c) for c in result.stdout.split()]
    assert codes[:7] == [NULL_POINTER] * 7
    assert codes[7:13] == [1] * 6  # input 0's dims do not fit: its bytes exceed 2**62
    assert codes[13] == 0
    assert "NULL pointer" in library.header


RELEASE_CALLS = r"""
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
lib.picked.argtypes = [P, P, P]
rng = np.random.default_rng(0)
for rows in (4, 64, 4, 300, 0, 9):
    x = rng.standard_normal((rows, 8)).astype(np.float32)
    out = np.empty(rows, np.int64)
    dims = (ctypes.c_int64 * 1)(rows)
    code = lib.picked((P * 1)(x.ctypes.data), dims, (P * 1)(out.ctypes.data))
    print(code, int(np.array_equal(out, np.argmax(np.tanh(x) * 2, axis=1))))
    if rows % 2 == 0:
        lib.picked_release()
        lib.picked_release()
"""


def test_release_frees_the_kept_temporaries_and_calls_go_on(tmp_path):
    """``NAME_release`` frees the workspace kept between calls (twice is harmless); calls
    before and after, of growing and shrinking sizes, compute their own numbers."""

    @sf.function
    def picked(x):
        return sf.argmax(sf.tanh(x) * 2.0, axis=1)

    library = sf.aot.compile(picked, sf.TensorSpec([None, 8], sf.float32), name="picked")
    library.save(str(tmp_path / "picked.so"))
    assert "void picked_release(void);" in library.header
    script = tmp_path / "calls.py"
    script.write_text(RELEASE_CALLS)
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "picked.so")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:-1] == ["0 1"] * 6


def test_a_convolution_and_its_gradients_split_over_threads_in_a_c_program(tmp_path):
    """A conv's value and both gradients, large enough to run as tasks on several threads,
    from C: the library defines its own guard of OpenBLAS's thread count (the JIT's is
    Python's) and gets the numbers Python gets."""
    rng = np.random.default_rng(0)
    w = sf.constant(rng.standard_normal((3, 3, 8, 16)).astype(np.float32) * 0.1)

    @sf.function
    def grads(x):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = sf.nn.conv2d(x, w, 2, "SAME")
            loss = sf.reduce_sum(y * y)
        dx, dw = tape.gradient(loss, [x, w])
        return loss, dx, dw

    x = rng.standard_normal((8, 32, 32, 8)).astype(np.float32)
    library = sf.aot.compile(grads, sf.TensorSpec([8, 32, 32, 8]), name="grads")
    assert "sf.blas.threads" not in library.header
    executable = build(tmp_path, library, [x])
    assert run(executable)[0] == "rc 0"
    want = [t.numpy() for t in grads(sf.constant(x))]
    for index, expected in enumerate(want):
        got = read_output(tmp_path, index, np.float32, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


def test_a_kernel_split_over_threads_in_a_c_program(tmp_path):
    """A kernel large enough to split its rows over the cores, with a broadcast operand:
    the library compiles it for any number of rows, as the JIT does, and gets Python's
    numbers."""
    bias = sf.constant(np.linspace(-1, 1, 512).astype(np.float32))

    @sf.function
    def squashed(x):
        return sf.tanh(x * 0.5 + bias)

    x = np.random.default_rng(2).standard_normal((601, 512)).astype(np.float32)
    library = sf.aot.compile(squashed, sf.TensorSpec([601, 512]), name="squashed")
    executable = build(tmp_path, library, [x])
    assert run(executable)[0] == "rc 0"
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (601, 512)),
                               squashed(sf.constant(x)).numpy(), rtol=1e-6, atol=1e-6)


def test_a_library_with_a_matmul_runs_after_its_directory_moves(tmp_path):
    """The BLAS is copied beside the library and found there (RUNPATH $ORIGIN): the
    directory, moved elsewhere, loads and runs with nothing of the build environment on
    any search path."""
    predict = mlp_forward()
    library = sf.aot.compile(predict, sf.TensorSpec([None, 784], sf.float32), name="mlp")
    built = tmp_path / "built"
    built.mkdir()
    x = np.random.default_rng(3).standard_normal((2, 784)).astype(np.float32)
    executable = build(built, library, [x])
    assert "scipy_openblas" in " ".join(p.name for p in built.iterdir())
    assert str(np.__file__).rsplit("/", 2)[0] not in (built / "libmlp.so").read_bytes().decode(
        "latin-1")  # no path into the Python environment is recorded
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(built, moved)
    shutil.rmtree(built)
    # The program is linked again to find libmlp.so where it is now; the OpenBLAS that
    # libmlp.so needs is found through libmlp.so's own RUNPATH only.
    subprocess.run([CC, "-O1", "-o", str(moved / "main"), str(moved / "main.c"), f"-L{moved}",
                    "-lmlp", f"-Wl,-rpath,{moved}"], check=True, cwd=moved)
    assert run(moved / executable.name, 2)[0] == "rc 0"
    probabilities, _ = predict(sf.constant(x))
    np.testing.assert_allclose(read_output(moved, 0, np.float32, (2, 10)),
                               probabilities.numpy(), rtol=1e-5, atol=1e-7)
    ldd = subprocess.run(["ldd", str(moved / "libmlp.so")], capture_output=True, text=True)
    blas = [line for line in ldd.stdout.splitlines() if "scipy_openblas" in line]
    assert blas and all(str(moved) in line for line in blas), ldd.stdout


def test_a_library_calling_lapack_without_a_matmul_links_the_blas(tmp_path):
    """LAPACK alone (no gemm in the module) still links NumPy's OpenBLAS."""
    @sf.function
    def inverse(a):
        return sf.linalg.inv(a)

    library = sf.aot.compile(inverse, sf.TensorSpec([None, 3, 3], sf.float64), name="inverse")
    assert library.libraries
    a = np.random.default_rng(5).standard_normal((2, 3, 3)) + 3 * np.eye(3)
    executable = build(tmp_path, library, [a])
    assert run(executable, 2)[0] == "rc 0"
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float64, (2, 3, 3)),
                               np.linalg.inv(a), rtol=1e-12, atol=1e-12)


def test_a_library_calling_lapack_in_a_c_program(tmp_path):
    """A Gaussian log-likelihood's Cholesky factor, triangular solves and slogdet (LAPACK,
    after the BLAS's matmul) in a C program: Python's numbers, for a batch of unknown size;
    an indefinite matrix returns the Cholesky's error code (no kernel to fall back on)."""
    @sf.function
    def gaussian(a, y, jitter):
        k = sf.matmul(a, a, transpose_b=True) + sf.reshape(jitter, [-1, 1, 1]) * sf.eye(
            4, dtype=sf.float64)
        low = sf.linalg.cholesky(k)
        alpha = sf.linalg.cholesky_solve(low, y)
        return alpha, sf.linalg.slogdet(k)[1]

    specs = [sf.TensorSpec([None, 4, 4], sf.float64), sf.TensorSpec([None, 4, 1], sf.float64),
             sf.TensorSpec([None], sf.float64)]
    library = sf.aot.compile(gaussian, *specs, name="gaussian")
    rng = np.random.default_rng(4)
    a, y = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 1))
    jitter = np.array([0.5, 1.0, 2.0])
    executable = build(tmp_path, library, [a, y, jitter])
    assert run(executable, 3, 3, 3)[0] == "rc 0"
    alpha, logdet = (t.numpy() for t in gaussian(a, y, jitter))
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float64, (3, 4, 1)), alpha,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(read_output(tmp_path, 1, np.float64, (3,)), logdet, rtol=1e-12)
    (tmp_path / "in2.bin").write_bytes(np.array([0.5, -100.0, 2.0]).tobytes())
    lines = run(executable, 3, 3, 3)
    assert lines[0].startswith("rc ") and int(lines[0][3:]) >= OP_FAILED


def test_large_splat_constants_take_no_space_and_are_filled_as_the_library_loads(tmp_path):
    """Constant-filled weights (1.5 everywhere, zeros, float16 -0.0) and a variable that
    starts as a splat take the library no file space beyond their size: zero-initialised
    storage that the library fills as it loads (`codegen/program/embedded.py`). Results
    and the variable's state as in this process."""
    weights = sf.constant(np.full((256, 256), 1.5, np.float32))
    bias = sf.constant(np.zeros((64, 256), np.float32))
    signs = sf.constant(np.full(40_000, -0.0, np.float16))
    scale = sf.Variable(np.full((64, 256), 0.25), name="scale")

    @sf.function
    def f(x):
        y = sf.matmul(x, weights) + bias
        scale.assign(scale * 2.0)
        return y * sf.cast(scale, sf.float32), signs * sf.cast(x[0, :1], sf.float16)

    spec = sf.TensorSpec([64, 256], sf.float32)
    library = sf.aot.compile(f, spec, name="splats", freeze=False)
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    executable = build(tmp_path, library, [x], state_sizes=[scale.numpy().nbytes])
    assert run(executable)[0] == "rc 0"
    assert (tmp_path / "libsplats.so").stat().st_size < 200_000  # the splats: 540 KB
    y, z = f(sf.constant(x))
    np.testing.assert_allclose(read_output(tmp_path, 0, np.float32, (64, 256)), y.numpy(),
                               rtol=1e-5)
    got = read_output(tmp_path, 1, np.float16, (40_000,))
    np.testing.assert_array_equal(got.view(np.uint16), z.numpy().view(np.uint16))
    np.testing.assert_array_equal(np.fromfile(tmp_path / "state0.bin", np.float64),
                                  np.full(64 * 256, 0.5))


def test_a_splat_is_the_same_bytes_in_every_element():
    assert is_splat(np.full((3, 5), 2.5, np.float32))
    assert not is_splat(np.array([0.0, -0.0]))
    nan = np.float32(np.nan)
    assert is_splat(np.array([nan, nan])) and not is_splat(np.array([nan, -nan]))
    assert is_splat(np.full(4, 1 - 2j)) and not is_splat(np.array([1 + 0j, 1 + 1j]))
    assert not is_splat(np.zeros(0))


def test_a_bfloat16_layer_in_a_c_program(tmp_path):
    """The bfloat16 matmul's own kernel (the CPU's bfloat16 dot products, or float32
    copies through the library's own gemm on a CPU without them) and its worker threads
    live in the library; a C program gets Python's numbers."""
    rng = np.random.default_rng(0)
    w = sf.constant(rng.standard_normal((96, 70)).astype(sf.bfloat16))
    b = sf.constant(rng.standard_normal(70).astype(sf.bfloat16))

    def layer(x):
        return sf.nn.relu(sf.matmul(x, w) + b)

    library = sf.aot.compile(layer, sf.TensorSpec([None, 96], sf.bfloat16), name="layer")
    x = rng.standard_normal((300, 96)).astype(sf.bfloat16)
    executable = build(tmp_path, library, [x])
    assert run(executable, 300)[0] == "rc 0"
    want = sf.function(layer)(sf.constant(x)).numpy()
    np.testing.assert_array_equal(read_output(tmp_path, 0, want.dtype, (300, 70)), want)


def test_a_plain_function_is_staged_and_anything_else_refused():
    library = sf.aot.compile(lambda x: x * 2.0, sf.TensorSpec([3], sf.float32), name="twice")
    assert "twice" in library.header
    with pytest.raises(TypeError, match="expected a function to compile, got int"):
        sf.aot.compile(42, sf.TensorSpec([3], sf.float32))
