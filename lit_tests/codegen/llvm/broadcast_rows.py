# RUN: python %s | filecheck %s
"""A per-channel scale of static NHWC shape: the channel loop is short and constant, so
LLVM unrolls it whole. The loops around it carry ``llvm.loop.vectorize.width 1`` (the loop
vectoriser would otherwise vectorise the width loop across rows, with gathers and
scatters) and the unrolled row is SLP-vectorised into whole-vector loads and stores. With
three channels the outer loops stay free to vectorise (by interleaved loads, the faster
there)."""

import re

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module


def kernel(channels: int) -> object:
    shape = f"32x32x32x{channels}xf32"
    return parse_module(f"""
func.func @scale{channels}(%x: tensor<{shape}>, %g: tensor<{channels}xf32>)
    -> tensor<{shape}> {{
  %0 = sf.multiply %x, %g : (tensor<{shape}>, tensor<{channels}xf32>) -> tensor<{shape}>
  func.return %0 : tensor<{shape}>
}}
""").ops.first


target = CPUTarget()
emitted = str(target.emit(kernel(16)))
print("\n".join(line for line in emitted.splitlines()
                if re.match(r"define|\s+br label %\"i\d\.head\"|!", line)))
# CHECK-LABEL: define internal void @"scale16.run"
# The back edges of the loops around the channel loop carry loop metadata; the channel
# loop's (the second branch to its head) does not.
# CHECK-DAG: br label %"i0.head", !llvm.loop ![[I0:[0-9]+]]
# CHECK-DAG: br label %"i1.head", !llvm.loop ![[I1:[0-9]+]]
# CHECK-DAG: br label %"i2.head", !llvm.loop ![[I2:[0-9]+]]
# CHECK-DAG: br label %"i3.head"{{$}}
# CHECK-DAG: br label %"i3.head"{{$}}
# CHECK: ![[WIDTH:[0-9]+]] = !{ !"llvm.loop.vectorize.width", i32 1 }
# CHECK-DAG: ![[I2]] = !{ ![[I2]], ![[WIDTH]] }
# CHECK-DAG: ![[I1]] = !{ ![[I1]], ![[WIDTH]] }
# CHECK-DAG: ![[I0]] = !{ ![[I0]], ![[WIDTH]] }

optimized = str(target.optimized(kernel(16)))
print("\n".join(line for line in optimized.splitlines()
                if re.match(r"define|\s+(%\S+ = )?(load|store|call) ", line)))
# CHECK-LABEL: define {{.*}}i32 @scale16(ptr
# CHECK-NOT: gather
# CHECK-NOT: scatter
# CHECK: load <[[N:8|16]] x float>
# CHECK-NOT: gather
# CHECK-NOT: scatter
# CHECK: store <[[N]] x float>
# CHECK-NOT: gather
# CHECK-NOT: scatter
# CHECK-LABEL: define {{.*}}i32 @scale16.py(ptr

print("\n".join(line for line in str(target.emit(kernel(3))).splitlines()
                if re.match(r"define|\s+br label %\"i\d\.head\"|!", line)))
# CHECK-LABEL: define internal void @"scale3.run"
# CHECK-NOT: !llvm.loop
# CHECK-LABEL: define i32 @"scale3"
