// RUN: stageflow opt %s --passes fuse-conv | filecheck %s

// `fuse-conv` with region ops: a convolution and its epilogue inside a branch or a loop
// body become one op there, the spread constants made beside it; an epilogue whose
// residual comes from outside the region (a value of the function's block) reads it in
// place; a convolution whose result leaves the region unfinished (yielded) stays.

// CHECK-LABEL: func.func @in_regions
// CHECK:         %r = sf.cond %p : (tensor<i1>) -> tensor<1x3x3x2xf32> ({
// CHECK-NEXT:      %{{.*}} = sf.constant dense<2.500000e-01> : tensor<2xf32>
// CHECK-NEXT:      %z = sf.conv2d_fused %x, %w, %{{.*}}, %skip {{{.*}}scale = false, shift = true, residual = true, activation = "relu"}
// CHECK-NEXT:      sf.yield %z
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %y = sf.conv2d %x, %w
// CHECK-NEXT:      sf.yield %y
// CHECK-NEXT:    })
// CHECK:           %c = sf.conv2d_fused %x, %w, %{{.*}} {{{.*}}residual = true, activation = "relu"}
// CHECK-NEXT:      sf.yield %i1, %c
func.func @in_regions(%x: tensor<1x3x3x1xf32>, %w: tensor<1x1x1x2xf32>, %skip: tensor<1x3x3x2xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<1x3x3x2xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<1x3x3x2xf32> ({
    %t = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x2xf32>) -> tensor<1x3x3x2xf32>
    %q = sf.constant dense<0.25> : tensor<f32>
    %u = sf.add %t, %q : (tensor<1x3x3x2xf32>, tensor<f32>) -> tensor<1x3x3x2xf32>
    %v = sf.add %u, %skip : (tensor<1x3x3x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
    %z = sf.relu %v : (tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
    sf.yield %z : tensor<1x3x3x2xf32>
  }, {
    %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x2xf32>) -> tensor<1x3x3x2xf32>
    sf.yield %y : tensor<1x3x3x2xf32>
  })
  %k, %s = sf.while %n, %r : (tensor<i64>, tensor<1x3x3x2xf32>) -> (tensor<i64>, tensor<1x3x3x2xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<1x3x3x2xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %more = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %more : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<1x3x3x2xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %b = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x3x3x1xf32>, tensor<1x1x1x2xf32>) -> tensor<1x3x3x2xf32>
    %d = sf.add %a, %b : (tensor<1x3x3x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
    %c = sf.relu %d : (tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
    sf.yield %i1, %c : tensor<i64>, tensor<1x3x3x2xf32>
  })
  func.return %s : tensor<1x3x3x2xf32>
}
