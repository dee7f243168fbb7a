// RUN: not stageflow opt --split-input-file %s 2>&1 | filecheck %s
// RUN: not stageflow opt %S/does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING

// Each case is one line on stderr, naming the file, the line of the op, the op and the
// problem; the verifier's messages come from the primitives' own shape rules.

// MISSING: stageflow opt: error: cannot read {{.*}}does-not-exist.mlir: No such file or directory

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.add' op shapes (3,) and (4,) are incompatible for broadcasting
func.func @shape_mismatch(%a: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.add %a, %b : (tensor<3xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.add' op result #0 has type tensor<5xf32> but the operands and attributes give tensor<4xf32>
func.func @wrong_result(%a: tensor<4xf32>) -> tensor<5xf32> {
  %0 = sf.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.multiply' op operands have different dtypes float32 and int32
func.func @dtype_mismatch(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  %0 = sf.multiply %a, %b : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  func.return
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.reduce_sum' op axes (1, 0) must be sorted, unique and in [0, 2)
func.func @unsorted_axes(%a: tensor<4x5xf32>) {
  %0 = sf.reduce_sum %a {axes = [1, 0], keepdims = false} : (tensor<4x5xf32>) -> tensor<f32>
  func.return
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: attribute 'keepdims' expected in operation 'sf.reduce_sum'
func.func @missing_attribute(%a: tensor<4x5xf32>) {
  %0 = sf.reduce_sum %a {axes = [0]} : (tensor<4x5xf32>) -> tensor<5xf32>
  func.return
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.random_bits' op has 1 result(s) but the shape rule gives 2
func.func @result_count(%s: tensor<4xui32>) {
  %0 = sf.random_bits %s {shape = [8]} : (tensor<4xui32>) -> tensor<8xui32>
  func.return
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.exp' op element type i128 is not supported by stageflow
func.func @element_type(%a: tensor<4xi128>) {
  %0 = sf.exp %a : (tensor<4xi128>) -> tensor<4xi128>
  func.return
}

// -----

func.func @callee(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  func.return %x : tensor<?x4xf32>
}
// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.call' op operands (tensor<3x4xf32>) do not match @callee's (tensor<?x4xf32>)
func.func @caller(%x: tensor<3x4xf32>) -> tensor<?x4xf32> {
  %0 = sf.call %x {callee = @callee} : (tensor<3x4xf32>) -> tensor<?x4xf32>
  func.return %0 : tensor<?x4xf32>
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:{{[0-9]+}}: Operation sf.nope is not registered
func.func @unknown_op(%a: tensor<4xf32>) {
  %0 = sf.nope %a : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// A flag must be true or false: 7 would otherwise read as true.
// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.matmul' op attribute transpose_a must be true or false, got 7 : i64
func.func @flag_as_integer(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = sf.matmul %a, %a {transpose_a = 7, transpose_b = false} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}

// -----

// A splat literal is refused before it is expanded: 337 bytes of IR asked for 19 GB.
// CHECK: errors.mlir:[[# @LINE + 2]]:33: a splat dense literal of 225,000,000 elements: at most 1,048,576 are held in IR
func.func @huge_splat() -> tensor<15000x15000xf32> {
  %0 = sf.constant dense<1.0> : tensor<15000x15000xf32>
  func.return %0 : tensor<15000x15000xf32>
}


// -----

// Complex numbers have no order: the comparison's shape rule refuses them.
// CHECK: errors.mlir:[[# @LINE + 2]]:3: 'sf.less' op dtype complex64 is not supported (expected one of float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
func.func @ordered_complex(%x: tensor<4xcomplex<f32>>) -> tensor<4xi1> {
  %0 = sf.less %x, %x : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}
