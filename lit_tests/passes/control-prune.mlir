// RUN: stageflow opt %s --passes prune | filecheck %s

// `prune` on region ops: unused ops inside regions go; a region op without effects
// inside whose results are unused goes entirely; one with an effect inside stays.

// CHECK-LABEL: func.func @dead
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %n = sf.negative %x
// CHECK-NEXT:      sf.yield %n
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x
// CHECK-NEXT:    })
// CHECK-NEXT:    %k = sf.while %x : (tensor<4xf32>) -> tensor<4xf32> ({
// CHECK:           sf.print
// CHECK:         func.return %r
func.func @dead(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %unused = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %d = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    %n = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %n : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  %k = sf.while %x : (tensor<4xf32>) -> tensor<4xf32> ({
  ^bb0(%c: tensor<4xf32>):
    sf.print %c {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
    sf.yield %p : tensor<i1>
  }, {
  ^bb0(%b: tensor<4xf32>):
    sf.yield %b : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}
