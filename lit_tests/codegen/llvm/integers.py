# RUN: python %s | filecheck %s
"""Integer ops with NumPy's semantics made total (no trap on x // 0 or MIN // -1), bools
stored as bytes, float -> int casts giving INT_MIN out of range (NumPy's on x86), and
bfloat16 by integer bit operations: rounded where an op's result needs it, not where it is
one of its operands' values (a ReLU's)."""

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

module = parse_module("""
func.func @floordiv(%x: tensor<8xi32>, %y: tensor<8xi32>) -> tensor<8xi32> {
  %0 = sf.floordiv %x, %y : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
  func.return %0 : tensor<8xi32>
}
func.func @cast(%x: tensor<8xf32>) -> (tensor<8xi32>, tensor<8xi1>, tensor<8xbf16>) {
  %0 = sf.cast %x {dtype = i32} : (tensor<8xf32>) -> tensor<8xi32>
  %1 = sf.cast %x {dtype = i1} : (tensor<8xf32>) -> tensor<8xi1>
  %2 = sf.cast %x {dtype = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  func.return %0, %1, %2 : tensor<8xi32>, tensor<8xi1>, tensor<8xbf16>
}
func.func @relu(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = sf.relu %x : (tensor<8xbf16>) -> tensor<8xbf16>
  func.return %0 : tensor<8xbf16>
}
""")
for kernel in module.ops:
    print(CPUTarget().emit(kernel))

# The divisor is replaced by 1 where dividing would trap, the quotient rounded toward
# -inf, and x // 0 gives 0.
# CHECK-LABEL: define internal void @"floordiv.run"
# CHECK: %[[X:".[0-9]+"]] = load i32, ptr
# CHECK: %[[Y:".[0-9]+"]] = load i32, ptr
# CHECK-NEXT: %[[ZERO:".[0-9]+"]] = icmp eq i32 %[[Y]], 0
# CHECK-NEXT: %[[MIN:".[0-9]+"]] = icmp eq i32 %[[X]], -2147483648
# CHECK-NEXT: %[[M1:".[0-9]+"]] = icmp eq i32 %[[Y]], -1
# CHECK-NEXT: %[[OVER:".[0-9]+"]] = and i1 %[[MIN]], %[[M1]]
# CHECK-NEXT: %[[TRAP:".[0-9]+"]] = or i1 %[[ZERO]], %[[OVER]]
# CHECK-NEXT: %[[D:".[0-9]+"]] = select i1 %[[TRAP]], i32 1, i32 %[[Y]]
# CHECK-NEXT: sdiv i32 %[[X]], %[[D]]
# CHECK-NEXT: srem i32 %[[X]], %[[D]]
# CHECK: select i1 %[[ZERO]], i32 0, i32
# CHECK: store i32

# CHECK-LABEL: define internal void @"cast.run"
# CHECK: %[[F:".[0-9]+"]] = load float, ptr
# CHECK-NEXT: %[[SAT:".[0-9]+"]] = call i32 @"llvm.fptosi.sat.i32.f32"(float %[[F]])
# NaN and values out of range give INT_MIN, as NumPy's cast on x86.
# CHECK-NEXT: %[[NAN:".[0-9]+"]] = fcmp uno float %[[F]], %[[F]]
# CHECK-NEXT: %[[HI:".[0-9]+"]] = fcmp oge float %[[F]], 0x41e0000000000000
# CHECK: %[[LO:".[0-9]+"]] = fcmp olt float %[[F]]
# CHECK: select i1 %{{.*}}, i32 -2147483648, i32 %[[SAT]]
# CHECK-NEXT: %[[B:".[0-9]+"]] = fcmp une float %[[F]], 0x0
# bfloat16: round to nearest even on the bits, NaNs kept quiet.
# CHECK-NEXT: %[[BITS:".[0-9]+"]] = bitcast float %[[F]] to i32
# CHECK-NEXT: %[[HIGH:".[0-9]+"]] = lshr i32 %[[BITS]], 16
# CHECK-NEXT: %[[LSB:".[0-9]+"]] = and i32 %[[HIGH]], 1
# CHECK-NEXT: %[[BIAS:".[0-9]+"]] = add i32 %[[LSB]], 32767
# CHECK: store i32
# CHECK: %[[BYTE:".[0-9]+"]] = zext i1 %[[B]] to i8
# CHECK: store i8 %[[BYTE]]
# CHECK: store i16

# A bfloat16 ReLU: the loaded value's bits widened, the result selected, and stored as its
# high half (a NaN made quiet) with no rounding, since it holds a bfloat16 exactly.
# CHECK-LABEL: define internal void @"relu.run"
# CHECK: %[[RAW:".[0-9]+"]] = load i16, ptr
# CHECK-NEXT: %[[WIDE:".[0-9]+"]] = zext i16 %[[RAW]] to i32
# CHECK-NEXT: %[[SHIFTED:".[0-9]+"]] = shl i32 %[[WIDE]], 16
# CHECK-NEXT: %[[X:".[0-9]+"]] = bitcast i32 %[[SHIFTED]] to float
# CHECK: %[[Y:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, float %[[X]], float {{ +}}0x0
# CHECK-NEXT: getelementptr
# CHECK-NEXT: %[[BITS:".[0-9]+"]] = bitcast float %[[Y]] to i32
# CHECK-NEXT: %[[HIGH:".[0-9]+"]] = lshr i32 %[[BITS]], 16
# CHECK-NEXT: %[[QUIET:".[0-9]+"]] = or i32 %[[HIGH]], 64
# CHECK-NEXT: %[[NAN:".[0-9]+"]] = fcmp uno float %[[Y]], %[[Y]]
# CHECK-NEXT: %[[OUT:".[0-9]+"]] = select i1 %[[NAN]], i32 %[[QUIET]], i32 %[[HIGH]]
# CHECK-NEXT: %[[HALF:".[0-9]+"]] = trunc i32 %[[OUT]] to i16
# CHECK-NEXT: store i16 %[[HALF]]
