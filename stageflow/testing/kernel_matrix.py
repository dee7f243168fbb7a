"""The kernel matrix: every elementwise primitive compiled for every dtype it accepts, and
every cast, for the CPU (JIT) and for the GPU (its PTX kernels' LLVM IR over emulated grids,
`EmulatedLaunch`), each run on ordinary and special values (zeros, infinities, NaN,
extremes) against the primitive's NumPy kernel: floats within a few ulps, integers and
bools exactly.

    python -m stageflow.testing.kernel_matrix [--targets cpu,emulated]
        [--families unary,binary,casts] [--only REGEX]

The whole matrix is some thousand kernels; the test suite runs `representatives` of it
(``tests/codegen/test_codegen.py``): each primitive on a dtype of each kind it accepts,
and each cast from every dtype to a dtype of each kind.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from stageflow.codegen import CPUTarget
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY, Primitive, ShapedType
from stageflow.ir import parse_module
from stageflow.ir.types import tensor_type
from stageflow.primitives.elementwise import (
    ElementwisePrimitive,
    cast_p,
    cos_p,
    pow_p,
    shift_right_logical_p,
    sin_p,
)
from stageflow.testing.campaign import print_counts

F16, BF16, F32, F64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
U32, U64, BOOL = dtypes.uint32, dtypes.uint64, dtypes.bool_
C64, C128 = dtypes.complex64, dtypes.complex128
# (rtol, atol): a few ulps; atol only absorbs differences among subnormal results. Complex
# results are compared by the modulus of the difference (NumPy's allclose).
TOLERANCE = {F16: (2e-3, 1e-7), BF16: (8e-3, 1e-38), F32: (1e-6, 1.2e-38),
             F64: (1e-12, 2.3e-308), C64: (1e-6, 1.2e-38), C128: (1e-12, 2.3e-308)}
# The kinds of dtype whose code differs: conversions through float32, IEEE arithmetic,
# signed and unsigned integers, complex pairs, bools.
KINDS = {"half": (F16, BF16), "float": (F32, F64), "signed": dtypes.SIGNED,
         "unsigned": dtypes.UNSIGNED, "complex float": dtypes.COMPLEX, "bool": (BOOL,),
         "narrow float": dtypes.NARROW_FLOATING, "narrow integer": dtypes.NARROW_INTEGER}
# The emulated GPU casts to these (the PTX cast family's targets of each kind).
EMULATED_CAST_TARGETS = (F16, BF16, F32, dtypes.int32, U32, U64, BOOL)
# Threads smaller than the array (so that they loop), and more threads than elements.
GRIDS = [(1, 1), (3, 32), (64, 128)]
TARGETS = ("cpu", "emulated")
FAMILIES = ("unary", "binary", "casts")
OUTCOMES = ("passed", "failed")

ELEMENTWISE = {name: p for name, p in REGISTRY.items() if isinstance(p, ElementwisePrimitive)}
UNARY = sorted(n for n, p in ELEMENTWISE.items() if p.shape_rule.__code__.co_argcount == 1)
BINARY = sorted(n for n, p in ELEMENTWISE.items() if p.shape_rule.__code__.co_argcount == 2)


def ir_type(shape: tuple[int | None, ...], dtype: np.dtype) -> str:
    return str(tensor_type(ShapedType(shape, dtype)))


def op_text(name: str, operands: list[tuple[tuple[int | None, ...], np.dtype]],
            params: dict | None = None, symbol: str | None = None) -> str:
    """A one-op kernel applying primitive `name`, its result type from the shape rule,
    named `symbol` (default ``NAME_kernel``)."""
    params = params or {}
    avals = [ShapedType(shape, dtype) for shape, dtype in operands]
    result = REGISTRY[name].shape_rule(*avals, **params)
    types = [ir_type(a.shape, a.dtype) for a in avals]
    out = ir_type(result.shape, result.dtype)
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    attrs = f" {{dtype = {ir_type((), params['dtype'])[7:-1]}}}" if "dtype" in params else ""
    uses = ", ".join(f"%a{i}" for i in range(len(types)))
    return (f"func.func @{symbol or f'{name}_kernel'}({args}) -> {out} {{\n"
            f"  %0 = sf.{name} {uses}{attrs} : ({', '.join(types)}) -> {out}\n"
            f"  func.return %0 : {out}\n}}")


def function(text: str):
    return parse_module(text).ops.first


def reference(name: str, *arrays: np.ndarray, **params) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(REGISTRY[name].kernel(*arrays, **params))


def assert_same(got: np.ndarray, want: np.ndarray, atol: float | None = None) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype in TOLERANCE:
        rtol, default_atol = TOLERANCE[want.dtype]
        if want.dtype.kind == "c":  # finite values by their distance, the others by parts
            finite = np.isfinite(want)
            pairs = [(got[finite].astype(C128), want[finite].astype(C128))]
            pairs += [(part(got[~finite]), part(want[~finite])) for part in (np.real, np.imag)]
        else:
            pairs = [(got.astype(np.float64), want.astype(np.float64))]
        for have, expected in pairs:
            np.testing.assert_allclose(have, expected, rtol=rtol, equal_nan=True,
                                       atol=default_atol if atol is None else atol)
    elif want.dtype in dtypes.NARROW:  # exactly, by value (any NaN is NaN)
        wide = np.float64 if want.dtype in dtypes.NARROW_FLOATING else np.int64
        np.testing.assert_array_equal(got.astype(wide), want.astype(wide))
    else:
        np.testing.assert_array_equal(got, want)


def values(dtype: np.dtype, count: int = 400, seed: int = 0) -> np.ndarray:
    """Ordinary values and every special one the dtype has, as a 1-D array."""
    rng = np.random.default_rng(seed)
    if dtype == BOOL:
        return np.array([True, False, True, True, False] * 3)
    if dtype in dtypes.NARROW_INTEGER:  # every value it has
        info = ml_dtypes.iinfo(dtype)
        return np.tile(np.arange(int(info.min), int(info.max) + 1).astype(dtype), 3)
    if dtype in dtypes.NARROW_FLOATING:  # every code (NaNs included)
        return np.arange(1 << ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)
    if dtype in dtypes.COMPLEX:  # each part ordinary or special, beside every other
        real, imag = (values(dtypes.real_dtype(dtype), count, seed + k) for k in (0, 1))
        parts = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, np.inf, -np.inf, np.nan])
        grid = np.meshgrid(parts, parts)
        z = np.empty(len(real) + grid[0].size, dtype)
        z.real = np.concatenate([real, grid[0].ravel()])
        z.imag = np.concatenate([imag[::-1], grid[1].ravel()])
        return z
    if dtype in dtypes.INTEGER:
        info = np.iinfo(dtype)
        positive = dtype in dtypes.UNSIGNED
        lo = 0 if positive else -1000
        extremes = [info.min, info.max, info.min + 1, 0, 1, 2, 7, info.max - 1]
        extremes += [] if positive else [-1, -2, -7]
        wrapped = np.array([v % 2**64 for v in extremes], np.uint64)  # two's complement
        return np.concatenate([rng.integers(lo, 1000, count).astype(dtype),
                               wrapped.astype(dtype)])
    wide = rng.uniform(-12, 12, count)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, np.inf, -np.inf, np.nan,
               1e-30, -1e-30, 1e-7, 100.0, -100.0, 88.5, -87.0, 30.0, 700.0, -740.0]
    with np.errstate(over="ignore"):
        return np.concatenate([wide, special]).astype(dtype)


def pow_operands(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special bases and exponents, then ordinary ones."""
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, 10.0,
                        np.inf, -np.inf, np.nan])
    x, y = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(1)
    x = np.concatenate([x, rng.uniform(0, 20, 500), -rng.integers(1, 9, 100)])
    y = np.concatenate([y, rng.uniform(-6, 6, 500), rng.integers(-8, 9, 100)])
    return x.astype(dtype), y.astype(dtype)


