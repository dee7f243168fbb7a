// RUN: stageflow opt %s --passes fuse-conv | filecheck %s

// A convolution's epilogue (a scale and a shift per output channel, a second scale and
// shift, a residual, a ReLU: each optional, in that order) becomes part of it, packed filters or not; the scale and
// shift constants are spread to one value per output channel, and `y - c` is `y + (-c)`.
// The ops it replaces go, and so do the constants only they read (others are prune's).
// CHECK-LABEL: func.func @whole
// CHECK-NEXT:    %[[S:.*]] = sf.constant dense<2.000000e+00> : tensor<2xf32>
// CHECK-NEXT:    %[[T:.*]] = sf.constant dense<[-1.000000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %z = sf.conv2d_fused %x, %w, %[[S]], %[[T]], %skip {filter_shape = [1, 1, 3, 2], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1], packed = false, scale = true, shift = true, residual = true, activation = "relu"} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
// CHECK-NEXT:    func.return %z
func.func @whole(%x: tensor<1x4x4x3xf32>, %w: tensor<1x1x3x2xf32>, %skip: tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32> {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %scale = sf.constant dense<2.0> : tensor<1x1x1x2xf32>
  %s = sf.multiply %scale, %y : (tensor<1x1x1x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %shift = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %t = sf.subtract %s, %shift : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %r = sf.add %skip, %t : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %z = sf.relu %r : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %z : tensor<1x4x4x2xf32>
}

// A batch norm's scale and shift, then a second scale and shift (as Inception v2's exporter
// writes a Mul and an Add after each batch norm) and a ReLU: both affine maps join the
// epilogue, in their order; a third scale does not, and stays below the fused op.
// CHECK-LABEL: func.func @two_affine_maps
// CHECK-NEXT:    %[[S2:.*]] = sf.constant dense<3.000000e+00> : tensor<2xf32>
// CHECK-NEXT:    %[[T2:.*]] = sf.constant dense<4.000000e+00> : tensor<2xf32>
// CHECK-NEXT:    %z = sf.conv2d_fused %x, %w, %s, %t, %[[S2]], %[[T2]] {filter_shape = [1, 1, 3, 2], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1], packed = false, scale = true, shift = true, second_scale = true, second_shift = true, residual = false, activation = "relu"}
// CHECK-NEXT:    %again = sf.multiply %z, %s
// CHECK-NEXT:    func.return %again
func.func @two_affine_maps(%x: tensor<1x4x4x3xf32>, %w: tensor<1x1x3x2xf32>, %s: tensor<2xf32>, %t: tensor<2xf32>) -> tensor<1x4x4x2xf32> {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %a = sf.multiply %y, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %b = sf.add %a, %t : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %scale = sf.constant dense<3.0> : tensor<f32>
  %c = sf.multiply %b, %scale : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %shift = sf.constant dense<4.0> : tensor<1x1x1x2xf32>
  %d = sf.add %shift, %c : (tensor<1x1x1x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %z = sf.relu %d : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %again = sf.multiply %z, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  func.return %again : tensor<1x4x4x2xf32>
}

// A packed convolution with a bias alone; a scalar shift is spread over the channels.
// CHECK-LABEL: func.func @packed_bias
// CHECK-NEXT:    %half = sf.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = sf.constant dense<5.000000e-01> : tensor<33xf32>
// CHECK-NEXT:    %b = sf.conv2d_fused %x, %p, %[[B]] {filter_shape = [1, 1, 1, 33], strides = [1, 1], padding = {{\[}}[0, 0], [0, 0]], dilations = [1, 1], packed = true, scale = false, shift = true, residual = false, activation = "none"}
// CHECK-NEXT:    func.return %b
func.func @packed_bias(%x: tensor<1x4x4x1xf32>, %p: tensor<2x1x32xf32>) -> tensor<1x4x4x33xf32> {
  %y = sf.conv2d_prepacked %x, %p {filter_shape = [1, 1, 1, 33], strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x1xf32>, tensor<2x1x32xf32>) -> tensor<1x4x4x33xf32>
  %half = sf.constant dense<0.5> : tensor<f32>
  %b = sf.add %y, %half : (tensor<1x4x4x33xf32>, tensor<f32>) -> tensor<1x4x4x33xf32>
  func.return %b : tensor<1x4x4x33xf32>
}

// A batch norm's scale and shift computed at run time from its variables (the channels'
// values, or after leading 1s, reshaped to them) are the epilogue's operands as they are;
// a run-time value subtracted is not (its negation would be an op of its own).
// CHECK-LABEL: func.func @run_time_affine
// CHECK-NEXT:    %[[T:.*]] = sf.reshape %shift {shape = [2]} : (tensor<1x1x1x2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %t = sf.conv2d_fused %x, %w, %scale, %[[T]] {{{.*}}scale = true, shift = true, residual = false, activation = "relu"}
// CHECK-NEXT:    %c = sf.conv2d_fused %x, %w, %scale {{{.*}}scale = true, shift = false, residual = false, activation = "none"}
// CHECK-NEXT:    %d = sf.subtract %c, %scale
// CHECK-NEXT:    func.return %t, %d
func.func @run_time_affine(%x: tensor<1x4x4x3xf32>, %w: tensor<1x1x3x2xf32>, %scale: tensor<2xf32>, %shift: tensor<1x1x1x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %s = sf.multiply %y, %scale : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %a = sf.add %shift, %s : (tensor<1x1x1x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %t = sf.relu %a : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %b = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %c = sf.multiply %b, %scale : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %d = sf.subtract %c, %scale : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  func.return %t, %d : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// What the epilogue cannot take stays: a pre-activation read twice (the chain ends
// before it), a scale that is not per channel, a shift after the residual, a float16
// convolution.
// CHECK-LABEL: func.func @kept
// CHECK:         %y = sf.conv2d %x, %w
// CHECK-NEXT:    %r = sf.relu %y
// CHECK-NEXT:    %rows = sf.constant
// CHECK-NEXT:    %u = sf.conv2d_fused %x, %w, %skip {{{.*}}packed = false, scale = false, shift = false, residual = true, activation = "none"}
// CHECK-NEXT:    %v = sf.multiply %u, %rows
// CHECK-NEXT:    %one = sf.constant
// CHECK-NEXT:    %c = sf.conv2d_fused %x, %w, %skip {{{.*}}residual = true, activation = "none"}
// CHECK-NEXT:    %d = sf.add %c, %one
// CHECK-NEXT:    %h = sf.conv2d %xh, %wh
// CHECK-NEXT:    %hr = sf.relu %h
// CHECK-NEXT:    func.return %y, %r, %v, %d, %hr
func.func @kept(%x: tensor<1x4x4x3xf32>, %w: tensor<1x1x3x2xf32>, %skip: tensor<1x4x4x2xf32>, %xh: tensor<1x4x4x3xf16>, %wh: tensor<1x1x3x2xf16>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf16>) {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %r = sf.relu %y : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %rows = sf.constant dense<[[[[1.0], [2.0], [3.0], [4.0]]]]> : tensor<1x1x4x1xf32>
  %t = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %u = sf.add %t, %skip : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %v = sf.multiply %u, %rows : (tensor<1x4x4x2xf32>, tensor<1x1x4x1xf32>) -> tensor<1x4x4x2xf32>
  %one = sf.constant dense<1.0> : tensor<2xf32>
  %a = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x4x4x2xf32>
  %c = sf.add %a, %skip : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d = sf.add %c, %one : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %h = sf.conv2d %xh, %wh {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xf16>, tensor<1x1x3x2xf16>) -> tensor<1x4x4x2xf16>
  %hr = sf.relu %h : (tensor<1x4x4x2xf16>) -> tensor<1x4x4x2xf16>
  func.return %y, %r, %v, %d, %hr : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf16>
}

// A bfloat16 convolution under a mixed-precision policy: a batch norm's cast up, float32
// scale and shift, cast back, then the skip and the ReLU, all one conv2d_fused whose
// per-channel operands stay float32; a constant bfloat16 bias is widened to float32.
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:    %z = sf.conv2d_fused %x, %w, %s, %t, %skip {filter_shape = [1, 1, 3, 2], {{.*}}packed = false, scale = true, shift = true, residual = true, activation = "relu"} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>, tensor<2xf32>, tensor<2xf32>, tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xbf16>
// CHECK-NEXT:    %[[B:.*]] = sf.constant dense<[5.000000e-01, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %br = sf.conv2d_fused %x, %w, %[[B]] {{{.*}}scale = false, shift = true, residual = false, activation = "relu"} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>, tensor<2xf32>) -> tensor<1x4x4x2xbf16>
// CHECK-NEXT:    func.return %z, %br
func.func @mixed(%x: tensor<1x4x4x3xbf16>, %w: tensor<1x1x3x2xbf16>, %s: tensor<2xf32>, %t: tensor<2xf32>, %skip: tensor<1x4x4x2xbf16>) -> (tensor<1x4x4x2xbf16>, tensor<1x4x4x2xbf16>) {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>) -> tensor<1x4x4x2xbf16>
  %up = sf.cast %y {dtype = f32} : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xf32>
  %a = sf.multiply %up, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %b = sf.add %a, %t : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %down = sf.cast %b {dtype = bf16} : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xbf16>
  %r = sf.add %down, %skip : (tensor<1x4x4x2xbf16>, tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xbf16>
  %z = sf.relu %r : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xbf16>
  %c = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>) -> tensor<1x4x4x2xbf16>
  %bias = sf.constant dense<[0.5, -2.0]> : tensor<2xbf16>
  %cb = sf.add %c, %bias : (tensor<1x4x4x2xbf16>, tensor<2xbf16>) -> tensor<1x4x4x2xbf16>
  %br = sf.relu %cb : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xbf16>
  func.return %z, %br : tensor<1x4x4x2xbf16>, tensor<1x4x4x2xbf16>
}

// What a bfloat16 chain cannot take stays: a float32 value the function returns (the
// chain ends at its last bfloat16 value, here the ReLU), a second per-channel step of
// its own after a bfloat16 bias (each rounds: the epilogue rounds once after them), and
// a run-time bfloat16 bias is cast up for the fused op.
// CHECK-LABEL: func.func @mixed_kept
// CHECK-NEXT:    %r = sf.conv2d_fused %x, %w {{{.*}}scale = false, shift = false, residual = false, activation = "relu"}
// CHECK-NEXT:    %up = sf.cast %r {dtype = f32}
// CHECK-NEXT:    %a = sf.multiply %up, %s
// CHECK-NEXT:    %[[WIDE:.*]] = sf.cast %bias {dtype = f32} : (tensor<2xbf16>) -> tensor<2xf32>
// CHECK-NEXT:    %cb = sf.conv2d_fused %x, %w, %[[WIDE]] {{{.*}}scale = false, shift = true, residual = false, activation = "none"}
// CHECK-NEXT:    %up2 = sf.cast %cb {dtype = f32}
// CHECK-NEXT:    %m = sf.multiply %up2, %s
// CHECK-NEXT:    %down = sf.cast %m {dtype = bf16}
// CHECK-NEXT:    func.return %a, %down
func.func @mixed_kept(%x: tensor<1x4x4x3xbf16>, %w: tensor<1x1x3x2xbf16>, %s: tensor<2xf32>, %bias: tensor<2xbf16>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xbf16>) {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>) -> tensor<1x4x4x2xbf16>
  %r = sf.relu %y : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xbf16>
  %up = sf.cast %r {dtype = f32} : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xf32>
  %a = sf.multiply %up, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %c = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1]} : (tensor<1x4x4x3xbf16>, tensor<1x1x3x2xbf16>) -> tensor<1x4x4x2xbf16>
  %cb = sf.add %c, %bias : (tensor<1x4x4x2xbf16>, tensor<2xbf16>) -> tensor<1x4x4x2xbf16>
  %up2 = sf.cast %cb {dtype = f32} : (tensor<1x4x4x2xbf16>) -> tensor<1x4x4x2xf32>
  %m = sf.multiply %up2, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %down = sf.cast %m {dtype = bf16} : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xbf16>
  func.return %a, %down : tensor<1x4x4x2xf32>, tensor<1x4x4x2xbf16>
}

// A grouped bfloat16 convolution runs NumPy's kernel: its ReLU stays a compiled kernel
// of its own, not the fused op's.
// CHECK-LABEL: func.func @mixed_grouped
// CHECK-NEXT:    %y = sf.conv2d %x, %w
// CHECK-NEXT:    %r = sf.relu %y
func.func @mixed_grouped(%x: tensor<1x4x4x3xbf16>, %w: tensor<1x1x1x3xbf16>) -> tensor<1x4x4x3xbf16> {
  %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[0, 0], [0, 0]], dilations = [1, 1], feature_group_count = 3} : (tensor<1x4x4x3xbf16>, tensor<1x1x1x3xbf16>) -> tensor<1x4x4x3xbf16>
  %r = sf.relu %y : (tensor<1x4x4x3xbf16>) -> tensor<1x4x4x3xbf16>
  func.return %r : tensor<1x4x4x3xbf16>
}
