// RUN: stageflow opt %s --passes remat | filecheck %s --check-prefix=DEFAULT
// RUN: stageflow opt %s --passes "remat{budget=1.0}" | filecheck %s
// RUN: stageflow opt %s --passes "remat{budget=0.0}" | filecheck %s --check-prefix=NONE

// `remat` rewrites forward/backward pairs: the forward's last `sf.residuals` results are
// what the backward (`sf.forward = @...`) reads as its first arguments. It saves a minimum
// cut of them and recomputes the rest in the backward, each op just before its first user,
// within a budget of recomputed work (a fraction of the forward's; 0.5 by default).

// Two residuals, one recomputable from the other: only `exp` is saved, `tanh` is redone.
// CHECK-LABEL: func.func @chain_forward
// CHECK-SAME:    -> (tensor<8xf32>, tensor<8xf32>) attributes {sf.residuals = 1 : i64}
// CHECK:         func.return %t, %e : tensor<8xf32>, tensor<8xf32>
// CHECK-LABEL: func.func @chain_backward
// CHECK-SAME:    (%e: tensor<8xf32>, %g: tensor<8xf32>)
// CHECK-NEXT:    %t = sf.tanh %e : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %0 = sf.multiply %t, %e
// NONE-LABEL: func.func @chain_forward
// NONE-SAME:    attributes {sf.residuals = 2 : i64}
// NONE:         func.return %t, %e, %t
// NONE-LABEL: func.func @chain_backward
// NONE-SAME:    (%e: tensor<8xf32>, %t: tensor<8xf32>, %g: tensor<8xf32>)
// NONE-NEXT:    %0 = sf.multiply %t, %e
func.func @chain_forward(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) attributes {sf.residuals = 2 : i64} {
  %e = sf.exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %t = sf.tanh %e : (tensor<8xf32>) -> tensor<8xf32>
  func.return %t, %e, %t : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
func.func @chain_backward(%e: tensor<8xf32>, %t: tensor<8xf32>, %g: tensor<8xf32>) -> tensor<8xf32> attributes {sf.forward = @chain_forward} {
  %0 = sf.multiply %t, %e : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = sf.multiply %0, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %1 : tensor<8xf32>
}

// Three wide residuals computed from one narrow value by a broadcast and elementwise ops:
// the narrow row is saved, the broadcast and the ops (constants included) are recomputed.
// That redoes 80% of the forward's work: over the default budget, which saves `%a`.
// CHECK-LABEL: func.func @narrow_forward
// CHECK-SAME:    attributes {sf.residuals = 1 : i64}
// CHECK:         func.return %y, %row
// CHECK-LABEL: func.func @narrow_backward
// CHECK-SAME:    (%row: tensor<64xf32>, %g: tensor<32x64xf32>)
// CHECK-NEXT:    %two = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %wide = sf.broadcast_to %row {shape = [32, 64]}
// CHECK-NEXT:    %a = sf.multiply %wide, %two
// CHECK-NEXT:    %b = sf.negative %a
// CHECK-NEXT:    %0 = sf.multiply %b, %g
// CHECK-NEXT:    %c = sf.abs %a
// DEFAULT-LABEL: func.func @narrow_forward
// DEFAULT-SAME:    attributes {sf.residuals = 1 : i64}
// DEFAULT:         func.return %y, %a
// DEFAULT-LABEL: func.func @narrow_backward
// DEFAULT-NEXT:    %b = sf.negative %a
// DEFAULT-NEXT:    %0 = sf.multiply %b, %g
// DEFAULT-NEXT:    %c = sf.abs %a
func.func @narrow_forward(%row: tensor<64xf32>) -> (tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) attributes {sf.residuals = 3 : i64} {
  %wide = sf.broadcast_to %row {shape = [32, 64]} : (tensor<64xf32>) -> tensor<32x64xf32>
  %two = sf.constant dense<2.000000e+00> : tensor<f32>
  %a = sf.multiply %wide, %two : (tensor<32x64xf32>, tensor<f32>) -> tensor<32x64xf32>
  %b = sf.negative %a : (tensor<32x64xf32>) -> tensor<32x64xf32>
  %c = sf.abs %a : (tensor<32x64xf32>) -> tensor<32x64xf32>
  %y = sf.multiply %b, %c : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  func.return %y, %a, %b, %c : tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>
}
func.func @narrow_backward(%a: tensor<32x64xf32>, %b: tensor<32x64xf32>, %c: tensor<32x64xf32>, %g: tensor<32x64xf32>) -> tensor<32x64xf32> attributes {sf.forward = @narrow_forward} {
  %0 = sf.multiply %b, %g : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %1 = sf.multiply %c, %0 : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %2 = sf.add %1, %a : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  func.return %2 : tensor<32x64xf32>
}

// A matmul, a reduction and a variable read are never recomputed: their results are saved
// when the backward needs them. Of the layer's output `%h` and its square `%u`, only `%h` is
// saved (saving `%z` instead would cost as many bytes and redo a `tanh`).
// CHECK-LABEL: func.func @layer_forward
// CHECK-SAME:    attributes {sf.residuals = 3 : i64}
// CHECK:         func.return %s, %w, %h, %s
// CHECK-LABEL: func.func @layer_backward
// CHECK-SAME:    (%w: tensor<256x256xf32>, %h: tensor<?x256xf32>, %s: tensor<f32>, %g: tensor<?x256xf32>)
// CHECK-NEXT:    %0 = sf.multiply %h, %g
// CHECK-NEXT:    %u = sf.multiply %h, %h
// CHECK-NOT:     sf.reduce_sum
// CHECK-NOT:     sf.matmul %x
// DEFAULT-LABEL: func.func @layer_backward
// DEFAULT-NEXT:    %0 = sf.multiply %h, %g
// DEFAULT-NEXT:    %u = sf.multiply %h, %h
func.func @layer_forward(%x: tensor<?x256xf32>, %v: !sf.resource<tensor<256x256xf32>>) -> (tensor<f32>, tensor<256x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>, tensor<f32>) attributes {sf.residuals = 4 : i64} {
  %w = sf.read_variable %v : (!sf.resource<tensor<256x256xf32>>) -> tensor<256x256xf32>
  %z = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  %h = sf.tanh %z : (tensor<?x256xf32>) -> tensor<?x256xf32>
  %u = sf.multiply %h, %h : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %s = sf.reduce_sum %u {axes = [0, 1], keepdims = false} : (tensor<?x256xf32>) -> tensor<f32>
  func.return %s, %w, %h, %u, %s : tensor<f32>, tensor<256x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>, tensor<f32>
}
func.func @layer_backward(%w: tensor<256x256xf32>, %h: tensor<?x256xf32>, %u: tensor<?x256xf32>, %s: tensor<f32>, %g: tensor<?x256xf32>) -> tensor<?x256xf32> attributes {sf.forward = @layer_forward} {
  %0 = sf.multiply %h, %g : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %1 = sf.multiply %0, %u : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %2 = sf.multiply %1, %s : (tensor<?x256xf32>, tensor<f32>) -> tensor<?x256xf32>
  %3 = sf.matmul %2, %w {transpose_a = false, transpose_b = true} : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  func.return %3 : tensor<?x256xf32>
}

// Functions that are not a marked pair are left alone.
// CHECK-LABEL: func.func @plain
// CHECK-NEXT:    %0 = sf.exp %x
// CHECK-NEXT:    func.return %0, %0
func.func @plain(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %0 : tensor<4xf32>, tensor<4xf32>
}
