# RUN: python %s | filecheck %s
"""Transcendentals: tanh is expanded into fma/select/division (vectorisable, and the same
on PTX); sin goes to libm through LLVM's intrinsic on the CPU, unless told otherwise."""

from stageflow.codegen import CPUTarget
from stageflow.ir import parse_module

module = parse_module("""
func.func @tanh(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = sf.tanh %x : (tensor<?xf32>) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
func.func @sin(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = sf.sin %x : (tensor<?xf32>) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
""")
tanh, sin = module.ops
print(CPUTarget().emit(tanh))
print(CPUTarget().emit(sin))
print(CPUTarget(libm=frozenset()).emit(sin))

# tanh (float32): Cephes' odd polynomial near 0, else 1 - 2 / (e**2|x| + 1) with e**y from
# a polynomial and exponent bits; the two are selected at |x| < 0.625. No libm call.
# CHECK-LABEL: define internal void @"tanh.run"
# CHECK: i.body:
# CHECK: %[[X:".[0-9]+"]] = load float, ptr
# CHECK-NEXT: %[[AX:".[0-9]+"]] = call float @"llvm.fabs.f32"(float %[[X]])
# CHECK-NEXT: %[[S:".[0-9]+"]] = fmul float %[[X]], %[[X]]
# CHECK-NEXT: call float @"llvm.fma.f32"(float 0xbf775e1d40000000, float %[[S]],
# CHECK: %[[SMALL:".[0-9]+"]] = call float @"llvm.fma.f32"({{.*}}, float %[[X]], float %[[X]])
# CHECK: fcmp ogt float %[[AX]], 0x4022000000000000
# CHECK: bitcast float %{{".[0-9]+"}} to i32
# CHECK: shl i32 %{{".[0-9]+"}}, 23
# CHECK: fdiv float 0x4000000000000000,
# CHECK: %[[LARGE:".[0-9]+"]] = call float @"llvm.copysign.f32"(float %{{".[0-9]+"}}, float %[[X]])
# CHECK-NEXT: %[[NEAR:".[0-9]+"]] = fcmp olt float %[[AX]], 0x3fe4000000000000
# CHECK-NEXT: %[[Y:".[0-9]+"]] = select i1 %[[NEAR]], float %[[SMALL]], float %[[LARGE]]
# CHECK: store float %[[Y]]
# CHECK-NOT: @"llvm.tanh
# CHECK-NOT: @"tanhf"

# sin on the CPU: libm's, through LLVM's intrinsic.
# CHECK-LABEL: define internal void @"sin.run"
# CHECK: call float @"llvm.sin.f32"(float
# CHECK: declare float @"llvm.sin.f32"(float

# sin expanded (as on PTX): in double, a three-part pi/2 reduction, Taylor polynomials.
# CHECK-LABEL: define internal void @"sin.run"
# CHECK: fpext float %{{".[0-9]+"}} to double
# CHECK: call double @"llvm.roundeven.f64"
# CHECK-COUNT-3: call double @"llvm.fma.f64"(double %{{".[0-9]+"}}, double 0x{{[0-9a-f]+}}, double
# CHECK: call double @"llvm.floor.f64"
# CHECK: fptrunc double %{{".[0-9]+"}} to float
# CHECK-NOT: @"llvm.sin
