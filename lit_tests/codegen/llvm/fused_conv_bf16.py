# RUN: python %s | filecheck %s
"""A fused bfloat16 convolution (`conv2d_fused` of a mixed-precision layer: float32 scale
and shift per output channel, a bfloat16 residual and a ReLU), built for a CPU with
AVX-512 BF16 whatever the host, compiles to the bfloat16 conv's entry and shared code,
which hands the bfloat16 gemm an epilogue: a record of the operands' pointers (the
residual's moved to the block of rows the gemm writes) and the ReLU's flag. The gemm
passes it to its tiles; a tile with one stores its sums rounded with vcvtneps2bf16, then
passes over its rows again (`sf.gemm.bf16.epilogue`): each vector widened, each affine
map and the residual applied only where their pointers are not null, then rounded once
more with vcvtneps2bf16 unless a lane is subnormal (vfpclassps), where it takes the
integer rounding."""

from dataclasses import replace

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.codegen.targets.platform import building_for, for_target
from stageflow.ir import parse_module

module = parse_module("""
func.func @f(%x: tensor<?x6x6x4xbf16>, %w: tensor<1x1x4x40xbf16>, %s: tensor<40xf32>,
             %t: tensor<40xf32>, %r: tensor<?x6x6x40xbf16>) -> tensor<?x6x6x40xbf16> {
  %y = sf.conv2d_fused %x, %w, %s, %t, %r {filter_shape = [1, 1, 4, 40], strides = [1, 1],
      padding = [[0, 0], [0, 0]], dilations = [1, 1], packed = false, scale = true,
      shift = true, residual = true, activation = "relu"}
      : (tensor<?x6x6x4xbf16>, tensor<1x1x4x40xbf16>, tensor<40xf32>, tensor<40xf32>,
         tensor<?x6x6x40xbf16>) -> tensor<?x6x6x40xbf16>
  func.return %y : tensor<?x6x6x40xbf16>
}
""")
AVX512_BF16 = "+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512dq,+avx512bf16"
target = replace(for_target("x86_64-linux-gnu", cpu="cooperlake"), features=AVX512_BF16)
with building_for(target):
    print(module_text([op_spec(next(iter(module.ops.first.body.block.ops)))]))

# CHECK-LABEL: define i32 @"conv2d_fused"(
# CHECK: getelementptr i64, i64* %"geometry", i64 23
# CHECK-NEXT: store i64 1,
# CHECK: call i32 @"sf.conv2d.bfloat16"(ptr %"operands",

# The pointwise conv's task: the epilogue's record, the residual moved to the task's rows.
# CHECK-LABEL: define internal i32 @"sf.conv2d.bfloat16.pixels.body"(
# CHECK: icmp eq ptr %[[RESIDUAL:".[0-9]+"]], null
# CHECK-NEXT: getelementptr i16, ptr %[[RESIDUAL]], i64
# CHECK: %"epilogue" = alloca i64, i32 6
# CHECK: call i32 @"sf.gemm.bf16.fused"({{.*}}, i64* %"epilogue")

# The epilogue's pass over a stored tile (defined before the tiles that call it).
# CHECK-LABEL: define internal void @"sf.gemm.bf16.epilogue"(
# CHECK: rows.body:
# CHECK: call <16 x i16> @"llvm.masked.load.v16i16.p0"(ptr
# CHECK: fmul <16 x float>
# CHECK-NEXT: fadd <16 x float>
# CHECK: call <16 x i16> @"llvm.masked.load.v16i16.p0"
# CHECK-NEXT: call <16 x i1> @"llvm.x86.avx512.fpclass.ps.512"(<16 x float> %{{".[0-9]+"}}, i32 32)
# CHECK-NEXT: call i1 @"llvm.vector.reduce.or.v16i1"
# CHECK-NEXT: call <16 x bfloat> @"llvm.x86.avx512bf16.cvtneps2bf16.512"
# CHECK: fcmp ugt <16 x float>
# CHECK: call <16 x i1> @"llvm.x86.avx512.fpclass.ps.512"
# CHECK: call void @"llvm.masked.store.v16i16.p0"

# CHECK-LABEL: define internal void @"sf.gemm.bf16.tile.rows"(
# CHECK: icmp ne ptr %"epilogue", null
# CHECK: call void @"sf.gemm.bf16.epilogue"(ptr %"c", i64 %"ldc", {{.*}}, ptr %"epilogue",
