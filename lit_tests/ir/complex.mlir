// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// complex64 and complex128 are MLIR's complex<f32> and complex<f64>: parts taken apart and
// put together (abs and real give the parts' type), complex constants as (real, imaginary)
// pairs, casts between complex dtypes.

// CHECK-LABEL: func.func @parts
func.func @parts(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xcomplex<f32>>) {
  // CHECK-NEXT: %0 = sf.complex %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xcomplex<f32>>
  // CHECK-NEXT: %1 = sf.conj %0 : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  // CHECK-NEXT: %2 = sf.real %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  // CHECK-NEXT: %3 = sf.imag %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  // CHECK-NEXT: %4 = sf.abs %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  // CHECK-NEXT: %5 = sf.add %2, %4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: func.return %5, %1 : tensor<4xf32>, tensor<4xcomplex<f32>>
  %0 = sf.complex %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xcomplex<f32>>
  %1 = sf.conj %0 : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  %2 = sf.real %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  %3 = sf.imag %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  %4 = sf.abs %1 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  %5 = sf.add %2, %4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %5, %1 : tensor<4xf32>, tensor<4xcomplex<f32>>
}

// CHECK-LABEL: func.func @constants
func.func @constants(%z: tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f32>> {
  // CHECK-NEXT: %c = sf.constant dense<[(1.000000e+00,2.000000e+00), (0.000000e+00,-5.000000e-01)]> : tensor<2xcomplex<f64>>
  // CHECK-NEXT: %0 = sf.multiply %z, %c : (tensor<2xcomplex<f64>>, tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f64>>
  // CHECK-NEXT: %1 = sf.cast %0 {dtype = complex<f32>} : (tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f32>>
  %c = sf.constant dense<[(1.0, 2.0), (0.0, -0.5)]> : tensor<2xcomplex<f64>>
  %0 = sf.multiply %z, %c : (tensor<2xcomplex<f64>>, tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f64>>
  %1 = sf.cast %0 {dtype = complex<f32>} : (tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f32>>
  func.return %1 : tensor<2xcomplex<f32>>
}
