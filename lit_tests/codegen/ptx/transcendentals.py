# RUN: python %s | filecheck %s
"""Transcendentals on PTX are instruction sequences (no libdevice, no calls, no
approximate ex2/sin instructions): tanh in float32, erf in float64, and bfloat16 by bit
operations; ptxas accepts them for sm_80 and sm_90."""

import subprocess
import sys
import tempfile
from pathlib import Path

from stageflow.codegen import PTXTarget
from stageflow.codegen.targets.ptx import ptxas_path
from stageflow.ir import parse_module

module = parse_module("""
func.func @act(%x: tensor<?xf32>, %d: tensor<?xf64>, %h: tensor<?xbf16>)
    -> (tensor<?xf32>, tensor<?xf64>, tensor<?xbf16>) {
  %0 = sf.tanh %x : (tensor<?xf32>) -> tensor<?xf32>
  %1 = sf.erf %d : (tensor<?xf64>) -> tensor<?xf64>
  %2 = sf.logistic %h : (tensor<?xbf16>) -> tensor<?xbf16>
  func.return %0, %1, %2 : tensor<?xf32>, tensor<?xf64>, tensor<?xbf16>
}
""")
ptxas = ptxas_path()
if ptxas is None:
    sys.exit("ptxas not found: install nvidia-cuda-nvcc (the test extra)")
for arch in ("sm_80", "sm_90"):
    ptx = PTXTarget(arch).compile(module.ops.first)
    print(ptx)
    forbidden = [w for w in ("call", "ex2.approx", "lg2.approx", "sin.approx", "tanh.approx")
                 if w in ptx]
    print(f"{arch} calls or approximate instructions: {forbidden or 'none'}")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "act.ptx"
        source.write_text(ptx)
        result = subprocess.run([str(ptxas), f"-arch={arch}", str(source), "-o",
                                 str(Path(tmp) / "act.cubin")], capture_output=True, text=True)
    print(f"ptxas {arch}: {'ok' if result.returncode == 0 else result.stderr}")

# CHECK-LABEL: .visible .entry act(
# CHECK-DAG: fma.rn.f32
# CHECK-DAG: div.rn.f32
# CHECK-DAG: fma.rn.f64
# CHECK-DAG: div.rn.f64
# CHECK-DAG: ld.global.{{[bu]}}16
# CHECK-DAG: st.global.{{[bu]}}16
# CHECK: sm_80 calls or approximate instructions: none
# CHECK-NEXT: ptxas sm_80: ok
# CHECK-LABEL: .visible .entry act(
# CHECK: sm_90 calls or approximate instructions: none
# CHECK-NEXT: ptxas sm_90: ok
