// RUN: stageflow opt %s --passes fuse | filecheck %s

// `fuse` outlines the elementwise ops of each region block into kernels, as it does at
// the top level; a group never spans a region's boundary: the multiply above the loop and
// the ops in its body go into different kernels.

// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %a = sf.call %x, %s {callee = @main_kernel0}
// CHECK-NEXT:    %w = sf.while %a
// CHECK:         ^bb0(%b: tensor<4xf32>):
// CHECK-NEXT:      %t = sf.call %b, %s {callee = @main_kernel1}
// CHECK-NEXT:      sf.yield %t
// CHECK-LABEL: func.func @main_kernel0
// CHECK-NEXT:    sf.multiply
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func @main_kernel1
// CHECK-NEXT:    sf.add
// CHECK-NEXT:    sf.tanh
// CHECK-NEXT:    func.return
func.func @main(%x: tensor<4xf32>, %s: tensor<f32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = sf.multiply %x, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %w = sf.while %a : (tensor<4xf32>) -> tensor<4xf32> ({
  ^bb0(%c: tensor<4xf32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<4xf32>):
    %n = sf.add %b, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %t = sf.tanh %n : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  })
  func.return %w : tensor<4xf32>
}
