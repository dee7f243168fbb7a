// RUN: stageflow opt %s --passes fuse | filecheck %s
// RUN: stageflow opt %s --passes fuse,fuse | filecheck %s

// `fuse` with region ops: the elementwise ops of each `sf.cond` and `sf.while` region are
// grouped on their own, block by block, into kernels called from inside the region; a
// group never spans a region's boundary (a kernel call runs all its ops, while a region's
// ops run only when, and as often as, the region does). In its block a region op is one
// node reading what its regions read from above: groups around it respect that order.
// A second run changes nothing.

// Each block gets its kernels: the ops before the cond, each branch's, the ops after it.
// The `exp %x` above and the `tanh` of it in a branch stay in two kernels; the branch's
// splat constant is cloned into its kernel and the one above, read only by the region,
// is erased when its kernel clones it.
// CHECK-LABEL: func.func @around_and_inside(
// CHECK-NEXT:    %e = sf.call %x {callee = @around_and_inside_kernel0}
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %b = sf.call %e {callee = @around_and_inside_kernel2}
// CHECK-NEXT:      sf.yield %b : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %c = sf.call %x {callee = @around_and_inside_kernel3}
// CHECK-NEXT:      sf.yield %c : tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    %out = sf.call %r, %e {callee = @around_and_inside_kernel1}
// CHECK-NEXT:    func.return %out
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func @around_and_inside_kernel0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    func.return %e
// CHECK:       func.func @around_and_inside_kernel1(%r: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %s = sf.multiply %r, %e
// CHECK-NEXT:    %out = sf.negative %s
// CHECK-NEXT:    func.return %out
// CHECK:       func.func @around_and_inside_kernel2(%e: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %a = sf.tanh %e
// CHECK-NEXT:    %two = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %b = sf.multiply %a, %two
// CHECK-NEXT:    func.return %b
// CHECK:       func.func @around_and_inside_kernel3(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %c = sf.abs %x
// CHECK-NEXT:    func.return %c
// CHECK-NOT:   sf.kernel
func.func @around_and_inside(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %two = sf.constant dense<2.0> : tensor<f32>
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.tanh %e : (tensor<4xf32>) -> tensor<4xf32>
    %b = sf.multiply %a, %two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  }, {
    %c = sf.abs %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c : tensor<4xf32>
  })
  %s = sf.multiply %r, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %out = sf.negative %s : (tensor<4xf32>) -> tensor<4xf32>
  func.return %out : tensor<4xf32>
}

// Ops on both sides of a region op fuse when no path runs through it: `exp` feeds the
// cond and `negative`, which does not need the cond, so both are one kernel, called
// before the cond (the cond reads its result); the `add` needs the cond and the kernel,
// and is a kernel of its own after the cond.
// CHECK-LABEL: func.func @across(
// CHECK-NEXT:    %e, %n = sf.call %x {callee = @across_kernel0}
// CHECK-NEXT:    %r = sf.cond %p
// CHECK:         })
// CHECK-NEXT:    %out = sf.call %r, %n {callee = @across_kernel1}
// CHECK-NEXT:    func.return %out
// CHECK:       func.func @across_kernel0(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {sf.kernel} {
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    %n = sf.negative %e
// CHECK-NEXT:    func.return %e, %n
func.func @across(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %e : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %n = sf.negative %e : (tensor<4xf32>) -> tensor<4xf32>
  %out = sf.add %r, %n : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %out : tensor<4xf32>
}

// Nested: the loop's condition, its body and a cond inside the body each get their own
// kernels; the counter's `add` and the body's `tanh`/`multiply` are in one block but not
// connected (two groups: they do not broadcast together either).
// CHECK-LABEL: func.func @nested(
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %k, %v = sf.while %zero, %x
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
// CHECK-NEXT:      %c = sf.call %i, %n {callee = @nested_kernel0}
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %i1 = sf.call %i_1 {callee = @nested_kernel1}
// CHECK-NEXT:      %m = sf.call %a_1 {callee = @nested_kernel2}
// CHECK-NEXT:      %q = sf.reduce_sum %m
// CHECK-NEXT:      %pos = sf.call %q {callee = @nested_kernel3}
// CHECK-NEXT:      %b = sf.cond %pos : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %s2 = sf.call %m {callee = @nested_kernel4}
// CHECK-NEXT:        sf.yield %s2
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield %m
// CHECK-NEXT:      })
// CHECK-NEXT:      sf.yield %i1, %b
// CHECK-NEXT:    })
// CHECK:       func.func @nested_kernel0(%i: tensor<i64>, %n: tensor<i64>) -> tensor<i1>
// CHECK-NEXT:    %c = sf.less %i, %n
// CHECK:       func.func @nested_kernel1(%i: tensor<i64>) -> tensor<i64>
// CHECK-NEXT:    %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:    %i1 = sf.add %i, %one
// CHECK:       func.func @nested_kernel2(%a: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %t = sf.tanh %a
// CHECK-NEXT:    %m = sf.multiply %t, %a
// CHECK:       func.func @nested_kernel3(%q: tensor<f32>) -> tensor<i1>
// CHECK:       func.func @nested_kernel4(%m: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %s = sf.sqrt %m
// CHECK-NEXT:    %s2 = sf.exp %s
func.func @nested(%x: tensor<4xf32>, %n: tensor<i64>) -> tensor<4xf32> {
  %zero = sf.constant dense<0> : tensor<i64>
  %one = sf.constant dense<1> : tensor<i64>
  %k, %v = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %t = sf.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
    %m = sf.multiply %t, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %q = sf.reduce_sum %m {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %zf = sf.constant dense<0.0> : tensor<f32>
    %pos = sf.greater %q, %zf : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %b = sf.cond %pos : (tensor<i1>) -> tensor<4xf32> ({
      %s = sf.sqrt %m : (tensor<4xf32>) -> tensor<4xf32>
      %s2 = sf.exp %s : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %s2 : tensor<4xf32>
    }, {
      sf.yield %m : tensor<4xf32>
    })
    sf.yield %i1, %b : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}

// Effects keep their order around a region op holding one: the print in the cond stays
// between the two prints of the function (the pure ops fuse into one kernel before them).
// CHECK-LABEL: func.func @effects(
// CHECK-NEXT:    %a, %b = sf.call %x {callee = @effects_kernel0}
// CHECK-NEXT:    sf.print %a {pieces = ["first", none], sep = " "}
// CHECK-NEXT:    sf.cond %p : (tensor<i1>) -> () ({
// CHECK-NEXT:      sf.print %x {pieces = ["inside", none], sep = " "}
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    })
// CHECK-NEXT:    sf.print %b {pieces = ["last", none], sep = " "}
func.func @effects(%x: tensor<4xf32>, %p: tensor<i1>) {
  %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  sf.print %a {pieces = ["first", none], sep = " "} : (tensor<4xf32>) -> ()
  sf.cond %p : (tensor<i1>) -> () ({
    sf.print %x {pieces = ["inside", none], sep = " "} : (tensor<4xf32>) -> ()
    sf.yield
  }, {
    sf.yield
  })
  %b = sf.negative %a : (tensor<4xf32>) -> tensor<4xf32>
  sf.print %b {pieces = ["last", none], sep = " "} : (tensor<4xf32>) -> ()
  func.return
}
