# RUN: python %s | filecheck %s
"""Lowered random_bits: Philox-4x32-10 on i32 words, each product a 32x32->64 multiply
split into halves, the key bumped by the Weyl constants between rounds, the 64-bit counter
advanced by ceil(6 / 4) = 2 blocks. One full block in the loop, then two words of the
last block stored one by one."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

module = parse_module("""
func.func @f(%s: tensor<4xui32>) -> (tensor<2x3xui32>, tensor<4xui32>) {
  %0, %1 = sf.random_bits %s {shape = [2, 3]}
      : (tensor<4xui32>) -> (tensor<2x3xui32>, tensor<4xui32>)
  func.return %0, %1 : tensor<2x3xui32>, tensor<4xui32>
}
""")
print(module_text([op_spec(module.ops.first.body.block.first_op)]))

# CHECK-LABEL: define i32 @"random_bits"(
# CHECK: %[[LO:".[0-9]+"]] = zext i32 %{{".[0-9]+"}} to i64
# CHECK-NEXT: %[[HI:".[0-9]+"]] = zext i32 %{{".[0-9]+"}} to i64
# CHECK-NEXT: %[[HIGH:".[0-9]+"]] = shl i64 %[[HI]], 32
# CHECK-NEXT: %[[CTR:".[0-9]+"]] = or i64 %[[LO]], %[[HIGH]]
# CHECK: icmp slt i64 %"block", 1
# CHECK: block.body:
# CHECK-NEXT: %[[AT:".[0-9]+"]] = add i64 %[[CTR]], %"block"
# CHECK-NEXT: %[[C0:".[0-9]+"]] = trunc i64 %[[AT]] to i32
# CHECK: %[[W:".[0-9]+"]] = zext i32 %[[C0]] to i64
# CHECK-NEXT: %[[P:".[0-9]+"]] = mul i64 %[[W]], 3528531795
# CHECK-NEXT: lshr i64 %[[P]], 32
# CHECK: mul i64 %{{".[0-9]+"}}, 3449720151
# CHECK: add i32 %{{".[0-9]+"}}, -1640531527
# CHECK-NEXT: add i32 %{{".[0-9]+"}}, -1150833019
# Nine key bumps for ten rounds in each block:
# CHECK-COUNT-8: add i32 %{{".[0-9]+"}}, -1640531527
# CHECK-NOT: add i32 %{{".[0-9]+"}}, -1640531527
# CHECK: store i32
# CHECK: block.end:
# CHECK-NEXT: add i64 %[[CTR]], 1
# CHECK: store i32
# CHECK: store i32
# CHECK-NOT: store i32
# CHECK: %[[NEW:".[0-9]+"]] = add i64 %[[CTR]], 2
# CHECK-NEXT: trunc i64 %[[NEW]] to i32
# CHECK-NEXT: lshr i64 %[[NEW]], 32
