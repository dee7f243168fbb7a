// RUN: stageflow opt %s --passes inline,fold,simplify,cse,prune,fuse,plan-buffers | filecheck %s

// The compiler's pipeline (DEFAULT_PIPELINE) on a loop whose body holds a cond and another
// loop. Inside the outer body: a call of a small helper is inlined; a cond on a constant
// flag folds away (its dead branch with it); `b * 1` is simplified; the scale %w, carried
// unchanged, is read from above (%s) and dropped from the loop; the `tanh %x` in a branch
// and in the folded cond reuse the one computed before the loop; dead ops go; the
// elementwise ops of each block become kernels, never across a region's boundary; the
// function's values get buffers, the regions' none.

// CHECK-LABEL: func.func @train(
// CHECK-SAME:    attributes {sf.peak_bytes = 16 : i64, sf.lower_bound_bytes = 16 : i64}
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %base = sf.call %x {callee = @train_kernel0, sf.buffer = 0}
// CHECK-NEXT:    %k, %acc = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
// CHECK-NEXT:      %c = sf.call %i, %n {callee = @train_kernel2}
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %i1 = sf.call %i_1 {callee = @train_kernel3}
// CHECK-NEXT:      %r = sf.call %a_1 {callee = @train_kernel4}
// CHECK-NEXT:      %big = sf.call %r, %s {callee = @train_kernel5}
// CHECK-NEXT:      %t = sf.cond %big : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %h = sf.call %a_1, %base, %s {callee = @train_kernel7}
// CHECK-NEXT:        sf.yield %h : tensor<4xf32>
// CHECK-NEXT:      }, {
// CHECK-NEXT:        %j, %b = sf.while %zero, %a_1 : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
// CHECK-NEXT:        ^bb0(%jj: tensor<i64>, %bb: tensor<4xf32>):
// CHECK-NEXT:          %more = sf.call %jj {callee = @train_kernel8}
// CHECK-NEXT:          sf.yield %more : tensor<i1>
// CHECK-NEXT:        }, {
// CHECK-NEXT:        ^bb0(%jj_1: tensor<i64>, %bb_1: tensor<4xf32>):
// CHECK-NEXT:          %j1 = sf.call %jj_1 {callee = @train_kernel9}
// CHECK-NEXT:          %b1 = sf.call %bb_1, %s {callee = @train_kernel10}
// CHECK-NEXT:          sf.yield %j1, %b1 : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:        })
// CHECK-NEXT:        sf.yield %b : tensor<4xf32>
// CHECK-NEXT:      })
// CHECK-NEXT:      %a1 = sf.call %t, %base {callee = @train_kernel6}
// CHECK-NEXT:      sf.yield %i1, %a1 : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    %out = sf.call %acc, %base {callee = @train_kernel1}
// CHECK-NEXT:    func.return %acc, %k, %out
// The helper's square and sum: one kernel, in the loop body.
// CHECK:       func.func @train_kernel4(%a: tensor<4xf32>) -> tensor<f32> attributes {sf.kernel} {
// CHECK-NEXT:    %q = sf.multiply %a, %a
// CHECK-NEXT:    %r = sf.reduce_sum %q
// The folded cond's `tanh %x + t` reads %base, and the `exp` after the cond joins it.
// CHECK:       func.func @train_kernel6(%t: tensor<4xf32>, %base: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %tv = sf.add %t, %base
// CHECK-NEXT:    %a1 = sf.exp %tv
// CHECK-NEXT:    func.return %a1
// CHECK:       func.func @train_kernel7(%a: tensor<4xf32>, %base: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %g = sf.multiply %a, %base
// CHECK-NEXT:    %h = sf.multiply %g, %s
// CHECK-NEXT:    func.return %h
// `b * 1` is gone from the inner loop's kernel.
// CHECK:       func.func @train_kernel10(%bb: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %b1 = sf.subtract %bb, %s
// CHECK-NEXT:    func.return %b1
// CHECK-NOT:   func.func @helper
func.func @train(%x: tensor<4xf32>, %s: tensor<f32>, %n: tensor<i64>) -> (tensor<4xf32>, tensor<i64>, tensor<4xf32>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %one = sf.constant dense<1> : tensor<i64>
  %unit = sf.constant dense<1.0> : tensor<f32>
  %flag = sf.constant dense<true> : tensor<i1>
  %base = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
  %k, %acc, %scale = sf.while %zero, %x, %s : (tensor<i64>, tensor<4xf32>, tensor<f32>) -> (tensor<i64>, tensor<4xf32>, tensor<f32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %w: tensor<f32>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %w: tensor<f32>):
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %sum = sf.call %a {callee = @helper} : (tensor<4xf32>) -> tensor<f32>
    %big = sf.greater %sum, %w : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %t = sf.cond %big : (tensor<i1>) -> tensor<4xf32> ({
      %dead = sf.exp %a : (tensor<4xf32>) -> tensor<4xf32>
      %tx = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
      %g = sf.multiply %a, %tx : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %h = sf.multiply %g, %w : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
      sf.yield %h : tensor<4xf32>
    }, {
      %j, %b = sf.while %zero, %a : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
      ^bb0(%jj: tensor<i64>, %bb: tensor<4xf32>):
        %three = sf.constant dense<3> : tensor<i64>
        %more = sf.less %jj, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
        sf.yield %more : tensor<i1>
      }, {
      ^bb0(%jj: tensor<i64>, %bb: tensor<4xf32>):
        %j1 = sf.add %jj, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
        %b0 = sf.multiply %bb, %unit : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
        %b1 = sf.subtract %b0, %w : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
        sf.yield %j1, %b1 : tensor<i64>, tensor<4xf32>
      })
      sf.yield %b : tensor<4xf32>
    })
    %u = sf.cond %flag : (tensor<i1>) -> tensor<4xf32> ({
      %v = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
      %tv = sf.add %t, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      sf.yield %tv : tensor<4xf32>
    }, {
      %neg = sf.negative %t : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %neg : tensor<4xf32>
    })
    %a1 = sf.exp %u : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %a1, %w : tensor<i64>, tensor<4xf32>, tensor<f32>
  })
  %out = sf.multiply %acc, %base : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %acc, %k, %out : tensor<4xf32>, tensor<i64>, tensor<4xf32>
}
func.func @helper(%v: tensor<4xf32>) -> tensor<f32> {
  %q = sf.multiply %v, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = sf.reduce_sum %q {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  func.return %r : tensor<f32>
}
