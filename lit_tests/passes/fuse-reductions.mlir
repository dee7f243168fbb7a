// RUN: stageflow opt %s --passes fuse | filecheck %s
// RUN: stageflow opt %s --passes 'fuse{reductions=false}' | filecheck %s --check-prefix=APART

// A reduction joins the kernel of the group producing its operand when the operand spans
// the group's iteration space: the kernel folds each element into the result as it
// computes it, and writes the operand only if something else reads it.

// sum(x * x) over the rows: one kernel, the square never written.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK-NEXT:    %s = sf.call %x {callee = @sum_of_squares_kernel0} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %s
// CHECK-LABEL: func.func @sum_of_squares_kernel0(%x: tensor<4x8xf32>) -> tensor<4xf32> attributes {sf.kernel}
// CHECK-NEXT:    %sq = sf.multiply %x, %x
// CHECK-NEXT:    %s = sf.reduce_sum %sq {axes = [1], keepdims = false}
// CHECK-NEXT:    func.return %s
// APART-LABEL: func.func @sum_of_squares(
// APART-NEXT:    %sq = sf.call %x {callee = @sum_of_squares_kernel0}
// APART-NEXT:    %s = sf.reduce_sum %sq {axes = [1], keepdims = false}
func.func @sum_of_squares(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %sq = sf.multiply %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = sf.reduce_sum %sq {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// sum(tanh(x) + b) over the leading axis, kept as 1; unknown dims stay in the signature.
// CHECK-LABEL: func.func @sum_of_tanh(
// CHECK-NEXT:    %m = sf.call %x, %b {callee = @sum_of_tanh_kernel0} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    func.return %m
// CHECK-LABEL: func.func @sum_of_tanh_kernel0(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<1x8xf32> attributes {sf.kernel}
// CHECK-NEXT:    %t = sf.tanh %x
// CHECK-NEXT:    %h = sf.add %t, %b
// CHECK-NEXT:    %m = sf.reduce_sum %h {axes = [0], keepdims = true}
// CHECK-NEXT:    func.return %m
func.func @sum_of_tanh(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<1x8xf32> {
  %t = sf.tanh %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %h = sf.add %t, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %m = sf.reduce_sum %h {axes = [0], keepdims = true} : (tensor<?x8xf32>) -> tensor<1x8xf32>
  func.return %m : tensor<1x8xf32>
}

// A max over a dim that may be 0 stays a step: its lowering refuses an empty axis, as NumPy
// does, where a kernel would give -inf. Over a known non-zero dim it joins the kernel.
// CHECK-LABEL: func.func @max_of_tanh(
// CHECK-NEXT:    %h = sf.call %x, %b {callee = @max_of_tanh_kernel0} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %m = sf.reduce_max %h {axes = [0], keepdims = true}
// CHECK-NEXT:    %n = sf.call %y {callee = @max_of_tanh_kernel1} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %m, %n
func.func @max_of_tanh(%x: tensor<?x8xf32>, %b: tensor<8xf32>, %y: tensor<4x8xf32>) -> (tensor<1x8xf32>, tensor<4xf32>) {
  %t = sf.tanh %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %h = sf.add %t, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %m = sf.reduce_max %h {axes = [0], keepdims = true} : (tensor<?x8xf32>) -> tensor<1x8xf32>
  %u = sf.tanh %y : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = sf.reduce_max %u {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %m, %n : tensor<1x8xf32>, tensor<4xf32>
}

// Two reductions of one value over several axes join it, and the value is never written.
// Returned as well, it is written anyway: then reductions folding the innermost axis stay
// steps.
// CHECK-LABEL: func.func @two_reductions(
// CHECK-NEXT:    %lo, %hi = sf.call %x {callee = @two_reductions_kernel0} : (tensor<2x3x4xf64>) -> (tensor<3xf64>, tensor<2x1x1xf64>)
// CHECK-NEXT:    func.return %lo, %hi
// CHECK-LABEL: func.func @two_reductions_kernel0(
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    %lo = sf.reduce_min %e {axes = [0, 2], keepdims = false}
// CHECK-NEXT:    %hi = sf.reduce_sum %e {axes = [1, 2], keepdims = true}
// CHECK-NEXT:    func.return %lo, %hi
func.func @two_reductions(%x: tensor<2x3x4xf64>) -> (tensor<3xf64>, tensor<2x1x1xf64>) {
  %e = sf.exp %x : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %lo = sf.reduce_min %e {axes = [0, 2], keepdims = false} : (tensor<2x3x4xf64>) -> tensor<3xf64>
  %hi = sf.reduce_sum %e {axes = [1, 2], keepdims = true} : (tensor<2x3x4xf64>) -> tensor<2x1x1xf64>
  func.return %lo, %hi : tensor<3xf64>, tensor<2x1x1xf64>
}

// CHECK-LABEL: func.func @returned_too(
// CHECK-NEXT:    %e = sf.call %x {callee = @returned_too_kernel0}
// CHECK-NEXT:    %lo = sf.reduce_min %e {axes = [0, 2], keepdims = false}
// CHECK-NEXT:    %hi = sf.reduce_sum %e {axes = [1, 2], keepdims = true}
// CHECK-NEXT:    func.return %e, %lo, %hi
func.func @returned_too(%x: tensor<2x3x4xf64>) -> (tensor<2x3x4xf64>, tensor<3xf64>, tensor<2x1x1xf64>) {
  %e = sf.exp %x : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %lo = sf.reduce_min %e {axes = [0, 2], keepdims = false} : (tensor<2x3x4xf64>) -> tensor<3xf64>
  %hi = sf.reduce_sum %e {axes = [1, 2], keepdims = true} : (tensor<2x3x4xf64>) -> tensor<2x1x1xf64>
  func.return %e, %lo, %hi : tensor<2x3x4xf64>, tensor<3xf64>, tensor<2x1x1xf64>
}

// A value also used elsewhere is written anyway; a reduction keeping the innermost axis
// (a bias gradient's column sums) still joins, adding each row into the result as the
// kernel writes it.
// CHECK-LABEL: func.func @written_and_column_summed(
// CHECK-NEXT:    %g, %s = sf.call %x, %m {callee = @written_and_column_summed_kernel0} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NEXT:    func.return %g, %s
// CHECK-LABEL: func.func @written_and_column_summed_kernel0(
// CHECK-NEXT:    %g = sf.multiply %x, %m
// CHECK-NEXT:    %s = sf.reduce_sum %g {axes = [0], keepdims = false}
// CHECK-NEXT:    func.return %g, %s
func.func @written_and_column_summed(%x: tensor<4x8xf32>, %m: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %g = sf.multiply %x, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = sf.reduce_sum %g {axes = [0], keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %g, %s : tensor<4x8xf32>, tensor<8xf32>
}

// Batch norm's backward: the gradient (also written: the next layer reads it) and its
// product with the normalised input (only summed) are both summed over N, H and W in the
// loop that computes them; the product is never written.
// CHECK-LABEL: func.func @batch_norm_sums(
// CHECK-NEXT:    %g, %dx, %sg, %sgx = sf.call %d, %m, %gamma, %xhat {callee = @batch_norm_sums_kernel0}
// CHECK-NEXT:    func.return %g, %dx, %sg, %sgx
// CHECK-LABEL: func.func @batch_norm_sums_kernel0(
// CHECK-NEXT:    %g = sf.multiply %d, %m
// CHECK-NEXT:    %dx = sf.multiply %g, %gamma
// CHECK-NEXT:    %gx = sf.multiply %g, %xhat
// CHECK-NEXT:    %sg = sf.reduce_sum %g {axes = [0, 1, 2], keepdims = false}
// CHECK-NEXT:    %sgx = sf.reduce_sum %gx {axes = [0, 1, 2], keepdims = false}
// CHECK-NEXT:    func.return %g, %dx, %sg, %sgx
func.func @batch_norm_sums(%d: tensor<2x4x4x8xf32>, %m: tensor<2x4x4x8xf32>, %gamma: tensor<8xf32>, %xhat: tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g = sf.multiply %d, %m : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %dx = sf.multiply %g, %gamma : (tensor<2x4x4x8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf32>
  %gx = sf.multiply %g, %xhat : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %sg = sf.reduce_sum %g {axes = [0, 1, 2], keepdims = false} : (tensor<2x4x4x8xf32>) -> tensor<8xf32>
  %sgx = sf.reduce_sum %gx {axes = [0, 1, 2], keepdims = false} : (tensor<2x4x4x8xf32>) -> tensor<8xf32>
  func.return %g, %dx, %sg, %sgx : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// A reduction of an argument has no producer to join; a value narrower than the group
// that broadcasts it (%a, along the rows) and used elsewhere is a kernel of its own, which
// its reduction then ends; a row sum of a value also written (%b) stays a step.
// CHECK-LABEL: func.func @not_fused(
// CHECK-NEXT:    %r = sf.reduce_sum %x {axes = [1], keepdims = true}
// CHECK-NEXT:    %a, %s = sf.call %r {callee = @not_fused_kernel1}
// CHECK-NEXT:    %b, %y = sf.call %x, %a {callee = @not_fused_kernel0}
// CHECK-NEXT:    %t = sf.reduce_sum %b {axes = [1], keepdims = false}
// CHECK-NEXT:    func.return %y, %s, %b, %t
func.func @not_fused(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1xf32>, tensor<4x8xf32>, tensor<4xf32>) {
  %r = sf.reduce_sum %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = sf.abs %r : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %b = sf.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = sf.multiply %a, %b : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = sf.reduce_sum %a {axes = [0], keepdims = false} : (tensor<4x1xf32>) -> tensor<1xf32>
  %t = sf.reduce_sum %b {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %y, %s, %b, %t : tensor<4x8xf32>, tensor<1xf32>, tensor<4x8xf32>, tensor<4xf32>
}

// With unknown dims, equal types are not equal dims: %y's unknown dim comes from %m as well
// (at run time %x's may be 1 and %m's 5), so %c, used outside, does not share %y's kernel;
// its column sums join its own.
// CHECK-LABEL: func.func @unknown_dims(
// CHECK-NEXT:    %c, %s = sf.call %x {callee = @unknown_dims_kernel1}
// CHECK-NEXT:    %y = sf.call %c, %m {callee = @unknown_dims_kernel0}
// CHECK-NEXT:    func.return %y, %s
func.func @unknown_dims(%x: tensor<?x4xf32>, %m: tensor<?x1xf32>) -> (tensor<?x4xf32>, tensor<4xf32>) {
  %c = sf.exp %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = sf.multiply %c, %m : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %s = sf.reduce_sum %c {axes = [0], keepdims = false} : (tensor<?x4xf32>) -> tensor<4xf32>
  func.return %y, %s : tensor<?x4xf32>, tensor<4xf32>
}
