// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// sf.constant holds a dense elements attribute; floats print in MLIR's form and round-trip
// exactly (0.1 in f32 prints as 1.000000e-01 and reads back as the same f32).

// CHECK-LABEL: func.func @constants
func.func @constants() -> tensor<2x2xf32> {
  // CHECK-NEXT: %0 = sf.constant dense<[[1.000000e+00, 2.500000e+00], [-3.000000e+00, 1.000000e-01]]> : tensor<2x2xf32>
  // CHECK-NEXT: %1 = sf.constant dense<0.000000e+00> : tensor<f64>
  // CHECK-NEXT: %2 = sf.constant dense<[1, -2, 3]> : tensor<3xi32>
  // CHECK-NEXT: %3 = sf.constant dense<[true, false]> : tensor<2xi1>
  // CHECK-NEXT: %4 = sf.constant dense<4294967295> : tensor<2xui32>
  // CHECK-NEXT: %5 = sf.constant dense<[1.000000e+00, 5.000000e-01]> : tensor<2xbf16>
  // CHECK-NEXT: %6 = sf.constant dense<> : tensor<0xi64>
  // CHECK-NEXT: %7 = sf.add %0, %0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %0 = sf.constant dense<[[1.0, 2.5], [-3.0, 0.1]]> : tensor<2x2xf32>
  %1 = sf.constant dense<0.0> : tensor<f64>
  %2 = sf.constant dense<[1, -2, 3]> : tensor<3xi32>
  %3 = sf.constant dense<[true, false]> : tensor<2xi1>
  %4 = sf.constant dense<4294967295> : tensor<2xui32>
  %5 = sf.constant dense<[1.0, 0.5]> : tensor<2xbf16>
  %6 = sf.constant dense<> : tensor<0xi64>
  %7 = sf.add %0, %0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %7 : tensor<2x2xf32>
}
