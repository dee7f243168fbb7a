# RUN: python %s | filecheck %s
"""Lowered data movement: a slice with a negative step along an unknown dim and a
transpose, both one strided copy reading the input in place (no copy first): the slice
starts at its first element and multiplies the input's strides by its steps; the
transpose swaps the strides, and as its output's rows read across the input's rows it
copies in square tiles of 8, in tasks over its other axes."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

module = parse_module("""
func.func @f(%x: tensor<?x8xf32>) -> (tensor<?x3xf32>, tensor<8x?xf32>) {
  %0 = sf.slice %x {slices = [[none, none, -2], [1, 7, 2]]} : (tensor<?x8xf32>) -> tensor<?x3xf32>
  %1 = sf.transpose %x {perm = [1, 0]} : (tensor<?x8xf32>) -> tensor<8x?xf32>
  func.return %0, %1 : tensor<?x3xf32>, tensor<8x?xf32>
}
""")
ops = list(module.ops.first.body.block.ops)[:2]
print(module_text([op_spec(op) for op in ops]))

# x[::-2] along the unknown axis starts at d0 - 1 and has ceil(d0 / 2) elements;
# x[:, 1:7:2] along the static axis folds to start 1, 3 elements.
# CHECK-LABEL: define i32 @"slice"(
# CHECK: icmp eq i64 %"arg1.d1", 3
# CHECK: %[[FIRST:".[0-9]+"]] = sub i64 %"arg0.d0", 1
# CHECK-NEXT: %[[SPAN:".[0-9]+"]] = sub i64 %[[FIRST]], -1
# CHECK-NEXT: %[[M:".[0-9]+"]] = sub i64 %[[SPAN]], 1
# CHECK-NEXT: %[[Q:".[0-9]+"]] = sdiv i64 %[[M]], 2
# CHECK-NEXT: %[[COUNT:".[0-9]+"]] = add i64 %[[Q]], 1
# CHECK-NEXT: %[[POS:".[0-9]+"]] = icmp sgt i64 %[[SPAN]], 0
# CHECK-NEXT: %[[LEN:".[0-9]+"]] = select  i1 %[[POS]], i64 %[[COUNT]], i64 0
# CHECK-NEXT: %[[BASE0:".[0-9]+"]] = mul i64 %[[FIRST]], %"arg0.s0"
# CHECK-NEXT: %[[STEP0:".[0-9]+"]] = mul i64 %"arg0.s0", -2
# CHECK-NEXT: %[[BASE:".[0-9]+"]] = add i64 %[[BASE0]], %"arg0.s1"
# CHECK-NEXT: %[[STEP1:".[0-9]+"]] = mul i64 %"arg0.s1", 2
# CHECK-NEXT: icmp eq i64 %"arg1.d0", %[[LEN]]
# CHECK: i1.body:
# CHECK-NEXT: %[[A:".[0-9]+"]] = mul i64 %"i0", %[[STEP0]]
# CHECK-NEXT: %[[B:".[0-9]+"]] = add i64 %[[BASE]], %[[A]]
# CHECK-NEXT: %[[C:".[0-9]+"]] = mul i64 %"i1", %[[STEP1]]
# CHECK-NEXT: %[[D:".[0-9]+"]] = add i64 %[[B]], %[[C]]
# CHECK-NEXT: %[[P:".[0-9]+"]] = getelementptr float, ptr %"arg0", i64 %[[D]]
# CHECK-NEXT: %[[V:".[0-9]+"]] = load float, ptr %[[P]]
# CHECK: store float %[[V]]

# The transpose reads x at (row * s1 + column * s0): the strides swapped, no copy first;
# rows and columns in tiles of 8 of each, the last tiles clipped to the dims, each tile
# the strided copy from its corner. Its tasks share out the output's other axes (none
# here: one unit, one task).
# CHECK-LABEL: define i32 @"transpose"(
# CHECK: icmp eq i64 %"arg1.d0", 8
# CHECK: icmp eq i64 %"arg1.d1", %"arg0.d0"
# CHECK: call i1 @"sf.pool.run"(ptr (ptr)* @"transpose.part.thread"
# CHECK-LABEL: define internal i32 @"transpose.part.body"(
# CHECK: unit.body:
# CHECK: tile_row.body:
# CHECK: tile_column.body:
# CHECK: add i64 %"tile_column", 8
# CHECK: %[[R:".[0-9]+"]] = mul i64 %"tile_row", %"arg0.s1"
# CHECK-NEXT: %[[Q:".[0-9]+"]] = mul i64 %"tile_column", %"arg0.s0"
# CHECK-NEXT: %[[CORNER:".[0-9]+"]] = add i64 %[[R]], %[[Q]]
# CHECK: i1.body:
# CHECK-NEXT: %[[A:".[0-9]+"]] = mul i64 %"i0", %"arg0.s1"
# CHECK-NEXT: %[[B:".[0-9]+"]] = add i64 %[[CORNER]], %[[A]]
# CHECK-NEXT: %[[C:".[0-9]+"]] = mul i64 %"i1", %"arg0.s0"
# CHECK-NEXT: %[[D:".[0-9]+"]] = add i64 %[[B]], %[[C]]
# CHECK-NEXT: getelementptr float, ptr %"arg0", i64 %[[D]]
