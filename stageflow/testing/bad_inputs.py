"""Bad arguments to staged functions, and the campaign that calls with them.

A case is one call of a small staged function (`TARGETS`: elementwise with broadcasting,
matmul, a float64 reduction, a captured variable updated in place, a variable argument,
a keyword-only parameter) made one way (`WAYS`: with no signature, with a signature of
known dims, with one of unknown dims; compiled or interpreted with ``jit=False``) with an
argument drawn from a family of bad ones (`FAMILIES`: wrong rank, dims or dtype, objects,
strings, None, lists ragged or not, scalars, ``__array__`` objects, strided and negative
strides views, empty and huge arrays, NaN and infinities, read-only arrays, the other byte
order, tensors on another device, variables where tensors go and the reverse, too many,
too few and unknown arguments). The same call is made eagerly, on its own fresh
variables, as the reference. Each case runs in a child process
(`stageflow.testing.isolated`), so a crash is counted. Outcomes:

- **ok**: the staged call returned and agrees with the eager call (NaN where it has NaN,
  within 1e-5 relative elsewhere), results and variables alike, or the eager call raised
  and the staged one accepted a documented conversion (a list or number for a
  ``TensorSpec``, as TensorFlow converts it);
- **clear error**: the staged call raised an exception that is not one of the raw types
  internals raise (`RAW`: KeyError, AttributeError, IndexError, ...), does not say
  "internal error", *names where* (the function's name, one of its parameter names as
  a word, or the line of the user's source, ``bad_inputs.py:N``) and *says what* (a
  dtype, a shape, or words such as expected, must, cannot, missing, unexpected);
- **unclear error**: any other exception;
- **wrong result**: both returned, and the staged results or variables differ from
  eager's;
- **crash** (the child died) and **hang** (no result in the timeout).

The test suite runs a slice (``tests/testing/test_bad_inputs.py``); a campaign runs many,
with a seed never used before::

    python -m stageflow.testing.bad_inputs --count 2000 [--seed N]
"""

from __future__ import annotations

import argparse
import inspect
import linecache
import random
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.testing.campaign import add_seed, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import Died, Hung, run_isolated

RAW = (KeyError, AttributeError, IndexError, AssertionError, NameError, UnboundLocalError,
       RecursionError, SystemError, StopIteration, ZeroDivisionError)
_SAYS_WHAT = re.compile(
    r"expect|must|cannot|can.t|unexpected|missing|required|unsupported|not supported"
    r"|too many|multiple values|differ|mismatch|incompatible|out of range|dtype|shape"
    r"|\(\d|\[\d|float|int|bool", re.IGNORECASE)
OUTCOMES = ["ok", "clear error", "unclear error", "wrong result", "crash", "hang"]


# -- the staged functions --------------------------------------------------------------------

# The functions are the user's code: compiled from this text under a file name of their
# own, so that errors and locations name their lines as they name a user's.
SOURCE_NAME = "<bad_inputs targets>"
SOURCE = """\
import stageflow as sf


def scale_shift(features, offsets):
    return features * 2.0 + offsets


def project(features, weights):
    return sf.matmul(features, weights)


def row_sums(values):
    return sf.reduce_sum(values, axis=-1)


def scaled(features, *, scale=2.0):
    return features * scale


def bump(state, delta):
    state.assign_add(delta)
    return state.read_value() * 2.0


def accumulator(total):
    def accumulate(features):
        total.assign_add(sf.reduce_sum(features))
        return features * total.read_value()
    return accumulate
"""
linecache.cache[SOURCE_NAME] = (len(SOURCE), None, SOURCE.splitlines(True), SOURCE_NAME)
USER: dict[str, Any] = {}
exec(compile(SOURCE, SOURCE_NAME, "exec"), USER)  # noqa: S102 - the campaign's own text


@dataclass(frozen=True)
class Target:
    """A function, the shapes and dtypes of its good tensor arguments, and the variables
    it closes over (`make(variables)` builds it) or takes (`variable_args`)."""

    make: Callable[[list[sf.Variable]], Callable]
    args: tuple[tuple[tuple[int, ...], np.dtype], ...]
    captured: tuple[tuple[tuple[int, ...], np.dtype], ...] = ()
    variable_args: tuple[int, ...] = ()
    signatures: bool = True


