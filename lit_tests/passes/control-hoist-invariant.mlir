// RUN: stageflow opt %s --passes hoist-invariant,prune | filecheck %s

// `hoist-invariant` with region ops: a value the entry block computes from a variable the
// function never writes moves into the partner even where only a branch or a loop body
// uses it (it is an argument of the function then, which dominates every region). A
// variable written inside a loop body is not invariant, nor is what is read inside a
// region: only the entry block's ops move.

// CHECK-LABEL: func.func @in_regions(
// CHECK-SAME:    %s: tensor<4xf32>
// CHECK-SAME:    attributes {sf.invariant = @in_regions_invariant, sf.invariant_reads = array<i64: 3>}
// CHECK-NEXT:    %o = sf.read_variable %m
// CHECK-NEXT:    %g = sf.sin %o
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %y = sf.multiply %x, %s
// CHECK:         %k, %a = sf.while %n, %r
// CHECK:           %u = sf.read_variable %v
// CHECK-NEXT:      %t = sf.tanh %u
// CHECK:           sf.assign_variable %m, %b
// CHECK:       func.func @in_regions_invariant(%w: !sf.resource<tensor<4xf32>>) -> tensor<4xf32>
// CHECK-NEXT:    %q = sf.read_variable %w
// CHECK-NEXT:    %s = sf.exp %q
// CHECK-NEXT:    func.return %s
func.func @in_regions(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>, %w: !sf.resource<tensor<4xf32>>, %v: !sf.resource<tensor<4xf32>>, %m: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %q = sf.read_variable %w : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %s = sf.exp %q : (tensor<4xf32>) -> tensor<4xf32>
  %o = sf.read_variable %m : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %g = sf.sin %o : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %y = sf.multiply %x, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %y : tensor<4xf32>
  }, {
    sf.yield %g : tensor<4xf32>
  })
  %k, %a = sf.while %n, %r : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %more = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %more : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %c: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %u = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
    %t = sf.tanh %u : (tensor<4xf32>) -> tensor<4xf32>
    %b = sf.add %c, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.assign_variable %m, %b : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    sf.yield %i1, %b : tensor<i64>, tensor<4xf32>
  })
  func.return %a : tensor<4xf32>
}
