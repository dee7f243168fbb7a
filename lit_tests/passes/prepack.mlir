// RUN: stageflow opt %s --passes prepack,prune | filecheck %s

// `prepack` lays constant filters out as the compiled gemm reads them: panels of 128
// bytes of columns (32 float32s), each all of k by its columns, zero past the last
// filter, and the conv becomes `sf.conv2d_prepacked`, which keeps the filters' shape as
// a param. 33 filters of one tap and channel: two panels, [1..32] and [33, 0, ...].
// A constant used by two convolutions is packed once; `prune` erases the original.

// CHECK-LABEL: func.func @packed(
// CHECK-NEXT:    %w = sf.constant dense<{{\[\[\[}}1.000000e+00, 2.000000e+00, {{.*}}, 3.200000e+01]], {{\[\[}}3.300000e+01, 0.000000e+00, {{.*}}, 0.000000e+00]]]> : tensor<2x1x32xf32>
// CHECK-NEXT:    %y = sf.conv2d_prepacked %x, %w {filter_shape = [1, 1, 1, 33], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<2x1x32xf32>) -> tensor<1x4x4x33xf32>
// CHECK-NEXT:    %z = sf.conv2d_prepacked %x, %w {filter_shape = [1, 1, 1, 33], strides = [2, 2], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<2x1x32xf32>) -> tensor<1x2x2x33xf32>
// CHECK-NEXT:    func.return %y, %z

// Left as they are: filters that are not constants, filters the direct loops read in
// their own layout (at most 64 output channels, a multiple of 8 float32s), and dtypes
// the gemm has no packed form for (float16).
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     sf.conv2d_prepacked
// CHECK:         %a = sf.conv2d %x, %v
// CHECK:         %b = sf.conv2d %x, %d
// CHECK:         %c = sf.conv2d %h, %e
// CHECK-NOT:     sf.conv2d_prepacked

// A matmul by constant weights of at least 16 rows is a pointwise convolution of its rows
// between two reshapes (views); the weights read transposed are packed transposed. Fewer
// rows (a decoder's step) keep the matmul.
// CHECK-LABEL: func.func @dense(
// CHECK-NEXT:    %w = sf.constant dense<1.000000e+00> : tensor<3x33xf32>
// CHECK-NEXT:    %w_1 = sf.constant dense<{{.*}}> : tensor<2x3x32xf32>
// CHECK-NEXT:    %[[I:.*]] = sf.reshape %a {shape = [1, 32, 1, 3]} : (tensor<2x16x3xf32>) -> tensor<1x32x1x3xf32>
// CHECK-NEXT:    %[[C:.*]] = sf.conv2d_prepacked %[[I]], %w_1 {filter_shape = [1, 1, 3, 33], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x32x1x3xf32>, tensor<2x3x32xf32>) -> tensor<1x32x1x33xf32>
// CHECK-NEXT:    %y = sf.reshape %[[C]] {shape = [2, 16, 33]} : (tensor<1x32x1x33xf32>) -> tensor<2x16x33xf32>
// CHECK-NEXT:    %t = sf.constant dense<{{.*}}> : tensor<2x3x32xf32>
// CHECK-NEXT:    %[[J:.*]] = sf.reshape %b {shape = [1, -1, 1, 3]} : (tensor<?x16x3xf32>) -> tensor<1x?x1x3xf32>
// CHECK-NEXT:    %[[D:.*]] = sf.conv2d_prepacked %[[J]], %t
// CHECK-NEXT:    %z = sf.reshape %[[D]] {shape = [-1, 16, 33]}
// CHECK-NEXT:    %r = sf.matmul %row, %w
// CHECK-NEXT:    func.return %y, %z, %r

// Weights read transposed by a matmul that stays one (few rows), with a bias or without,
// are read from a transposed copy as they are stored; a variable's are left alone.
// CHECK-LABEL: func.func @transposed(
// CHECK-NEXT:    %w = sf.constant dense<{{\[\[}}1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    %y = sf.matmul %a, %w {transpose_a = false, transpose_b = false}
// CHECK-NEXT:    %c = sf.matmul_add %a, %w, %bias {alpha = 1.000000e+00 : f64, transpose_a = false, transpose_b = false}
// CHECK-NEXT:    %v2 = sf.matmul %a, %v {transpose_a = false, transpose_b = true}
// CHECK-NEXT:    func.return %y, %c, %v2

builtin.module {
  func.func @packed(%x: tensor<1x4x4x1xf32>) -> (tensor<1x4x4x33xf32>, tensor<1x2x2x33xf32>) {
    %w = sf.constant dense<[[[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0]]]]> : tensor<1x1x1x33xf32>
    %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x4x4x33xf32>
    %z = sf.conv2d %x, %w {strides = [2, 2], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x2x2x33xf32>
    func.return %y, %z : tensor<1x4x4x33xf32>, tensor<1x2x2x33xf32>
  }
  func.func @kept(%x: tensor<1x4x4x1xf32>, %v: tensor<1x1x1x33xf32>, %h: tensor<1x4x4x1xf16>) -> (tensor<1x4x4x33xf32>, tensor<1x4x4x32xf32>, tensor<1x4x4x33xf16>) {
    %a = sf.conv2d %x, %v {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x4x4x33xf32>
    %d = sf.constant dense<1.0> : tensor<1x1x1x32xf32>
    %b = sf.conv2d %x, %d {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x32xf32>) -> tensor<1x4x4x32xf32>
    %e = sf.constant dense<1.0> : tensor<1x1x1x33xf16>
    %c = sf.conv2d %h, %e {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf16>, tensor<1x1x1x33xf16>) -> tensor<1x4x4x33xf16>
    func.return %a, %b, %c : tensor<1x4x4x33xf32>, tensor<1x4x4x32xf32>, tensor<1x4x4x33xf16>
  }
  func.func @dense(%a: tensor<2x16x3xf32>, %b: tensor<?x16x3xf32>, %row: tensor<1x3xf32>) -> (tensor<2x16x33xf32>, tensor<?x16x33xf32>, tensor<1x33xf32>) {
    %w = sf.constant dense<1.0> : tensor<3x33xf32>
    %y = sf.matmul %a, %w {transpose_a = false, transpose_b = false} : (tensor<2x16x3xf32>, tensor<3x33xf32>) -> tensor<2x16x33xf32>
    %t = sf.constant dense<2.0> : tensor<33x3xf32>
    %z = sf.matmul %b, %t {transpose_a = false, transpose_b = true} : (tensor<?x16x3xf32>, tensor<33x3xf32>) -> tensor<?x16x33xf32>
    %r = sf.matmul %row, %w {transpose_a = false, transpose_b = false} : (tensor<1x3xf32>, tensor<3x33xf32>) -> tensor<1x33xf32>
    func.return %y, %z, %r : tensor<2x16x33xf32>, tensor<?x16x33xf32>, tensor<1x33xf32>
  }
  func.func @transposed(%a: tensor<2x2xf32>, %bias: tensor<2xf32>, %v: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
    %w = sf.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
    %y = sf.matmul %a, %w {transpose_a = false, transpose_b = true} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %c = sf.matmul_add %a, %w, %bias {transpose_a = false, transpose_b = true, alpha = 1.0 : f64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %v2 = sf.matmul %a, %v {transpose_a = false, transpose_b = true} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    func.return %y, %c, %v2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
  }
}
