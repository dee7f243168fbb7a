// RUN: stageflow opt %s --passes prepack | filecheck %s

// `prepack` with region ops: a convolution inside a branch or a loop body whose filters
// are a constant (of the function's block, or of the region's own) reads them packed;
// the packed constant is made beside the original, where it dominates every use, and a
// constant packed for one convolution serves the others.

// CHECK-LABEL: func.func @in_regions
// CHECK-NEXT:    %w = sf.constant dense<0.000000e+00> : tensor<1x1x1x33xf32>
// CHECK-NEXT:    %w_1 = sf.constant dense<{{.*}}> : tensor<2x1x32xf32>
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<1x3x3x33xf32> ({
// CHECK-NEXT:      %y = sf.conv2d_prepacked %x, %w_1 {filter_shape = [1, 1, 1, 33]
// CHECK-NEXT:      sf.yield %y
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %v = sf.constant dense<5.000000e-01> : tensor<1x1x1x33xf32>
// CHECK-NEXT:      %v_1 = sf.constant dense<{{.*}}> : tensor<2x1x32xf32>
// CHECK-NEXT:      %z = sf.conv2d_prepacked %x, %v_1 {filter_shape = [1, 1, 1, 33]
// CHECK-NEXT:      sf.yield %z
// CHECK-NEXT:    })
// CHECK-NEXT:    %k, %s = sf.while %n, %r
// CHECK:           %c = sf.conv2d_prepacked %x, %w_1 {filter_shape = [1, 1, 1, 33]
func.func @in_regions(%x: tensor<1x3x3x1xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<1x3x3x33xf32> {
  %w = sf.constant dense<0.0> : tensor<1x1x1x33xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<1x3x3x33xf32> ({
    %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x3x3x33xf32>
    sf.yield %y : tensor<1x3x3x33xf32>
  }, {
    %v = sf.constant dense<0.5> : tensor<1x1x1x33xf32>
    %z = sf.conv2d %x, %v {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x3x3x33xf32>
    sf.yield %z : tensor<1x3x3x33xf32>
  })
  %k, %s = sf.while %n, %r : (tensor<i64>, tensor<1x3x3x33xf32>) -> (tensor<i64>, tensor<1x3x3x33xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<1x3x3x33xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %more = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %more : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<1x3x3x33xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %c = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x3x3x33xf32>
    %b = sf.add %a, %c : (tensor<1x3x3x33xf32>, tensor<1x3x3x33xf32>) -> tensor<1x3x3x33xf32>
    sf.yield %i1, %b : tensor<i64>, tensor<1x3x3x33xf32>
  })
  func.return %s : tensor<1x3x3x33xf32>
}
