// RUN: stageflow opt %s --passes fuse | filecheck %s
// RUN: stageflow opt %s --passes 'fuse{max-ops=4}' | filecheck %s --check-prefix=SMALL
// RUN: stageflow opt %s --passes fuse,fuse | filecheck %s
// RUN: stageflow opt %s --passes 'fuse{recompute=true}' | filecheck %s --check-prefix=RECOMPUTE

// `fuse` moves each group of connected elementwise ops into a kernel function
// `@<caller>_kernel<N>` marked `sf.kernel` (placed after its caller), and calls it where the
// group's last op was. Kernel arguments are the group's operands from outside it in order
// of first use; results are its values used outside it in order of definition. 0-d and
// splat constants are cloned into the kernel. A second run changes nothing.

// gelu_tanh(x * w + b) * 0.5 + x: one kernel, the constants cloned into it, each once.
// With max-ops=4 its 13 ops are split in program order: 4 + 4 + 4 + 1.
// CHECK-LABEL: func.func @mlp_gelu(
// CHECK-NEXT:    %out = sf.call %x, %w, %b {callee = @mlp_gelu_kernel0} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %out : tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func @mlp_gelu_kernel0(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {sf.kernel} {
// CHECK-NEXT:    %xw = sf.multiply %x, %w
// CHECK-NEXT:    %y = sf.add %xw, %b
// CHECK-NEXT:    %y2 = sf.multiply %y, %y
// CHECK-NEXT:    %y3 = sf.multiply %y2, %y
// CHECK-NEXT:    %k = sf.constant dense<4.471500e-02> : tensor<f32>
// CHECK-NEXT:    %ky3 = sf.multiply %y3, %k
// CHECK-NEXT:    %inner = sf.add %y, %ky3
// CHECK-NEXT:    %s = sf.constant dense<0.797884583> : tensor<f32>
// CHECK-NEXT:    %si = sf.multiply %inner, %s
// CHECK-NEXT:    %t = sf.tanh %si
// CHECK-NEXT:    %one = sf.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %t1 = sf.add %t, %one
// CHECK-NEXT:    %half = sf.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    %hy = sf.multiply %y, %half
// CHECK-NEXT:    %g = sf.multiply %hy, %t1
// CHECK-NEXT:    %g2 = sf.multiply %g, %half
// CHECK-NEXT:    %out = sf.add %g2, %x
// CHECK-NEXT:    func.return %out : tensor<4x8xf32>
// CHECK-NEXT:  }
// SMALL-LABEL: func.func @mlp_gelu(
// SMALL-NEXT:    %y, %y3 = sf.call %x, %w, %b {callee = @mlp_gelu_kernel0}
// SMALL-NEXT:    %t = sf.call %y3, %y {callee = @mlp_gelu_kernel1}
// SMALL-NEXT:    %g2 = sf.call %t, %y {callee = @mlp_gelu_kernel2}
// SMALL-NEXT:    %out = sf.call %g2, %x {callee = @mlp_gelu_kernel3}
// SMALL-NEXT:    func.return %out
// SMALL:       func.func @mlp_gelu_kernel2(%t: tensor<4x8xf32>, %y: tensor<4x8xf32>)
// SMALL-NEXT:    %one = sf.constant dense<1.000000e+00>
// SMALL-NEXT:    %t1 = sf.add %t, %one
// SMALL-NEXT:    %half = sf.constant dense<5.000000e-01>
// SMALL-NEXT:    %hy = sf.multiply %y, %half
// SMALL-NEXT:    %g = sf.multiply %hy, %t1
// SMALL-NEXT:    %g2 = sf.multiply %g, %half
// SMALL-NEXT:    func.return %g2
func.func @mlp_gelu(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %k = sf.constant dense<0.044715> : tensor<f32>
  %s = sf.constant dense<0.7978845608> : tensor<f32>
  %one = sf.constant dense<1.0> : tensor<f32>
  %half = sf.constant dense<0.5> : tensor<f32>
  %xw = sf.multiply %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = sf.add %xw, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y2 = sf.multiply %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y3 = sf.multiply %y2, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ky3 = sf.multiply %y3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %inner = sf.add %y, %ky3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %si = sf.multiply %inner, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = sf.tanh %si : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t1 = sf.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %hy = sf.multiply %y, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g = sf.multiply %hy, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g2 = sf.multiply %g, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %out = sf.add %g2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %out : tensor<4x8xf32>
}

