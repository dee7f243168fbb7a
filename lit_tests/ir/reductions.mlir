// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s
// RUN: stageflow opt --print-generic %s | stageflow opt - | filecheck %s

// Reductions carry sorted `axes` and `keepdims`; arg reductions one `axis` and give i64.

// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<4x?x8xf32>) -> tensor<?xf32> {
  // CHECK-NEXT: %0 = sf.reduce_sum %x {axes = [0, 2], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<?xf32>
  // CHECK-NEXT: %1 = sf.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x?x8xf32>) -> tensor<4x1x8xf32>
  // CHECK-NEXT: %2 = sf.reduce_prod %x {axes = [], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  // CHECK-NEXT: %3 = sf.reduce_min %x {axes = [0, 1, 2], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<f32>
  // CHECK-NEXT: func.return %0 : tensor<?xf32>
  %0 = sf.reduce_sum %x {axes = [0, 2], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<?xf32>
  %1 = sf.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x?x8xf32>) -> tensor<4x1x8xf32>
  %2 = sf.reduce_prod %x {axes = [], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %3 = sf.reduce_min %x {axes = [0, 1, 2], keepdims = false} : (tensor<4x?x8xf32>) -> tensor<f32>
  func.return %0 : tensor<?xf32>
}

// CHECK-LABEL: func.func @arg_reduce
func.func @arg_reduce(%x: tensor<3x5xi32>) -> tensor<3xi64> {
  // CHECK-NEXT: %0 = sf.argmax %x {axis = 1} : (tensor<3x5xi32>) -> tensor<3xi64>
  // CHECK-NEXT: %1 = sf.argmin %x {axis = -2} : (tensor<3x5xi32>) -> tensor<5xi64>
  %0 = sf.argmax %x {axis = 1} : (tensor<3x5xi32>) -> tensor<3xi64>
  %1 = sf.argmin %x {axis = -2} : (tensor<3x5xi32>) -> tensor<5xi64>
  func.return %0 : tensor<3xi64>
}
