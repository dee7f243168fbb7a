"""Calling a compiled kernel from Python: a lean fast path and a checking slow path.

The fast path is a small function generated per kernel (as `dataclasses` generates its
methods) so that a call does no loops and no attribute lookups beyond what it must: it
checks each input's type and dtype by identity, allocates the outputs (static shapes are
constants; ``?`` dims are read off the inputs' shapes), and calls the kernel's ``.py``
entry with the arrays themselves (``ctypes.py_object``: no pointer extraction in Python).
The compiled entry checks ranks, dims, contiguity and alignment before touching memory.
Anything unusual (another dtype object, a list, a strided view, a wrong shape, a non-zero
return code) falls back to the slow path, which converts what it safely can (strided or
misaligned arrays are copied, non-native byte order is swapped), raises `TypeError` or
`ValueError` naming the argument otherwise, and only then calls compiled code.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.codegen.kernels.analysis import Arg, DimSpec, Kernel
from stageflow.core.shapes import format_shape


def _first_not_one(*dims: int) -> int:
    for d in dims:
        if d != 1:
            return d
    return 1


def spec_value(spec: DimSpec, shapes: Sequence[tuple[int, ...]]) -> int:
    """A dim spec's size for inputs of `shapes` (the first of its sources that is not 1)."""
    if isinstance(spec, int):
        return spec
    return _first_not_one(*(shapes[i][axis] for i, axis in spec))


def _spec_source(spec: DimSpec) -> str:
    if isinstance(spec, int):
        return repr(spec)
    dims = [f"a{i}.shape[{axis}]" for i, axis in spec]
    return dims[0] if len(dims) == 1 else f"first_not_one({', '.join(dims)})"


def _type_text(arg: Arg) -> str:
    dims = "x".join("?" if d is None else str(d) for d in arg.shape)
    return f"tensor<{dims + 'x' if dims else ''}{arg.dtype.name}>"


