# RUN: python %s | filecheck %s
"""A fused convolution (`conv2d_fused`: a 3x3 conv, its scale per output channel, a
residual and a ReLU) compiles to conv2d's entry and conv2d's shared code: the entry checks
the scales (one per output channel) and the residual (the result's dims), row-major, then
passes the input's, filters' and output's pointers, the scales', nulls for the shifts and
the second scales and shifts it does not have, the residual's, and a geometry whose last
word (the ReLU) is 1. In the
convolutions' own gemm, a tile whose chunk holds the last terms first starts reading its
residual's lines, and after its terms multiplies each vector by its channels' scales,
adds the residual's elements and keeps x where x > 0 or x is NaN, else 0, before storing:
each step only where its pointer is not null."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

module = parse_module("""
func.func @f(%x: tensor<?x6x6x4xf32>, %w: tensor<3x3x4x40xf32>, %s: tensor<40xf32>,
             %r: tensor<?x6x6x40xf32>) -> tensor<?x6x6x40xf32> {
  %y = sf.conv2d_fused %x, %w, %s, %r {filter_shape = [3, 3, 4, 40], strides = [1, 1],
      padding = [[1, 1], [1, 1]], dilations = [1, 1], packed = false, scale = true,
      shift = false, residual = true, activation = "relu"}
      : (tensor<?x6x6x4xf32>, tensor<3x3x4x40xf32>, tensor<40xf32>, tensor<?x6x6x40xf32>)
      -> tensor<?x6x6x40xf32>
  func.return %y : tensor<?x6x6x40xf32>
}
""")
print(module_text([op_spec(next(iter(module.ops.first.body.block.ops)))]))

# CHECK-LABEL: define i32 @"conv2d_fused"(
# CHECK: %"operands" = alloca ptr, i32 8
# CHECK: getelementptr i64, i64* %"geometry", i64 23
# CHECK-NEXT: store i64 1,
# CHECK: icmp eq i64 %"arg2.d0", %"arg1.d3"
# CHECK-NEXT: icmp eq i64 %"arg2.s0", 1
# CHECK: icmp eq i64 %"arg3.d0", %"arg4.d0"
# CHECK: store ptr %"arg0", ptr
# CHECK: store ptr %"arg1", ptr
# CHECK: store ptr %"arg4", ptr
# CHECK: store ptr %"arg2", ptr
# CHECK-NEXT: getelementptr ptr, ptr %"operands", i64 4
# CHECK-NEXT: store ptr null, ptr
# CHECK-NEXT: getelementptr ptr, ptr %"operands", i64 5
# CHECK-NEXT: store ptr null, ptr
# CHECK-NEXT: getelementptr ptr, ptr %"operands", i64 6
# CHECK-NEXT: store ptr null, ptr
# CHECK-NEXT: getelementptr ptr, ptr %"operands", i64 7
# CHECK-NEXT: store ptr %"arg3", ptr
# CHECK: call i32 @"sf.conv2d.float32"(ptr %"operands",

# CHECK-LABEL: define internal void @"sf.gemm.float32"(
# CHECK: tile.body:
# CHECK: icmp eq i64 %{{".[0-9]+"}}, %"k"
# CHECK: call void @"llvm.prefetch.p0"(ptr
# CHECK: k.body:
# CHECK: k.end:
# CHECK: icmp ne ptr %"scale", null
# CHECK: fmul <[[W:8|16]] x float>
# CHECK: icmp ne ptr %"shift", null
# CHECK: fadd <[[W]] x float>
# CHECK: icmp ne ptr %"residual", null
# CHECK: fadd <[[W]] x float>
# CHECK: fcmp ugt <[[W]] x float>
# CHECK-NEXT: select <[[W]] x i1>
