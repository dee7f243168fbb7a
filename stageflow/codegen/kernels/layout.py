"""A kernel's arguments as LLVM values: their dims, the iteration space, per-argument strides
and the test for whether a flat loop may run (see `stageflow.codegen.kernels.loops`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from stageflow.codegen.kernels.analysis import DimSpec, Kernel
from stageflow.codegen.llvm.loops import fold_mul, i64

# Emits one element, given per-argument offsets; returns the values computed there.
Body = Callable[[list[ir.Value]], dict[int, ir.Value] | None]
Address = Callable[[int, ir.Value], ir.Value]  # argument index, element offset -> pointer


def _and(b: ir.IRBuilder, x: ir.Value | None, y: ir.Value) -> ir.Value:
    return y if x is None else b.and_(x, y)


def name_dims(kernel: Kernel, args: Sequence[ir.Argument]) -> None:
    """Name dim parameters ``argI.dJ`` so that the IR reads as the ABI says."""
    names = [f"arg{i}.d{a}" for i, arg in enumerate(kernel.args) for a in range(arg.ndim)]
    for value, name in zip(args, names, strict=True):
        value.name = name


class Layout:
    """Per-argument dims as IR values, the iteration space, strides and flatness tests.

    `given` holds the dims as passed; `dims` the same with the type's static sizes
    substituted (valid once `consistent` holds), so that LLVM folds what the types fix.
    """

    def __init__(self, b: ir.IRBuilder, kernel: Kernel, dims: Sequence[ir.Value]) -> None:
        self.b, self.kernel = b, kernel
        self._specs: dict[DimSpec, ir.Value] = {}
        self.given: list[list[ir.Value]] = []
        self.dims: list[list[ir.Value]] = []
        position = 0
        for arg in kernel.args:
            given = list(dims[position:position + arg.ndim])
            self.given.append(given)
            self.dims.append([v if d is None else i64(d) for v, d in zip(given, arg.shape,
                                                                           strict=True)])
            position += arg.ndim
        self.space = [self._space_dim(axis) for axis in range(kernel.rank)]
        total: ir.Value = i64(1)
        for d in self.space:
            total = fold_mul(b, total, d)
        self.total = total

    def live(self, index: int) -> bool:
        return self.kernel.is_live(index)

    def axes(self, index: int) -> list[tuple[int, int]]:
        """(iteration axis, argument axis) pairs of argument `index`, right-aligned."""
        offset = self.kernel.rank - self.kernel.args[index].ndim
        return [(offset + a, a) for a in range(self.kernel.args[index].ndim)]

    def _space_dim(self, axis: int) -> ir.Value:
        return self.spec_value(self.kernel.shape[axis])

    def spec_value(self, spec: DimSpec) -> ir.Value:
        """A dim spec's size: the first of its source input dims that is not 1 (nor
        negative, so that a negative dim is reported against its own argument only)."""
        if isinstance(spec, int):
            return i64(spec)
        if spec not in self._specs:
            b, size = self.b, i64(1)
            for index, axis in reversed(spec):
                d = self.given[index][axis]
                usable = b.and_(b.icmp_signed("!=", d, i64(1)), b.icmp_signed(">=", d, i64(0)))
                size = b.select(usable, d, size)
            self._specs[spec] = size
        return self._specs[spec]

    def arg_spec(self, index: int, arg_axis: int) -> DimSpec:
        """What decides a dim of argument `index`: its type, its own value, or for an
        output the inputs it is computed from."""
        arg = self.kernel.args[index]
        if arg.shape[arg_axis] is not None:
            return arg.shape[arg_axis]
        if arg.is_output:
            return self.kernel.output_shapes[index - len(self.kernel.inputs)][arg_axis]
        return ((index, arg_axis),)

    def consistent(self, index: int) -> ir.Value:
        """i1: argument `index`'s dims fit its type and the iteration space (inputs: each
        dim 1 or the space's; outputs: exactly the broadcast of their inputs' dims)."""
        b, arg = self.b, self.kernel.args[index]
        ok = None
        for space_axis, arg_axis in self.axes(index):
            d = self.given[index][arg_axis]
            static = arg.shape[arg_axis]
            if static is not None:
                fits = b.icmp_signed("==", d, i64(static))
            elif arg.is_output:
                fits = b.icmp_signed("==", d, self.spec_value(self.arg_spec(index, arg_axis)))
            elif not self.live(index):
                fits = b.icmp_signed(">=", d, i64(0))
            else:
                fits = b.and_(b.icmp_signed(">=", d, i64(0)),
                              b.or_(b.icmp_signed("==", d, i64(1)),
                                    b.icmp_signed("==", d, self.space[space_axis])))
            ok = _and(b, ok, fits)
        return ir.Constant(ir.IntType(1), 1) if ok is None else ok

    def structurally_full(self, index: int) -> bool:
        """Full-size whenever the checks pass: on every iteration axis its dim is decided
        exactly as the iteration space's (same static size, or the same sources)."""
        arg, kernel = self.kernel.args[index], self.kernel
        leading = kernel.shape[:kernel.rank - arg.ndim]
        return (all(d == 1 for d in leading)
                and all(self.arg_spec(index, a) == kernel.shape[k] for k, a in self.axes(index)))

    def size(self, index: int) -> ir.Value:
        size: ir.Value = i64(1)
        for d in self.dims[index]:
            size = fold_mul(self.b, size, d)
        return size

    def flat_strides(self) -> list[int]:
        """Flat-loop strides: 0 for single-element arguments, 1 for full-size ones."""
        return [0 if arg.is_static_scalar else 1 for arg in self.kernel.args]

    def flat_ok(self) -> ir.Value | None:
        """i1: the flat loop is valid now; ``None`` if it always is."""
        ok = None
        for index, arg in enumerate(self.kernel.args):
            if self.live(index) and not arg.is_static_scalar and not self.structurally_full(index):
                ok = _and(self.b, ok, self.b.icmp_signed("==", self.size(index), self.total))
        return ok

    def strides(self, index: int) -> list[ir.Value]:
        """Element strides of argument `index` on every iteration axis (0 where broadcast)."""
        b = self.b
        result: list[ir.Value] = [i64(0)] * self.kernel.rank
        contiguous: ir.Value = i64(1)
        for space_axis, arg_axis in reversed(self.axes(index)):
            d = self.dims[index][arg_axis]
            if isinstance(d, ir.Constant):
                result[space_axis] = i64(0) if d.constant == 1 else contiguous
            else:
                result[space_axis] = b.select(b.icmp_signed("==", d, i64(1)), i64(0),
                                              contiguous)
            contiguous = fold_mul(b, contiguous, d)
        return result