class CompiledKernel:
    """A compiled kernel: ``kernel(*arrays)`` returns the tuple of its output arrays.

    ``raw(arrays, dims)`` calls the ``NAME(args, dims)`` ABI directly with the given
    dims and returns its status code (for tests and other runtimes); ``llvm_ir`` is the
    module's text before optimisation.
    """

    def __init__(self, kernel: Kernel, raw: Callable[..., int],
                 py: Callable[..., int] | None, llvm_ir: str, symbol: str = "") -> None:
        self.kernel = kernel
        self.llvm_ir = llvm_ir
        self.symbol = symbol  # of the ``NAME(args, dims)`` entry, for compiled callers
        self._raw = raw
        self._py = py
        self._fast = (self._generate_fast_path() if py is not None
                      else lambda arrays: self.call_checked(*arrays))

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        return self._fast(arrays)

    def __repr__(self) -> str:
        return f"<CompiledKernel @{self.kernel.name}>"

    # -- fast path ----------------------------------------------------------------------------

    def _generate_fast_path(self) -> Callable[..., tuple[np.ndarray, ...]]:
        kernel = self.kernel
        names = [f"a{i}" for i in range(len(kernel.inputs))]
        scope: dict[str, Any] = {"ndarray": np.ndarray, "empty": np.empty, "py": self._py,
                                 "slow": self.call_checked, "first_not_one": _first_not_one}
        checks = []
        for i, arg in enumerate(kernel.inputs):
            scope[f"D{i}"] = arg.dtype
            checks.append(f"type(a{i}) is not ndarray or a{i}.dtype is not D{i}")
        outputs, dynamic = [], False
        for j, (arg, spec) in enumerate(zip(kernel.outputs, kernel.output_shapes, strict=True)):
            scope[f"E{j}"] = arg.dtype
            if all(isinstance(d, int) for d in spec):
                scope[f"S{j}"] = tuple(spec)
                outputs.append(f"o{j} = empty(S{j}, E{j})")
            else:
                dynamic = True
                dims = ", ".join(_spec_source(d) for d in spec)
                outputs.append(f"o{j} = empty(({dims},), E{j})")
        args = ", ".join(names)
        outs = ", ".join(f"o{j}" for j in range(len(kernel.outputs)))
        lines = ["def fast(arrays):",
                 f"    if len(arrays) != {len(names)}:",
                 "        return slow(*arrays)"]
        if names:
            lines.append(f"    {args}{',' if len(names) == 1 else ''} = arrays")
        if checks:
            lines += ["    if " + " or ".join(checks) + ":",
                      f"        return slow({args})"]
        if dynamic:
            lines += ["    try:"] + [f"        {line}" for line in outputs]
            lines += ["    except IndexError:", f"        return slow({args})"]
        else:
            lines += [f"    {line}" for line in outputs]
        lines += [f"    if py({', '.join(names + [f'o{j}' for j in range(len(outputs))])}):",
                  f"        return slow({args})",
                  f"    return ({outs},)" if outs else "    return ()"]
        exec(compile("\n".join(lines), f"<kernel @{kernel.name}>", "exec"), scope)
        return scope["fast"]  # type: ignore[no-any-return]

    # -- slow path ----------------------------------------------------------------------------

    def _where(self, arg: Arg) -> str:
        return f"{arg.name} of kernel @{self.kernel.name} ({_type_text(arg)})"

    def _prepare(self, arg: Arg, value: Any) -> np.ndarray:
        """The argument as an aligned C-contiguous array of the right dtype and rank."""
        try:
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
        except Exception as error:
            raise TypeError(f"{self._where(arg)}: cannot convert "
                            f"{type(value).__name__} to an array: {error}") from None
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        if array.dtype != arg.dtype:
            if array.dtype.newbyteorder("=") != arg.dtype:
                raise TypeError(f"{self._where(arg)}: expected dtype {arg.dtype.name}, got "
                                f"{array.dtype.name}")
            array = array.astype(arg.dtype)
        if array.ndim != arg.ndim:
            raise ValueError(f"{self._where(arg)}: expected rank {arg.ndim}, got shape "
                             f"{format_shape(array.shape)}")
        for axis, (have, want) in enumerate(zip(array.shape, arg.shape, strict=True)):
            if want is not None and have != want:
                raise ValueError(f"{self._where(arg)}: dim {axis} must be {want}, got shape "
                                 f"{format_shape(array.shape)}")
        if not (array.flags.c_contiguous and array.flags.aligned):
            array = np.array(array, order="C", copy=True)
        return array

    def _check_broadcast(self, arrays: list[np.ndarray]) -> None:
        kernel = self.kernel
        shapes = [a.shape for a in arrays]
        space = [spec_value(spec, shapes) for spec in kernel.shape]
        for index, (arg, shape) in enumerate(zip(kernel.inputs, shapes, strict=True)):
            if not kernel.is_live(index):
                continue
            offset = kernel.rank - arg.ndim
            if any(d not in (1, space[offset + a]) for a, d in enumerate(shape)):
                listed = ", ".join(f"{a.name} {format_shape(s)}"
                                   for a, s in zip(kernel.inputs, shapes, strict=True))
                raise ValueError(f"kernel @{kernel.name}: the argument shapes do not "
                                 f"broadcast together: {listed}")

    def call_checked(self, *values: Any) -> tuple[np.ndarray, ...]:
        """Validate and convert every argument, then run the kernel."""
        kernel = self.kernel
        if len(values) != len(kernel.inputs):
            raise TypeError(f"kernel @{kernel.name} takes {len(kernel.inputs)} arguments, "
                            f"got {len(values)}")
        arrays = [self._prepare(arg, v) for arg, v in zip(kernel.inputs, values, strict=True)]
        self._check_broadcast(arrays)
        shapes = [a.shape for a in arrays]
        outputs = [np.empty(tuple(spec_value(d, shapes) for d in spec), arg.dtype)
                   for arg, spec in zip(kernel.outputs, kernel.output_shapes, strict=True)]
        everything = arrays + outputs
        if self._py is not None:
            code = self._py(*everything)
        else:
            code = self.raw(everything, [d for a in everything for d in a.shape])
        if code:
            raise RuntimeError(f"kernel @{kernel.name} rejected "
                               f"{kernel.args[code - 1].name} after it was checked")
        return tuple(outputs)

    def run_into(self, arrays: Sequence[np.ndarray]) -> int:
        """Run on inputs then preallocated outputs (of the kernel's dtypes), without
        converting anything; the status code (0: done; else nothing was written, as where an
        array is not C-contiguous and aligned: 1 + its index).
        The GIL is released while the kernel runs, so threads can run blocks of rows."""
        if self._py is not None:
            return self._py(*arrays)  # (it checks their layout as below)
        for index, array in enumerate(arrays):  # the raw entry reads them as C-contiguous
            if not (array.flags.c_contiguous and array.flags.aligned):
                return index + 1
        return self.raw(arrays, [d for a in arrays for d in a.shape])

    def raw(self, arrays: Sequence[np.ndarray], dims: Sequence[int]) -> int:
        """Call ``NAME(args, dims)`` with these arrays' data pointers and the given dims."""
        if len(arrays) != len(self.kernel.args):
            raise TypeError(f"expected {len(self.kernel.args)} arrays, got {len(arrays)}")
        pointers = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        sizes = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        if len(dims) != sum(arg.ndim for arg in self.kernel.args):
            raise ValueError("dims must list every argument's sizes")
        return self._raw(pointers, sizes)
