// RUN: stageflow opt %s --passes "remat{budget=1.0}" | filecheck %s

// `remat` treats a region op as work it does not model: its results are always saved,
// never recomputed in the backward (a region may hold effects, and its cost is not an
// op's). The pair is left as it is, and valid.

// CHECK-LABEL: func.func @f_forward
// CHECK-SAME:    attributes {sf.residuals = 2 : i64}
// CHECK:         %r = sf.cond %p
// CHECK:         func.return %r, %e, %r
// CHECK-LABEL: func.func @f_backward
// CHECK-SAME:    (%e: tensor<8xf32>, %r: tensor<8xf32>, %g: tensor<8xf32>)
// CHECK-NEXT:    %0 = sf.multiply %r, %e
func.func @f_forward(%x: tensor<8xf32>, %p: tensor<i1>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) attributes {sf.residuals = 2 : i64} {
  %e = sf.exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<8xf32> ({
    %t = sf.tanh %e : (tensor<8xf32>) -> tensor<8xf32>
    sf.yield %t : tensor<8xf32>
  }, {
    sf.yield %e : tensor<8xf32>
  })
  func.return %r, %e, %r : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
func.func @f_backward(%e: tensor<8xf32>, %r: tensor<8xf32>, %g: tensor<8xf32>) -> tensor<8xf32> attributes {sf.forward = @f_forward} {
  %0 = sf.multiply %r, %e : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = sf.multiply %0, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %1 : tensor<8xf32>
}