// Two chains separated by a reduction: the first ends in it (every op of the group leads
// to the reduced value, so the kernel sums it as it computes it and never writes it out);
// the second reads the sum.
// CHECK-LABEL: func.func @two_chains(
// CHECK-NEXT:    %sum = sf.call %x {callee = @two_chains_kernel0} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %r = sf.call %sum {callee = @two_chains_kernel1} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %r
// CHECK-LABEL: func.func @two_chains_kernel0(%x: tensor<4x8xf32>) -> tensor<4xf32> attributes {sf.kernel}
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    %e2 = sf.multiply %e, %e
// CHECK-NEXT:    %sum = sf.reduce_sum %e2 {axes = [1], keepdims = false}
// CHECK-NEXT:    func.return %sum
// CHECK-LABEL: func.func @two_chains_kernel1(%sum: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel}
// CHECK-NEXT:    %l = sf.log1p %sum
// CHECK-NEXT:    %r = sf.negative %l
// CHECK-NEXT:    func.return %r
func.func @two_chains(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = sf.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = sf.multiply %e, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = sf.reduce_sum %e2 {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %l = sf.log1p %sum : (tensor<4xf32>) -> tensor<4xf32>
  %r = sf.negative %l : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// %h feeds the group and a reduction: it is a kernel result too, and the reduction, which
// came before the group's last op, moves after the call. Results in definition order.
// CHECK-LABEL: func.func @shared_value(
// CHECK-NEXT:    %h, %y = sf.call %x {callee = @shared_value_kernel0} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %m = sf.reduce_max %h {axes = [0, 1], keepdims = false}
// CHECK-NEXT:    func.return %y, %m
// CHECK-LABEL: func.func @shared_value_kernel0(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {sf.kernel}
// CHECK-NEXT:    %h = sf.tanh %x
// CHECK-NEXT:    %y = sf.multiply %h, %x
// CHECK-NEXT:    func.return %h, %y
func.func @shared_value(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %h = sf.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = sf.reduce_max %h {axes = [0, 1], keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %y = sf.multiply %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y, %m : tensor<4x8xf32>, tensor<f32>
}

// Operands of different shapes: the kernel broadcasts them, as the ops did.
// CHECK-LABEL: func.func @broadcasting(
// CHECK-NEXT:    %z = sf.call %x, %row, %col, %s {callee = @broadcasting_kernel0} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %z
func.func @broadcasting(%x: tensor<4x8xf32>, %row: tensor<8xf32>, %col: tensor<4x1xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %a = sf.add %x, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %b = sf.multiply %col, %a : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = sf.maximum %b, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}

// A diamond: %e / reduce_sum(%e) in one kernel would have to run both before and after
// the reduction, so the division is a group of its own (softmax's shape).
// CHECK-LABEL: func.func @diamond(
// CHECK-NEXT:    %e = sf.call %x {callee = @diamond_kernel0} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sum = sf.reduce_sum %e {axes = [1], keepdims = true}
// CHECK-NEXT:    %p = sf.call %e, %sum {callee = @diamond_kernel1} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %p
// CHECK-LABEL: func.func @diamond_kernel0(%x: tensor<4x8xf32>)
// CHECK-NEXT:    %e = sf.exp %x
// CHECK-NEXT:    func.return %e
// CHECK-LABEL: func.func @diamond_kernel1(%e: tensor<4x8xf32>, %sum: tensor<4x1xf32>)
// CHECK-NEXT:    %p = sf.divide %e, %sum
// CHECK-NEXT:    func.return %p
func.func @diamond(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = sf.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = sf.reduce_sum %e {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %p = sf.divide %e, %sum : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %p : tensor<4x8xf32>
}

// Splat constants are cloned into the kernel (and erased from the caller when nothing else
// uses them); a constant with distinct elements is an argument; a constant also used
// outside the group stays where it was.
// CHECK-LABEL: func.func @constants(
// CHECK-NEXT:    %table = sf.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:    %two = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %c = sf.call %x, %table {callee = @constants_kernel0} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %r = sf.reshape %two {shape = [1]}
// CHECK-NEXT:    func.return %c, %r
// CHECK-LABEL: func.func @constants_kernel0(%x: tensor<4xf32>, %table: tensor<4xf32>)
// CHECK-NEXT:    %ones = sf.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %a = sf.add %x, %ones
// CHECK-NEXT:    %b = sf.multiply %a, %table
// CHECK-NEXT:    %two = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %c = sf.pow %b, %two
// CHECK-NEXT:    func.return %c
func.func @constants(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<1xf32>) {
  %ones = sf.constant dense<1.0> : tensor<4xf32>
  %table = sf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %two = sf.constant dense<2.0> : tensor<f32>
  %a = sf.add %x, %ones : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = sf.multiply %a, %table : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = sf.pow %b, %two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %r = sf.reshape %two {shape = [1]} : (tensor<f32>) -> tensor<1xf32>
  func.return %c, %r : tensor<4xf32>, tensor<1xf32>
}

// No elementwise ops: nothing changes (a lone constant is never a group).
// CHECK-LABEL: func.func @no_elementwise(
// CHECK-NEXT:    %c = sf.constant dense<1.000000e+00> : tensor<8x3xf32>
// CHECK-NEXT:    %m = sf.matmul %x, %c
// CHECK-NEXT:    %s = sf.reduce_sum %m
// CHECK-NEXT:    func.return %s
// CHECK-NOT:   @no_elementwise_kernel
func.func @no_elementwise(%x: tensor<4x8xf32>) -> tensor<3xf32> {
  %c = sf.constant dense<1.0> : tensor<8x3xf32>
  %m = sf.matmul %x, %c {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %s = sf.reduce_sum %m {axes = [0], keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  func.return %s : tensor<3xf32>
}

// Dynamic dims are kept in the kernel's signature; comparisons, select and cast fuse too.
// CHECK-LABEL: func.func @dynamic(
// CHECK-NEXT:    %r = sf.call %x, %b {callee = @dynamic_kernel0} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf64>
// CHECK-NEXT:    func.return %r : tensor<?x8xf64>
// CHECK-LABEL: func.func @dynamic_kernel0(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf64> attributes {sf.kernel}
// CHECK-NEXT:    %a = sf.add %x, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %zero = sf.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %p = sf.greater %a, %zero
// CHECK-NEXT:    %relu = sf.select %p, %a, %zero
// CHECK-NEXT:    %r = sf.cast %relu {dtype = f64} : (tensor<?x8xf32>) -> tensor<?x8xf64>
// CHECK-NEXT:    func.return %r : tensor<?x8xf64>
func.func @dynamic(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf64> {
  %zero = sf.constant dense<0.0> : tensor<f32>
  %a = sf.add %x, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %p = sf.greater %a, %zero : (tensor<?x8xf32>, tensor<f32>) -> tensor<?x8xi1>
  %relu = sf.select %p, %a, %zero : (tensor<?x8xi1>, tensor<?x8xf32>, tensor<f32>) -> tensor<?x8xf32>
  %r = sf.cast %relu {dtype = f64} : (tensor<?x8xf32>) -> tensor<?x8xf64>
  func.return %r : tensor<?x8xf64>
}

// Effects keep their order: %b reads a value read after the print, which needs %a, so %a
// and %b cannot be one call; %c joins %a's kernel, its call moving before the print.
// CHECK-LABEL: func.func @effects(
// CHECK-NEXT:    %a, %c = sf.call %x {callee = @effects_kernel0}
// CHECK-NEXT:    sf.print %a
// CHECK-NEXT:    %r = sf.read_variable %v
// CHECK-NEXT:    %d = sf.call %a, %r, %c {callee = @effects_kernel1}
// CHECK-NEXT:    func.return %d
func.func @effects(%x: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  sf.print %a {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
  %r = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %b = sf.add %a, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = sf.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
  %d = sf.subtract %b, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %d : tensor<4xf32>
}

// A kernel already (e.g. from an earlier run) is left alone, and so are calls of it.
// CHECK-LABEL: func.func @given_kernel(
// CHECK-NEXT:    sf.exp %x
// CHECK-NEXT:    func.return
// CHECK-NOT:   @given_kernel_kernel0
func.func @given_kernel(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %e : tensor<4xf32>
}

// Two groups that would need each other: {%a, %c} and {%b, %d} are each convex, but %c
// needs the reduction of %b and %d the reduction of %a, so one call would have to run
// before the other and after it. The second group is split instead.
// CHECK-LABEL: func.func @crossed(
// CHECK-NEXT:    %b = sf.call %x {callee = @crossed_kernel0}
// CHECK-NEXT:    %mb = sf.reduce_max %b
// CHECK-NEXT:    %a, %c = sf.call %x, %mb {callee = @crossed_kernel1}
// CHECK-NEXT:    %ma = sf.reduce_sum %a
// CHECK-NEXT:    %d = sf.call %b, %ma {callee = @crossed_kernel2}
// CHECK-NEXT:    func.return %c, %d
func.func @crossed(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = sf.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = sf.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %ma = sf.reduce_sum %a {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb = sf.reduce_max %b {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %c = sf.add %a, %mb : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = sf.multiply %b, %ma : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %c, %d : tensor<4x8xf32>, tensor<4x8xf32>
}

// Two weight updates sharing a 0-d learning rate: their shapes do not broadcast together,
// and a kernel has one iteration space, so the second update is a kernel of its own; the
// rate's cast, which both read, is narrower than either update: a kernel of its own too.
// CHECK-LABEL: func.func @two_updates(
// CHECK-NEXT:    %r = sf.call %lr {callee = @two_updates_kernel0}
// CHECK-NEXT:    %v = sf.call %g, %r, %w {callee = @two_updates_kernel1}
// CHECK-NEXT:    %u = sf.call %h, %r, %k {callee = @two_updates_kernel2}
// CHECK-NEXT:    func.return %v, %u
func.func @two_updates(%lr: tensor<f64>, %g: tensor<3x16xf32>, %w: tensor<3x16xf32>, %h: tensor<16x16xf32>, %k: tensor<16x16xf32>) -> (tensor<3x16xf32>, tensor<16x16xf32>) {
  %r = sf.cast %lr {dtype = f32} : (tensor<f64>) -> tensor<f32>
  %s = sf.multiply %g, %r : (tensor<3x16xf32>, tensor<f32>) -> tensor<3x16xf32>
  %v = sf.subtract %w, %s : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  %t = sf.multiply %h, %r : (tensor<16x16xf32>, tensor<f32>) -> tensor<16x16xf32>
  %u = sf.subtract %k, %t : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %v, %u : tensor<3x16xf32>, tensor<16x16xf32>
}

// A value used outside a kernel is never an output narrower than the kernel's iteration
// space: the kernel computes each element of that space once, so with an empty space
// (here 0x3) the narrow output (%y, 2x1) would never be written. %y is a kernel of its own.
// CHECK-LABEL: func.func @narrow_output(
// CHECK-NEXT:    %y = sf.call %x {callee = @narrow_output_kernel0}
// CHECK-NEXT:    %z = sf.call %y, %e {callee = @narrow_output_kernel1}
// CHECK-NEXT:    func.return %y, %z
func.func @narrow_output(%x: tensor<2x1xf32>, %e: tensor<2x0xf32>) -> (tensor<2x1xf32>, tensor<2x0xf32>) {
  %y = sf.exp %x : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %z = sf.add %y, %e : (tensor<2x1xf32>, tensor<2x0xf32>) -> tensor<2x0xf32>
  func.return %y, %z : tensor<2x1xf32>, tensor<2x0xf32>
}

// pow of signed integers stays out of kernels: NumPy refuses a negative exponent, which a
// kernel cannot do for one element of many (its own lowering returns an error code). The
// float pow beside it joins its kernel.
// CHECK-LABEL: func.func @integer_pow(
// CHECK-NEXT:    %d = sf.call %x {callee = @integer_pow_kernel0} : (tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:    %p = sf.pow %d, %y : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:    %q = sf.call %p, %f, %g {callee = @integer_pow_kernel1}
// CHECK-NOT:     sf.pow {{.*}}i32
// CHECK-LABEL: func.func @integer_pow_kernel1(
// CHECK:         sf.pow %f, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @integer_pow(%x: tensor<4xi32>, %y: tensor<4xi32>, %f: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %d = sf.add %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %p = sf.pow %d, %y : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %pf = sf.cast %p {dtype = f32} : (tensor<4xi32>) -> tensor<4xf32>
  %h = sf.pow %f, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = sf.add %pf, %h : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %p, %q : tensor<4xi32>, tensor<4xf32>
}

// Equal static shapes, unknown dims of different origins: at run time %a's may be 1 and
// %g's 0, so the space of sign and pow together may be empty where %s is not. %s, used
// outside, stays out of pow's kernel (it was never written once).
// CHECK-LABEL: func.func @unknown_origins(
// CHECK-NEXT:    %s = sf.call %a {callee = @unknown_origins_kernel0}
// CHECK-NEXT:    %p = sf.call %s, %g {callee = @unknown_origins_kernel1}
// CHECK-NEXT:    func.return %p, %s
func.func @unknown_origins(%a: tensor<3x?xf64>, %g: tensor<1x?xf64>) -> (tensor<3x?xf64>, tensor<3x?xf64>) {
  %s = sf.sign %a : (tensor<3x?xf64>) -> tensor<3x?xf64>
  %p = sf.pow %s, %g : (tensor<3x?xf64>, tensor<1x?xf64>) -> tensor<3x?xf64>
  func.return %p, %s : tensor<3x?xf64>, tensor<3x?xf64>
}

// Inputs of three unknown sizes: each op's dim is the broadcast of the inputs' it reads
// (a set of origins), so the last add's, {%x, %w, %b}, is the whole space's and it is the
// kernel's output; %xw, read only inside, needs no origin of its own. One kernel.
// CHECK-LABEL: func.func @broadcast_origins(
// CHECK-NEXT:    %y = sf.call %x, %w, %b {callee = @broadcast_origins_kernel0}
// CHECK-NEXT:    func.return %y
func.func @broadcast_origins(%x: tensor<?xf32>, %w: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %xw = sf.multiply %x, %w : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %z = sf.add %xw, %b : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %t = sf.tanh %z : (tensor<?xf32>) -> tensor<?xf32>
  %y = sf.add %t, %x : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  func.return %y : tensor<?xf32>
}

// An inference batch norm: its per-channel scale and shift (a reciprocal square root and
// products) are broadcast over every pixel. In the pixels' kernel they would be computed
// again per pixel; they are a kernel of their own, computed once per channel, and the
// pixels' kernel reads them. A broadcast value of one cheap op (the bias's negation)
// still joins its user. With recompute=true (PTX) everything is one kernel.
// CHECK-LABEL: func.func @batch_norm(
// CHECK-NEXT:    %s, %t = sf.call %var, %gamma, %mean, %beta {callee = @batch_norm_kernel0} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT:    %out = sf.call %x, %s, %t, %bias {callee = @batch_norm_kernel1}
// CHECK-NEXT:    func.return %out
// CHECK-LABEL: func.func @batch_norm_kernel0(
// CHECK-NEXT:    %eps = sf.constant
// CHECK-NEXT:    %v = sf.add %var, %eps
// CHECK-NEXT:    %r = sf.rsqrt %v
// CHECK-NEXT:    %s = sf.multiply %r, %gamma
// CHECK-NEXT:    %ms = sf.multiply %mean, %s
// CHECK-NEXT:    %t = sf.subtract %beta, %ms
// CHECK-NEXT:    func.return %s, %t
// CHECK-LABEL: func.func @batch_norm_kernel1(
// CHECK-NEXT:    %xs = sf.multiply %x, %s
// CHECK-NEXT:    %y = sf.add %xs, %t
// CHECK-NEXT:    %nb = sf.negative %bias
// CHECK-NEXT:    %z = sf.add %y, %nb
// CHECK-NEXT:    %out = sf.relu %z
// CHECK-NEXT:    func.return %out
// RECOMPUTE-LABEL: func.func @batch_norm(
// RECOMPUTE-NEXT:    %out = sf.call %var, %gamma, %x, %mean, %beta, %bias {callee = @batch_norm_kernel0}
// RECOMPUTE-NEXT:    func.return %out
func.func @batch_norm(%x: tensor<2x4x4x8xf32>, %mean: tensor<8xf32>, %var: tensor<8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>, %bias: tensor<8xf32>) -> tensor<2x4x4x8xf32> {
  %eps = sf.constant dense<1.0e-03> : tensor<f32>
  %v = sf.add %var, %eps : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %r = sf.rsqrt %v : (tensor<8xf32>) -> tensor<8xf32>
  %s = sf.multiply %r, %gamma : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %xs = sf.multiply %x, %s : (tensor<2x4x4x8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf32>
  %ms = sf.multiply %mean, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %t = sf.subtract %beta, %ms : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = sf.add %xs, %t : (tensor<2x4x4x8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf32>
  %nb = sf.negative %bias : (tensor<8xf32>) -> tensor<8xf32>
  %z = sf.add %y, %nb : (tensor<2x4x4x8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf32>
  %out = sf.relu %z : (tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  func.return %out : tensor<2x4x4x8xf32>
}
