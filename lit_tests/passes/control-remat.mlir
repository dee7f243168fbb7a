// RUN: stageflow opt %s --passes remat | filecheck %s

// `remat` with region ops. In a forward function a region op is opaque: its results are
// saved, never recomputed (a loop can cost anything, and its regions read values the cut
// does not see), while the ops after it may be recomputed from them as usual. In the
// backward, a recomputed op that a region uses is placed before the region op (computed
// once, not in every run of the region).

// The residuals are the cond's result %r and %s = -%r: %r is saved (no cheaper value can
// give it back), %s is recomputed from it. The backward reads %s only inside a branch:
// the recomputed `negative` goes just before the cond.
// CHECK-LABEL: func.func @cond_forward
// CHECK-SAME:    attributes {sf.residuals = 1 : i64}
// CHECK:         func.return %y, %r : tensor<8xf32>, tensor<8xf32>
// CHECK-LABEL: func.func @cond_backward
// CHECK-SAME:    (%r: tensor<8xf32>, %p: tensor<i1>, %g: tensor<8xf32>)
// CHECK-NEXT:    %a = sf.multiply %g, %r
// CHECK-NEXT:    %s = sf.negative %r
// CHECK-NEXT:    %b = sf.cond %p : (tensor<i1>) -> tensor<8xf32> ({
// CHECK-NEXT:      %m = sf.multiply %a, %s
// CHECK-NEXT:      sf.yield %m
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %a
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %b
func.func @cond_forward(%x: tensor<8xf32>, %p: tensor<i1>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) attributes {sf.residuals = 2 : i64} {
  %e = sf.exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<8xf32> ({
    %t = sf.tanh %e : (tensor<8xf32>) -> tensor<8xf32>
    sf.yield %t : tensor<8xf32>
  }, {
    sf.yield %e : tensor<8xf32>
  })
  %s = sf.negative %r : (tensor<8xf32>) -> tensor<8xf32>
  %y = sf.multiply %s, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %y, %r, %s : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
func.func @cond_backward(%r: tensor<8xf32>, %s: tensor<8xf32>, %p: tensor<i1>, %g: tensor<8xf32>) -> tensor<8xf32> attributes {sf.forward = @cond_forward} {
  %a = sf.multiply %g, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b = sf.cond %p : (tensor<i1>) -> tensor<8xf32> ({
    %m = sf.multiply %a, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    sf.yield %m : tensor<8xf32>
  }, {
    sf.yield %a : tensor<8xf32>
  })
  func.return %b : tensor<8xf32>
}

// A loop's result is saved (the backward never runs the loop again), and what is cheaply
// computed from it is recomputed: the residual -%w is redone in the backward.
// CHECK-LABEL: func.func @loop_forward
// CHECK-SAME:    attributes {sf.residuals = 1 : i64}
// CHECK:         func.return %w, %w : tensor<16xf32>, tensor<16xf32>
// CHECK-LABEL: func.func @loop_backward
// CHECK-SAME:    (%w: tensor<16xf32>, %g: tensor<16xf32>)
// CHECK-NEXT:    %e = sf.negative %w
// CHECK-NEXT:    %0 = sf.multiply %g, %e
func.func @loop_forward(%x: tensor<16xf32>, %n: tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) attributes {sf.residuals = 2 : i64} {
  %k, %w = sf.while %n, %x : (tensor<i64>, tensor<16xf32>) -> (tensor<i64>, tensor<16xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<16xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<16xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %a1 = sf.sin %a : (tensor<16xf32>) -> tensor<16xf32>
    sf.yield %i1, %a1 : tensor<i64>, tensor<16xf32>
  })
  %e = sf.negative %w : (tensor<16xf32>) -> tensor<16xf32>
  func.return %w, %w, %e : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
func.func @loop_backward(%rw: tensor<16xf32>, %re: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> attributes {sf.forward = @loop_forward} {
  %0 = sf.multiply %g, %re : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %1 = sf.multiply %0, %rw : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return %1 : tensor<16xf32>
}
