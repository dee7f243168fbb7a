# RUN: python %s | filecheck %s
"""After O3 with the host's features the flat loop is vectorised: vector loads, vector
fma for the tanh polynomial, vector division, vector stores (4, 8 or 16 floats wide)."""

import re

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

kernel = parse_module("""
func.func @gelu_part(%x: tensor<?xf32>, %w: tensor<?xf32>) -> tensor<?xf32> {
  %0 = sf.multiply %x, %w : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %1 = sf.tanh %0 : (tensor<?xf32>) -> tensor<?xf32>
  %2 = sf.add %1, %x : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  func.return %2 : tensor<?xf32>
}
""").ops.first
optimized = str(CPUTarget().optimized(kernel))
# Only the public entry points remain; the checked, inlined loop is inside the raw one.
print("\n".join(line for line in optimized.splitlines()
                if re.match(r"define|\s+(%\S+ = )?(load|store|fmul|fdiv|tail call|call) ", line)))

# CHECK-LABEL: define {{.*}}i32 @gelu_part(ptr
# CHECK: load <[[N:4|8|16]] x float>
# CHECK: fmul <[[N]] x float>
# CHECK: call <[[N]] x float> @llvm.fma.v[[N]]f32
# CHECK: fdiv <[[N]] x float>
# CHECK: store <[[N]] x float>
# The NumPy entry reads the arrays' pointers and dims and calls the raw entry: one copy of
# the loop per kernel.
# CHECK-LABEL: define {{.*}}i32 @gelu_part.py(ptr
# CHECK-NOT: <{{[0-9]+}} x float>
# CHECK: call i32 @gelu_part(ptr