def binary_operands(primitive: Primitive, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    if primitive is pow_p and dtype in dtypes.FLOATING:
        return pow_operands(dtype)
    x, y = values(dtype, seed=1), values(dtype, seed=2)
    if primitive is pow_p and dtype in dtypes.INTEGER:
        x = x % 7 - (0 if dtype in (U32, U64) else 3)
        y = np.abs(y % 40)  # NumPy raises for negative integer powers
    if primitive is shift_right_logical_p:
        y = np.abs(y % (8 * dtype.itemsize + 4)).astype(dtype)
    grid = np.meshgrid(x[-25:], y[-25:])  # every pair of the special values
    return (np.concatenate([x, grid[0].ravel()]).astype(dtype),
            np.concatenate([y, grid[1].ravel()]).astype(dtype))


def _around_2_63(x: np.ndarray) -> np.ndarray:
    """Floats for a uint64 cast: `x` and values on both sides of 2**63 (where x86 has no
    unsigned conversion), all finite and in (-2**63, 2**64), where NumPy's result is the
    value truncated (negatives wrapped as through int64)."""
    big = np.array([2.0**63 - 1024, 2.0**63, 2.0**63 + 2048, 1.8e19, 2.0**64 - 2048])
    with np.errstate(over="ignore"):
        x = np.concatenate([x, big.astype(x.dtype)])
    real = np.real(x).astype(np.float64)
    return x[np.isfinite(x) & (real > -2.0**63) & (real < 2.0**64)]


def cast_operand(source: np.dtype, target: np.dtype) -> np.ndarray:
    """`values(source)` where NumPy's cast to `target` follows a rule. Signed targets take
    everything: NaN, infinities and values out of range give INT_MIN, as NumPy's cast does
    on x86 (eager results)."""
    x = values(source)
    if source in dtypes.FLOATING + dtypes.NARROW_FLOATING + dtypes.COMPLEX and target == U32:
        # Out of range, NumPy's uint32 result follows no rule: in range only.
        x = x[np.isfinite(x) & (np.abs(np.real(x).astype(np.float64)) < 2e9)]
    if source in dtypes.FLOATING + dtypes.COMPLEX and target == U64:
        x = _around_2_63(x)
    if source in dtypes.INTEGER and target == BF16:
        x = x[np.abs(x.astype(np.float64)) < 2**24]  # exact in float32 (no double rounding)
    if source == F64 and target == F16:  # values that round differently through float32
        x = np.concatenate([x, [1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40, 65519.99, 6e-8]])
    return x


@dataclass(frozen=True)
class Case:
    """One kernel of the matrix: a primitive on a dtype (for a cast, to `target`)."""

    family: str
    primitive: Primitive
    dtype: np.dtype
    target: np.dtype | None = None

    def __str__(self) -> str:
        to = f"->{self.target}" if self.target is not None else ""
        return f"{self.primitive.name}-{self.dtype}{to}"

    def text(self) -> str:
        arity = 2 if self.family == "binary" else 1
        params = {"dtype": self.target} if self.target is not None else None
        return op_text(self.primitive.name, [((None,), self.dtype)] * arity, params)

    def operands(self) -> tuple[np.ndarray, ...]:
        if self.family == "binary":
            return binary_operands(self.primitive, self.dtype)
        if self.family == "casts":
            return (cast_operand(self.dtype, self.target),)
        return (values(self.dtype),)

    def expected(self, operands: Sequence[np.ndarray]) -> np.ndarray:
        params = {"dtype": self.target} if self.target is not None else {}
        return reference(self.primitive.name, *operands, **params)

    def atol(self) -> float | None:
        """sin and cos near their zeros: an absolute tolerance."""
        if self.primitive in (sin_p, cos_p):
            return {F32: 1e-7, F64: 1e-15}.get(self.dtype)
        return None


def cases(family: str, target: str) -> list[Case]:
    """Every case of `family` for `target` ("cpu" or "emulated")."""
    if family == "casts":
        targets = dtypes.ALL if target == "cpu" else EMULATED_CAST_TARGETS
        return [Case(family, cast_p, s, t) for s in dtypes.ALL for t in targets]
    names = UNARY if family == "unary" else BINARY
    return [Case(family, ELEMENTWISE[n], d) for n in names for d in dtypes.ALL
            if d in ELEMENTWISE[n].operand_dtypes]


def kind_of(dtype: np.dtype) -> str:
    return next(kind for kind, members in KINDS.items() if dtype in members)


def representatives(matrix: Sequence[Case]) -> list[Case]:
    """A case per primitive and kind of dtype it accepts (for a cast: per source and kind
    of target), the dtype of each kind taken in turn over the primitives in order; and, for
    a kind with more dtypes than primitives to take them (the narrow ones, which only the
    comparisons for equality accept), the first case of each dtype still missing: every
    dtype and every cast target of the matrix is among them."""
    groups: dict[tuple, list[Case]] = {}
    for case in matrix:
        if case.target is not None:
            key = (case.primitive.name, str(case.dtype), kind_of(case.target))
        else:
            key = (case.primitive.name, kind_of(case.dtype))
        groups.setdefault(key, []).append(case)
    turns: Counter = Counter()
    chosen = []
    for (*_, kind), group in groups.items():
        chosen.append(group[turns[kind] % len(group)])
        turns[kind] += 1
    for case in matrix:
        if (case.dtype not in {c.dtype for c in chosen}
                or case.target not in {c.target for c in chosen}):
            chosen.append(case)
    return chosen


@dataclass
class Runner:
    """Compiles a case's kernel for one target and checks it on the case's operands."""

    target: str

    def __post_init__(self) -> None:
        self.compiler = CPUTarget() if self.target == "cpu" else EmulatedLaunch()

    def check(self, case: Case) -> None:
        """Raise AssertionError where the kernel's results differ from NumPy's."""
        operands = case.operands()
        want = case.expected(operands)
        kernel = self.compiler.compile(function(case.text()))
        if self.target == "cpu":
            assert_same(kernel(*operands)[0], want, atol=case.atol())
            return
        for grid, block in GRIDS:  # outputs start as garbage
            out = np.full(want.shape, 7, want.dtype)
            kernel.launch(list(operands), [out], grid, block)
            assert_same(out, want, atol=case.atol())


def run(targets: Sequence[str], families: Sequence[str], only: str | None,
        report: Callable[[str, Case, str], None]) -> dict[str, Counter]:
    """Every selected case on every target; `report(target, case, failure)` per failure.
    The counts of outcomes per ``family target`` row."""
    counts: dict[str, Counter] = {}
    pattern = re.compile(only) if only else None
    for target in targets:
        runner = Runner(target)
        for family in families:
            row = counts.setdefault(f"{family} {target}", Counter())
            for case in cases(family, target):
                if pattern is not None and not pattern.search(str(case)):
                    continue
                try:
                    runner.check(case)
                except (AssertionError, ValueError, TypeError, NotImplementedError) as error:
                    row["failed"] += 1
                    report(target, case, str(error).strip().splitlines()[0][:200])
                else:
                    row["passed"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.kernel_matrix",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"comma-separated, of: {', '.join(TARGETS)}")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, of: {', '.join(FAMILIES)}")
    parser.add_argument("--only", default=None,
                        help="cases whose name (e.g. add-float32, cast-int8->bool) matches")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(targets) - set(TARGETS)) + sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown targets or families {unknown}")
    failures: list[str] = []

    def report(target: str, case: Case, failure: str) -> None:
        failures.append(f"{target} {case}: {failure}")
        print(f"  FAIL {failures[-1]}", file=sys.stderr, flush=True)

    counts = run(targets, families, args.only, report)
    print("the kernel matrix against NumPy's kernels")
    print_counts("family target", counts, counts, OUTCOMES, {}, 16)
    for failure in failures:
        print(f"  {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
