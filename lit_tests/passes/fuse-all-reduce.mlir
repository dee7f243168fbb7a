// RUN: stageflow opt %s | filecheck %s --check-prefix=BEFORE
// RUN: stageflow opt %s --passes fuse | filecheck %s
// RUN: stageflow opt %s --passes fuse,fuse | filecheck %s

// `sf.all_reduce` combines the replicas' values (operands of one shape and dtype) element
// by element: an elementwise op of any number of operands, so `fuse` puts it in one kernel
// with the ops that make its operands and the update that uses its result. Its reduction
// is an attribute; unknown dims stay unknown.

// A data-parallel SGD step: each of three replicas' gradients clipped, their mean, the
// weights updated. The input, as written:
// BEFORE-LABEL: func.func @sgd_step(
// BEFORE:         %c0 = sf.minimum %g0, %clip
// BEFORE-NEXT:    %c1 = sf.minimum %g1, %clip
// BEFORE-NEXT:    %c2 = sf.minimum %g2, %clip
// BEFORE-NEXT:    %g = sf.all_reduce %c0, %c1, %c2 {reduction = "mean"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// BEFORE-NEXT:    %step = sf.multiply %g, %lr
// BEFORE-NEXT:    %new = sf.subtract %w, %step
// BEFORE-NEXT:    func.return %new
// After `fuse`, one kernel of all of it, called once:
// CHECK-LABEL: func.func @sgd_step(
// CHECK-NEXT:    %new = sf.call %g0, %g1, %g2, %w {callee = @sgd_step_kernel0} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %new : tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func @sgd_step_kernel0(%g0: tensor<4x8xf32>, %g1: tensor<4x8xf32>, %g2: tensor<4x8xf32>, %w: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %clip = sf.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %c0 = sf.minimum %g0, %clip
// CHECK-NEXT:    %c1 = sf.minimum %g1, %clip
// CHECK-NEXT:    %c2 = sf.minimum %g2, %clip
// CHECK-NEXT:    %g = sf.all_reduce %c0, %c1, %c2 {reduction = "mean"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %lr = sf.constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT:    %step = sf.multiply %g, %lr
// CHECK-NEXT:    %new = sf.subtract %w, %step
// CHECK-NEXT:    func.return %new : tensor<4x8xf32>
// CHECK-NEXT:  }
func.func @sgd_step(%w: tensor<4x8xf32>, %g0: tensor<4x8xf32>, %g1: tensor<4x8xf32>, %g2: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %lr = sf.constant dense<0.1> : tensor<f32>
  %clip = sf.constant dense<1.0> : tensor<f32>
  %c0 = sf.minimum %g0, %clip : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %c1 = sf.minimum %g1, %clip : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %c2 = sf.minimum %g2, %clip : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g = sf.all_reduce %c0, %c1, %c2 {reduction = "mean"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %step = sf.multiply %g, %lr : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %new = sf.subtract %w, %step : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %new : tensor<4x8xf32>
}

// Integer maxima of two replicas' values of an unknown batch: the kernel ends where a
// matmul, which is not elementwise, takes its result.
// BEFORE-LABEL: func.func @batch_max(
// BEFORE:         %top = sf.all_reduce %a1, %b {reduction = "max"} : (tensor<?x3xi32>, tensor<?x3xi32>) -> tensor<?x3xi32>
// CHECK-LABEL: func.func @batch_max(
// CHECK-NEXT:    %f = sf.call %a, %b {callee = @batch_max_kernel0} : (tensor<?x3xi32>, tensor<?x3xi32>) -> tensor<?x3xf32>
// CHECK-NEXT:    %p = sf.matmul %f, %m
// CHECK-NEXT:    func.return %p
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func @batch_max_kernel0(%a: tensor<?x3xi32>, %b: tensor<?x3xi32>) -> tensor<?x3xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %one = sf.constant dense<1> : tensor<i32>
// CHECK-NEXT:    %a1 = sf.add %a, %one
// CHECK-NEXT:    %top = sf.all_reduce %a1, %b {reduction = "max"} : (tensor<?x3xi32>, tensor<?x3xi32>) -> tensor<?x3xi32>
// CHECK-NEXT:    %f = sf.cast %top {dtype = f32}
// CHECK-NEXT:    func.return %f : tensor<?x3xf32>
// CHECK-NEXT:  }
func.func @batch_max(%a: tensor<?x3xi32>, %b: tensor<?x3xi32>, %m: tensor<3x5xf32>) -> tensor<?x5xf32> {
  %one = sf.constant dense<1> : tensor<i32>
  %a1 = sf.add %a, %one : (tensor<?x3xi32>, tensor<i32>) -> tensor<?x3xi32>
  %top = sf.all_reduce %a1, %b {reduction = "max"} : (tensor<?x3xi32>, tensor<?x3xi32>) -> tensor<?x3xi32>
  %f = sf.cast %top {dtype = f32} : (tensor<?x3xi32>) -> tensor<?x3xf32>
  %p = sf.matmul %f, %m {transpose_a = false, transpose_b = false} : (tensor<?x3xf32>, tensor<3x5xf32>) -> tensor<?x5xf32>
  func.return %p : tensor<?x5xf32>
}
