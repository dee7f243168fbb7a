// RUN: stageflow opt %s --passes prepack,prune | filecheck %s

// A grouped convolution is one `sf.conv2d` whose `feature_group_count` attribute says how
// many groups its channels form (filters of C / groups input channels; an op without the
// attribute is of one group). `prepack` packs its constant filters group by group: each
// group's 2 columns start a panel of their own (32 float32s wide, zero past them), and
// the prepacked op keeps the attribute.

// CHECK-LABEL: func.func @grouped(
// CHECK-NEXT:    %w = sf.constant dense<{{\[\[\[}}1.000000e+00, 2.000000e+00, 0.000000e+00, {{.*}}]], {{\[\[}}3.000000e+00, 4.000000e+00, 0.000000e+00, {{.*}}]]]> : tensor<2x1x32xf32>
// CHECK-NEXT:    %y = sf.conv2d_prepacked %x, %w {filter_shape = [1, 1, 1, 4], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1], feature_group_count = 2} : (tensor<1x3x3x2xf32>, tensor<2x1x32xf32>) -> tensor<1x3x3x4xf32>
// CHECK-NEXT:    %z = sf.conv2d %x, %v {strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1], feature_group_count = 2} : (tensor<1x3x3x2xf32>, tensor<1x1x1x4xf32>) -> tensor<1x3x3x4xf32>
// CHECK-NEXT:    func.return %y, %z

builtin.module {
  func.func @grouped(%x: tensor<1x3x3x2xf32>, %v: tensor<1x1x1x4xf32>) -> (tensor<1x3x3x4xf32>, tensor<1x3x3x4xf32>) {
    %w = sf.constant dense<[[[[1.0, 2.0, 3.0, 4.0]]]]> : tensor<1x1x1x4xf32>
    %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1], feature_group_count = 2} : (tensor<1x3x3x2xf32>, tensor<1x1x1x4xf32>) -> tensor<1x3x3x4xf32>
    %z = sf.conv2d %x, %v {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1], feature_group_count = 2} : (tensor<1x3x3x2xf32>, tensor<1x1x1x4xf32>) -> tensor<1x3x3x4xf32>
    func.return %y, %z : tensor<1x3x3x4xf32>, tensor<1x3x3x4xf32>
  }
}
