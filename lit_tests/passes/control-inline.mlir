// RUN: stageflow opt %s --passes inline | filecheck %s

// `inline` copies small callees into regions too, their arguments mapped to the call's
// operands (a loop's block arguments, values from above).

// CHECK-LABEL: func.func @main
// CHECK:         ^bb0(%b: tensor<4xf32>):
// CHECK-NEXT:      %0 = sf.multiply %b, %s
// CHECK-NEXT:      %n = sf.tanh %0
// CHECK-NEXT:      sf.yield %n
// CHECK-NOT:     func.func @step
func.func @main(%x: tensor<4xf32>, %s: tensor<f32>, %p: tensor<i1>) -> tensor<4xf32> {
  %w = sf.while %x : (tensor<4xf32>) -> tensor<4xf32> ({
  ^bb0(%c: tensor<4xf32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<4xf32>):
    %n = sf.call %b, %s {callee = @step} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    sf.yield %n : tensor<4xf32>
  })
  func.return %w : tensor<4xf32>
}
func.func @step(%v: tensor<4xf32>, %k: tensor<f32>) -> tensor<4xf32> {
  %0 = sf.multiply %v, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = sf.tanh %0 : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
