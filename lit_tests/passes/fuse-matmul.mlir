// RUN: stageflow opt %s --passes fuse | filecheck %s

// Before forming kernels, `fuse` turns a matmul and the scaled add after it into one
// `sf.matmul_add` (alpha * a @ b + c): the BLAS adds c where it would have zeroed its
// output. What follows the add (here a ReLU) is still fused into a kernel. The product
// must have no other user, the addend must broadcast to the product (the sum has the
// product's type), and the dtype must be floating.

// CHECK-LABEL: func.func @bias_relu(
// CHECK-NEXT:    %y = sf.matmul_add %x, %w, %b {alpha = 1.000000e+00 : f64, transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %r = sf.call %y {callee = @bias_relu_kernel0}
// CHECK-NEXT:    func.return %r
// CHECK-LABEL: func.func @bias_relu_kernel0(
// CHECK-NEXT:    %zero = sf.constant
// CHECK-NEXT:    %r = sf.maximum %y, %zero

// w - 0.01 * (x^T @ g): alpha is minus the scale; the scale and the matmul are gone.
// CHECK-LABEL: func.func @sgd_step(
// CHECK-NEXT:    %new = sf.matmul_add %x, %g, %w {alpha = -0.0099999997764825821 : f64, transpose_a = true, transpose_b = false} : (tensor<4x3xf32>, tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    func.return %new

// A product used twice, m - c (alpha would scale c), integers, and an addend wider than
// the product stay a matmul and a kernel.
// CHECK-LABEL: func.func @not_fused(
// CHECK-NOT:     sf.matmul_add
// CHECK:         %m = sf.matmul %x, %w
// CHECK-NEXT:    %twice = sf.call %m
// CHECK-NEXT:    %n = sf.matmul %x, %w
// CHECK-NEXT:    %minus = sf.call %n, %c
// CHECK-NEXT:    %im = sf.matmul %i, %j
// CHECK-NEXT:    %isum = sf.call %im, %k
// CHECK-NEXT:    %small = sf.matmul %row, %w
// CHECK-NEXT:    %wide = sf.call %small, %c
// CHECK-NOT:     sf.matmul_add

builtin.module {
  func.func @bias_relu(%x: tensor<4x3xf32>, %w: tensor<3x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
    %m = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
    %y = sf.add %m, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %zero = sf.constant dense<0.000000e+00> : tensor<f32>
    %r = sf.maximum %y, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    func.return %r : tensor<4x8xf32>
  }
  func.func @sgd_step(%w: tensor<3x8xf32>, %x: tensor<4x3xf32>, %g: tensor<4x8xf32>) -> tensor<3x8xf32> {
    %grad = sf.matmul %x, %g {transpose_a = true, transpose_b = false} : (tensor<4x3xf32>, tensor<4x8xf32>) -> tensor<3x8xf32>
    %lr = sf.constant dense<1.000000e-02> : tensor<f32>
    %step = sf.multiply %lr, %grad : (tensor<f32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %new = sf.subtract %w, %step : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    func.return %new : tensor<3x8xf32>
  }
  func.func @not_fused(%x: tensor<4x3xf32>, %w: tensor<3x8xf32>, %c: tensor<4x8xf32>, %i: tensor<4x3xi32>, %j: tensor<3x8xi32>, %k: tensor<4x8xi32>, %row: tensor<1x3xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xf32>) {
    %m = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
    %twice = sf.add %m, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %n = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
    %minus = sf.subtract %n, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %im = sf.matmul %i, %j {transpose_a = false, transpose_b = false} : (tensor<4x3xi32>, tensor<3x8xi32>) -> tensor<4x8xi32>
    %isum = sf.add %im, %k : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
    %small = sf.matmul %row, %w {transpose_a = false, transpose_b = false} : (tensor<1x3xf32>, tensor<3x8xf32>) -> tensor<1x8xf32>
    %wide = sf.add %small, %c : (tensor<1x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    func.return %twice, %minus, %isum, %wide : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  }
}
