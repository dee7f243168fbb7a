# RUN: python %s | filecheck %s
"""Complex elements are {float, float} / {double, double} structs, NumPy's layout, loaded and
stored whole: products fuse one rounding per part as NumPy's vector loop does, quotients
take Smith's branch on the larger part of the divisor, and a reduction adds the parts."""

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

C64, C128 = "tensor<8xcomplex<f32>>", "tensor<4x8xcomplex<f64>>"
module = parse_module(f"""
func.func @product(%x: {C64}, %y: {C64}) -> tensor<8xf32> {{
  %0 = sf.multiply %x, %y : ({C64}, {C64}) -> {C64}
  %1 = sf.real %0 : ({C64}) -> tensor<8xf32>
  func.return %1 : tensor<8xf32>
}}
func.func @sums(%x: {C128}) -> tensor<4xcomplex<f64>> {{
  %0 = sf.divide %x, %x : ({C128}, {C128}) -> {C128}
  %1 = sf.reduce_sum %0 {{axes = [1], keepdims = false}} : ({C128}) -> tensor<4xcomplex<f64>>
  func.return %1 : tensor<4xcomplex<f64>>
}}
""")
for kernel in module.ops:
    print(CPUTarget().emit(kernel))

# CHECK-LABEL: define internal void @"product.run"
# CHECK: %[[X:".[0-9]+"]] = load {float, float}, ptr
# CHECK: %[[Y:".[0-9]+"]] = load {float, float}, ptr
# CHECK-NEXT: %[[A:".[0-9]+"]] = extractvalue {float, float} %[[X]], 0
# CHECK-NEXT: %[[B:".[0-9]+"]] = extractvalue {float, float} %[[X]], 1
# CHECK-NEXT: %[[C:".[0-9]+"]] = extractvalue {float, float} %[[Y]], 0
# CHECK-NEXT: %[[D:".[0-9]+"]] = extractvalue {float, float} %[[Y]], 1
# re = fma(a, c, -(b d)), im = fma(a, d, b c)
# CHECK-NEXT: %[[BD:".[0-9]+"]] = fmul float %[[B]], %[[D]]
# CHECK-NEXT: %[[NBD:".[0-9]+"]] = fneg float %[[BD]]
# CHECK-NEXT: %[[RE:".[0-9]+"]] = call float @"llvm.fma.f32"(float %[[A]], float %[[C]],
# CHECK-SAME: float %[[NBD]])
# CHECK-NEXT: %[[BC:".[0-9]+"]] = fmul float %[[B]], %[[C]]
# CHECK-NEXT: %[[IM:".[0-9]+"]] = call float @"llvm.fma.f32"(float %[[A]], float %[[D]],
# CHECK-SAME: float %[[BC]])
# CHECK-NEXT: %[[Z:".[0-9]+"]] = insertvalue {float, float} undef, float %[[RE]], 0
# CHECK-NEXT: insertvalue {float, float} %[[Z]], float %[[IM]], 1
# The real part is stored as a float.
# CHECK: store float

# CHECK-LABEL: define internal void @"sums.run"
# The result starts at 0 + 0i.
# CHECK: store {double, double} {double {{ *}}0x0, double {{ *}}0x0}
# CHECK: phi {double, double}
# Smith's quotient: the branch on |re y| >= |im y|, and the divisor 0 (NaN or infinities).
# CHECK: %[[RABS:".[0-9]+"]] = call double @"llvm.fabs.f64"
# CHECK-NEXT: %[[IABS:".[0-9]+"]] = call double @"llvm.fabs.f64"
# CHECK: fcmp oge double %[[RABS]], %[[IABS]]
# CHECK-NEXT: fcmp oeq double %[[RABS]], {{ *}}0x0
# The row's sum adds the parts.
# CHECK: %[[SR:".[0-9]+"]] = fadd double
# CHECK-NEXT: %[[SI:".[0-9]+"]] = fadd double
# CHECK-NEXT: %[[S:".[0-9]+"]] = insertvalue {double, double} undef, double %[[SR]], 0
# CHECK-NEXT: insertvalue {double, double} %[[S]], double %[[SI]], 1
# CHECK: store {double, double}
