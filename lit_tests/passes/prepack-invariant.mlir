// RUN: stageflow opt %s --passes 'prepack{invariant=true}' | filecheck %s
// RUN: stageflow opt %s --passes 'prepack{invariant=true},hoist-invariant,prune' | filecheck %s --check-prefix=KEPT

// With `invariant`, `prepack` lays out the filters and dense weights a function reads from
// variables it never writes, as it lays out constants, but by ops: a reshape cutting the
// columns into runs of a panel's width (32 float32s) and a transpose putting the runs one
// after another. 96 filters of one tap and channel: three panels. Two convolutions of one
// variable share its layout; a matmul of 16 rows becomes a pointwise convolution of the
// panels. One of 2 rows reading its weights transposed keeps reading them in place (a
// transposed copy, as a constant's, would hold the weights twice more).
// CHECK-LABEL: func.func @model(
// CHECK-NEXT:    %wr = sf.read_variable %w
// CHECK-NEXT:    %[[R:.*]] = sf.reshape %wr {shape = [1, 3, 32]} : (tensor<1x1x1x96xf32>) -> tensor<1x3x32xf32>
// CHECK-NEXT:    %[[P:.*]] = sf.transpose %[[R]] {perm = [1, 0, 2]} : (tensor<1x3x32xf32>) -> tensor<3x1x32xf32>
// CHECK-NEXT:    %y = sf.conv2d_prepacked %x, %[[P]] {filter_shape = [1, 1, 1, 96], strides = [1, 1], {{.*}}} : (tensor<1x4x4x1xf32>, tensor<3x1x32xf32>) -> tensor<1x4x4x96xf32>
// CHECK-NEXT:    %z = sf.conv2d_prepacked %x, %[[P]] {filter_shape = [1, 1, 1, 96], strides = [2, 2],
// CHECK-NEXT:    %dr = sf.read_variable %d
// CHECK-NEXT:    %[[S:.*]] = sf.reshape %dr {shape = [3, 2, 32]}
// CHECK-NEXT:    %[[Q:.*]] = sf.transpose %[[S]] {perm = [1, 0, 2]} : (tensor<3x2x32xf32>) -> tensor<2x3x32xf32>
// CHECK-NEXT:    %[[I:.*]] = sf.reshape %a {shape = [1, 16, 1, 3]}
// CHECK-NEXT:    %[[C:.*]] = sf.conv2d_prepacked %[[I]], %[[Q]] {filter_shape = [1, 1, 3, 64],
// CHECK-NEXT:    %m = sf.reshape %[[C]] {shape = [16, 64]}
// CHECK-NEXT:    %tr = sf.read_variable %t
// CHECK-NEXT:    %h = sf.matmul %row, %tr {transpose_a = false, transpose_b = true}
// CHECK-NEXT:    func.return %y, %z, %m, %h

// `hoist-invariant` then moves the layouts into the partner, whose results the runtime
// keeps between calls: the function reads packed panels as its frozen form does.
// KEPT-LABEL: func.func @model(
// KEPT-SAME:     %wr: tensor<3x1x32xf32>, %dr: tensor<2x3x32xf32>)
// KEPT-NOT:      sf.transpose
// KEPT:          %tr = sf.read_variable %t
// KEPT-NOT:      sf.transpose
// KEPT:          func.return
// KEPT:        func.func @model_invariant(
// KEPT-NEXT:     sf.read_variable %w
// KEPT-NEXT:     sf.reshape
// KEPT-NEXT:     sf.transpose
// KEPT-NEXT:     sf.read_variable %d
// KEPT-NEXT:     sf.reshape
// KEPT-NEXT:     sf.transpose
// KEPT-NEXT:     func.return

