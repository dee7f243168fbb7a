// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// Whole concrete functions (a dense layer, softmax pieces), calls between functions, ops
// with several or no results, and variable handles (!sf.resource).

// CHECK-LABEL: func.func @dense_relu
// CHECK-SAME: (%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32>
func.func @dense_relu(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  // CHECK-NEXT: %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  // CHECK-NEXT: %1 = sf.add %0, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  // CHECK-NEXT: %2 = sf.constant dense<0.000000e+00> : tensor<f32>
  // CHECK-NEXT: %3 = sf.maximum %1, %2 : (tensor<?x3xf32>, tensor<f32>) -> tensor<?x3xf32>
  // CHECK-NEXT: func.return %3 : tensor<?x3xf32>
  %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %1 = sf.add %0, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %2 = sf.constant dense<0.0> : tensor<f32>
  %3 = sf.maximum %1, %2 : (tensor<?x3xf32>, tensor<f32>) -> tensor<?x3xf32>
  func.return %3 : tensor<?x3xf32>
}

// CHECK-LABEL: func.func @loss
func.func @loss(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  // CHECK-NEXT: %0 = func.call @dense_relu(%x, %w, %b) : (tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  // CHECK-NEXT: %1 = sf.reduce_max %0 {axes = [1], keepdims = true} : (tensor<?x3xf32>) -> tensor<?x1xf32>
  // CHECK-NEXT: %2 = sf.subtract %0, %1 : (tensor<?x3xf32>, tensor<?x1xf32>) -> tensor<?x3xf32>
  // CHECK-NEXT: %3 = sf.exp %2 : (tensor<?x3xf32>) -> tensor<?x3xf32>
  // CHECK-NEXT: %4 = sf.reduce_sum %3 {axes = [0, 1], keepdims = false} : (tensor<?x3xf32>) -> tensor<f32>
  // CHECK-NEXT: func.return %4 : tensor<f32>
  %0 = func.call @dense_relu(%x, %w, %b) : (tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %1 = sf.reduce_max %0 {axes = [1], keepdims = true} : (tensor<?x3xf32>) -> tensor<?x1xf32>
  %2 = sf.subtract %0, %1 : (tensor<?x3xf32>, tensor<?x1xf32>) -> tensor<?x3xf32>
  %3 = sf.exp %2 : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %4 = sf.reduce_sum %3 {axes = [0, 1], keepdims = false} : (tensor<?x3xf32>) -> tensor<f32>
  func.return %4 : tensor<f32>
}

// The `call` primitive's callee is a symbol reference, checked against the callee's type.
// CHECK-LABEL: func.func @call_primitive
func.func @call_primitive(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  // CHECK-NEXT: %0 = sf.call %x, %w, %b {callee = @dense_relu} : (tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %0 = sf.call %x, %w, %b {callee = @dense_relu} : (tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  func.return %0 : tensor<?x3xf32>
}

// CHECK-LABEL: func.func @random_and_state
func.func @random_and_state(%state: tensor<4xui32>, %v: !sf.resource<tensor<2x3xf32>>) -> tensor<2x3xui32> {
  // CHECK-NEXT: %bits, %new_state = sf.random_bits %state {shape = [2, 3]} : (tensor<4xui32>) -> (tensor<2x3xui32>, tensor<4xui32>)
  // CHECK-NEXT: %0 = sf.read_variable %v : (!sf.resource<tensor<2x3xf32>>) -> tensor<2x3xf32>
  // CHECK-NEXT: %1 = sf.exp %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: sf.assign_variable %v, %1 : (!sf.resource<tensor<2x3xf32>>, tensor<2x3xf32>) -> ()
  %bits, %new_state = sf.random_bits %state {shape = [2, 3]} : (tensor<4xui32>) -> (tensor<2x3xui32>, tensor<4xui32>)
  %0 = sf.read_variable %v : (!sf.resource<tensor<2x3xf32>>) -> tensor<2x3xf32>
  %1 = sf.exp %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  sf.assign_variable %v, %1 : (!sf.resource<tensor<2x3xf32>>, tensor<2x3xf32>) -> ()
  func.return %bits : tensor<2x3xui32>
}

// CHECK-LABEL: func.func @windows
func.func @windows(%img: tensor<?x28x28x1xf32>, %k: tensor<5x5x1x8xf32>) -> tensor<?x14x14x8xf32> {
  // CHECK-NEXT: %0 = sf.conv2d %img, %k {strides = [1, 1], padding = [[2, 2], [2, 2]], dilations = [1, 1]} : (tensor<?x28x28x1xf32>, tensor<5x5x1x8xf32>) -> tensor<?x28x28x8xf32>
  // CHECK-NEXT: %1 = sf.reduce_window %0 {kind = "max", window = [2, 2], strides = [2, 2], padding = [[0, 0], [0, 0]]} : (tensor<?x28x28x8xf32>) -> tensor<?x14x14x8xf32>
  %0 = sf.conv2d %img, %k {strides = [1, 1], padding = [[2, 2], [2, 2]], dilations = [1, 1]} : (tensor<?x28x28x1xf32>, tensor<5x5x1x8xf32>) -> tensor<?x28x28x8xf32>
  %1 = sf.reduce_window %0 {kind = "max", window = [2, 2], strides = [2, 2], padding = [[0, 0], [0, 0]]} : (tensor<?x28x28x8xf32>) -> tensor<?x14x14x8xf32>
  func.return %1 : tensor<?x14x14x8xf32>
}
