# RUN: python %s | filecheck %s
"""A kernel as a PTX .entry: pointer and dim parameters, a grid-stride loop over the
elements from the NVVM special registers, global loads and stores; ptxas accepts it."""

import subprocess
import sys
import tempfile
from pathlib import Path

from stageflow.codegen import PTXTarget
from stageflow.codegen.targets.ptx import ptxas_path
from stageflow.ir import parse_module

kernel = parse_module("""
func.func @scale(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %0 = sf.multiply %x, %y : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
""").ops.first

ptxas = ptxas_path()
if ptxas is None:
    sys.exit("ptxas not found: install nvidia-cuda-nvcc (the test extra)")
for arch in ("sm_80", "sm_90"):
    ptx = PTXTarget(arch).compile(kernel)
    print(ptx)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "scale.ptx"
        source.write_text(ptx)
        result = subprocess.run([str(ptxas), f"-arch={arch}", str(source), "-o",
                                 str(Path(tmp) / "scale.cubin")], capture_output=True, text=True)
    print(f"ptxas {arch}: {'ok' if result.returncode == 0 else result.stderr}")

# CHECK: .target sm_80
# CHECK-LABEL: .visible .entry scale(
# CHECK-NEXT: .param .u64 .ptr .global {{.*}}scale_param_0,
# CHECK-NEXT: .param .u64 .ptr .global {{.*}}scale_param_1,
# CHECK-NEXT: .param .u64 .ptr .global {{.*}}scale_param_2,
# CHECK-NEXT: .param .u64 scale_param_3,
# CHECK-NEXT: .param .u64 scale_param_4,
# CHECK-NEXT: .param .u64 scale_param_5
# CHECK-NEXT: )
# CHECK-DAG: %ctaid.x
# CHECK-DAG: %ntid.x
# CHECK-DAG: %tid.x
# CHECK-DAG: %nctaid.x
# CHECK: ld.global.{{[bf]}}32
# CHECK: ld.global.{{[bf]}}32
# CHECK: mul.rn.f32
# CHECK: st.global.{{[bf]}}32
# CHECK: ptxas sm_80: ok
# CHECK: .target sm_90
# CHECK-LABEL: .visible .entry scale(
# CHECK: mul.rn.f32
# CHECK: ptxas sm_90: ok
