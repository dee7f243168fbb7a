// RUN: stageflow opt %s --passes plan-buffers | filecheck %s
// RUN: stageflow opt %s --passes plan-buffers,plan-buffers | filecheck %s

// `plan-buffers` numbers the buffer of every temporary result (`sf.buffer`), lets a kernel
// call write a result into an input that dies there (`sf.in_place`: per result, the operand
// it overwrites, or -1), and records on each non-kernel function the bytes of its buffers
// (`sf.peak_bytes`) and the most bytes live at one op (`sf.lower_bound_bytes`). Arguments,
// constants, variable reads, returned values and values stored into variables are not
// temporaries. Running it twice gives the same IR.

// A chain of kernel calls: each result takes its dying input's buffer; the matmul result
// needs a second one, as %b is read by the matmul itself; the returned sum has none.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    attributes {sf.peak_bytes = 128 : i64, sf.lower_bound_bytes = 128 : i64}
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %b = sf.call %a {callee = @tanh_kernel, sf.buffer = 0, sf.in_place = [0]}
// CHECK-NEXT:    %m = sf.matmul %w, %b {transpose_a = false, transpose_b = false, sf.buffer = 1}
// CHECK-NEXT:    %s = sf.reduce_sum %m {axes = [0, 1], keepdims = false} :
// CHECK-NEXT:    func.return %s
func.func @chain(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<f32> {
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = sf.call %a {callee = @tanh_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = sf.matmul %w, %b {transpose_a = false, transpose_b = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = sf.reduce_sum %m {axes = [0, 1], keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
  func.return %s : tensor<f32>
}

// Reuse: %a dies at the matmul, so %e takes its buffer 0 (not in place: the view %v
// keeps %t live until %sum). When %e dies, %sum (4 bytes) takes a new buffer rather than
// tie up the 64 bytes of buffer 0: a value takes no free buffer over twice its size, so
// the plan needs 4 bytes over the lower bound here. The value stored into the variable,
// the variable read and the returned %out have no buffer.
// CHECK-LABEL: func.func @reuse(
// CHECK-SAME:    attributes {sf.peak_bytes = 148 : i64, sf.lower_bound_bytes = 144 : i64}
// CHECK-NEXT:    %v0 = sf.read_variable %var :
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %t = sf.matmul %a, %v0 {transpose_a = false, transpose_b = false, sf.buffer = 1}
// CHECK-NEXT:    %v = sf.reshape %t {shape = [16], sf.buffer = 1}
// CHECK-NEXT:    %e = sf.call %t {callee = @exp_kernel, sf.buffer = 0} :
// CHECK-NEXT:    %r = sf.reduce_sum %e {axes = [1], keepdims = false, sf.buffer = 2}
// CHECK-NEXT:    %n = sf.call %e {callee = @exp_kernel} :
// CHECK-NEXT:    sf.assign_variable %var, %n :
// CHECK-NEXT:    %sum = sf.reduce_sum %v {axes = [0], keepdims = false, sf.buffer = 3}
// CHECK-NEXT:    %out = sf.add %sum, %r :
// CHECK-NEXT:    func.return %out, %x
func.func @reuse(%x: tensor<4x4xf32>, %var: !sf.resource<tensor<4x4xf32>>) -> (tensor<4xf32>, tensor<4x4xf32>) {
  %v0 = sf.read_variable %var : (!sf.resource<tensor<4x4xf32>>) -> tensor<4x4xf32>
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = sf.matmul %a, %v0 {transpose_a = false, transpose_b = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %v = sf.reshape %t {shape = [16]} : (tensor<4x4xf32>) -> tensor<16xf32>
  %e = sf.call %t {callee = @exp_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = sf.reduce_sum %e {axes = [1], keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %n = sf.call %e {callee = @exp_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  sf.assign_variable %var, %n : (!sf.resource<tensor<4x4xf32>>, tensor<4x4xf32>) -> ()
  %sum = sf.reduce_sum %v {axes = [0], keepdims = false} : (tensor<16xf32>) -> tensor<f32>
  %out = sf.add %sum, %r : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %out, %x : tensor<4xf32>, tensor<4x4xf32>
}

// Several results: the first overwrites %a, the second needs a buffer of its own (an
// operand serves one result at most). A value with an unknown dim gets a buffer nobody
// shares and is left out of both figures. Only kernel calls work in place.
// CHECK-LABEL: func.func @several(
// CHECK-SAME:    attributes {sf.peak_bytes = 128 : i64, sf.lower_bound_bytes = 128 : i64, sf.unsized_temporaries = 1 : i64}
// CHECK-NEXT:    %a = sf.call %x {callee = @exp_kernel, sf.buffer = 0}
// CHECK-NEXT:    %p, %q = sf.call %a {callee = @pair_kernel, sf.buffer = [0, 1], sf.in_place = [0, -1]}
// CHECK-NEXT:    %d = sf.call %y {callee = @dyn_kernel, sf.buffer = 2} :
// CHECK-NEXT:    %s = sf.add %p, %q :
// CHECK-NEXT:    %sd = sf.reduce_sum %d {axes = [0], keepdims = false} :
func.func @several(%x: tensor<4x4xf32>, %y: tensor<?xf32>) -> (tensor<4x4xf32>, tensor<f32>) {
  %a = sf.call %x {callee = @exp_kernel} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p, %q = sf.call %a {callee = @pair_kernel} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %d = sf.call %y {callee = @dyn_kernel} : (tensor<?xf32>) -> tensor<?xf32>
  %s = sf.add %p, %q : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %sd = sf.reduce_sum %d {axes = [0], keepdims = false} : (tensor<?xf32>) -> tensor<f32>
  func.return %s, %sd : tensor<4x4xf32>, tensor<f32>
}

// Kernels themselves are not planned.
// CHECK-LABEL: func.func @exp_kernel(
// CHECK-SAME:    attributes {sf.kernel} {
// CHECK-NEXT:    %e = sf.exp %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @exp_kernel(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %e : tensor<4x4xf32>
}
func.func @tanh_kernel(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {sf.kernel} {
  %e = sf.tanh %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %e : tensor<4x4xf32>
}
func.func @pair_kernel(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = sf.negative %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %e, %n : tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @dyn_kernel(%x: tensor<?xf32>) -> tensor<?xf32> attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<?xf32>) -> tensor<?xf32>
  func.return %e : tensor<?xf32>
}
