// RUN: stageflow opt %s --passes prune | filecheck %s

// `prune` with region ops: dead ops inside regions go; a region op has its contents'
// effects, so one without effects whose results are unused goes whole, and one holding a
// write, a print or a py_func stays (with what it reads). A cond's unused results go, with
// the values its regions yield for them; so does a loop variable that neither the code
// after the loop nor the condition reads and that the body only passes back (or ignores).

// Dead ops in a branch, in a loop body and in a cond nested in it go; the live ones stay.
// CHECK-LABEL: func.func @dead_inside
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %a = sf.exp %x
// CHECK-NEXT:      sf.yield %a
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x
// CHECK-NEXT:    })
// CHECK-NEXT:    %k, %v = sf.while %n, %r
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a_1: tensor<4xf32>):
// CHECK-NEXT:      %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:      %c = sf.greater %i, %zero
// CHECK-NEXT:      sf.yield %c
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_2: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.subtract %i_1, %one
// CHECK-NEXT:      %b = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %t = sf.tanh %a_2
// CHECK-NEXT:        sf.yield %t
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield %a_2
// CHECK-NEXT:      })
// CHECK-NEXT:      sf.yield %i1, %b
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %v
func.func @dead_inside(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %dead = sf.negative %a : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %dead = sf.abs %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %x : tensor<4xf32>
  })
  %k, %v = sf.while %n, %r : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %dead = sf.exp %a : (tensor<4xf32>) -> tensor<4xf32>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %b = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
      %t = sf.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
      %dead = sf.multiply %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      sf.yield %t : tensor<4xf32>
    }, {
      sf.yield %a : tensor<4xf32>
    })
    sf.yield %i1, %b : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}

// Unused region ops without effects go whole, nested ones too (the loop's only effect-free
// contents include a cond); the ops above that only they read go with them.
// CHECK-LABEL: func.func @dead_region_ops
// CHECK-NEXT:    func.return %x
func.func @dead_region_ops(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<4xf32> {
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.tanh %e : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.greater %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %j = sf.cond %p : (tensor<i1>) -> tensor<i64> ({
      %two = sf.constant dense<2> : tensor<i64>
      %m = sf.multiply %i, %two : (tensor<i64>, tensor<i64>) -> tensor<i64>
      sf.yield %m : tensor<i64>
    }, {
      sf.yield %i : tensor<i64>
    })
    sf.yield %j : tensor<i64>
  })
  func.return %x : tensor<4xf32>
}

// Effects keep their region op, unused results and all: a write in a branch, a print in a
// loop body, a py_func nested in a cond inside a loop. Their unused results go.
// CHECK-LABEL: func.func @effects_kept
// CHECK-NEXT:    sf.cond %p : (tensor<i1>) -> () ({
// CHECK-NEXT:      sf.assign_variable %v, %x
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    })
// CHECK-NEXT:    %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
// CHECK:           sf.print %i_1
// CHECK:         %k2 = sf.while %n : (tensor<i64>) -> tensor<i64> ({
// CHECK:           sf.cond %p : (tensor<i1>) -> () ({
// CHECK-NEXT:        %f = sf.py_func %x {func = "report#0", shapes = [[4]], dtypes = [f32]}
// CHECK-NEXT:        sf.yield
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield
// CHECK-NEXT:      })
// CHECK:         func.return %x
func.func @effects_kept(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %zero = sf.constant dense<0> : tensor<i64>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    sf.print %i {pieces = ["i =", none], sep = " "} : (tensor<i64>) -> ()
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1 : tensor<i64>
  })
  %k2 = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %zero = sf.constant dense<0> : tensor<i64>
    %c = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %g = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
      %f = sf.py_func %x {func = "report#0", shapes = [[4]], dtypes = [f32]} : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %f : tensor<4xf32>
    }, {
      sf.yield %x : tensor<4xf32>
    })
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    sf.yield %i1 : tensor<i64>
  })
  func.return %x : tensor<4xf32>
}

// A cond keeps only its used results: the second goes with the `tanh` that computed it.
// A loop drops %b, which the body ignores (its next value is computed from %a alone, and
// that computation goes too), and %w, which the body passes back unchanged; %a is read
// by the body and stays though its result is unused, and %i is read by the condition.
// CHECK-LABEL: func.func @unused_results
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %a = sf.exp %x
// CHECK-NEXT:      sf.yield %a : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %k, %acc, %last = sf.while %zero, %r, %x : (tensor<i64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>, tensor<4xf32>) ({
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a_1: tensor<4xf32>, %c: tensor<4xf32>):
// CHECK-NEXT:      %cc = sf.less %i, %n
// CHECK-NEXT:      sf.yield %cc : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_2: tensor<4xf32>, %c_1: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.add %i_1, %one
// CHECK-NEXT:      %a1 = sf.tanh %a_2
// CHECK-NEXT:      %c1 = sf.add %c_1, %a_2
// CHECK-NEXT:      sf.yield %i1, %a1, %c1 : tensor<i64>, tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %last
func.func @unused_results(%x: tensor<4xf32>, %p: tensor<i1>, %n: tensor<i64>) -> tensor<4xf32> {
  %r, %s = sf.cond %p : (tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %b = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a, %b : tensor<4xf32>, tensor<4xf32>
  }, {
    sf.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  })
  %zero = sf.constant dense<0> : tensor<i64>
  %k, %acc, %ignored, %same, %last = sf.while %zero, %r, %s, %x, %x : (tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %b: tensor<4xf32>, %w: tensor<4xf32>, %c: tensor<4xf32>):
    %cc = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %cc : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>, %b: tensor<4xf32>, %w: tensor<4xf32>, %c: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %a1 = sf.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
    %b1 = sf.exp %a : (tensor<4xf32>) -> tensor<4xf32>
    %c1 = sf.add %c, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %a1, %b1, %w, %c1 : tensor<i64>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  })
  func.return %last : tensor<4xf32>
}
