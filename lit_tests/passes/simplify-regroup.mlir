// RUN: stageflow opt %s --passes simplify | filecheck %s

// `simplify`'s rule for a transpose beside a reshape: where the reshape splits or merges
// whole runs of the transposed axes, one of the transposes around it crosses it and the
// two compose into one (or none).

// A channel shuffle of a channels-last model imported from channels-first ONNX: to NCHW,
// split the channels into 4 groups of 28, swap the two, merge them, back to NHWC. The
// first transpose crosses the split, the last crosses the merge backwards, and what is
// left is one copy between two views.
// CHECK-LABEL: func.func @channel_shuffle
// CHECK-NEXT:    %{{.*}} = sf.reshape %x {shape = [1, 56, 56, 4, 28]} : (tensor<1x56x56x112xf32>) -> tensor<1x56x56x4x28xf32>
// CHECK-NEXT:    %{{.*}} = sf.transpose %{{.*}} {perm = [0, 1, 2, 4, 3]} : (tensor<1x56x56x4x28xf32>) -> tensor<1x56x56x28x4xf32>
// CHECK-NEXT:    %{{.*}} = sf.reshape %{{.*}} {shape = [1, 56, 56, 112]} : (tensor<1x56x56x28x4xf32>) -> tensor<1x56x56x112xf32>
// CHECK-NEXT:    func.return
func.func @channel_shuffle(%x: tensor<1x56x56x112xf32>) -> tensor<1x56x56x112xf32> {
  %0 = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<1x56x56x112xf32>) -> tensor<1x112x56x56xf32>
  %1 = sf.reshape %0 {shape = [1, 4, 28, 56, 56]} : (tensor<1x112x56x56xf32>) -> tensor<1x4x28x56x56xf32>
  %2 = sf.transpose %1 {perm = [0, 2, 1, 3, 4]} : (tensor<1x4x28x56x56xf32>) -> tensor<1x28x4x56x56xf32>
  %3 = sf.reshape %2 {shape = [1, 112, 56, 56]} : (tensor<1x28x4x56x56xf32>) -> tensor<1x112x56x56xf32>
  %4 = sf.transpose %3 {perm = [0, 2, 3, 1]} : (tensor<1x112x56x56xf32>) -> tensor<1x56x56x112xf32>
  func.return %4 : tensor<1x56x56x112xf32>
}

// Two transposes that are inverse once the reshape's merge is done on the other side:
// no copy at all.
// CHECK-LABEL: func.func @inverse
// CHECK-NEXT:    %{{.*}} = sf.reshape %x {shape = [2, 12, 5]} : (tensor<2x3x4x5xf32>) -> tensor<2x12x5xf32>
// CHECK-NEXT:    func.return
func.func @inverse(%x: tensor<2x3x4x5xf32>) -> tensor<2x12x5xf32> {
  %t = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<2x3x4x5xf32>) -> tensor<2x5x3x4xf32>
  %r = sf.reshape %t {shape = [2, 5, 12]} : (tensor<2x5x3x4xf32>) -> tensor<2x5x12xf32>
  %u = sf.transpose %r {perm = [0, 2, 1]} : (tensor<2x5x12xf32>) -> tensor<2x12x5xf32>
  func.return %u : tensor<2x12x5xf32>
}

// The reshape turns 3x2 into 2x3, a run that neither transpose keeps in order (the first
// swapped those axes, the second swaps them again): nothing can cross, nothing moves.
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:    %t = sf.transpose %x {perm = [1, 0, 2]}
// CHECK-NEXT:    %r = sf.reshape %t {shape = [2, 3, 4]}
// CHECK-NEXT:    %u = sf.transpose %r {perm = [1, 0, 2]}
// CHECK-NEXT:    func.return %u
func.func @mixed(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  %t = sf.transpose %x {perm = [1, 0, 2]} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %r = sf.reshape %t {shape = [2, 3, 4]} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  %u = sf.transpose %r {perm = [1, 0, 2]} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  func.return %u : tensor<3x2x4xf32>
}

// The first transpose has another use: composing would leave two transposes, as before,
// so the chain stays.
// CHECK-LABEL: func.func @shared
// CHECK-NEXT:    %t = sf.transpose %x {perm = [0, 2, 1]}
// CHECK-NEXT:    %r = sf.reshape %t {shape = [8, 3]}
// CHECK-NEXT:    %u = sf.transpose %r {perm = [1, 0]}
func.func @shared(%x: tensor<2x3x4xf32>) -> (tensor<3x8xf32>, tensor<2x4x3xf32>) {
  %t = sf.transpose %x {perm = [0, 2, 1]} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %r = sf.reshape %t {shape = [8, 3]} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
  %u = sf.transpose %r {perm = [1, 0]} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  func.return %u, %t : tensor<3x8xf32>, tensor<2x4x3xf32>
}

// An unknown dim the reshape names (-2: its operand's dim 0) is carried over as it is:
// the transpose crosses the merge of 4x6, and the new reshape names the dim where the
// composed transpose put it (-4: dim 2).
// CHECK-LABEL: func.func @unknown_named
// CHECK-NEXT:    %{{.*}} = sf.transpose %x {perm = [2, 1, 0]} : (tensor<?x6x4xf32>) -> tensor<4x6x?xf32>
// CHECK-NEXT:    %{{.*}} = sf.reshape %{{.*}} {shape = [24, -4]} : (tensor<4x6x?xf32>) -> tensor<24x?xf32>
// CHECK-NEXT:    func.return
func.func @unknown_named(%x: tensor<?x6x4xf32>) -> tensor<24x?xf32> {
  %t = sf.transpose %x {perm = [0, 2, 1]} : (tensor<?x6x4xf32>) -> tensor<?x4x6xf32>
  %r = sf.reshape %t {shape = [-2, 24]} : (tensor<?x4x6xf32>) -> tensor<?x24xf32>
  %u = sf.transpose %r {perm = [1, 0]} : (tensor<?x24xf32>) -> tensor<24x?xf32>
  func.return %u : tensor<24x?xf32>
}

// A -1 over an unknown dim: which axes the reshape splits and merges is not known, so
// nothing moves.
// CHECK-LABEL: func.func @unknown_inferred
// CHECK-NEXT:    %t = sf.transpose %x {perm = [0, 2, 1]}
// CHECK-NEXT:    %r = sf.reshape %t {shape = [-1, 3, 8]}
// CHECK-NEXT:    %u = sf.transpose %r {perm = [0, 2, 1]}
// CHECK-NEXT:    func.return %u
func.func @unknown_inferred(%x: tensor<?x6x4xf32>) -> tensor<?x8x3xf32> {
  %t = sf.transpose %x {perm = [0, 2, 1]} : (tensor<?x6x4xf32>) -> tensor<?x4x6xf32>
  %r = sf.reshape %t {shape = [-1, 3, 8]} : (tensor<?x4x6xf32>) -> tensor<?x3x8xf32>
  %u = sf.transpose %r {perm = [0, 2, 1]} : (tensor<?x3x8xf32>) -> tensor<?x8x3xf32>
  func.return %u : tensor<?x8x3xf32>
}
