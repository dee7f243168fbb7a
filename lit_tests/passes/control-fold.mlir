// RUN: stageflow opt %s --passes fold | filecheck %s

// `fold` on region ops: a cond whose operand is a constant becomes the region it selects,
// inlined where the cond was (an out-of-range index selects the last region); ops inside
// regions fold like any others; a cond whose taken region yields a type other than its
// result's (a dim the cond leaves unknown) stays.

// CHECK-LABEL: func.func @true_predicate
// CHECK-NEXT:    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %a : tensor<4xf32>
func.func @true_predicate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = sf.constant dense<true> : tensor<i1>
  %r = sf.cond %t : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @index_out_of_range
// CHECK-NEXT:    %b = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %b : tensor<4xf32>
func.func @index_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i = sf.constant dense<7> : tensor<i32>
  %r = sf.cond %i : (tensor<i32>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    %b = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %b : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// The predicate is computed from constants: it folds first, then the cond.
// CHECK-LABEL: func.func @computed_predicate
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @computed_predicate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = sf.constant dense<1.0> : tensor<f32>
  %two = sf.constant dense<2.0> : tensor<f32>
  %p = sf.greater %one, %two : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// Inside a loop body, constants fold; the loop itself stays.
// CHECK-LABEL: func.func @inside_a_loop
// CHECK:         ^bb0(%b: tensor<f32>):
// CHECK-NEXT:      %six = sf.constant dense<6.000000e+00> : tensor<f32>
// CHECK-NEXT:      %s = sf.add %b, %six : (tensor<f32>, tensor<f32>) -> tensor<f32>
func.func @inside_a_loop(%x: tensor<f32>, %p: tensor<i1>) -> tensor<f32> {
  %r = sf.while %x : (tensor<f32>) -> tensor<f32> ({
  ^bb0(%c: tensor<f32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<f32>):
    %two = sf.constant dense<2.0> : tensor<f32>
    %three = sf.constant dense<3.0> : tensor<f32>
    %six = sf.multiply %two, %three : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s = sf.add %b, %six : (tensor<f32>, tensor<f32>) -> tensor<f32>
    sf.yield %s : tensor<f32>
  })
  func.return %r : tensor<f32>
}

// The taken region yields tensor<4xf32> for a tensor<?xf32> result: the cond stays.
// CHECK-LABEL: func.func @unknown_dim_result
// CHECK:         sf.cond %t
func.func @unknown_dim_result(%x: tensor<4xf32>) -> tensor<?xf32> {
  %t = sf.constant dense<true> : tensor<i1>
  %r = sf.cond %t : (tensor<i1>) -> tensor<?xf32> ({
    sf.yield %x : tensor<4xf32>
  }, {
    %b = sf.concat %x, %x {axis = 0} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    sf.yield %b : tensor<8xf32>
  })
  func.return %r : tensor<?xf32>
}
