# RUN: python %s | filecheck %s
"""A static elementwise kernel lowers to one flat loop: load, compute, store per element."""

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

kernel = parse_module("""
func.func @affine(%x: tensor<256x4xf32>, %y: tensor<256x4xf32>) -> tensor<256x4xf32> {
  %c = sf.constant dense<1.0> : tensor<f32>
  %0 = sf.multiply %x, %y : (tensor<256x4xf32>, tensor<256x4xf32>) -> tensor<256x4xf32>
  %1 = sf.add %0, %c : (tensor<256x4xf32>, tensor<f32>) -> tensor<256x4xf32>
  func.return %1 : tensor<256x4xf32>
}
""").ops.first
print(CPUTarget().emit(kernel))

# The checks compare every dim with the static type; nothing is read before they pass.
# CHECK-LABEL: define internal i32 @"affine.check"(i64 %"arg0.d0", i64 %"arg0.d1",
# CHECK: icmp eq i64 %"arg0.d0", 256
# CHECK: icmp eq i64 %"arg0.d1", 4
# CHECK: ret i32

# Every argument is full-size: one flat loop of 1024 elements, no broadcasting nest.
# CHECK-LABEL: define internal void @"affine.run"(ptr %"arg0", ptr %"arg1", ptr noalias %"arg2"
# CHECK-NEXT: {
# CHECK-NEXT: entry:
# CHECK-NEXT: br label %"i.head"
# CHECK-NEXT: i.head:
# CHECK-NEXT: %"i" = phi i64 [0, %"entry"], [%[[NEXT:".[0-9]+"]], %"i.body"]
# CHECK-NEXT: %[[MORE:".[0-9]+"]] = icmp slt i64 %"i", 1024
# CHECK-NEXT: br i1 %[[MORE]], label %"i.body", label %"i.end"
# CHECK-NEXT: i.body:
# CHECK-NEXT: %[[PX:".[0-9]+"]] = getelementptr inbounds float, ptr %"arg0", i64 %"i"
# CHECK-NEXT: %[[X:".[0-9]+"]] = load float, ptr %[[PX]]
# CHECK-NEXT: %[[PY:".[0-9]+"]] = getelementptr inbounds float, ptr %"arg1", i64 %"i"
# CHECK-NEXT: %[[Y:".[0-9]+"]] = load float, ptr %[[PY]]
# CHECK-NEXT: %[[XY:".[0-9]+"]] = fmul float %[[X]], %[[Y]]
# CHECK-NEXT: %[[SUM:".[0-9]+"]] = fadd float %[[XY]], 0x3ff0000000000000
# CHECK-NEXT: %[[PO:".[0-9]+"]] = getelementptr inbounds float, ptr %"arg2", i64 %"i"
# CHECK-NEXT: store float %[[SUM]], ptr %[[PO]]
# CHECK-NEXT: %[[NEXT]] = add nsw i64 %"i", 1
# CHECK-NEXT: br label %"i.head"
# CHECK-NEXT: i.end:
# CHECK-NEXT: ret void

# The ABI entry points: pointers and dims arrays, and NumPy array objects.
# CHECK-LABEL: define i32 @"affine"(ptr %"args", ptr %"dims")
# CHECK: call i32 @"affine.check"
# CHECK: call void @"affine.run"
# CHECK-LABEL: define i32 @"affine.py"(ptr %"array0", ptr %"array1", ptr %"array2")
