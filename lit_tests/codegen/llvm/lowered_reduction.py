# RUN: python %s | filecheck %s
"""A lowered reduction: reduce_max over the innermost axis of a strided ?x8 input. The
dims are checked before any access, an empty max is refused (the NumPy kernel then raises),
each row is folded into a register with NaN-propagating llvm.maximum at the input's own
strides, then combined into the output element."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

function = parse_module("""
func.func @f(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  %0 = sf.reduce_max %x {axes = [1], keepdims = false} : (tensor<?x8xf32>) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
""").ops.first
print(module_text([op_spec(function.body.block.first_op)]))

# CHECK-LABEL: define i32 @"reduce_max"(ptr %"data", ptr %"dims", ptr %"strides")
# CHECK: %"arg0.d0" = load i64
# CHECK: %[[STATIC:".[0-9]+"]] = icmp eq i64 %"arg0.d1", 8
# CHECK: %"arg0.s0" = load i64
# CHECK: %"arg0.s1" = load i64
# CHECK: %"arg1.d0" = load i64
# CHECK: fail:
# CHECK-NEXT: ret i32 1
# CHECK: icmp eq i64 %"arg1.d0", %"arg0.d0"
# CHECK: fail.1:
# CHECK-NEXT: ret i32 2
# CHECK: init0.body:
# CHECK: store float 0xfff0000000000000
# CHECK: i0.body:
# CHECK: %[[ROW:".[0-9]+"]] = mul i64 %"i0", %"arg0.s0"
# CHECK: j.head:
# CHECK: %[[ACC:".[0-9]+"]] = phi  float [0xfff0000000000000, %"i0.body"],
# CHECK-SAME: [%[[NEXT:".[0-9]+"]], %"j.body"]
# CHECK: icmp slt i64 %"j", 8
# CHECK: j.body:
# CHECK: %[[COL:".[0-9]+"]] = mul i64 %"j", %"arg0.s1"
# CHECK: %[[AT:".[0-9]+"]] = add i64 %[[ROW]], %[[COL]]
# CHECK: %[[P:".[0-9]+"]] = getelementptr float, ptr %"arg0", i64 %[[AT]]
# CHECK: %[[X:".[0-9]+"]] = load float, ptr %[[P]]
# CHECK: %[[NEXT]] = call float @"llvm.maximum.f32"(float %[[ACC]], float %[[X]])
# CHECK: j.end:
# CHECK: call float @"llvm.maximum.f32"
# CHECK: store float

# The NumPy entry reads data, dims (+32) and byte strides (+40) from the array structs
# and divides the strides by the element size.
# CHECK-LABEL: define i32 @"reduce_max.py"(ptr %"array0", ptr %"array1")
# CHECK: getelementptr i8, ptr %"array0", i64 40
# CHECK: sdiv i64 %{{".[0-9]+"}}, 4
# CHECK: call i32 @"reduce_max"(
