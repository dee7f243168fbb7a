// RUN: stageflow opt %s --passes simplify | filecheck %s

// `simplify` rewrites inside regions as outside: x * 1 is x in a branch and in a loop body.

// CHECK-LABEL: func.func @identities
// CHECK:         sf.cond %p
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK:         ^bb0(%b: tensor<4xf32>):
// CHECK-NEXT:      %t = sf.tanh %b
// CHECK-NEXT:      sf.yield %t
func.func @identities(%x: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = sf.constant dense<1.0> : tensor<f32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.multiply %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %w = sf.while %x : (tensor<4xf32>) -> tensor<4xf32> ({
  ^bb0(%c: tensor<4xf32>):
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<4xf32>):
    %m = sf.multiply %b, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %t = sf.tanh %m : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  })
  func.return %r, %w : tensor<4xf32>, tensor<4xf32>
}
