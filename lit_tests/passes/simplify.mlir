// RUN: stageflow opt %s --passes simplify | filecheck %s
// RUN: stageflow opt %s --passes 'simplify{no-signed-zeros=true}' | filecheck %s --check-prefix=NSZ

// `simplify` rewrites algebraic identities and op chains, replacing a value only by one of
// exactly the same type, and erases the ops a rewrite leaves unused.

// x + -0.0 and x - 0.0 are x for every float; x + 0.0 is not when x is -0.0 (it gives
// +0.0), unless signed zeros may be ignored. Integer zeros always go, on either side.
// CHECK-LABEL: func.func @add_zero
// CHECK-NEXT:    %pz = sf.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %0 = sf.add %x, %pz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %x, %0, %i, %x :
// NSZ-LABEL: func.func @add_zero
// NSZ-NEXT:    func.return %x, %x, %i, %x :
func.func @add_zero(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) {
  %nz = sf.constant dense<-0.0> : tensor<f32>
  %pz = sf.constant dense<0.0> : tensor<f32>
  %iz = sf.constant dense<0> : tensor<i32>
  %0 = sf.add %x, %nz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = sf.add %x, %pz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = sf.add %iz, %i : (tensor<i32>, tensor<4xi32>) -> tensor<4xi32>
  %3 = sf.subtract %x, %pz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>
}

// The same for bfloat16 (which NumPy does not count as a floating type).
// CHECK-LABEL: func.func @add_zero_bf16
// CHECK-NEXT:    %pz = sf.constant dense<0.000000e+00> : tensor<bf16>
// CHECK-NEXT:    %0 = sf.add %x, %pz : (tensor<4xbf16>, tensor<bf16>) -> tensor<4xbf16>
// CHECK-NEXT:    func.return %0, %x : tensor<4xbf16>, tensor<4xbf16>
func.func @add_zero_bf16(%x: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xbf16>) {
  %pz = sf.constant dense<0.0> : tensor<bf16>
  %nz = sf.constant dense<-0.0> : tensor<4xbf16>
  %0 = sf.add %x, %pz : (tensor<4xbf16>, tensor<bf16>) -> tensor<4xbf16>
  %1 = sf.add %x, %nz : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  func.return %0, %1 : tensor<4xbf16>, tensor<4xbf16>
}

