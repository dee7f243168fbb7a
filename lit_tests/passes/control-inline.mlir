// RUN: stageflow opt %s --passes inline | filecheck %s
// RUN: stageflow opt %s --passes 'inline{max-ops=3}' | filecheck %s --check-prefix=SMALL

// `inline` with region ops: a call inside an `sf.cond` or `sf.while` region is replaced by
// the callee's body in that region (the copy runs when, and as often as, the region
// does), and a callee holding region ops is copied whole, its regions reading the call's
// operands from above. A callee's size counts the ops inside its regions.

// Calls in a branch, in a loop's condition and in its body are inlined where they are.
// CHECK-LABEL: func.func @calls_in_regions
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %a = sf.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %a : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    %k, %v = sf.while %n, %r
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:      %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_2: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.subtract %i_1, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:      %a1 = sf.add %a_2, %a_2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %i1, %a1 : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %v
// The small callees fit in three ops too.
// SMALL-LABEL: func.func @calls_in_regions
// SMALL:         sf.add %x, %x
// SMALL:         sf.greater
// SMALL:         sf.subtract
// SMALL:         sf.add %a_2, %a_2
func.func @calls_in_regions(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.call %x {callee = @twice} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %k, %v = sf.while %n, %r : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %c = sf.call %i {callee = @positive} : (tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %i1 = sf.call %i {callee = @decrement} : (tensor<i64>) -> tensor<i64>
    %a1 = sf.call %a {callee = @twice} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %a1 : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}

// A callee with a cond inside is copied whole: its branch reads the call's operand %x
// from above, and the call inside that branch is inlined too. With max-ops=3 it is too
// large (five ops, the branch's counted) and stays a call, while @twice is still inlined
// into it.
// CHECK-LABEL: func.func @callee_with_regions
// CHECK-NEXT:    %zero = sf.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %s = sf.reduce_sum %x {axes = [0], keepdims = false}
// CHECK-NEXT:    %q = sf.greater %s, %zero
// CHECK-NEXT:    %r = sf.cond %q : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %t = sf.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %t : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %r : tensor<4xf32>
// SMALL-LABEL: func.func @callee_with_regions
// SMALL-NEXT:    %0 = sf.call %x {callee = @double_if_positive}
// SMALL-LABEL: func.func @double_if_positive
// SMALL:         sf.cond
// SMALL-NEXT:      %t = sf.add %a, %a
func.func @callee_with_regions(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.call %x {callee = @double_if_positive} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// A recursive function is never inlined, not even from inside a region.
// CHECK-LABEL: func.func @countdown
// CHECK:         sf.call %m {callee = @countdown}
func.func @countdown(%n: tensor<i64>) -> tensor<i64> {
  %zero = sf.constant dense<0> : tensor<i64>
  %p = sf.greater %n, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
  %r = sf.cond %p : (tensor<i1>) -> tensor<i64> ({
    %one = sf.constant dense<1> : tensor<i64>
    %m = sf.subtract %n, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %c = sf.call %m {callee = @countdown} : (tensor<i64>) -> tensor<i64>
    sf.yield %c : tensor<i64>
  }, {
    sf.yield %n : tensor<i64>
  })
  func.return %r : tensor<i64>
}

// Callees inlined everywhere are erased.
// CHECK-NOT: func.func @twice
// CHECK-NOT: func.func @positive
// CHECK-NOT: func.func @decrement
// CHECK-NOT: func.func @double_if_positive
func.func @twice(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @positive(%i: tensor<i64>) -> tensor<i1> {
  %zero = sf.constant dense<0> : tensor<i64>
  %0 = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
  func.return %0 : tensor<i1>
}
func.func @decrement(%i: tensor<i64>) -> tensor<i64> {
  %one = sf.constant dense<1> : tensor<i64>
  %0 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  func.return %0 : tensor<i64>
}
func.func @double_if_positive(%a: tensor<4xf32>) -> tensor<4xf32> {
  %zero = sf.constant dense<0.0> : tensor<f32>
  %s = sf.reduce_sum %a {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %q = sf.greater %s, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %r = sf.cond %q : (tensor<i1>) -> tensor<4xf32> ({
    %t = sf.call %a {callee = @twice} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  }, {
    sf.yield %a : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}
