// RUN: stageflow opt %s --passes schedule | filecheck %s

// `schedule` with region ops: a loop body (a training loop's step) is a block of its own,
// scheduled like the function's: the start moves above the ops it does not need, even a
// cond, and the wait below them; the cond's branches read values of the body, so it stays
// after what computes them.

// CHECK-LABEL: func.func @step_loop
// CHECK:         ^bb0(%i_1: tensor<i64>, %w_2: tensor<4xf32>):
// CHECK-NEXT:      %g = sf.exp %w_2
// CHECK-NEXT:      %t = sf.py_func %g {func = "start#1"
// CHECK-NEXT:      %one = sf.constant
// CHECK-NEXT:      %i1 = sf.subtract %i_1, %one
// CHECK-NEXT:      %h = sf.tanh %w_2
// CHECK-NEXT:      %c = sf.cond %p
// CHECK:           %r = sf.py_func %t {func = "done#2"
// CHECK-NEXT:      %w1 = sf.subtract %c, %r
func.func @step_loop(%n: tensor<i64>, %w: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %k, %v = sf.while %n, %w : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%i: tensor<i64>, %w_1: tensor<4xf32>):
    %zero = sf.constant dense<0> : tensor<i64>
    %more = sf.greater %i, %zero : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %more : tensor<i1>
  }, {
  ^bb0(%i_1: tensor<i64>, %w_2: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.subtract %i_1, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %h = sf.tanh %w_2 : (tensor<4xf32>) -> tensor<4xf32>
    %g = sf.exp %w_2 : (tensor<4xf32>) -> tensor<4xf32>
    %t = sf.py_func %g {func = "start#1", shapes = [[4]], dtypes = ["float32"], schedule = "early"} : (tensor<4xf32>) -> tensor<4xf32>
    %r = sf.py_func %t {func = "done#2", shapes = [[4]], dtypes = ["float32"], schedule = "late"} : (tensor<4xf32>) -> tensor<4xf32>
    %c = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
      %s = sf.multiply %h, %h : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      sf.yield %s : tensor<4xf32>
    }, {
      sf.yield %h : tensor<4xf32>
    })
    %w1 = sf.subtract %c, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %i1, %w1 : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}