F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
TARGETS: dict[str, Target] = {
    "scale_shift": Target(lambda v: USER["scale_shift"], (((3, 4), F32), ((4,), F32))),
    "project": Target(lambda v: USER["project"], (((2, 3), F32), ((3, 5), F32))),
    "row_sums": Target(lambda v: USER["row_sums"], (((4, 3), F64),)),
    "scaled": Target(lambda v: USER["scaled"], (((2, 2), F32),)),
    "accumulate": Target(lambda v: USER["accumulator"](v[0]), (((3,), F32),),
                         captured=(((), F32),)),
    "bump": Target(lambda v: USER["bump"], (((3,), F32), ((3,), F32)), variable_args=(0,),
                   signatures=False),
}
WAYS = {f"{sig}, {'compiled' if jit else 'interpreted'}": (sig, jit)
        for sig in ("no signature", "known dims", "unknown dims") for jit in (True, False)}


# -- the bad arguments ----------------------------------------------------------------------

@dataclass
class Call:
    """One call's arguments, built afresh for each of the eager and the staged call (each
    gets its own variables)."""

    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)


class ArrayLike:
    """An object NumPy converts through ``__array__``."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype)


def _view(array: np.ndarray, rng: random.Random) -> np.ndarray:
    """The same values as a non-contiguous view: every other element of a doubled array,
    read forwards or (negative strides) backwards."""
    if array.ndim == 0:
        return array
    if rng.random() < 0.5:
        return np.repeat(array, 2, axis=-1)[..., ::2]
    return np.repeat(np.flip(array, -1), 2, axis=-1)[..., ::-2]


def _reshaped(shape: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
    kind = rng.choice(["add", "drop", "dim"]) if shape else "add"
    if kind == "add":
        at = rng.randint(0, len(shape))
        return shape[:at] + (rng.choice([1, 2, 3]),) + shape[at:]
    at = rng.randrange(len(shape))
    if kind == "drop":
        return shape[:at] + shape[at + 1:]
    return shape[:at] + (rng.choice([d for d in (0, 1, 2, 5, 7) if d != shape[at]]),) + \
        shape[at + 1:]


WRONG_DTYPES = [np.int32, np.int64, np.float16, np.float32, np.float64, np.bool_, np.uint8,
                np.complex64, np.int8]


def _bad_value(family: str, good: np.ndarray, rng: random.Random) -> Any:
    """A bad stand-in for the good argument `good`, from `family`."""
    shape, dtype = good.shape, good.dtype
    if family == "wrong shape":
        return np.ones(_reshaped(shape, rng), dtype)
    if family == "wrong dtype":
        return good.astype(rng.choice([d for d in WRONG_DTYPES if np.dtype(d) != dtype]))
    if family == "object array":
        return np.array(good.tolist() if rng.random() < 0.5 else [object()] * 2, dtype=object)
    if family == "string":
        return rng.choice(["1.0", "abc", np.array(["a", "b"]), np.array(good, dtype=str)])
    if family == "None":
        return None
    if family == "list":
        return good.tolist()
    if family == "ragged list":
        return [[1.0, 2.0], [3.0]] if rng.random() < 0.5 else [good.tolist(), [1.0]]
    if family == "scalar":
        return rng.choice([1, 2.5, True, 1 + 2j, np.float32(1.5), np.float64(2.0), np.int32(3)])
    if family == "array-like":
        return ArrayLike(good if rng.random() < 0.5 else np.ones(_reshaped(shape, rng), dtype))
    if family == "strided view":
        return _view(good, rng)
    if family == "empty":
        if not shape:
            return np.ones((0,), dtype)
        at = rng.randrange(len(shape))
        return np.ones(shape[:at] + (0,) + shape[at + 1:], dtype)
    if family == "huge":
        dims = rng.choice([(2**33,), (2**31, 4), (2**40, 2**10), (2**59,)])
        return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), dims, (0,) * len(dims))
    if family == "non-finite":
        bad = good.copy()
        if bad.dtype.kind == "f" and bad.size:
            bad.flat[rng.randrange(bad.size)] = rng.choice([np.nan, np.inf, -np.inf])
        return bad
    if family == "read-only":
        bad = good.copy()
        bad.setflags(write=False)
        return bad
    if family == "byte order":
        return good.astype(dtype.newbyteorder(">" if dtype.byteorder != ">" else "<"))
    if family == "other device":
        return sf.constant(good).to(rng.choice(["/gpu:0", "/cpu:1"]))
    if family == "variable for a tensor":
        return sf.Variable(good)
    if family == "nest":
        return rng.choice([(good, good), {"a": good}, [sf.constant(good)]])
    raise ValueError(family)


VALUE_FAMILIES = ["wrong shape", "wrong dtype", "object array", "string", "None", "list",
                  "ragged list", "scalar", "array-like", "strided view", "empty", "huge",
                  "non-finite", "read-only", "byte order", "other device",
                  "variable for a tensor", "nest"]
CALL_FAMILIES = ["too many", "too few", "unknown keyword", "duplicate keyword"]
VARIABLE_FAMILIES = ["variable of another shape", "tensor for a variable"]
FAMILIES = VALUE_FAMILIES + CALL_FAMILIES + VARIABLE_FAMILIES


@dataclass(frozen=True)
class Case:
    """What one child call does; drawn from (campaign seed, index) alone, so that a child
    and its parent agree on it."""

    target: str
    way: str
    family: str
    seed: int

    @staticmethod
    def draw(campaign_seed: int, index: int) -> Case:
        rng = random.Random(f"{campaign_seed}:{index}")
        target = rng.choice(sorted(TARGETS))
        ways = [w for w, (sig, _) in WAYS.items()
                if TARGETS[target].signatures or sig == "no signature"]
        families = VALUE_FAMILIES + (VARIABLE_FAMILIES if TARGETS[target].variable_args
                                     else CALL_FAMILIES)
        return Case(target, rng.choice(ways), rng.choice(families), rng.getrandbits(32))

    def __str__(self) -> str:
        return f"{self.target}, {self.way}, {self.family} (seed {self.seed})"


def _good_args(target: Target, rng: random.Random) -> list[np.ndarray]:
    values = []
    for shape, dtype in target.args:
        values.append(np.asarray(rng.random() * 4 - 2 + np.arange(int(np.prod(shape)))
                                 .reshape(shape) / 4, dtype))
    return values


def _builder(case: Case) -> Callable[[], Call]:
    """A function making the case's call afresh (new variables, new arrays)."""
    target = TARGETS[case.target]

    def build() -> Call:
        rng = random.Random(case.seed)
        goods = _good_args(target, rng)
        args: list[Any] = [sf.constant(g) for g in goods]
        for i in target.variable_args:
            args[i] = sf.Variable(goods[i])
        kwargs: dict[str, Any] = {}
        family = case.family
        at = rng.choice([i for i in range(len(args)) if i not in target.variable_args])
        if family in VALUE_FAMILIES:
            if case.target == "scaled" and rng.random() < 0.3:
                kwargs["scale"] = _bad_value(family, np.float32(2.0), rng)
            else:
                args[at] = _bad_value(family, goods[at], rng)
        elif family == "too many":
            args.append(goods[0])
        elif family == "too few":
            args.pop(at)
        elif family == "unknown keyword":
            kwargs[rng.choice(["feature", "bias", "training"])] = goods[0]
        elif family == "duplicate keyword":
            kwargs[_parameters(case)[0]] = goods[0]
        elif family == "variable of another shape":
            args[0] = sf.Variable(np.ones(_reshaped(goods[0].shape, rng), goods[0].dtype))
        elif family == "tensor for a variable":
            args[0] = sf.constant(goods[0])
        return Call(args, kwargs)
    return build


