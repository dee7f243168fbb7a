// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// Elementwise ops round-trip in the custom syntax: unary, broadcasting binary,
// comparisons (bool results), select and cast.

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  // CHECK-NEXT: %0 = sf.exp %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: %1 = sf.negative %0 : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: %2 = sf.logistic %1 : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: func.return %2 : tensor<4x?xf32>
  %0 = sf.exp %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %1 = sf.negative %0 : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %2 = sf.logistic %1 : (tensor<4x?xf32>) -> tensor<4x?xf32>
  func.return %2 : tensor<4x?xf32>
}

// CHECK-LABEL: func.func @binary_broadcast
func.func @binary_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %i: tensor<3xi64>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %0 = sf.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %1 = sf.multiply %0, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %2 = sf.divide %i, %i : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xf64>
  %0 = sf.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = sf.multiply %0, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = sf.divide %i, %i : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xf64>
  func.return %1 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @compare_select
func.func @compare_select(%x: tensor<?xf32>, %y: tensor<1xf32>) -> tensor<?xf32> {
  // CHECK-NEXT: %0 = sf.less %x, %y : (tensor<?xf32>, tensor<1xf32>) -> tensor<?xi1>
  // CHECK-NEXT: %1 = sf.logical_not %0 : (tensor<?xi1>) -> tensor<?xi1>
  // CHECK-NEXT: %2 = sf.select %1, %x, %y : (tensor<?xi1>, tensor<?xf32>, tensor<1xf32>) -> tensor<?xf32>
  %0 = sf.less %x, %y : (tensor<?xf32>, tensor<1xf32>) -> tensor<?xi1>
  %1 = sf.logical_not %0 : (tensor<?xi1>) -> tensor<?xi1>
  %2 = sf.select %1, %x, %y : (tensor<?xi1>, tensor<?xf32>, tensor<1xf32>) -> tensor<?xf32>
  func.return %2 : tensor<?xf32>
}

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<2x3xf32>) -> tensor<2x3xbf16> {
  // CHECK-NEXT: %0 = sf.cast %x {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  // CHECK-NEXT: %1 = sf.cast %0 {dtype = ui32} : (tensor<2x3xi32>) -> tensor<2x3xui32>
  // CHECK-NEXT: %2 = sf.cast %1 {dtype = i1} : (tensor<2x3xui32>) -> tensor<2x3xi1>
  // CHECK-NEXT: %3 = sf.cast %2 {dtype = f16} : (tensor<2x3xi1>) -> tensor<2x3xf16>
  // CHECK-NEXT: %4 = sf.cast %3 {dtype = bf16} : (tensor<2x3xf16>) -> tensor<2x3xbf16>
  %0 = sf.cast %x {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  %1 = sf.cast %0 {dtype = ui32} : (tensor<2x3xi32>) -> tensor<2x3xui32>
  %2 = sf.cast %1 {dtype = i1} : (tensor<2x3xui32>) -> tensor<2x3xi1>
  %3 = sf.cast %2 {dtype = f16} : (tensor<2x3xi1>) -> tensor<2x3xf16>
  %4 = sf.cast %3 {dtype = bf16} : (tensor<2x3xf16>) -> tensor<2x3xbf16>
  func.return %4 : tensor<2x3xbf16>
}
