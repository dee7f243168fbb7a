"""Functions the JIT compiles once per process (`cpu.shared_function`): our own gemm and
each convolution family's code are declared, not defined, in the modules of ops the JIT
builds, compiled once and linked before them, so that modules of matmuls or convolutions
of other shapes in separate compiles share one copy and give NumPy's numbers; an IR dump
(and an ahead-of-time library) still defines its own; a module built from patched code
generators (`cpu.private`) keeps its copies to itself; a second process finds both the
shared code and its callers' in the disk cache, none refused, and builds no IR of the
shared code (its entry is keyed by stageflow's sources) unless it is read."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from stageflow.codegen.lowered import matmul, own_blas
from stageflow.codegen.lowered.compile import compile_ops, module_text
from stageflow.codegen.targets import cpu
from stageflow.core import dtypes
from tests.codegen.test_lowered_conv import conv_reference, spec_for, spy_on_gemms, values

OWN_GEMM = matmul.own_gemm(dtypes.float32)
own_gemm_only = pytest.mark.skipif(not OWN_GEMM,
                                   reason="the JIT's float32 gemms are OpenBLAS's here")
SYMBOL = "sf.cblas.gemm.float32"
CONV = "sf.conv2d.float64"
GEOMETRY = {"strides": (2, 1), "padding": ((1, 1), (0, 1)), "dilations": (1, 1)}


def _spec(m: int, k: int, n: int):
    return spec_for("matmul", [np.ones((m, k), np.float32), np.ones((k, n), np.float32)],
                    False, transpose_a=False, transpose_b=False)


@own_gemm_only
def test_modules_of_ops_declare_the_gemm_the_process_compiles_once():
    rng = np.random.default_rng(0)
    results = []
    for m, k, n in [(64, 128, 96), (130, 70, 50)]:
        (op,) = compile_ops([_spec(m, k, n)])
        module, *shared = op.llvm_ir.split("; ModuleID")[1:]
        assert f'declare void @"{SYMBOL}"' in module
        assert f'define internal void @"{SYMBOL}"' not in module
        assert any(f'define void @"{SYMBOL}"' in text for text in shared)  # for reading
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        out = np.empty((m, n), np.float32)
        assert op.call([a, b], [out]) == 0
        results.append((out, a @ b))
    jit = cpu.process_jit()
    assert SYMBOL in jit._shared_linked
    assert jit._shared[SYMBOL].entry in jit._permanent.loaded
    for got, want in results:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@own_gemm_only
def test_a_dump_of_the_ops_defines_its_own_gemm():
    assert f'define internal void @"{SYMBOL}"' in module_text([_spec(64, 128, 96)])
    assert own_blas.REGIONS_SYMBOL in module_text([_spec(64, 128, 96)])


@own_gemm_only
def test_a_shared_function_whose_code_was_cached_builds_its_ir_to_be_read():
    compile_ops([_spec(8, 8, 8)])
    cached = dataclasses.replace(cpu.process_jit()._shared[SYMBOL], code=b"", job=None,
                                 _text=None)
    assert f'define void @"{SYMBOL}"' in cached.text()


def _conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """A float64 conv2d's operands and an output to write (im2col and the gemm: output
    channels the direct loops do not take), and the spec of its shapes."""
    x, w = values(x_shape, np.float64), values(w_shape, np.float64, seed=1)
    spec = spec_for("conv2d", [x, w], False, **GEOMETRY)
    return x, w, np.empty(spec.outputs[0].shape, np.float64), spec


def test_convolutions_of_every_shape_call_their_familys_one_copy():
    for x_shape, w_shape in [((2, 7, 6, 3), (3, 3, 3, 5)), ((1, 9, 4, 2), (2, 3, 2, 7))]:
        x, w, out, spec = _conv(x_shape, w_shape)
        (op,) = compile_ops([spec])
        module, *shared = op.llvm_ir.split("; ModuleID")[1:]
        assert f'declare i32 @"{CONV}"' in module
        assert f'define internal i32 @"{CONV}"' not in module
        assert any(f'define i32 @"{CONV}"' in text for text in shared)  # for reading
        assert op.call([x, w], [out]) == 0
        np.testing.assert_allclose(out, conv_reference(x, w, **GEOMETRY), rtol=1e-12)
    assert CONV in cpu.process_jit()._shared_linked
    assert f'define internal i32 @"{CONV}"' in module_text([spec])


def test_a_private_module_keeps_its_patched_copies_to_itself(monkeypatch):
    """A module built from spied gemms defines the family's code under the shared name. In
    an engine of its own it serves no other module's declaration of that name: MCJIT binds
    a declaration to any symbol its engine holds, another module's internal ones too."""
    x, w, out, spec = _conv((2, 7, 6, 3), (3, 3, 3, 5))
    (shared,) = compile_ops([spec])
    calls = spy_on_gemms(monkeypatch)
    with cpu.private():
        (spied,) = compile_ops([_conv((2, 5, 5, 3), (3, 3, 3, 6))[3]])
    assert f'define internal i32 @"{CONV}"' in spied.llvm_ir
    jit = cpu.process_jit()
    engine = spied._raw.engine
    assert engine not in (jit.current, jit._permanent, shared._raw.engine)
    monkeypatch.undo()
    x, w, out, spec = _conv((1, 8, 8, 3), (3, 3, 3, 6))
    (op,) = compile_ops([spec])
    assert op._raw.engine is not engine
    assert op.call([x, w], [out]) == 0 and not calls
    np.testing.assert_allclose(out, conv_reference(x, w, **GEOMETRY), rtol=1e-12)


CHILD = r"""
import json, numpy as np, stageflow as sf
from stageflow.codegen.targets import cache, cpu
f = sf.function(lambda a, b: sf.matmul(a, b) + 1.0)
a = np.arange(64 * 128, dtype=np.float32).reshape(64, 128) / 1000
b = np.ones((128, 96), np.float32)
conv = sf.function(lambda x, w: sf.nn.conv2d(x, w, 1, "SAME"))
x, w = np.ones((1, 6, 6, 4), np.float32), np.ones((3, 3, 4, 5), np.float32)
shared = cpu.process_jit()._shared
print(json.dumps({"ok": bool(np.allclose(f(a, b).numpy(), a @ b + 1, rtol=1e-5)),
                  "conv": float(conv(x, w).numpy()[0, 2, 2, 0]) == 36.0,
                  "gemm": "sf.cblas.gemm.float32" in f.get_concrete_function(a, b).ir("lowered"),
                  "built": [name for name in ("sf.cblas.gemm.float32", "sf.conv2d.float32")
                            if name in shared and shared[name].job is not None],
                  "hits": cache.stats.hits, "misses": cache.stats.misses,
                  "corrupt": cache.stats.corrupt}))
"""


def test_a_second_process_links_the_gemm_and_its_callers_from_the_disk_cache(tmp_path):
    env = {**os.environ, "STAGEFLOW_CACHE_DIR": str(tmp_path), "STAGEFLOW_CACHE": "1"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert all(run["ok"] and run["conv"] and run["corrupt"] == 0 for run in runs)
    assert all(run["gemm"] == OWN_GEMM for run in runs)
    assert runs[0]["misses"] > 0 and runs[1]["misses"] == 0 and runs[1]["hits"] > 0
    assert runs[0]["built"] == ["sf.cblas.gemm.float32"] * OWN_GEMM + ["sf.conv2d.float32"]
    assert runs[1]["built"] == []
