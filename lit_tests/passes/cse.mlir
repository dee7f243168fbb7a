// RUN: stageflow opt %s --passes cse | filecheck %s

// `cse` replaces a pure op by an earlier equal one (same name, attributes, operands and
// result types), transitively; stateful ops are never merged, except reads of a variable
// with no other stateful op between them.

// The two exp merge, then the two multiplies (their constants merged first), then the
// two adds, one of them with its operands commuted after the merges.
// CHECK-LABEL: func.func @pure
// CHECK-NEXT:    %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %c0 = sf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %1 = sf.multiply %0, %c0 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %2 = sf.add %1, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %3 = sf.subtract %2, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %3 : tensor<4xf32>
func.func @pure(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %c0 = sf.constant dense<2.0> : tensor<f32>
  %c1 = sf.constant dense<2.0> : tensor<f32>
  %2 = sf.multiply %0, %c0 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = sf.multiply %1, %c1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %4 = sf.add %2, %3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = sf.add %3, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = sf.subtract %4, %5 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %6 : tensor<4xf32>
}

// Different attributes or operand order: nothing merges.
// CHECK-LABEL: func.func @different
// CHECK-NEXT:    %0 = sf.reduce_sum %m {axes = [0], keepdims = false}
// CHECK-NEXT:    %1 = sf.reduce_sum %m {axes = [1], keepdims = false}
// CHECK-NEXT:    %2 = sf.subtract %0, %1
// CHECK-NEXT:    %3 = sf.subtract %1, %0
func.func @different(%m: tensor<3x3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = sf.reduce_sum %m {axes = [0], keepdims = false} : (tensor<3x3xf32>) -> tensor<3xf32>
  %1 = sf.reduce_sum %m {axes = [1], keepdims = false} : (tensor<3x3xf32>) -> tensor<3xf32>
  %2 = sf.subtract %0, %1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %3 = sf.subtract %1, %0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %2, %3 : tensor<3xf32>, tensor<3xf32>
}

// A read after a write is a new value; two reads with nothing between them are one.
// CHECK-LABEL: func.func @variables
// CHECK-NEXT:    %0 = sf.read_variable %v
// CHECK-NEXT:    sf.assign_variable %v, %x
// CHECK-NEXT:    %1 = sf.read_variable %v
// CHECK-NEXT:    sf.print %1
// CHECK-NEXT:    %2 = sf.read_variable %v
// CHECK-NEXT:    func.return %0, %1, %1, %2 :
func.func @variables(%v: !sf.resource<tensor<4xf32>>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
  %1 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %2 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  sf.print %2 {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
  %3 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Two draws from the same state value are the same numbers; a draw from the next state
// is not. Prints and calls are never merged.
// CHECK-LABEL: func.func @random_prints_calls
// CHECK-NEXT:    %a, %s1 = sf.random_bits %state {shape = [3]}
// CHECK-NEXT:    %c, %s3 = sf.random_bits %s1 {shape = [3]}
// CHECK-NEXT:    sf.print %a
// CHECK-NEXT:    sf.print %a
// CHECK-NEXT:    %0 = sf.call %c {callee = @id}
// CHECK-NEXT:    %1 = sf.call %c {callee = @id}
// CHECK-NEXT:    func.return %a, %a, %0, %1 :
func.func @random_prints_calls(%state: tensor<4xui32>) -> (tensor<3xui32>, tensor<3xui32>, tensor<3xui32>, tensor<3xui32>) {
  %a, %s1 = sf.random_bits %state {shape = [3]} : (tensor<4xui32>) -> (tensor<3xui32>, tensor<4xui32>)
  %b, %s2 = sf.random_bits %state {shape = [3]} : (tensor<4xui32>) -> (tensor<3xui32>, tensor<4xui32>)
  %c, %s3 = sf.random_bits %s1 {shape = [3]} : (tensor<4xui32>) -> (tensor<3xui32>, tensor<4xui32>)
  sf.print %a {pieces = [none], sep = " "} : (tensor<3xui32>) -> ()
  sf.print %b {pieces = [none], sep = " "} : (tensor<3xui32>) -> ()
  %0 = sf.call %c {callee = @id} : (tensor<3xui32>) -> tensor<3xui32>
  %1 = sf.call %c {callee = @id} : (tensor<3xui32>) -> tensor<3xui32>
  func.return %a, %b, %0, %1 : tensor<3xui32>, tensor<3xui32>, tensor<3xui32>, tensor<3xui32>
}

// CHECK-LABEL: func.func @id
func.func @id(%x: tensor<3xui32>) -> tensor<3xui32> {
  func.return %x : tensor<3xui32>
}
