"""Functions the JIT compiles once per process (`cpu.shared_function`): our own gemm is
declared, not defined, in the modules of ops the JIT builds, compiled once and linked
before them, so that modules of matmuls in separate compiles share one copy and give
NumPy's numbers; an IR dump (and an ahead-of-time library) still defines its own; a second
process finds both the gemm's code and its callers' in the disk cache, none refused, and
builds no IR of the gemm (its entry is keyed by stageflow's sources) unless it is read."""

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
from tests.codegen.test_lowered_conv import spec_for

pytestmark = pytest.mark.skipif(not matmul.own_gemm(dtypes.float32),
                                reason="the JIT's float32 gemms are OpenBLAS's here")
SYMBOL = "sf.cblas.gemm.float32"


def _spec(m: int, k: int, n: int):
    return spec_for("matmul", [np.ones((m, k), np.float32), np.ones((k, n), np.float32)],
                    False, transpose_a=False, transpose_b=False)


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


def test_a_dump_of_the_ops_defines_its_own_gemm():
    assert f'define internal void @"{SYMBOL}"' in module_text([_spec(64, 128, 96)])
    assert own_blas.REGIONS_SYMBOL in module_text([_spec(64, 128, 96)])


def test_a_shared_function_whose_code_was_cached_builds_its_ir_to_be_read():
    compile_ops([_spec(8, 8, 8)])
    cached = dataclasses.replace(cpu.process_jit()._shared[SYMBOL], code=b"", job=None,
                                 _text=None)
    assert f'define void @"{SYMBOL}"' in cached.text()


CHILD = r"""
import json, numpy as np, stageflow as sf
from stageflow.codegen.targets import cache, cpu
f = sf.function(lambda a, b: sf.matmul(a, b) + 1.0)
a = np.arange(64 * 128, dtype=np.float32).reshape(64, 128) / 1000
b = np.ones((128, 96), np.float32)
print(json.dumps({"ok": bool(np.allclose(f(a, b).numpy(), a @ b + 1, rtol=1e-5)),
                  "gemm": "sf.cblas.gemm.float32" in f.get_concrete_function(a, b).ir("lowered"),
                  "built": cpu.process_jit()._shared["sf.cblas.gemm.float32"].job is not None,
                  "hits": cache.stats.hits, "misses": cache.stats.misses,
                  "corrupt": cache.stats.corrupt}))
"""


def test_a_second_process_links_the_gemm_and_its_callers_from_the_disk_cache(tmp_path):
    env = {**os.environ, "STAGEFLOW_CACHE_DIR": str(tmp_path), "STAGEFLOW_CACHE": "1"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert all(run["ok"] and run["gemm"] and run["corrupt"] == 0 for run in runs)
    assert runs[0]["misses"] > 0 and runs[1]["misses"] == 0 and runs[1]["hits"] > 0
    assert runs[0]["built"] and not runs[1]["built"]
