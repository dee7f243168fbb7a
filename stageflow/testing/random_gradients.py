"""Random programs' gradients against finite differences, and the campaign that runs them.

The programs are drawn by the generator of `stageflow.testing.random_ops`, from its
pool-building steps that keep float64 values differentiable (elementwise ops, comparisons
feeding selects, reductions, arg-reductions feeding gathers, softmax, matmul and data
movement), over 1-3 float64 inputs of broadcastable shapes. The float inputs are then
replaced by generic values (uniform in [-2, 2) from the program's seed), because
hypothesis favours zeros and repeated values, which put most programs on a kink or a tie.

The loss is the sum of each float64 output reachable from an input times fixed random
weights. Its gradient with respect to every float64 input is computed five ways: eagerly by
`sf.GradientTape`, by staged functions returning the gradient (compiled, `jit=False`, and
compiled with some input dims unknown), and as a Hessian-vector product of nested tapes
(eagerly). Each is checked against central finite differences in float64 along a random
direction per input, ``<grad, v> ~ (f(x + h v) - f(x - h v)) / 2h``, and each staged
gradient against the eager one within a tight tolerance.

The loss is not differentiable everywhere (ties of max and min, relu or abs at 0, floor,
sign, a comparison feeding a select near its switch). A direction is skipped, and counted
as such, when the central differences at steps `h` and `2h` disagree (a kink or a jump
within `2h` of the point), or when the one-sided differences say there is a kink at the
point itself (``(f(x+h) - f(x-h) - 2 f(x)) / h`` does not halve with `h`); both tests use
the comparison's own tolerance, so a kink they miss is too small to make a mismatch. A
staged gradient's stated refusal (`NotImplementedError`, e.g. a concat's gradient along an
unknown dim) is counted as unsupported, with its reason, not as an error.

    python -m stageflow.testing.random_gradients --count 2000 [--seed N]

Needs the test extra (hypothesis).
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.testing.campaign import add_seed, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.random_ops import (
    F64,
    Program,
    Run,
    add_input,
    op_arg_reduce,
    op_binary,
    op_broadcast_to,
    op_compare,
    op_complex,
    op_concat,
    op_gather,
    op_matmul,
    op_pad,
    op_reduce,
    op_reshape,
    op_slice,
    op_softmax,
    op_transpose,
    op_unary,
    op_where,
)

__all__ = ["WAYS", "Case", "Tally", "differentiable_programs", "main", "run_campaign"]

# The steps of random_programs that keep a float64 pool differentiable: no casts (float32
# values would need float32 tolerances), no random draws and no variables (an assigned
# value reaches a later read without the tape seeing it).
DIFFERENTIABLE_OPS = [op_unary, op_binary, op_compare, op_where, op_reduce, op_arg_reduce,
                      op_softmax, op_matmul, op_transpose, op_reshape, op_slice, op_concat,
                      op_pad, op_gather, op_broadcast_to, op_complex]

STEP = 1e-5  # and 2 * STEP: truncation ~ h^2 f''' / 6, rounding ~ 1e-16 |f| / h
RTOL = 1e-6  # finite differences against a gradient, relative to both
ATOL = 1e-7  # absolute, scaled by 1 + |loss| for the rounding of large intermediates
STAGED_RTOL = 1e-9  # a staged gradient against the eager one


@st.composite
def differentiable_programs(draw: Any, max_steps: int = 8) -> Program:
    """A random program over 1-3 float64 inputs returning float64 values computed from
    them (an input itself when no step computed one)."""
    p = Program(seed=draw(st.integers(0, 2**32 - 1)))
    count = draw(st.integers(1, 3))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=4))
    for shape in shapes.input_shapes:
        add_input(draw, p, shape, F64)
    for _ in range(draw(st.integers(1, max_steps))):
        draw(st.sampled_from(DIFFERENTIABLE_OPS))(draw, p)
    reachable = _reachable(p)
    candidates = [i for i in range(len(p.pool)) if reachable[i] and p.pool[i].dtype == F64]
    computed = [i for i in candidates if p.steps[i].operands] or candidates
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    p.outputs = tuple(sorted(outputs, reverse=True))
    rng = np.random.default_rng(p.seed)
    p.inputs = [rng.uniform(-2.0, 2.0, x.shape) if x.dtype == F64 else x for x in p.inputs]
    return p


def _reachable(p: Program) -> list[bool]:
    """Which pool values depend on a float64 input (every step pushes one value)."""
    reachable: list[bool] = []
    for step, value in zip(p.steps, p.pool, strict=True):
        is_input = not step.operands and step.text.startswith("arg")
        reachable.append((is_input and value.dtype == F64)
                         or any(reachable[i] for i in step.operands))
    return reachable


@dataclass
class Case:
    """One program with what its loss needs: the weights of its outputs, which arguments
    are differentiated, and a direction for each of them."""

    program: Program
    weights: list[np.ndarray]
    wrt: list[int]
    directions: list[np.ndarray]

    @classmethod
    def of(cls, program: Program) -> Case:
        rng = np.random.default_rng(program.seed + 1)
        weights = [rng.standard_normal(program.pool[i].shape) for i in program.outputs]
        wrt = [i for i, x in enumerate(program.inputs) if x.dtype == F64]
        directions = [rng.standard_normal(program.inputs[i].shape) for i in wrt]
        return cls(program, weights, wrt, directions)

    def loss(self, args: list[Any]) -> Any:
        outputs = self.program(Run(tuple(args), [], None))
        total = sf.constant(np.zeros((), F64))
        for y, w in zip(outputs, self.weights, strict=True):
            total = total + sf.reduce_sum(y * sf.constant(w))
        return total

    def gradients(self, args: list[Any]) -> list[Any]:
        """d loss / d args[i] for i in `wrt` (zeros where the tape sees no connection)."""
        with sf.GradientTape() as tape:
            tape.watch([args[i] for i in self.wrt])
            loss = self.loss(args)
        grads = tape.gradient(loss, [args[i] for i in self.wrt])
        return [sf.zeros_like(args[i]) if g is None else g
                for i, g in zip(self.wrt, grads, strict=True)]

    def hessian_vector(self, args: list[Any]) -> list[Any]:
        """H v for the directions v, by a tape over a tape."""
        with sf.GradientTape() as outer:
            outer.watch([args[i] for i in self.wrt])
            directional = self.directional(args)
        grads = outer.gradient(directional, [args[i] for i in self.wrt])
        return [sf.zeros_like(args[i]) if g is None else g
                for i, g in zip(self.wrt, grads, strict=True)]

    def directional(self, args: list[Any]) -> Any:
        """<grad, v> summed over the inputs."""
        total = sf.constant(np.zeros((), F64))
        for g, v in zip(self.gradients(args), self.directions, strict=True):
            total = total + sf.reduce_sum(g * sf.constant(v))
        return total

    def arguments(self, shifts: dict[int, np.ndarray] | None = None) -> list[Any]:
        shifts = shifts or {}
        return [sf.constant(x + shifts[i] if i in shifts else x)
                for i, x in enumerate(self.program.inputs)]


def staged_gradients(**options: Any) -> Callable[[Case], Callable[..., list[Any]]]:
    def make(case: Case) -> Callable[..., list[Any]]:
        return sf.function(lambda *args: case.gradients(list(args)), **options)
    return make


WAYS: dict[str, Callable[[Case], Callable[..., list[Any]]] | None] = {
    "eager": lambda case: lambda *args: case.gradients(list(args)),
    "compiled": staged_gradients(),
    "interpreted": staged_gradients(jit=False),
    "unknown dims": lambda case: staged_gradients(
        input_signature=case.program.signature())(case),
    "second order": None,  # eager H v against differences of the eager gradient
}


class Mismatch(AssertionError):
    """A gradient that disagrees with finite differences or with the eager gradient."""


def check_direction(f: Callable[[dict[int, np.ndarray]], float], at: float, i: int,
                    v: np.ndarray, analytic: float, what: str) -> bool:
    """Whether `<grad, v> = analytic` could be checked against central differences of `f`
    along `v` in argument `i` (False where `f` is not differentiable there); raises
    `Mismatch` where it disagrees."""
    values = {k: f({i: k * STEP * v}) for k in (-2, -1, 1, 2)}
    central = [(values[k] - values[-k]) / (2 * k * STEP) for k in (1, 2)]
    kink = [(values[k] + values[-k] - 2 * at) / (k * STEP) for k in (1, 2)]

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= RTOL * (abs(a) + abs(b)) + ATOL * (1 + abs(at))

    if not close(central[0], central[1]) or not close(kink[1], 2 * kink[0]):
        return False
    if not close(analytic, central[0]):
        raise Mismatch(f"{what} of argument {i} along v: {analytic!r}, finite differences "
                       f"{central[0]!r} (step {STEP}), {central[1]!r} (step {2 * STEP})")
    return True


def loss_value(case: Case, shifts: dict[int, np.ndarray]) -> float:
    return float(case.loss(case.arguments(shifts)).numpy())


def check_gradients(case: Case, grads: list[np.ndarray], reference: list[np.ndarray] | None
                    ) -> int:
    """How many directions were skipped; raises `Mismatch` where `grads` disagree with
    finite differences of the loss, or with the eager `reference`."""
    for k, (g, i) in enumerate(zip(grads, case.wrt, strict=True)):
        x = case.program.inputs[i]
        if g.shape != x.shape or g.dtype != x.dtype:
            raise Mismatch(f"gradient of argument {i}: {g.dtype}{list(g.shape)} for "
                           f"{x.dtype}{list(x.shape)}")
        if reference is not None:
            w = reference[k]
            tol = STAGED_RTOL * (1 + float(np.max(np.abs(w), initial=0.0)))
            if not np.allclose(g, w, rtol=STAGED_RTOL, atol=tol, equal_nan=True):
                raise Mismatch(f"gradient of argument {i} differs from eager's by "
                               f"{np.max(np.abs(g - w))!r}:\n{g!r}\n{w!r}")
    at = loss_value(case, {})
    skipped = 0
    for g, i, v in zip(grads, case.wrt, case.directions, strict=True):
        analytic = float(np.sum(g * v))
        if not check_direction(lambda s: loss_value(case, s), at, i, v, analytic, "gradient"):
            skipped += 1
    return skipped


def check_second_order(case: Case) -> int:
    """H v by nested tapes against differences of the eager <grad, v>; directions skipped."""
    hv = [h.numpy() for h in case.hessian_vector(case.arguments())]

    def directional(shifts: dict[int, np.ndarray]) -> float:
        return float(case.directional(case.arguments(shifts)).numpy())

    at = directional({})
    skipped = 0
    for h, i, v in zip(hv, case.wrt, case.directions, strict=True):
        analytic = float(np.sum(h * v))
        if not check_direction(directional, at, i, v, analytic, "H v"):
            skipped += 1
    return skipped


@dataclass
class Tally:
    """What one way did over a campaign, with the directions it could not check."""

    programs: int = 0
    mismatches: int = 0
    errors: int = 0
    unsupported: int = 0
    skipped: int = 0
    seconds: float = 0.0
    first: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)


def run_way(case: Case, way: str, reference: list[np.ndarray] | None) -> tuple[
        int, list[np.ndarray]]:
    """Directions skipped and the gradients of one way (H v for the second order)."""
    make = WAYS[way]
    if make is None:
        return check_second_order(case), []
    grads = [g.numpy() for g in make(case)(*case.arguments())]
    return check_gradients(case, grads, reference), grads


def run_campaign(count: int, campaign_seed: int, ways: list[str],
                 progress: Callable[[int], None] | None = None) -> dict[str, Tally]:
    """`count` random programs from `campaign_seed`, each differentiated every way of
    `ways`; per way, how many ran, disagreed, raised, and how many directions were skipped.
    Staged ways are compared with the eager gradient when the eager way ran and passed."""
    tallies = {way: Tally() for way in ways}
    done = [0]

    @seed(campaign_seed)
    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(differentiable_programs())
    def one(program: Program) -> None:
        case = Case.of(program)
        reference = None
        for way in ways:
            tally = tallies[way]
            start = time.perf_counter()
            try:
                staged = WAYS[way] is not None and way != "eager"
                skipped, grads = run_way(case, way, reference if staged else None)
                tally.skipped += skipped
                if way == "eager":
                    reference = grads
            except NotImplementedError as refusal:  # a staged gradient's stated limit
                tally.unsupported += 1
                tally.reasons[re.sub(r"[-\d?(), ]+", " ", str(refusal))[:80]] += 1
            except Mismatch as error:
                tally.mismatches += 1
                if len(tally.first) < 3:
                    tally.first.append(f"{program!r}\n  {str(error)[:600]}")
            except Exception as error:  # noqa: BLE001 - counted and shown, not fatal
                tally.errors += 1
                if len(tally.first) < 3:
                    tally.first.append(f"{program!r}\n  {type(error).__name__}: "
                                       f"{str(error)[:400]}")
            tally.programs += 1
            tally.seconds += time.perf_counter() - start
        done[0] += 1
        if progress is not None:
            progress(done[0])

    try:
        one()
    except UnsatisfiedAssumption:
        pass
    return tallies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.random_gradients",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    add_seed(parser)
    parser.add_argument("--ways", default=",".join(WAYS),
                        help=f"comma-separated, of: {', '.join(WAYS)}")
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        parser.error(f"unknown ways {unknown} (have: {', '.join(WAYS)})")
    print(f"random gradients against finite differences, seed {campaign_seed}", flush=True)
    start = time.perf_counter()

    progress = report_progress("programs", 100)

    tallies = run_campaign(args.count, campaign_seed, ways, progress)
    print(f"{time.perf_counter() - start:.0f} s")
    print(f"  {'way':14} {'programs':>9} {'mismatches':>11} {'errors':>7} {'unsupported':>12} "
          f"{'skipped':>8} {'seconds':>8}")
    for way, tally in tallies.items():
        print(f"  {way:14} {tally.programs:9d} {tally.mismatches:11d} {tally.errors:7d} "
              f"{tally.unsupported:12d} {tally.skipped:8d} {tally.seconds:8.1f}")
    for way, tally in tallies.items():
        for text, n in tally.reasons.most_common():
            print(f"  {way} unsupported, {n}x: {text}")
    for way, tally in tallies.items():
        for text in tally.first:
            print(f"\n{way}: {text}")
    return 0 if all(t.mismatches == t.errors == 0 for t in tallies.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
