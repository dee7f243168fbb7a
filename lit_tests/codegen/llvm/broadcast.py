# RUN: python %s | filecheck %s
"""Dynamic dims: the run function tests at run time whether the flat loop is valid, else
runs the broadcasting nest with each argument's own strides (0 where its dim is 1)."""

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

kernel = parse_module("""
func.func @bias(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> {
  %0 = sf.add %x, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  func.return %0 : tensor<?x?xf32>
}
""").ops.first
print(CPUTarget().emit(kernel))

# The iteration size of each axis is the first input dim that is not 1; input dims must
# be 1 or that size, outputs exactly that size, else the code names the argument (1-based).
# CHECK-LABEL: define internal i32 @"bias.check"
# CHECK-SAME: (i64 %"arg0.d0", i64 %"arg0.d1", i64 %"arg1.d0", i64 %"arg2.d0", i64 %"arg2.d1")
# CHECK: %[[ROWS:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, i64 %"arg0.d0", i64 1
# CHECK: %[[B:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, i64 %"arg1.d0", i64 1
# CHECK: %[[COLS:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, i64 %"arg0.d1", i64 %[[B]]
# CHECK: icmp eq i64 %"arg2.d0", %[[ROWS]]
# CHECK: icmp eq i64 %"arg2.d1", %[[COLS]]
# CHECK: select i1 %{{".[0-9]+"}}, i32 0, i32 3
# CHECK: icmp eq i64 %"arg1.d0", %[[COLS]]
# CHECK: select i1 %{{".[0-9]+"}}, i32 %{{".[0-9]+"}}, i32 2
# CHECK: select i1 %{{".[0-9]+"}}, i32 %{{".[0-9]+"}}, i32 1

# The flat loop runs when every input has all the elements (the output always has, once
# the checks pass); otherwise the nest, each argument at its own strides.
# CHECK-LABEL: define internal void @"bias.run"
# CHECK: %[[TOTAL:".[0-9]+"]] = mul i64 %[[R:".[0-9]+"]], %[[C:".[0-9]+"]]
# CHECK: icmp eq i64 %"arg1.d0", %[[TOTAL]]
# CHECK-NOT: %"arg2.d0"
# CHECK: br i1 %{{".[0-9]+"}}, label %"flat", label %"broadcast"
# CHECK: broadcast:
# CHECK: %[[B1:".[0-9]+"]] = icmp eq i64 %"arg1.d0", 1
# CHECK-NEXT: %[[BSTRIDE:".[0-9]+"]] = select i1 %[[B1]], i64 0, i64 1
# CHECK: i.body:
# CHECK: fadd float
# CHECK: i0.head:
# CHECK-NEXT: %"i0" = phi i64 [0, %"broadcast"]
# CHECK: icmp slt i64 %"i0", %[[R]]
# CHECK: i1.head:
# CHECK-NEXT: %"i1" = phi i64 [0, %"i0.body"]
# CHECK: icmp slt i64 %"i1", %[[C]]
# CHECK: i1.body:
# CHECK: %[[OFF:".[0-9]+"]] = mul i64 %"i1", %[[BSTRIDE]]
# CHECK: %[[PB:".[0-9]+"]] = getelementptr inbounds float, ptr %"arg1", i64 %[[OFF]]
# CHECK-NEXT: load float, ptr %[[PB]]
# CHECK-NEXT: fadd float
# CHECK: store float
