// Input of locations.mlir (not a test itself: lit.cfg.py excludes Inputs/).
func.func @bad(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  %0 = sf.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<3xf32> loc("model.py":7:3)
  func.return
}
