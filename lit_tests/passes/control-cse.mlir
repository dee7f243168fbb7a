// RUN: stageflow opt %s --passes cse | filecheck %s

// `cse` on region ops: an op inside a region equal to one above it reuses the value
// from above (which dominates it); equal ops in two regions are not merged with each other
// (neither dominates the other); equal ops within one region merge.

// CHECK-LABEL: func.func @regions
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %b = sf.add %e, %e
// CHECK-NEXT:      %c = sf.negative %x
// CHECK-NEXT:      %d = sf.multiply %c, %c
// CHECK-NEXT:      %f = sf.add %b, %d
// CHECK-NEXT:      sf.yield %f
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %c2 = sf.negative %x
// CHECK-NEXT:      sf.yield %c2
// CHECK-NEXT:    })
func.func @regions(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %b = sf.add %a, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %c = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    %c1 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    %d = sf.multiply %c, %c1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %f = sf.add %b, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    sf.yield %f : tensor<4xf32>
  }, {
    %c2 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %c2 : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// Effects inside regions are not merged: both prints stay.
// CHECK-LABEL: func.func @effects
// CHECK:         sf.print %x
// CHECK-NEXT:    sf.print %x
func.func @effects(%x: tensor<f32>, %p: tensor<i1>) -> tensor<f32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<f32> ({
    sf.print %x {pieces = [none], sep = " "} : (tensor<f32>) -> ()
    sf.print %x {pieces = [none], sep = " "} : (tensor<f32>) -> ()
    sf.yield %x : tensor<f32>
  }, {
    sf.yield %x : tensor<f32>
  })
  func.return %r : tensor<f32>
}
