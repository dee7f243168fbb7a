// RUN: stageflow opt %s --passes cse | filecheck %s

// `cse` with region ops, by MLIR's rules: ops merge within a block, and an op inside a
// region reuses an equal op of an enclosing block that dominates it; ops of sibling
// regions never merge (only one branch runs; a loop's condition and body see different
// values), nor does an op after a region op reuse one inside it. A region op has its
// contents' effects: a pure one merges with an equal earlier one (same regions op for op,
// reading the same values), one holding an effect never does.

// Inside regions: the branch's `exp %x` reuses the one computed above; the two equal
// `tanh` in one branch merge; the loop body's `exp %x` reuses it too, and so does the one
// nested in a cond in that body, while the `negative %x` of that cond reuses the body's.
// CHECK-LABEL: func.func @reuse_from_above
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %t = sf.tanh %e
// CHECK-NEXT:      %s = sf.add %t, %t
// CHECK-NEXT:      sf.yield %s
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %e
// CHECK-NEXT:    })
// CHECK-NEXT:    %k, %v = sf.while %n, %r
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
// CHECK-NEXT:      %c = sf.less %i, %n
// CHECK-NEXT:      sf.yield %c
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %neg = sf.negative %x
// CHECK-NEXT:      %b = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %m = sf.multiply %neg, %e
// CHECK-NEXT:        sf.yield %m
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield %a_1
// CHECK-NEXT:      })
// CHECK-NEXT:      %a1 = sf.add %b, %e
// CHECK-NEXT:      %a2 = sf.multiply %a1, %neg
// CHECK-NEXT:      sf.yield %i_1, %a2
// CHECK-NEXT:    })
func.func @reuse_from_above(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<4xf32> {
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %e2 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %t = sf.tanh %e2 : (tensor<4xf32>) -> tensor<4xf32>
    %t2 = sf.tanh %e2 : (tensor<4xf32>) -> tensor<4xf32>
    %s = sf.add %t, %t2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %s : tensor<4xf32>
  }, {
    sf.yield %e : tensor<4xf32>
  })
  %k, %v = sf.while %n, %r : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %neg = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    %e3 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %b = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
      %neg2 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
      %e4 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
      %m = sf.multiply %neg2, %e4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      sf.yield %m : tensor<4xf32>
    }, {
      sf.yield %a : tensor<4xf32>
    })
    %a1 = sf.add %b, %e3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %a2 = sf.multiply %a1, %neg : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i, %a2 : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}

// Sibling regions keep their own ops: each branch computes its `exp %x`, the loop's
// condition and body their `add %i, %one`; the `exp %x` after the cond is computed again
// (the branch's did not run on every path).
// CHECK-LABEL: func.func @siblings_apart
// CHECK-NEXT:    %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %a = sf.exp %x
// CHECK-NEXT:      sf.yield %a
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %b = sf.exp %x
// CHECK-NEXT:      %c = sf.negative %b
// CHECK-NEXT:      sf.yield %c
// CHECK-NEXT:    })
// CHECK-NEXT:    %after = sf.exp %x
// CHECK-NEXT:    %k = sf.while %n
// CHECK-NEXT:    ^bb0(%i: tensor<i64>):
// CHECK-NEXT:      %j = sf.add %i, %one
// CHECK-NEXT:      %c_1 = sf.less %j, %n
// CHECK-NEXT:      sf.yield %c_1
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>):
// CHECK-NEXT:      %j_1 = sf.add %i_1, %one
// CHECK-NEXT:      sf.yield %j_1
// CHECK-NEXT:    })
func.func @siblings_apart(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i64>) {
  %one = sf.constant dense<1> : tensor<i64>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %b = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %c = sf.negative %b : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c : tensor<4xf32>
  })
  %after = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %j = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %c = sf.less %j, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %j = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %j : tensor<i64>
  })
  func.return %r, %after, %k : tensor<4xf32>, tensor<4xf32>, tensor<i64>
}

// Region ops themselves: %r2 is %r1 again (pure, the same regions reading the same
// values) and goes; %r3 differs in one op and stays; the two printing conds both stay.
// CHECK-LABEL: func.func @region_ops
// CHECK-NEXT:    %r1 = sf.cond %p
// CHECK:         %r3 = sf.cond %p
// CHECK:         sf.tanh
// CHECK:         %r4 = sf.cond %p
// CHECK:         sf.print
// CHECK:         %r5 = sf.cond %p
// CHECK:         sf.print
// CHECK:         func.return %r1, %r1, %r3, %r4, %r5
func.func @region_ops(%x: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %r1 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r2 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r3 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r4 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.print %x {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r5 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.print %x {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r1, %r2, %r3, %r4, %r5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Reads of a variable: a cond that only computes (or only reads) between two reads does
// not separate them; one that may write does. In a loop body, two reads merge unless the
// body writes between them.
// CHECK-LABEL: func.func @variable_reads
// CHECK-NEXT:    %r1 = sf.read_variable %v
// CHECK-NEXT:    %c1 = sf.cond %p
// CHECK:         %c2 = sf.cond %p
// CHECK:           sf.assign_variable %v, %x
// CHECK:         %r3 = sf.read_variable %v
// CHECK-NEXT:    %k = sf.while %n
// CHECK:         ^bb0(%i_1: tensor<i64>):
// CHECK-NEXT:      %b1 = sf.read_variable %v
// CHECK-NEXT:      %s = sf.add %b1, %b1
// CHECK-NEXT:      sf.assign_variable %v, %s
// CHECK-NEXT:      %b3 = sf.read_variable %v
// CHECK-NEXT:      sf.print %b3
// CHECK:         func.return %r1, %r1, %r3
func.func @variable_reads(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>, %v: !sf.resource<tensor<4xf32>>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %r1 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %c1 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %in = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
    %b = sf.add %a, %in : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r2 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %c2 = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r3 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %zero = sf.constant dense<0> : tensor<i64>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %b1 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
    %b2 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
    %s = sf.add %b1, %b2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.assign_variable %v, %s : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    %b3 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
    sf.print %b3 {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1 : tensor<i64>
  })
  func.return %r1, %r2, %r3, %c1, %c2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
