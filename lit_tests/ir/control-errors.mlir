// RUN: not stageflow opt --split-input-file %s 2>&1 | filecheck %s

// The verifier of the region ops: one line per error, naming the file, the op's line and
// what is wrong.

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op region #1 yields (tensor<i32>), expected (tensor<f32>)
func.func @yield_type(%p: tensor<i1>, %a: tensor<f32>, %b: tensor<i32>) -> tensor<f32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<f32> ({
    sf.yield %a : tensor<f32>
  }, {
    sf.yield %b : tensor<i32>
  })
  func.return %r : tensor<f32>
}

// -----

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op with a tensor<i1> operand has 3 regions
func.func @three_for_a_bool(%p: tensor<i1>, %a: tensor<f32>) -> tensor<f32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<f32> ({
    sf.yield %a : tensor<f32>
  }, {
    sf.yield %a : tensor<f32>
  }, {
    sf.yield %a : tensor<f32>
  })
  func.return %r : tensor<f32>
}

// -----

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.cond' op needs a bool or integer scalar, got tensor<2xi1>
func.func @vector_predicate(%p: tensor<2xi1>, %a: tensor<f32>) -> tensor<f32> {
  %r = sf.cond %p : (tensor<2xi1>) -> tensor<f32> ({
    sf.yield %a : tensor<f32>
  }, {
    sf.yield %a : tensor<f32>
  })
  func.return %r : tensor<f32>
}

// -----

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op condition yields (tensor<f32>), expected (tensor<i1>)
func.func @float_condition(%x: tensor<f32>) -> tensor<f32> {
  %r = sf.while %x : (tensor<f32>) -> tensor<f32> ({
  ^bb0(%c: tensor<f32>):
    sf.yield %c : tensor<f32>
  }, {
  ^bb0(%b: tensor<f32>):
    sf.yield %b : tensor<f32>
  })
  func.return %r : tensor<f32>
}

// -----

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op body yields (tensor<3xf32>), expected (tensor<2xf32>)
func.func @carried_type(%x: tensor<2xf32>, %p: tensor<i1>, %y: tensor<3xf32>) -> tensor<2xf32> {
  %r = sf.while %x : (tensor<2xf32>) -> tensor<2xf32> ({
  ^bb0(%c: tensor<2xf32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<2xf32>):
    sf.yield %y : tensor<3xf32>
  })
  func.return %r : tensor<2xf32>
}

// -----

// CHECK: control-errors.mlir:[[# @LINE + 2]]:3: 'sf.while' op body must end in sf.yield
func.func @no_yield(%x: tensor<f32>, %p: tensor<i1>) -> tensor<f32> {
  %r = sf.while %x : (tensor<f32>) -> tensor<f32> ({
  ^bb0(%c: tensor<f32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<f32>):
    %n = sf.negative %b : (tensor<f32>) -> tensor<f32>
  })
  func.return %r : tensor<f32>
}
