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

# tanh (float32): the argument clamped to +-9.02, x P(x^2) / Q(x^2) by fma chains, one
# division, the result clamped to [-1, 1]. No exp, no libm call.
# CHECK-LABEL: define internal void @"tanh.run"
# CHECK: i.body:
# CHECK: %[[X:".[0-9]+"]] = load float, ptr
# CHECK-NEXT: %[[HIGH:".[0-9]+"]] = fcmp ogt float %[[X]], 0x40220a3d80000000
# CHECK: %[[C:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, float 0xc0220a3d80000000, float
# CHECK-NEXT: %[[S:".[0-9]+"]] = fmul float %[[C]], %[[C]]
# CHECK-COUNT-4: call float @"llvm.fma.f32"
# CHECK-NEXT: %[[P:".[0-9]+"]] = fmul float %[[C]],
# CHECK-COUNT-4: call float @"llvm.fma.f32"
# CHECK-NEXT: %[[R:".[0-9]+"]] = fdiv float %[[P]],
# CHECK-NEXT: fcmp ogt float %[[R]], 0x3ff0000000000000
# CHECK: %[[Y:".[0-9]+"]] = select i1 %{{".[0-9]+"}}, float 0xbff0000000000000, float
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
