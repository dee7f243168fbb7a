// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// Structural ops: their params are ints, nested int lists with `none` for Python's None
// (slice bounds), floats (pad value) and dtypes (iota). A reshape's -2 - k is the
// operand's dim k.

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %u: tensor<?x?xf32>) -> tensor<4x6xf32> {
  // CHECK-NEXT: %0 = sf.reshape %x {shape = [-1, 6]} : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
  // CHECK-NEXT: %r = sf.reshape %u {shape = [-3, 1, -2]} : (tensor<?x?xf32>) -> tensor<?x1x?xf32>
  // CHECK-NEXT: %1 = sf.transpose %x {perm = [2, 0, 1]} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK-NEXT: %2 = sf.broadcast_to %x {shape = [5, 2, 3, 4]} : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  %0 = sf.reshape %x {shape = [-1, 6]} : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
  %r = sf.reshape %u {shape = [-3, 1, -2]} : (tensor<?x?xf32>) -> tensor<?x1x?xf32>
  %1 = sf.transpose %x {perm = [2, 0, 1]} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %2 = sf.broadcast_to %x {shape = [5, 2, 3, 4]} : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  func.return %0 : tensor<4x6xf32>
}

// CHECK-LABEL: func.func @slice_concat_pad
func.func @slice_concat_pad(%x: tensor<8x?xf32>) -> tensor<17x?xf32> {
  // CHECK-NEXT: %0 = sf.slice %x {slices = [[1, none, 2], [none, -1, none]]} : (tensor<8x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: %1 = sf.concat %0, %x, %0 {axis = 0} : (tensor<4x?xf32>, tensor<8x?xf32>, tensor<4x?xf32>) -> tensor<16x?xf32>
  // CHECK-NEXT: %2 = sf.pad %1 {pads = [[1, 0], [2, 3]], value = 0.000000e+00 : f64} : (tensor<16x?xf32>) -> tensor<17x?xf32>
  // CHECK-NEXT: %3 = sf.concat %2 {axis = -1} : (tensor<17x?xf32>) -> tensor<17x?xf32>
  %0 = sf.slice %x {slices = [[1, none, 2], [none, -1, none]]} : (tensor<8x?xf32>) -> tensor<4x?xf32>
  %1 = sf.concat %0, %x, %0 {axis = 0} : (tensor<4x?xf32>, tensor<8x?xf32>, tensor<4x?xf32>) -> tensor<16x?xf32>
  %2 = sf.pad %1 {pads = [[1, 0], [2, 3]], value = 0.0 : f64} : (tensor<16x?xf32>) -> tensor<17x?xf32>
  %3 = sf.concat %2 {axis = -1} : (tensor<17x?xf32>) -> tensor<17x?xf32>
  func.return %3 : tensor<17x?xf32>
}

// CHECK-LABEL: func.func @gather_iota
func.func @gather_iota(%table: tensor<10x16xbf16>, %ids: tensor<?x3xi32>) -> tensor<?x3x16xbf16> {
  // CHECK-NEXT: %0 = sf.gather %table, %ids {axis = 0} : (tensor<10x16xbf16>, tensor<?x3xi32>) -> tensor<?x3x16xbf16>
  // CHECK-NEXT: %1 = sf.iota {shape = [2, 3], dtype = i64, dimension = 1} : () -> tensor<2x3xi64>
  %0 = sf.gather %table, %ids {axis = 0} : (tensor<10x16xbf16>, tensor<?x3xi32>) -> tensor<?x3x16xbf16>
  %1 = sf.iota {shape = [2, 3], dtype = i64, dimension = 1} : () -> tensor<2x3xi64>
  func.return %0 : tensor<?x3x16xbf16>
}
