// RUN: stageflow opt %s --passes prune | filecheck %s

// `prune` removes ops whose results nobody uses, transitively, and keeps every stateful
// op (variable reads and writes, prints, calls) and the function signatures.

// A dead chain goes as a whole: %1 only feeds %2, which is unused.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NEXT:    %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
func.func @dead_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.multiply %1, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// Effects stay, with what they use: the write, the print, the unused read.
// CHECK-LABEL: func.func @effects
// CHECK-NEXT:    %0 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = sf.add %0, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    sf.assign_variable %v, %1 : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
// CHECK-NEXT:    %2 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
// CHECK-NEXT:    sf.print %x {pieces = ["x =", none], sep = " "} : (tensor<4xf32>) -> ()
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @effects(%v: !sf.resource<tensor<4xf32>>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %1 = sf.add %0, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  sf.assign_variable %v, %1 : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
  %2 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  %3 = sf.exp %2 : (tensor<4xf32>) -> tensor<4xf32>
  sf.print %x {pieces = ["x =", none], sep = " "} : (tensor<4xf32>) -> ()
  func.return %x : tensor<4xf32>
}

// A call is kept even if its results are unused (the callee may have effects); a
// random draw is pure given its state, so an unused one goes.
// CHECK-LABEL: func.func @calls_and_random
// CHECK-NEXT:    %0 = sf.call %x {callee = @dead_chain} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @calls_and_random(%x: tensor<4xf32>, %state: tensor<4xui32>) -> tensor<4xf32> {
  %0 = sf.call %x {callee = @dead_chain} : (tensor<4xf32>) -> tensor<4xf32>
  %bits, %next = sf.random_bits %state {shape = [4]} : (tensor<4xui32>) -> (tensor<4xui32>, tensor<4xui32>)
  func.return %x : tensor<4xf32>
}

// Unused arguments and constants: the signature stays, the constant goes.
// CHECK-LABEL: func.func @signature(%x: tensor<4xf32>, %unused: tensor<2xi32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @signature(%x: tensor<4xf32>, %unused: tensor<2xi32>) -> tensor<4xf32> {
  %c = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  func.return %x : tensor<4xf32>
}