// The zeros broadcast x to a bigger shape: x + zeros is not x.
// CHECK-LABEL: func.func @zeros_that_broadcast
// CHECK-NEXT:    %z = sf.constant dense<-0.000000e+00> : tensor<3x4xf32>
// CHECK-NEXT:    %0 = sf.add %x, %z : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
func.func @zeros_that_broadcast(%x: tensor<4xf32>) -> tensor<3x4xf32> {
  %z = sf.constant dense<-0.0> : tensor<3x4xf32>
  %0 = sf.add %x, %z : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @mul_div_one
// CHECK-NEXT:    func.return %x, %x : tensor<2x3xf32>, tensor<2x3xf32>
func.func @mul_div_one(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %one = sf.constant dense<1.0> : tensor<f32>
  %0 = sf.multiply %one, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = sf.divide %0, %one : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  func.return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// Integer x * 0 is 0 (the zeros themselves, or zeros broadcast to the result's static
// shape); float x * 0 stays (inf * 0 and NaN * 0 are NaN).
// CHECK-LABEL: func.func @mul_zero
// CHECK-NEXT:    %iz = sf.constant dense<0> : tensor<4xi32>
// CHECK-NEXT:    %fz = sf.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %0 = sf.constant dense<0> : tensor<i32>
// CHECK-NEXT:    %1 = sf.broadcast_to %0 {shape = [2, 4]} : (tensor<i32>) -> tensor<2x4xi32>
// CHECK-NEXT:    %2 = sf.multiply %x, %fz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %iz, %1, %2 :
func.func @mul_zero(%i: tensor<4xi32>, %j: tensor<2x4xi32>, %x: tensor<4xf32>) -> (tensor<4xi32>, tensor<2x4xi32>, tensor<4xf32>) {
  %iz = sf.constant dense<0> : tensor<4xi32>
  %fz = sf.constant dense<0.0> : tensor<f32>
  %0 = sf.multiply %i, %iz : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = sf.multiply %j, %iz : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  %2 = sf.multiply %x, %fz : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xi32>, tensor<2x4xi32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @double_negation
// CHECK-NEXT:    func.return %x, %b : tensor<4xf32>, tensor<4xi1>
func.func @double_negation(%x: tensor<4xf32>, %b: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xi1>) {
  %0 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.negative %0 : (tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.logical_not %b : (tensor<4xi1>) -> tensor<4xi1>
  %3 = sf.logical_not %2 : (tensor<4xi1>) -> tensor<4xi1>
  func.return %1, %3 : tensor<4xf32>, tensor<4xi1>
}

// Perms compose (result axis i of the outer reads axis p[q[i]] of x); an identity goes.
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT:    %0 = sf.transpose %x {perm = [2, 1, 0]} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK-NEXT:    func.return %x, %0, %x :
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x3x2xf32>, tensor<2x3x4xf32>) {
  %0 = sf.transpose %x {perm = [1, 2, 0]} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %1 = sf.transpose %0 {perm = [2, 0, 1]} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  %2 = sf.transpose %0 {perm = [1, 0, 2]} : (tensor<3x4x2xf32>) -> tensor<4x3x2xf32>
  %3 = sf.transpose %x {perm = [0, 1, 2]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %1, %2, %3 : tensor<2x3x4xf32>, tensor<4x3x2xf32>, tensor<2x3x4xf32>
}

// A reshape of a reshape is one reshape; a reshape to the operand's own type goes, but
// only if the shape rule agrees: ?x? reshaped to [2, 8] is not a no-op.
// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT:    %0 = sf.reshape %x {shape = [4, -1]} : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT:    %1 = sf.reshape %u {shape = [2, 8]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-NEXT:    func.return %0, %d, %1 :
func.func @reshapes(%x: tensor<2x3x4xf32>, %d: tensor<?x4xf32>, %u: tensor<?x?xf32>) -> (tensor<4x6xf32>, tensor<?x4xf32>, tensor<?x?xf32>) {
  %0 = sf.reshape %x {shape = [6, 4]} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = sf.reshape %0 {shape = [4, -1]} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %2 = sf.reshape %d {shape = [-1, 4]} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %3 = sf.reshape %u {shape = [2, 8]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  func.return %1, %2, %3 : tensor<4x6xf32>, tensor<?x4xf32>, tensor<?x?xf32>
}

// Dims named as the operand's (-2 - k: a squeeze or expand_dims of unknown dims) name
// what the inner reshape gave them; a chain through an inferred (-1) dim stays.
// CHECK-LABEL: func.func @reshapes_of_unknown_dims
// CHECK-NEXT:    %0 = sf.reshape %x {shape = [1, -3, -2]} : (tensor<?x?x1xf32>) -> tensor<1x?x?xf32>
// CHECK-NEXT:    %1 = sf.reshape %y {shape = [-1, 1]} : (tensor<?x4xf32>) -> tensor<?x1xf32>
// CHECK-NEXT:    %2 = sf.reshape %1 {shape = [-2]} : (tensor<?x1xf32>) -> tensor<?xf32>
// CHECK-NEXT:    func.return %0, %2 :
func.func @reshapes_of_unknown_dims(%x: tensor<?x?x1xf32>, %y: tensor<?x4xf32>) -> (tensor<1x?x?xf32>, tensor<?xf32>) {
  %0 = sf.reshape %x {shape = [-3, -2]} : (tensor<?x?x1xf32>) -> tensor<?x?xf32>
  %1 = sf.reshape %0 {shape = [1, -2, -3]} : (tensor<?x?xf32>) -> tensor<1x?x?xf32>
  %2 = sf.reshape %y {shape = [-1, 1]} : (tensor<?x4xf32>) -> tensor<?x1xf32>
  %3 = sf.reshape %2 {shape = [-2]} : (tensor<?x1xf32>) -> tensor<?xf32>
  func.return %1, %3 : tensor<1x?x?xf32>, tensor<?xf32>
}

// Broadcasts and casts to the operand's own type go; a broadcast of ?x3 to 4x3 does not.
// CHECK-LABEL: func.func @noop_moves
// CHECK-NEXT:    %0 = sf.broadcast_to %d {shape = [4, 3]} : (tensor<?x3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT:    %1 = sf.cast %x {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
// CHECK-NEXT:    func.return %x, %x, %0, %1 :
func.func @noop_moves(%x: tensor<2x3xf32>, %d: tensor<?x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<?x3xf32>, tensor<2x3xi32>) {
  %0 = sf.broadcast_to %x {shape = [2, 3]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = sf.cast %0 {dtype = f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = sf.broadcast_to %d {shape = [4, 3]} : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %3 = sf.cast %x {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  func.return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<?x3xf32>, tensor<2x3xi32>
}

// A constant condition picks a branch, if that branch already has the result's type.
// CHECK-LABEL: func.func @select_constant
// CHECK-NEXT:    %f = sf.constant dense<false> : tensor<4xi1>
// CHECK-NEXT:    %0 = sf.select %f, %x, %s : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %x, %y, %0 :
func.func @select_constant(%x: tensor<4xf32>, %y: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %t = sf.constant dense<true> : tensor<i1>
  %f = sf.constant dense<false> : tensor<4xi1>
  %0 = sf.select %t, %x, %y : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.select %f, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.select %f, %x, %s : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// A splat constant operand of a binary op becomes 0-d, unless its shape makes the result:
// with x of unknown size the 4 elements of the constant fix the result's size.
// CHECK-LABEL: func.func @scalar_broadcast
// CHECK-NEXT:    %two = sf.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %two_1 = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %0 = sf.multiply %x, %two_1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = sf.add %d, %two : (tensor<?xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %0, %1 :
func.func @scalar_broadcast(%x: tensor<4xf32>, %d: tensor<?xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %two = sf.constant dense<2.0> : tensor<4xf32>
  %0 = sf.multiply %x, %two : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.add %d, %two : (tensor<?xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// An elementwise op broadcasts a broadcast_to's operand itself where the other operands
// still give the result's shape; a broadcast that makes the result's shape stays.
// CHECK-LABEL: func.func @broadcast_into_consumer
// CHECK-NEXT:    %0 = sf.multiply %s, %x : (tensor<4x1xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %1 = sf.select %c, %s, %x : (tensor<4x3xi1>, tensor<4x1xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %2 = sf.add %s, %v : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %3 = sf.broadcast_to %s {shape = [4, 3]} : (tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %4 = sf.add %3, %w : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %0, %1, %2, %4 :
func.func @broadcast_into_consumer(%s: tensor<4x1xf32>, %x: tensor<4x3xf32>, %v: tensor<3xf32>, %w: tensor<4x1xf32>, %c: tensor<4x3xi1>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %b = sf.broadcast_to %s {shape = [4, 3]} : (tensor<4x1xf32>) -> tensor<4x3xf32>
  %0 = sf.multiply %b, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = sf.select %c, %b, %x : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = sf.add %b, %v : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %3 = sf.broadcast_to %s {shape = [4, 3]} : (tensor<4x1xf32>) -> tensor<4x3xf32>
  %4 = sf.add %3, %w : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  func.return %0, %1, %2, %4 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// A gather of a constant run of consecutive indices is a slice (one index: the slice
// reshaped without the axis; negative indices count from the end); indices out of order
// or out of range stay a gather.
// CHECK-LABEL: func.func @gather_run
// CHECK-NEXT:    %[[Q:.*]] = sf.slice %x {slices = {{\[}}[1, 2, 1], [none, none, none], [none, none, none]]} : (tensor<3x4x5xf32>) -> tensor<1x4x5xf32>
// CHECK-NEXT:    %a = sf.reshape %[[Q]] {shape = [4, 5]} : (tensor<1x4x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    %b = sf.slice %x {slices = {{\[}}[none, none, none], [2, 4, 1], [none, none, none]]} : (tensor<3x4x5xf32>) -> tensor<3x2x5xf32>
// CHECK-NEXT:    %k = sf.constant dense<[3, 1]> : tensor<2xi32>
// CHECK-NEXT:    %c = sf.gather %x, %k {axis = -2}
// CHECK-NEXT:    %o = sf.constant dense<3> : tensor<i64>
// CHECK-NEXT:    %d = sf.gather %x, %o {axis = 0}
// CHECK-NEXT:    func.return %a, %b, %c, %d
func.func @gather_run(%x: tensor<3x4x5xf32>) -> (tensor<4x5xf32>, tensor<3x2x5xf32>, tensor<3x2x5xf32>, tensor<4x5xf32>) {
  %i = sf.constant dense<-2> : tensor<i64>
  %a = sf.gather %x, %i {axis = 0} : (tensor<3x4x5xf32>, tensor<i64>) -> tensor<4x5xf32>
  %j = sf.constant dense<[2, 3]> : tensor<2xi32>
  %b = sf.gather %x, %j {axis = 1} : (tensor<3x4x5xf32>, tensor<2xi32>) -> tensor<3x2x5xf32>
  %k = sf.constant dense<[3, 1]> : tensor<2xi32>
  %c = sf.gather %x, %k {axis = -2} : (tensor<3x4x5xf32>, tensor<2xi32>) -> tensor<3x2x5xf32>
  %o = sf.constant dense<3> : tensor<i64>
  %d = sf.gather %x, %o {axis = 0} : (tensor<3x4x5xf32>, tensor<i64>) -> tensor<4x5xf32>
  func.return %a, %b, %c, %d : tensor<4x5xf32>, tensor<3x2x5xf32>, tensor<3x2x5xf32>, tensor<4x5xf32>
}

// A half-float sum or product accumulates in float32 and rounds once (its kernel does):
// written so, as a float32 reduction between casts, it compiles. Max and min of halves,
// exact in any order, stay as they are, and so do float32 sums.
// CHECK-LABEL: func.func @half_reductions
// CHECK-NEXT:    %[[B:.*]] = sf.cast %b {dtype = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = sf.reduce_sum %[[B]] {axes = [0], keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %[[SB:.*]] = sf.cast %[[S]] {dtype = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT:    %[[H:.*]] = sf.cast %h {dtype = f32} : (tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[P:.*]] = sf.reduce_prod %[[H]] {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %[[PH:.*]] = sf.cast %[[P]] {dtype = f16} : (tensor<4x1xf32>) -> tensor<4x1xf16>
// CHECK-NEXT:    %m = sf.reduce_max %b
// CHECK-NEXT:    %f = sf.reduce_sum %x
// CHECK-NEXT:    func.return %[[SB]], %[[PH]], %m, %f
func.func @half_reductions(%b: tensor<4x8xbf16>, %h: tensor<4x8xf16>, %x: tensor<4x8xf32>) -> (tensor<8xbf16>, tensor<4x1xf16>, tensor<8xbf16>, tensor<8xf32>) {
  %s = sf.reduce_sum %b {axes = [0], keepdims = false} : (tensor<4x8xbf16>) -> tensor<8xbf16>
  %p = sf.reduce_prod %h {axes = [1], keepdims = true} : (tensor<4x8xf16>) -> tensor<4x1xf16>
  %m = sf.reduce_max %b {axes = [0], keepdims = false} : (tensor<4x8xbf16>) -> tensor<8xbf16>
  %f = sf.reduce_sum %x {axes = [0], keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %s, %p, %m, %f : tensor<8xbf16>, tensor<4x1xf16>, tensor<8xbf16>, tensor<8xf32>
}
