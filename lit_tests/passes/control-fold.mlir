// RUN: stageflow opt %s --passes fold | filecheck %s

// `fold` on region ops: an `sf.cond` whose index is a constant becomes the ops of the
// region it selects, moved before it, and its results the values that region yields; an
// `sf.while` whose condition is false on its constant initial values becomes those values.
// Ops inside regions fold like any other. No kernel ever runs a region op.

// The predicate folds first (2 > 1), then the cond: the true region's ops move out, and
// the constant chain among them folds in turn; the false region is gone.
// CHECK-LABEL: func.func @constant_predicate
// CHECK-NEXT:    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %d = sf.constant dense<[-1.000000e+00, -2.000000e+00, -3.000000e+00, -4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:    %e = sf.add %a, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %e : tensor<4xf32>
func.func @constant_predicate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = sf.constant dense<2> : tensor<i32>
  %one = sf.constant dense<1> : tensor<i32>
  %p = sf.greater %two, %one : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %c = sf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    %d = sf.negative %c : (tensor<4xf32>) -> tensor<4xf32>
    %e = sf.add %a, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %e : tensor<4xf32>
  }, {
    %t = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// A false predicate takes the second region, which yields a value from above: nothing
// moves, the result is %x.
// CHECK-LABEL: func.func @false_yields_from_above
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @false_yields_from_above(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = sf.constant dense<false> : tensor<i1>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// An integer index picks its region; out of range (7 of 3, or -1) it picks the last,
// as the op does at run time (switch_case's default).
// CHECK-LABEL: func.func @switch
// CHECK-NEXT:    %b = sf.tanh %x
// CHECK-NEXT:    %c = sf.negative %x
// CHECK-NEXT:    %c_1 = sf.negative %x
// CHECK-NEXT:    func.return %b, %c, %c_1
func.func @switch(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %i = sf.constant dense<1> : tensor<i32>
  %big = sf.constant dense<7> : tensor<i64>
  %minus = sf.constant dense<-1> : tensor<i32>
  %r = sf.cond %i : (tensor<i32>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %b = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  }, {
    %c = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c : tensor<4xf32>
  })
  %s = sf.cond %big : (tensor<i64>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %b = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  }, {
    %c = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c : tensor<4xf32>
  })
  %t = sf.cond %minus : (tensor<i32>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %c = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c : tensor<4xf32>
  })
  func.return %r, %s, %t : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Effects of the taken region move out in their order, where the cond ran them.
// CHECK-LABEL: func.func @effects_move_out
// CHECK-NEXT:    sf.print %x {pieces = ["before", none], sep = " "}
// CHECK-NEXT:    sf.assign_variable %v, %x
// CHECK-NEXT:    sf.print %x {pieces = ["after", none], sep = " "}
// CHECK-NEXT:    func.return
func.func @effects_move_out(%x: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) {
  %p = sf.constant dense<true> : tensor<i1>
  sf.print %x {pieces = ["before", none], sep = " "} : (tensor<4xf32>) -> ()
  sf.cond %p : (tensor<i1>) -> () ({
    sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    sf.yield
  }, {
    sf.yield
  })
  sf.print %x {pieces = ["after", none], sep = " "} : (tensor<4xf32>) -> ()
  func.return
}

