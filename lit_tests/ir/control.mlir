// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s

// The region ops print and parse back: `sf.cond` with one region per branch, `sf.while`
// with a condition and a body region taking the loop variables, both ending in
// `sf.yield`, regions reading values from above (%x, %n) directly. Printing the parsed
// text gives the same text.

// CHECK-LABEL: func.func @branches
// CHECK-NEXT:    %r, %s = sf.cond %p : (tensor<i1>) -> (tensor<?xf32>, tensor<f32>) ({
// CHECK-NEXT:      %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      %t = sf.reduce_sum %a {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT:      sf.yield %a, %t : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %b = sf.concat %x, %x {axis = 0} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT:      sf.yield %b, %one : tensor<8xf32>, tensor<f32>
// CHECK-NEXT:    })
func.func @branches(%x: tensor<4xf32>, %p: tensor<i1>, %one: tensor<f32>) -> (tensor<?xf32>, tensor<f32>) {
  %r, %s = sf.cond %p : (tensor<i1>) -> (tensor<?xf32>, tensor<f32>) ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %t = sf.reduce_sum %a {axes = [0], keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    sf.yield %a, %t : tensor<4xf32>, tensor<f32>
  }, {
    %b = sf.concat %x, %x {axis = 0} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    sf.yield %b, %one : tensor<8xf32>, tensor<f32>
  })
  func.return %r, %s : tensor<?xf32>, tensor<f32>
}

// A switch over three regions by an integer index.
// CHECK-LABEL: func.func @switch
// CHECK-NEXT:    %r = sf.cond %i : (tensor<i32>) -> tensor<f32> ({
// CHECK:         }, {
// CHECK:         }, {
// CHECK:         })
func.func @switch(%i: tensor<i32>, %a: tensor<f32>) -> tensor<f32> {
  %r = sf.cond %i : (tensor<i32>) -> tensor<f32> ({
    sf.yield %a : tensor<f32>
  }, {
    %n = sf.negative %a : (tensor<f32>) -> tensor<f32>
    sf.yield %n : tensor<f32>
  }, {
    %e = sf.exp %a : (tensor<f32>) -> tensor<f32>
    sf.yield %e : tensor<f32>
  })
  func.return %r : tensor<f32>
}

// A loop with a nested cond in its body.
// CHECK-LABEL: func.func @loop
// CHECK-NEXT:    %k, %v = sf.while %i, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
// CHECK-NEXT:    ^bb0(%c: tensor<i64>, %cv: tensor<4xf32>):
// CHECK-NEXT:      %more = sf.less %c, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      sf.yield %more : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%b: tensor<i64>, %bv: tensor<4xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %next = sf.add %b, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:      %odd = sf.greater %b, %one : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      %w = sf.cond %odd : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:        %t = sf.tanh %bv : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:        sf.yield %t : tensor<4xf32>
// CHECK-NEXT:      }, {
// CHECK-NEXT:        sf.yield %bv : tensor<4xf32>
// CHECK-NEXT:      })
// CHECK-NEXT:      sf.yield %next, %w : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:    })
func.func @loop(%i: tensor<i64>, %x: tensor<4xf32>, %n: tensor<i64>) -> tensor<4xf32> {
  %k, %v = sf.while %i, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) ({
  ^bb0(%c: tensor<i64>, %cv: tensor<4xf32>):
    %more = sf.less %c, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    sf.yield %more : tensor<i1>
  }, {
  ^bb0(%b: tensor<i64>, %bv: tensor<4xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %next = sf.add %b, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %odd = sf.greater %b, %one : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %w = sf.cond %odd : (tensor<i1>) -> tensor<4xf32> ({
      %t = sf.tanh %bv : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %t : tensor<4xf32>
    }, {
      sf.yield %bv : tensor<4xf32>
    })
    sf.yield %next, %w : tensor<i64>, tensor<4xf32>
  })
  func.return %v : tensor<4xf32>
}
