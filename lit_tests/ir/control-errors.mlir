// RUN: not stageflow opt --split-input-file %s 2>&1 | filecheck %s

// The verifier's errors for region ops (`sf.cond`, `sf.while`, `sf.yield`): each case is
// one line on stderr naming the file, the line of the op, the op and the problem, with
// the types involved written as in the IR.

// A branch yields a value of another type than the op's result.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #1 yields (tensor<f32>), expected (tensor<4xf32>)
func.func @wrong_yield_type(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    %s = sf.constant dense<1.0> : tensor<f32>
    sf.yield %s : tensor<f32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// A branch yields fewer values than the op has results.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #0 yields (), expected (tensor<4xf32>)
func.func @wrong_yield_count(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// A yielded value may leave a dim of the result unknown only the other way round: a declared
// dim is a promise.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #0 yields (tensor<?xf32>), expected (tensor<4xf32>)
func.func @less_precise_yield(%x: tensor<?xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<?xf32>
  }, {
    sf.yield %x : tensor<?xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// A region without its terminator.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #1 must end in sf.yield, but ends in sf.exp
func.func @missing_yield(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// `sf.yield` ends the regions of region ops only.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.yield' expects parent op to be one of 'sf.cond', 'sf.while'
func.func @yield_in_function(%x: tensor<4xf32>) -> tensor<4xf32> {
  sf.yield %x : tensor<4xf32>
}

// -----

// The predicate must be a scalar.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op needs a bool or integer scalar, got tensor<2xi1>
func.func @vector_predicate(%x: tensor<4xf32>, %p: tensor<2xi1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<2xi1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// ... of a bool or integer type.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op needs a bool or integer scalar, got tensor<f32>
func.func @float_predicate(%x: tensor<4xf32>, %p: tensor<f32>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<f32>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// A bool predicate selects between exactly two regions (an integer index takes any number).
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op with a bool predicate (tensor<i1>) needs 2 regions (true, false), not 3
func.func @bool_with_three_regions(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// An integer index needs at least one region.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op needs at least one region
func.func @no_regions(%i: tensor<i32>) {
  sf.cond %i : (tensor<i32>) -> () ()
  func.return
}

// -----

// Branches take no block arguments: they read what they need from above.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #0 takes (tensor<4xf32>), expected ()
func.func @branch_arguments(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
  ^bb0(%q: tensor<4xf32>):
    sf.yield %q : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// -----

// A loop's condition yields one bool scalar.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op condition yields (tensor<i64>), expected (tensor<i1>)
func.func @condition_not_bool(%n: tensor<i64>) -> tensor<i64> {
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    sf.yield %i : tensor<i64>
  }, {
  ^bb0(%i: tensor<i64>):
    sf.yield %i : tensor<i64>
  })
  func.return %k : tensor<i64>
}

// -----

// The carried types (the results') must fit the operands.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op carries (tensor<i32>), its results' types, but its operands are (tensor<i64>)
func.func @carried_mismatch(%n: tensor<i64>) -> tensor<i32> {
  %k = sf.while %n : (tensor<i64>) -> tensor<i32> ({
  ^bb0(%i: tensor<i32>):
    %c = sf.constant dense<true> : tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i32>):
    sf.yield %i : tensor<i32>
  })
  func.return %k : tensor<i32>
}

// -----

// Both regions take the carried types as block arguments.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op body takes (tensor<i32>), expected (tensor<i64>)
func.func @body_arguments(%n: tensor<i64>) -> tensor<i64> {
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.constant dense<true> : tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i32>):
    sf.yield %n : tensor<i64>
  })
  func.return %k : tensor<i64>
}

// -----

// The body yields the next loop variables.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op body yields (tensor<i1>), expected (tensor<i64>)
func.func @body_yield(%n: tensor<i64>) -> tensor<i64> {
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.constant dense<true> : tensor<i1>
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>):
    %c = sf.constant dense<true> : tensor<i1>
    sf.yield %c : tensor<i1>
  })
  func.return %k : tensor<i64>
}

// -----

// A loop has a condition and a body.
// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op needs 2 regions (condition, body), not 1
func.func @one_region(%n: tensor<i64>) -> tensor<i64> {
  %k = sf.while %n : (tensor<i64>) -> tensor<i64> ({
  ^bb0(%i: tensor<i64>):
    %c = sf.constant dense<true> : tensor<i1>
    sf.yield %c : tensor<i1>
  })
  func.return %k : tensor<i64>
}

// -----

// Ops inside regions are verified too, and name their own line.
// CHECK: control-errors.mlir:[[# @LINE + 5]]:5: 'sf.add' op shapes (4,) and (3,) are incompatible for broadcasting
func.func @nested_error(%x: tensor<4xf32>, %y: tensor<3xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    %a = sf.add %x, %y : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}