// The result leaves a dim unknown that the taken region's value has: replacing the result
// would change its type, so the cond stays, but the constant ops in its regions fold.
// CHECK-LABEL: func.func @kept_for_its_type
// CHECK-NEXT:    %p = sf.constant dense<true> : tensor<i1>
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<?xf32> ({
// CHECK-NEXT:      %b = sf.constant dense<[2.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:      sf.yield %b : tensor<2xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK-NEXT:    })
func.func @kept_for_its_type(%x: tensor<4xf32>) -> tensor<?xf32> {
  %p = sf.constant dense<true> : tensor<i1>
  %one = sf.constant dense<1.0> : tensor<f32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<?xf32> ({
    %a = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %b = sf.add %a, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
    sf.yield %b : tensor<2xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<?xf32>
}

// Folding inside regions with an unknown predicate, nested: a constant from above and one
// from inside fold in a loop body and in a cond within it; a cond with a constant
// predicate inside the loop body is replaced there.
// CHECK-LABEL: func.func @inside_regions
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %k, %v = sf.while %zero, %x
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
// CHECK-NEXT:      %c = sf.less %i, %n
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.add %i_1, %one
// CHECK-NEXT:      %a1 = sf.cond %q : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %h = sf.constant dense<1.500000e+00> : tensor<f32>
// CHECK-NEXT:        %m = sf.multiply %a_1, %h
// CHECK-NEXT:        sf.yield %m : tensor<4xf32>
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield %a_1 : tensor<4xf32>
// CHECK-NEXT:      })
// CHECK-NEXT:      %t = sf.tanh %a1
// CHECK-NEXT:      sf.yield %i1, %t
// CHECK-NEXT:    })
func.func @inside_regions(%x: tensor<4xf32>, %n: tensor<i64>, %q: tensor<i1>) -> (tensor<i64>, tensor<4xf32>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %half = sf.constant dense<0.5> : tensor<f32>
  %k, %v = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %two = sf.constant dense<2> : tensor<i64>
    %minus = sf.constant dense<-1> : tensor<i64>
    %one = sf.add %two, %minus : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %a1 = sf.cond %q : (tensor<i1>) -> tensor<4xf32> ({
      %unit = sf.constant dense<1.0> : tensor<f32>
      %h = sf.add %half, %unit : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %m = sf.multiply %a, %h : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
      sf.yield %m : tensor<4xf32>
    }, {
      sf.yield %a : tensor<4xf32>
    })
    %true = sf.constant dense<true> : tensor<i1>
    %a2 = sf.cond %true : (tensor<i1>) -> tensor<4xf32> ({
      %t = sf.tanh %a1 : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %t : tensor<4xf32>
    }, {
      sf.yield %a1 : tensor<4xf32>
    })
    sf.yield %i1, %a2 : tensor<i64>, tensor<4xf32>
  })
  func.return %k, %v : tensor<i64>, tensor<4xf32>
}

// A loop whose condition is false on its initial values (0 < 0, computed from the
// constant operand like any fold) runs no iteration: its results are its operands, and
// the constant only its body read goes too.
// CHECK-LABEL: func.func @zero_trip
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    func.return %zero, %x : tensor<i64>, tensor<4xf32>
func.func @zero_trip(%x: tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %one = sf.constant dense<1> : tensor<i64>
  %k, %v = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %limit = sf.constant dense<0> : tensor<i64>
    %c = sf.less %i, %limit : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %a1 = sf.exp %a : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %a1 : tensor<i64>, tensor<4xf32>
  })
  func.return %k, %v : tensor<i64>, tensor<4xf32>
}

// Loops that stay: one that runs (0 < 3), one whose bound is unknown, one whose
// condition prints (it would run once even with no iteration), and one whose operand is
// more precise than its result (replacing the result would change its type).
// CHECK-LABEL: func.func @loops_kept
// CHECK-COUNT-4: sf.while
func.func @loops_kept(%x: tensor<4xf32>, %n: tensor<i64>) -> (tensor<i64>, tensor<i64>, tensor<i64>, tensor<?xf32>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %three = sf.constant dense<3> : tensor<i64>
  %runs = sf.while %zero : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.less %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %i1 = sf.add %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1 : tensor<i64>
  })
  %unknown = sf.while %zero : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %i1 = sf.add %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1 : tensor<i64>
  })
  %printing = sf.while %zero : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    sf.print %i {pieces = [none], sep = " "} : (tensor<i64>) -> ()
    %c = sf.greater %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    sf.yield %i : tensor<i64>
  })
  %wider = sf.while %x : (tensor<4xf32>) -> tensor<?xf32> ({
  ^bb0(%a: tensor<?xf32>):
    %c = sf.constant dense<false> : tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<?xf32>):
    sf.yield %a : tensor<?xf32>
  })
  func.return %runs, %unknown, %printing, %wider : tensor<i64>, tensor<i64>, tensor<i64>, tensor<?xf32>
}