// Left as they are: filters whose panels would need padding (33 columns: the partner keeps
// no value larger than the variables it reads), filters of a variable the function
// writes, and filters in a function holding a callback (it may write any variable), whose
// layout would be redone on every call.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     sf.conv2d_prepacked
// CHECK-NOT:     sf.transpose
// CHECK:         func.return
// CHECK-LABEL: func.func @callback(
// CHECK-NOT:     sf.conv2d_prepacked
// CHECK:         func.return
// KEPT-LABEL:  func.func @kept(
// KEPT-NOT:      sf.invariant
// KEPT-LABEL:  func.func @callback(
// KEPT-NOT:      sf.invariant
func.func @model(%x: tensor<1x4x4x1xf32>, %a: tensor<16x3xf32>, %row: tensor<2x32xf32>, %w: !sf.resource<tensor<1x1x1x96xf32>>, %d: !sf.resource<tensor<3x64xf32>>, %t: !sf.resource<tensor<64x32xf32>>) -> (tensor<1x4x4x96xf32>, tensor<1x2x2x96xf32>, tensor<16x64xf32>, tensor<2x64xf32>) {
  %wr = sf.read_variable %w : (!sf.resource<tensor<1x1x1x96xf32>>) -> tensor<1x1x1x96xf32>
  %y = sf.conv2d %x, %wr {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x96xf32>) -> tensor<1x4x4x96xf32>
  %z = sf.conv2d %x, %wr {strides = [2, 2], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x96xf32>) -> tensor<1x2x2x96xf32>
  %dr = sf.read_variable %d : (!sf.resource<tensor<3x64xf32>>) -> tensor<3x64xf32>
  %m = sf.matmul %a, %dr {transpose_a = false, transpose_b = false} : (tensor<16x3xf32>, tensor<3x64xf32>) -> tensor<16x64xf32>
  %tr = sf.read_variable %t : (!sf.resource<tensor<64x32xf32>>) -> tensor<64x32xf32>
  %h = sf.matmul %row, %tr {transpose_a = false, transpose_b = true} : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  func.return %y, %z, %m, %h : tensor<1x4x4x96xf32>, tensor<1x2x2x96xf32>, tensor<16x64xf32>, tensor<2x64xf32>
}
func.func @kept(%x: tensor<1x4x4x1xf32>, %w: !sf.resource<tensor<1x1x1x33xf32>>, %u: !sf.resource<tensor<1x1x1x96xf32>>) -> (tensor<1x4x4x33xf32>, tensor<1x4x4x96xf32>) {
  %wr = sf.read_variable %w : (!sf.resource<tensor<1x1x1x33xf32>>) -> tensor<1x1x1x33xf32>
  %y = sf.conv2d %x, %wr {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x33xf32>) -> tensor<1x4x4x33xf32>
  %ur = sf.read_variable %u : (!sf.resource<tensor<1x1x1x96xf32>>) -> tensor<1x1x1x96xf32>
  %z = sf.conv2d %x, %ur {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x96xf32>) -> tensor<1x4x4x96xf32>
  %n = sf.negative %ur : (tensor<1x1x1x96xf32>) -> tensor<1x1x1x96xf32>
  sf.assign_variable %u, %n : (!sf.resource<tensor<1x1x1x96xf32>>, tensor<1x1x1x96xf32>) -> ()
  func.return %y, %z : tensor<1x4x4x33xf32>, tensor<1x4x4x96xf32>
}
func.func @callback(%x: tensor<1x4x4x1xf32>, %w: !sf.resource<tensor<1x1x1x96xf32>>) -> tensor<1x4x4x96xf32> {
  %wr = sf.read_variable %w : (!sf.resource<tensor<1x1x1x96xf32>>) -> tensor<1x1x1x96xf32>
  %y = sf.conv2d %x, %wr {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<1x1x1x96xf32>) -> tensor<1x4x4x96xf32>
  %p = sf.py_func %y {func = "f#1", shapes = [[1, 4, 4, 96]], dtypes = [f32]} : (tensor<1x4x4x96xf32>) -> tensor<1x4x4x96xf32>
  func.return %p : tensor<1x4x4x96xf32>
}
