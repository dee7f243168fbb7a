// RUN: stageflow opt %s --passes simplify | filecheck %s

// `simplify`'s layout rules: transposes move below the ops that do not care about the
// order of axes, so that a channels-first model's transposes around each channels-last
// op meet and cancel.

// A bias add and a relu between the transpose back to NCHW after one op and the transpose
// into NHWC before the next: the bias constant is transposed at compile time, the relu
// and the add run in NHWC, and both transposes are gone.
// CHECK-LABEL: func.func @between_two_ops
// CHECK-NEXT:    %{{.*}} = sf.constant dense<{{.*}}> : tensor<1x1x1x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.add %x, %{{.*}} : (tensor<1x4x5x3xf32>, tensor<1x1x1x3xf32>) -> tensor<1x4x5x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.relu %{{.*}} : (tensor<1x4x5x3xf32>) -> tensor<1x4x5x3xf32>
// CHECK-NEXT:    func.return %{{.*}} : tensor<1x4x5x3xf32>
func.func @between_two_ops(%x: tensor<1x4x5x3xf32>) -> tensor<1x4x5x3xf32> {
  %bias = sf.constant dense<[[[1.0]], [[2.0]], [[3.0]]]> : tensor<3x1x1xf32>
  %nchw = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<1x4x5x3xf32>) -> tensor<1x3x4x5xf32>
  %b = sf.add %nchw, %bias : (tensor<1x3x4x5xf32>, tensor<3x1x1xf32>) -> tensor<1x3x4x5xf32>
  %r = sf.relu %b : (tensor<1x3x4x5xf32>) -> tensor<1x3x4x5xf32>
  %nhwc = sf.transpose %r {perm = [0, 2, 3, 1]} : (tensor<1x3x4x5xf32>) -> tensor<1x4x5x3xf32>
  func.return %nhwc : tensor<1x4x5x3xf32>
}

// A residual add of two transposed values, a concat along channels and a slice: each is
// done on the untransposed operands (the concat's axis and the slice's ranges permuted),
// and one transpose remains, at the end.
// CHECK-LABEL: func.func @add_concat_slice
// CHECK-NEXT:    %{{.*}} = sf.add %a, %b : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
// CHECK-NEXT:    %{{.*}} = sf.concat %{{.*}}, %a {axis = 3} : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT:    %{{.*}} = sf.slice %{{.*}} {slices = {{\[}}[0, 1, 1], [0, 4, 2], [1, 4, 2], [0, 4, 1]]} : (tensor<1x4x4x4xf32>) -> tensor<1x2x2x4xf32>
// CHECK-NEXT:    %{{.*}} = sf.transpose %{{.*}} {perm = [0, 3, 1, 2]} : (tensor<1x2x2x4xf32>) -> tensor<1x4x2x2xf32>
// CHECK-NEXT:    func.return %{{.*}} : tensor<1x4x2x2xf32>
func.func @add_concat_slice(%a: tensor<1x4x4x2xf32>, %b: tensor<1x4x4x2xf32>) -> tensor<1x4x2x2xf32> {
  %ta = sf.transpose %a {perm = [0, 3, 1, 2]} : (tensor<1x4x4x2xf32>) -> tensor<1x2x4x4xf32>
  %tb = sf.transpose %b {perm = [0, 3, 1, 2]} : (tensor<1x4x4x2xf32>) -> tensor<1x2x4x4xf32>
  %s = sf.add %ta, %tb : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = sf.concat %s, %ta {axis = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32>
  %w = sf.slice %c {slices = [[0, 1, 1], [0, 4, 1], [0, 4, 2], [1, 4, 2]]} : (tensor<1x4x4x4xf32>) -> tensor<1x4x2x2xf32>
  func.return %w : tensor<1x4x2x2xf32>
}

// Nothing moves where it would add transposes: an operand transposed another way, or a
// value neither transposed nor constant.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    %t = sf.transpose %x {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    %s = sf.add %t, %y : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    func.return %s : tensor<3x2xf32>
func.func @kept(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %t = sf.transpose %x {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %s = sf.add %t, %y : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  func.return %s : tensor<3x2xf32>
}

// A channels-first global pooling of a channels-last result: the sum runs over the NHWC
// pixels, the transpose of its (1, 1, 1, C) result only moves axes of size 1, and the
// flattening reshape reads the sum directly. Without keepdims the axes left need no
// transpose where they keep their order, and a max moves the same way.
// CHECK-LABEL: func.func @global_pooling
// CHECK-NEXT:    %{{.*}} = sf.reduce_sum %x {axes = [1, 2], keepdims = true} : (tensor<1x4x5x3xf32>) -> tensor<1x1x1x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.reshape %{{.*}} {shape = [1, 3]} : (tensor<1x1x1x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.reduce_max %x {axes = [1, 2], keepdims = false} : (tensor<1x4x5x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.reduce_sum %x {axes = [0, 1], keepdims = false} : (tensor<1x4x5x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT:    %{{.*}} = sf.transpose %{{.*}} {perm = [1, 0]} : (tensor<5x3xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    func.return %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x3xf32>, tensor<1x3xf32>, tensor<3x5xf32>
func.func @global_pooling(%x: tensor<1x4x5x3xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>, tensor<3x5xf32>) {
  %t = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<1x4x5x3xf32>) -> tensor<1x3x4x5xf32>
  %s = sf.reduce_sum %t {axes = [2, 3], keepdims = true} : (tensor<1x3x4x5xf32>) -> tensor<1x3x1x1xf32>
  %f = sf.reshape %s {shape = [1, 3]} : (tensor<1x3x1x1xf32>) -> tensor<1x3xf32>
  %u = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<1x4x5x3xf32>) -> tensor<1x3x4x5xf32>
  %m = sf.reduce_max %u {axes = [2, 3], keepdims = false} : (tensor<1x3x4x5xf32>) -> tensor<1x3xf32>
  %v = sf.transpose %x {perm = [0, 3, 1, 2]} : (tensor<1x4x5x3xf32>) -> tensor<1x3x4x5xf32>
  %r = sf.reduce_sum %v {axes = [0, 2], keepdims = false} : (tensor<1x3x4x5xf32>) -> tensor<3x5xf32>
  func.return %f, %m, %r : tensor<1x3xf32>, tensor<1x3xf32>, tensor<3x5xf32>
}
