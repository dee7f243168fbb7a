"""A whole optimised function as one LLVM function (`builder`), by role: whether a
function can be one (`legality`), its C ABI (`abi`), every value's run-time dims
(`runtime_dims`), where each value lives (`placement`, in the `workspace` kept between
calls), the calls into kernels and lowered ops, split over the cores where large
(`calls`), and branches and loops (`control_flow`); `module` is the LLVM module holding
a program with its kernels and lowered ops."""
