// RUN: stageflow opt %s --passes simplify | filecheck %s

// `simplify` with region ops: its rules apply inside `sf.cond` and `sf.while` regions as
// anywhere else (a value from above is a value like any other), and two rules see through
// the region ops: a result every branch yields as the same outer value is that value, and
// a loop variable the body yields back unchanged is the loop's operand throughout.

// Identities inside regions, nested: `a * 1` in a branch, a double transpose in a loop
// body, `x + -0.0` with the constant and `x` both from above; the region ops themselves
// stay as they were.
// CHECK-LABEL: func.func @rules_inside
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %step = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<2x3xf32> ({
// CHECK-NEXT:      %e = sf.exp %m : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      sf.yield %e : tensor<2x3xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %m : tensor<2x3xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    %k, %v = sf.while %n, %r : (tensor<i64>, tensor<2x3xf32>) -> (tensor<i64>, tensor<2x3xf32>) ({
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %b: tensor<2x3xf32>):
// CHECK-NEXT:      %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %b_1: tensor<2x3xf32>):
// CHECK-NEXT:      %s = sf.multiply %b_1, %m : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:      %i1 = sf.subtract %i_1, %step : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:      sf.yield %i1, %s : tensor<i64>, tensor<2x3xf32>
// CHECK-NEXT:    })
func.func @rules_inside(%m: tensor<2x3xf32>, %p: tensor<i1>, %n: tensor<i64>) -> (tensor<i64>, tensor<2x3xf32>) {
  %one = sf.constant dense<1.0> : tensor<f32>
  %zero = sf.constant dense<0> : tensor<i64>
  %step = sf.constant dense<1> : tensor<i64>
  %minus_zero = sf.constant dense<-0.0> : tensor<f32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<2x3xf32> ({
    %e = sf.exp %m : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %a = sf.multiply %e, %one : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    sf.yield %a : tensor<2x3xf32>
  }, {
    sf.yield %m : tensor<2x3xf32>
  })
  %k, %v = sf.while %n, %r : (tensor<i64>, tensor<2x3xf32>) -> (tensor<i64>, tensor<2x3xf32>) ({
  ^bb0(%i: tensor<i64>, %b: tensor<2x3xf32>):
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %b: tensor<2x3xf32>):
    %t = sf.transpose %b {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %tt = sf.transpose %t {perm = [1, 0]} : (tensor<3x2xf32>) -> tensor<2x3xf32>
    %x = sf.add %m, %minus_zero : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %s = sf.multiply %tt, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %i1 = sf.subtract %i, %step : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1, %s : tensor<i64>, tensor<2x3xf32>
  })
  func.return %k, %v : tensor<i64>, tensor<2x3xf32>
}

// Both branches yield %y as their second value: its uses read %y, so the return no
// longer waits for the cond (prune may drop the result). The first result differs per
// branch and stays; so does a result whose type is less precise than the shared value's.
// CHECK-LABEL: func.func @cond_pass_through
// CHECK-NEXT:    %r, %s, %t = sf.cond %p
// CHECK:         func.return %r, %y, %t : tensor<4xf32>, tensor<4xf32>, tensor<?xf32>
func.func @cond_pass_through(%x: tensor<4xf32>, %y: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<?xf32>) {
  %r, %s, %t = sf.cond %p : (tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<?xf32>) ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a, %y, %y : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }, {
    sf.yield %x, %y, %y : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  })
  func.return %r, %s, %t : tensor<4xf32>, tensor<4xf32>, tensor<?xf32>
}

// A value computed inside a branch is not from above: nothing to forward even if every
// branch yields an equal computation.
// CHECK-LABEL: func.func @cond_inner_values
// CHECK:         func.return %r : tensor<4xf32>
func.func @cond_inner_values(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %b = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// The scale %w is a loop variable the body passes back unchanged: inside both regions and
// after the loop it is the operand %s itself (the variable is then unused, for prune). The
// counter changes and stays carried.
// CHECK-LABEL: func.func @while_invariant
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %k, %w, %acc = sf.while %zero, %s, %x
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<f32>, %b: tensor<4xf32>):
// CHECK-NEXT:      %small = sf.less %s, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:      %c = sf.less %i, %n
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<f32>, %b_1: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.add %i_1, %one
// CHECK-NEXT:      %b1 = sf.multiply %b_1, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %i1, %s, %b1 : tensor<i64>, tensor<f32>, tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %acc, %s : tensor<4xf32>, tensor<f32>
func.func @while_invariant(%x: tensor<4xf32>, %s: tensor<f32>, %n: tensor<i64>) -> (tensor<4xf32>, tensor<f32>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %k, %w, %acc = sf.while %zero, %s, %x : (tensor<i64>, tensor<f32>, tensor<4xf32>) -> (tensor<i64>, tensor<f32>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<f32>, %b: tensor<4xf32>):
    %small = sf.less %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xi1>
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<f32>, %b: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %b1 = sf.multiply %b, %a : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    sf.yield %i1, %a, %b1 : tensor<i64>, tensor<f32>, tensor<4xf32>
  })
  func.return %acc, %w : tensor<4xf32>, tensor<f32>
}

// The operand is more precise than the carried type: forwarding it would change the types
// the ops inside read, so the variable stays.
// CHECK-LABEL: func.func @while_invariant_other_type
// CHECK:         sf.yield %a_1 : tensor<?xf32>
// CHECK:         func.return %w : tensor<?xf32>
func.func @while_invariant_other_type(%x: tensor<4xf32>) -> tensor<?xf32> {
  %w = sf.while %x : (tensor<4xf32>) -> tensor<?xf32> ({
  ^bb0(%a: tensor<?xf32>):
    %q = sf.constant dense<false> : tensor<i1>
    sf.yield %q : tensor<i1>
  }, {
  ^bb0(%a: tensor<?xf32>):
    sf.yield %a : tensor<?xf32>
  })
  func.return %w : tensor<?xf32>
}
