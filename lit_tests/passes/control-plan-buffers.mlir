// RUN: stageflow opt %s --passes plan-buffers | filecheck %s
// RUN: stageflow opt %s --passes plan-buffers,plan-buffers | filecheck %s

// `plan-buffers` with region ops. A region op reads the values its regions use from
// above, so they live until it has run. Its results may be such values, or views of them
// (a branch yielding its operand, a loop running no iteration): they are never
// overwritten in place, and what the op reads lives as long as its results do, so that
// no kernel writes into memory a result still shares. The regions' own values are not
// planned and carry no annotations (stale ones are removed).

// %t dies at %u's call, but the cond's result may be %t itself (false branch) and is read
// later: %u gets a buffer of its own instead of writing into %t. At %w both %r and %u
// die: the kernel writes into %u, never into the cond's result. The op in the branch
// has no annotation, its stale `sf.buffer` removed.
// CHECK-LABEL: func.func @result_shares_an_operand(
// CHECK-SAME:    attributes {sf.peak_bytes = 48 : i64, sf.lower_bound_bytes = 48 : i64}
// CHECK-NEXT:    %t = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %r = sf.cond %p {sf.buffer = 1} : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %in = sf.call %t {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %in
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %t
// CHECK-NEXT:    })
// CHECK-NEXT:    %u = sf.call %t {callee = @exp_kernel, sf.buffer = 2}
// CHECK-NEXT:    %w = sf.call %r, %u {callee = @add_kernel, sf.buffer = 2, sf.in_place = [1]}
// CHECK-NEXT:    %y = sf.call %w {callee = @exp_kernel}
// CHECK-NEXT:    func.return %y
func.func @result_shares_an_operand(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %t = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %in = sf.call %t {callee = @exp_kernel, sf.buffer = 7} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %in : tensor<4xf32>
  }, {
    sf.yield %t : tensor<4xf32>
  })
  %u = sf.call %t {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %w = sf.call %r, %u {callee = @add_kernel} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = sf.call %w {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// %a is last read inside the cond's branch, from above: it lives until the cond, so %b's
// kernel, before the cond, cannot write into it. The cond's result is no fresh memory
// (the branch may yield %x, an argument): %c, reading it as it dies, gets a new buffer;
// %d then writes into %c.
// CHECK-LABEL: func.func @read_from_above(
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %b = sf.call %a {callee = @exp_kernel, sf.buffer = 1}
// CHECK-NEXT:    %r = sf.cond %p {sf.buffer = 2}
// CHECK:         %c = sf.call %r {callee = @exp_kernel, sf.buffer = 3}
// CHECK-NEXT:    %d = sf.call %c, %b {callee = @add_kernel, sf.buffer = 3, sf.in_place = [0]}
func.func @read_from_above(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %b = sf.call %a {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %s = sf.call %a, %b {callee = @add_kernel} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %s : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %c = sf.call %r {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %d = sf.call %c, %b {callee = @add_kernel} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = sf.call %d {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %e : tensor<4xf32>
}

// A loop's results are no fresh memory either (%v is %b itself if no iteration runs), and
// %b, which %v may be, lives as long as %v: %c, reading %b, cannot write into it, nor %d
// into %v, nor into %b's buffer (%b's range reaches %d). The returned counter is no
// temporary (-1).
// CHECK-LABEL: func.func @loop_results(
// CHECK-NEXT:    %b = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %k, %v = sf.while %n, %b {sf.buffer = [-1, 1]}
// CHECK:         %c_1 = sf.call %b {callee = @exp_kernel, sf.buffer = 2}
// CHECK-NEXT:    %d = sf.call %v {callee = @exp_kernel, sf.buffer = 3}
// CHECK-NEXT:    %e = sf.call %c_1, %d {callee = @add_kernel}
// CHECK-NEXT:    func.return %e, %k
func.func @loop_results(%x: tensor<4xf32>, %n: tensor<i64>) -> (tensor<4xf32>, tensor<i64>) {
  %b = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %k, %v = sf.while %n, %b : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %h: tensor<4xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %h: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %s = sf.call %h {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %s : tensor<i64>, tensor<4xf32>
  })
  %c = sf.call %b {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %d = sf.call %v {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %e = sf.call %c, %d {callee = @add_kernel} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %e, %k : tensor<4xf32>, tensor<i64>
}

// Chains of region ops: the cond passes the loop's result on, which may be %t (the loop
// runs no iteration, the branch yields it): %t lives as long as the cond's result, to the
// return, and %u never takes its memory.
// CHECK-LABEL: func.func @chained(
// CHECK-NEXT:    %limit = sf.constant
// CHECK-NEXT:    %t = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %v = sf.while %t {sf.buffer = 1}
// CHECK:         %r = sf.cond %p
// CHECK:         %u = sf.call %t {callee = @exp_kernel, sf.buffer = 3}
// CHECK-NEXT:    %w = sf.call %r, %u {callee = @add_kernel, sf.buffer = 3, sf.in_place = [1]}
func.func @chained(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %limit = sf.constant dense<100.0> : tensor<f32>
  %t = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %v = sf.while %t : (tensor<4xf32>) -> tensor<4xf32> ({
  ^bb0(%h: tensor<4xf32>):
    %sum = sf.reduce_sum %h {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %q = sf.less %sum, %limit : (tensor<f32>, tensor<f32>) -> tensor<i1>
    sf.yield %q : tensor<i1>
  }, {
  ^bb0(%h: tensor<4xf32>):
    %e = sf.call %h {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %e : tensor<4xf32>
  })
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %v : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %u = sf.call %t {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %w = sf.call %r, %u {callee = @add_kernel} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = sf.call %w {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

func.func @exp_kernel(%a: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
  %0 = sf.exp %a : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @add_kernel(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
  %0 = sf.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
