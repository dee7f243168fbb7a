// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// NaN and the infinities print as hexadecimal bit patterns (MLIR's form); a hexadecimal
// element of a float tensor reads back as those bits, never as the integer it spells.
// An integer tensor's hexadecimal element is the integer.

// CHECK-LABEL: func.func @nonfinite
func.func @nonfinite() -> tensor<3xf32> {
  // CHECK-NEXT: %0 = sf.constant dense<[0x7fc00000, 0x7f800000, 0xff800000]> : tensor<3xf32>
  // CHECK-NEXT: %1 = sf.constant dense<0xff800000> : tensor<f32>
  // CHECK-NEXT: %2 = sf.constant dense<[0x7ff0000000000000, 1.500000e+00]> : tensor<2xf64>
  // CHECK-NEXT: %3 = sf.constant dense<[16, 3]> : tensor<2xi32>
  // CHECK-NEXT: %4 = sf.constant dense<0x7c00> : tensor<f16>
  %0 = sf.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000]> : tensor<3xf32>
  %1 = sf.constant dense<0xFF800000> : tensor<f32>
  %2 = sf.constant dense<[0x7FF0000000000000, 1.5]> : tensor<2xf64>
  %3 = sf.constant dense<[0x10, 3]> : tensor<2xi32>
  %4 = sf.constant dense<0x7C00> : tensor<f16>
  func.return %0 : tensor<3xf32>
}
