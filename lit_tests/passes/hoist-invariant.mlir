// RUN: stageflow opt %s --passes hoist-invariant,prune | filecheck %s
// RUN: stageflow opt %s --passes hoist-invariant,hoist-invariant,prune | filecheck %s

// `hoist-invariant` moves what a function computes from variables it never writes into
// `@<name>_invariant`, whose results the function takes as arguments after its own, and
// names the partner and the handles it passes it. A mixed-precision layer's cast of its
// float32 kernel to bfloat16 (half the bytes) and a batch norm's scale (from two
// variables and a constant) move; the function keeps the read it uses itself. A second
// run changes nothing: neither a function with a partner nor a partner moves anything.

// CHECK-LABEL: func.func @layer(
// CHECK-SAME:    %w: !sf.resource<tensor<8x4xf32>>, %g: !sf.resource<tensor<4xf32>>, %d: !sf.resource<tensor<4xf32>>, %c: tensor<8x4xbf16>, %s: tensor<4xf32>)
// CHECK-SAME:    attributes {sf.invariant = @layer_invariant, sf.invariant_reads = array<i64: 1, 2, 3>}
// CHECK-NEXT:    %r = sf.read_variable %w
// CHECK-NEXT:    %y = sf.matmul %x, %c
// CHECK-NEXT:    %f = sf.cast %y {dtype = f32}
// CHECK-NEXT:    %z = sf.multiply %f, %s
// CHECK-NEXT:    func.return %z, %r
// CHECK:       func.func @layer_invariant(%w: !sf.resource<tensor<8x4xf32>>, %g: !sf.resource<tensor<4xf32>>, %d: !sf.resource<tensor<4xf32>>) -> (tensor<8x4xbf16>, tensor<4xf32>)
// CHECK-NEXT:    %r = sf.read_variable %w
// CHECK-NEXT:    %c = sf.cast %r {dtype = bf16}
// CHECK-NEXT:    %gv = sf.read_variable %g
// CHECK-NEXT:    %dv = sf.read_variable %d
// CHECK-NEXT:    %eps = sf.constant dense<1.000000e-03>
// CHECK-NEXT:    %e = sf.add %dv, %eps
// CHECK-NEXT:    %q = sf.rsqrt %e
// CHECK-NEXT:    %s = sf.multiply %gv, %q
// CHECK-NEXT:    func.return %c, %s
func.func @layer(%x: tensor<2x8xbf16>, %w: !sf.resource<tensor<8x4xf32>>, %g: !sf.resource<tensor<4xf32>>, %d: !sf.resource<tensor<4xf32>>) -> (tensor<2x4xf32>, tensor<8x4xf32>) {
  %r = sf.read_variable %w : (!sf.resource<tensor<8x4xf32>>) -> tensor<8x4xf32>
  %c = sf.cast %r {dtype = bf16} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
  %y = sf.matmul %x, %c {transpose_a = false, transpose_b = false} : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %f = sf.cast %y {dtype = f32} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %gv = sf.read_variable %g : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %dv = sf.read_variable %d : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %eps = sf.constant dense<1.0e-3> : tensor<4xf32>
  %e = sf.add %dv, %eps : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = sf.rsqrt %e : (tensor<4xf32>) -> tensor<4xf32>
  %s = sf.multiply %gv, %q : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = sf.multiply %f, %s : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %z, %r : tensor<2x4xf32>, tensor<8x4xf32>
}

// Left where they are: a reshape of a read (an alias: no work), what depends on a variable
// the function writes (even before the write), and what comes from constants only
// (`fold`'s job). A value that would outgrow the variables it comes from (a broadcast)
// stays, and what it is computed from moves instead.
// CHECK-LABEL: func.func @kept(
// CHECK-SAME:    %e: tensor<4xf32>)
// CHECK-SAME:    attributes {sf.invariant = @kept_invariant, sf.invariant_reads = array<i64: 1>}
// CHECK-NEXT:    %r = sf.read_variable %v
// CHECK-NEXT:    %big = sf.broadcast_to %e
// CHECK:         %t = sf.reshape %r
// CHECK:         %n = sf.negative %a
// CHECK:         sf.assign_variable %u, %n
// CHECK:         %k = sf.exp %h
// CHECK:       func.func @kept_invariant(%v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32>
// CHECK-NEXT:    %r = sf.read_variable %v
// CHECK-NEXT:    %e = sf.exp %r
// CHECK-NEXT:    func.return %e
func.func @kept(%x: tensor<4x4xf32>, %v: !sf.resource<tensor<4xf32>>, %u: !sf.resource<tensor<4xf32>>) -> (tensor<4x4xf32>, tensor<2x2xf32>, tensor<4xf32>) {
  %r = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %e = sf.exp %r : (tensor<4xf32>) -> tensor<4xf32>
  %big = sf.broadcast_to %e {shape = [4, 4]} : (tensor<4xf32>) -> tensor<4x4xf32>
  %y = sf.add %x, %big : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = sf.reshape %r {shape = [2, 2]} : (tensor<4xf32>) -> tensor<2x2xf32>
  %a = sf.read_variable %u : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %n = sf.negative %a : (tensor<4xf32>) -> tensor<4xf32>
  sf.assign_variable %u, %n : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
  %h = sf.constant dense<1.0> : tensor<4xf32>
  %k = sf.exp %h : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y, %t, %k : tensor<4x4xf32>, tensor<2x2xf32>, tensor<4xf32>
}

// A transpose of a read moves (a compiled program copies it: the layouts `prepack` gives
// variables' filters are transposes); a reshape of it stays (an alias of the read).
// CHECK-LABEL: func.func @copied(
// CHECK-SAME:    %t: tensor<3x2xf32>)
// CHECK-NEXT:    %r = sf.read_variable %m
// CHECK-NEXT:    %s = sf.reshape %r
// CHECK-NEXT:    func.return %t, %s
// CHECK:       func.func @copied_invariant(
// CHECK-NEXT:    %r = sf.read_variable %m
// CHECK-NEXT:    %t = sf.transpose %r {perm = [1, 0]}
// CHECK-NEXT:    func.return %t
func.func @copied(%m: !sf.resource<tensor<2x3xf32>>) -> (tensor<3x2xf32>, tensor<6xf32>) {
  %r = sf.read_variable %m : (!sf.resource<tensor<2x3xf32>>) -> tensor<2x3xf32>
  %t = sf.transpose %r {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %s = sf.reshape %r {shape = [6]} : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %t, %s : tensor<3x2xf32>, tensor<6xf32>
}

// A function holding a `py_func` is left whole: the callback may write any variable.
// CHECK-LABEL: func.func @callback(
// CHECK-NOT:     sf.invariant
// CHECK:         %e = sf.exp %r
func.func @callback(%v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %r = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %e = sf.exp %r : (tensor<4xf32>) -> tensor<4xf32>
  %p = sf.py_func %e {func = "f#1", shapes = [[4]], dtypes = [f32]} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %p : tensor<4xf32>
}