def _parameters(case: Case) -> list[str]:
    function = TARGETS[case.target].make([sf.Variable(np.float32(0))])
    return list(inspect.signature(function).parameters)


def _staged(case: Case, function: Callable) -> Callable:
    signature, jit = WAYS[case.way]
    if signature == "no signature":
        return sf.function(function, jit=jit)
    specs = [sf.TensorSpec([None] * len(shape) if signature == "unknown dims" else shape,
                           dtype) for shape, dtype in TARGETS[case.target].args]
    return sf.function(function, input_signature=specs, jit=jit)


# -- running and judging one case -----------------------------------------------------------

_OP_CALL = re.compile(r"\w+\(\w+\[[^\]]*\]")  # an op and its operands: add(float32[3], ...


def unclear_because(error: BaseException, name: str, parameters: list[str],
                    eager_error: BaseException | None) -> str | None:
    """Why `error`, raised by the staged function `name`, is unclear, or None if clear.

    The user's function failing in its own code (the innermost frame is the user's, and
    the eager call failed with the same type) is as clear as it is eagerly."""
    frames = traceback.extract_tb(error.__traceback__)
    if (frames and frames[-1].filename == SOURCE_NAME and eager_error is not None
            and type(eager_error) is type(error)):
        return None
    if isinstance(error, RAW):
        return f"raw {type(error).__name__}"
    message = str(error)
    if "internal error" in message.lower():
        return "says internal error"
    where = (name in message or SOURCE_NAME in message or _OP_CALL.search(message)
             or any(re.search(rf"\b{re.escape(p)}\b", message) for p in parameters))
    if not where:
        return "names neither the function, a parameter, an op nor the user's line"
    if not _SAYS_WHAT.search(message):
        return "does not say what was expected"
    return None


