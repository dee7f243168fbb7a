// RUN: stageflow opt %s --passes plan-buffers | filecheck %s

// `plan-buffers` across regions: a value the regions of a cond read from above lives until
// the cond, so a kernel call before it may not overwrite it in place, where it could if
// nothing read it later (@plain). The regions' own values get no buffer of the plan.

// CHECK-LABEL: func.func @read_in_a_branch
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %c = sf.call %a {callee = @neg_kernel, sf.buffer = 1}
// CHECK-NEXT:    %r = sf.cond %p
// CHECK-NEXT:      %t = sf.call %a {callee = @neg_kernel}
func.func @read_in_a_branch(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %c = sf.call %a {callee = @neg_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %t = sf.call %a {callee = @neg_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  }, {
    sf.yield %c : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @plain
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %c = sf.call %a {callee = @neg_kernel, sf.buffer = 0, sf.in_place = [0]}
func.func @plain(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %c = sf.call %a {callee = @neg_kernel} : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %t = sf.call %x {callee = @neg_kernel} : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %t : tensor<4xf32>
  }, {
    sf.yield %c : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

func.func @exp_kernel(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @neg_kernel(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
  %0 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
