// RUN: stageflow opt %s --passes fold | filecheck %s
// RUN: stageflow opt %s --passes 'fold{max-elements=2}' | filecheck %s --check-prefix=LIMIT

// `fold` evaluates ops whose operands are all constants with the primitives' eager
// kernels, and erases the constants that become unused.

// A chain folds to one constant: (a * 2) - 1 with a = [1, 2, 3], then its sum.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %0 = sf.constant dense<[1.000000e+00, 3.000000e+00, 5.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %1 = sf.constant dense<9.000000e+00> : tensor<f32>
// CHECK-NEXT:    %2 = sf.add %x, %0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    func.return %2, %1 : tensor<3xf32>, tensor<f32>
// With at most 2 elements per result the chain folds all the same: no result is larger
// than its largest operand (a frozen model's per-channel arithmetic on its weights).
// LIMIT-LABEL: func.func @chain
// LIMIT-NEXT:    %0 = sf.constant dense<[1.000000e+00, 3.000000e+00, 5.000000e+00]> : tensor<3xf32>
// LIMIT-NEXT:    %1 = sf.constant dense<9.000000e+00> : tensor<f32>
func.func @chain(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %a = sf.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %two = sf.constant dense<2.0> : tensor<f32>
  %one = sf.constant dense<1.0> : tensor<f32>
  %0 = sf.multiply %a, %two : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = sf.subtract %0, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %2 = sf.reduce_sum %1 {axes = [0], keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %3 = sf.add %x, %1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %3, %2 : tensor<3xf32>, tensor<f32>
}

// A result larger than both the limit and its operands is not folded: a broadcast stays
// a cheap op rather than a literal of its size.
// CHECK-LABEL: func.func @growth
// CHECK-NEXT:    %0 = sf.constant dense<2.000000e+00> : tensor<3xf32>
// LIMIT-LABEL: func.func @growth
// LIMIT-NEXT:    %s = sf.constant dense<2.000000e+00> : tensor<f32>
// LIMIT-NEXT:    %0 = sf.broadcast_to %s {shape = [3]} : (tensor<f32>) -> tensor<3xf32>
func.func @growth() -> tensor<3xf32> {
  %s = sf.constant dense<2.0> : tensor<f32>
  %0 = sf.broadcast_to %s {shape = [3]} : (tensor<f32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// Ops without operands fold too; casts and comparisons keep their result types.
// CHECK-LABEL: func.func @iota_cast
// CHECK-NEXT:    %0 = sf.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT:    %1 = sf.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00]> : tensor<3xf64>
// CHECK-NEXT:    func.return %0, %1 : tensor<3xi1>, tensor<3xf64>
// LIMIT-LABEL: func.func @iota_cast
// LIMIT-NEXT:    %0 = sf.iota
func.func @iota_cast() -> (tensor<3xi1>, tensor<3xf64>) {
  %0 = sf.iota {shape = [3], dtype = i32, dimension = 0} : () -> tensor<3xi32>
  %zero = sf.constant dense<0> : tensor<i32>
  %1 = sf.equal %0, %zero : (tensor<3xi32>, tensor<i32>) -> tensor<3xi1>
  %2 = sf.cast %0 {dtype = f64} : (tensor<3xi32>) -> tensor<3xf64>
  func.return %1, %2 : tensor<3xi1>, tensor<3xf64>
}

// Division by zero folds to what it computes at run time (inf, 0x7f800000); an out-of-range gather is left
// to fail when it runs.
// CHECK-LABEL: func.func @runtime_errors
// CHECK-NEXT:    %c = sf.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %i = sf.constant dense<5> : tensor<1xi32>
// CHECK-NEXT:    %0 = sf.constant dense<0x7f800000> : tensor<2xf32>
// CHECK-NEXT:    %1 = sf.gather %c, %i {axis = 0} : (tensor<2xf32>, tensor<1xi32>) -> tensor<1xf32>
// CHECK-NEXT:    func.return %0, %1 : tensor<2xf32>, tensor<1xf32>
func.func @runtime_errors() -> (tensor<2xf32>, tensor<1xf32>) {
  %c = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %zero = sf.constant dense<0.0> : tensor<f32>
  %i = sf.constant dense<5> : tensor<1xi32>
  %0 = sf.divide %c, %zero : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %1 = sf.gather %c, %i {axis = 0} : (tensor<2xf32>, tensor<1xi32>) -> tensor<1xf32>
  func.return %0, %1 : tensor<2xf32>, tensor<1xf32>
}

// Stateful ops are never folded, a result of a less precise type than its value is kept
// (folding would change the type), and random bits from a constant state are constants.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    %c = sf.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    sf.print %c {pieces = [none], sep = " "} : (tensor<2xf32>) -> ()
// CHECK-NEXT:    %0 = sf.exp %c : (tensor<2xf32>) -> tensor<?xf32>
// CHECK-NEXT:    %bits = sf.constant dense<[{{.*}}]> : tensor<2xui32>
// CHECK-NEXT:    %next = sf.constant dense<[1, 2, 4, 0]> : tensor<4xui32>
// CHECK-NEXT:    func.return %0, %bits, %next
func.func @kept() -> (tensor<?xf32>, tensor<2xui32>, tensor<4xui32>) {
  %c = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  sf.print %c {pieces = [none], sep = " "} : (tensor<2xf32>) -> ()
  %0 = sf.exp %c : (tensor<2xf32>) -> tensor<?xf32>
  %state = sf.constant dense<[1, 2, 3, 0]> : tensor<4xui32>
  %bits, %next = sf.random_bits %state {shape = [2]} : (tensor<4xui32>) -> (tensor<2xui32>, tensor<4xui32>)
  func.return %0, %bits, %next : tensor<?xf32>, tensor<2xui32>, tensor<4xui32>
}