def _as_staged_sees(case: Case, call: Call) -> Call:
    """The call's arguments as the staged call converts them, for the eager reference:
    NumPy arrays made tensors, and with a signature any value for a `TensorSpec`
    converted to its dtype (as documented); what does not convert is left as it is."""
    signature, _ = WAYS[case.way]
    specs = TARGETS[case.target].args

    def convert(value: Any, i: int) -> Any:
        if isinstance(value, sf.Tensor | sf.Variable):
            return value
        try:
            if signature != "no signature" and i < len(specs):
                return sf.convert_to_tensor(value, specs[i][1])
            return sf.constant(value) if isinstance(value, np.ndarray) else value
        except (TypeError, ValueError, MemoryError):
            return value

    return Call([convert(a, i) for i, a in enumerate(call.args)],
                {k: convert(v, len(specs) if k == "scale" else 0)
                 for k, v in call.kwargs.items()})


def _numpy_leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, list | tuple):
        return [a for v in value for a in _numpy_leaves(v)]
    if isinstance(value, dict):
        return [a for k in sorted(value) for a in _numpy_leaves(value[k])]
    return [np.asarray(value)]


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if not np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case, in this process."""
    target = TARGETS[case.target]
    build = _builder(case)
    name = target.make([sf.Variable(np.zeros(s, d)) for s, d in target.captured]).__name__
    parameters = _parameters(case)

    def attempt(staged: bool) -> tuple[list[np.ndarray] | None, BaseException | None]:
        captured = [sf.Variable(np.ones(s, d)) for s, d in target.captured]
        function = target.make(captured)
        if staged:
            function = _staged(case, function)
        call = build() if staged else _as_staged_sees(case, build())
        try:
            result = function(*call.args, **call.kwargs)
            states = [v.numpy() for v in captured]
            states += [a.numpy() for a in call.args if isinstance(a, sf.Variable)]
            return _numpy_leaves(result) + states, None
        except Exception as error:  # noqa: BLE001 - judged by the caller
            return None, error

    want, eager_error = attempt(staged=False)
    got, error = attempt(staged=True)
    if error is not None:
        why = unclear_because(error, name, parameters, eager_error)
        detail = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        return ("unclear error", f"{why}: {detail}") if why else ("clear error", detail)
    if eager_error is not None or _same(got, want):
        return "ok", ""
    return "wrong result", f"staged {got!r} eager {want!r}"[:600]


def _setup() -> None:
    """In every child: the devices the families place tensors on."""
    sf.config.set_logical_device_count("CPU", 2)
    sf.config.set_emulated_gpu_count(1)


def _run_indexed(item: tuple[int, int]) -> tuple[str, str]:
    return run_case(Case.draw(*item))


# -- the campaign ---------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per family, and the first few cases of each bad outcome."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, outcome: str, detail: str) -> None:
        self.counts.setdefault(case.family, Counter())[outcome] += 1
        if outcome not in ("ok", "clear error") and len(self.examples) < 20:
            self.examples.append(f"{outcome}: {case}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 200,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` cases drawn from `campaign_seed`, run in child processes, tallied."""
    items = [(campaign_seed, i) for i in range(count)]
    results = run_isolated(_run_indexed, items, batch=batch, setup=_setup, progress=progress)
    tally = Tally()
    for item, result in zip(items, results, strict=True):
        if isinstance(result, Died):
            result = ("crash", f"{result.how}{'' if result.alone else ' (after others)'}")
        elif isinstance(result, Hung):
            result = ("hang", f"no result in {result.seconds:.0f} s")
        tally.add(Case.draw(*item), *result)
    return tally


def print_table(tally: Tally) -> None:
    short = {"clear error": "clear", "unclear error": "unclear", "wrong result": "wrong"}
    print_counts("family", FAMILIES, tally.counts, OUTCOMES, short, 26)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.bad_inputs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()

    progress = report_progress("calls")

    tally = run_campaign(args.count, campaign_seed, progress=progress)
    print(f"bad inputs to staged functions, seed {campaign_seed}, {args.count} calls, "
          f"{time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    bad = sum(tally.total(o) for o in ("unclear error", "wrong result", "crash", "hang"))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
