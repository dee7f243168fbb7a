"""Large eager elementwise ops on one-op compiled programs: every op that takes part computes
NumPy's numbers bit for bit (infinities, signed zeros, subnormals, broadcasting; NaNs where
NumPy's are, whatever their sign and payload); a
signature's trial runs NumPy while the program compiles, then both in turns, and keeps the
faster; small ops, transcendental ones and all of them with `sf.config.eager_compile` off
stay on NumPy's kernels."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.core import config
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.runtime import eager_compiles, eager_kernels
from stageflow.runtime.eager import EagerTrace
from stageflow.runtime.eager_kernels import MIN_ELEMENTS, TRIAL_CALLS, exact

EXACT = sorted(p.name for p in REGISTRY.values() if exact(p))
FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-310, 0.5, -0.5, 1.5, -2.5,
           3.0, -7.0, 1e30, -1e300]
# Operand shapes: equal, one broadcast along the rows, one a scalar.
LAYOUTS = [((64, 32), (64, 32)), ((64, 32), (1, 32)), ((64, 32), ())]
_programs: dict[tuple, eager_compiles._ProgramOp] = {}


def operand_dtypes(name: str) -> list[list[np.dtype]]:
    """The operand dtype lists of `name`'s signatures on floats and booleans."""
    primitive = REGISTRY[name]
    if name == "select":
        return [[np.dtype(np.bool_), d, d] for d in FLOATS]
    if name == "all_reduce":  # three replicas' values
        return [[d] * 3 for d in FLOATS]
    if name == "cast":
        return [[d] for d in [*FLOATS, np.dtype(np.bool_)]]
    allowed = [d for d in [*FLOATS, np.dtype(np.bool_)] if d in primitive.operand_dtypes]
    arity = 1 if _takes_one(primitive) else 2
    return [[d] * arity for d in allowed]


def _takes_one(primitive) -> bool:
    positional = [p for p in inspect.signature(primitive.shape_rule).parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD]
    return len(positional) == 1


def params_of(name: str) -> list[dict]:
    if name == "all_reduce":
        return [{"reduction": r} for r in ("sum", "mean", "max", "min")]
    return [{"dtype": d} for d in (np.float32, np.float64, np.bool_)] if name == "cast" else [{}]


def values(dtype: np.dtype, shape: tuple[int, ...], position: int, seed: int) -> np.ndarray:
    """The special values on a grid (operand 0 by rows, operand 1 by columns, so that every
    pair meets), the rest random."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    array = rng.standard_normal(shape) * 4
    flat = array.reshape(-1)
    grid = np.array(SPECIAL)
    pairs = np.repeat(grid, len(grid)) if position == 0 else np.tile(grid, len(grid))
    count = min(flat.size, pairs.size)
    flat[:count] = pairs[:count]
    with np.errstate(over="ignore"):
        return array.astype(dtype)


def program(name: str, arrays: list[np.ndarray], params: dict) -> eager_compiles._ProgramOp:
    key = (name, *[(a.dtype, a.shape) for a in arrays], *params.items())
    if key not in _programs:
        inputs = tuple(ShapedType(a.shape, a.dtype) for a in arrays)
        built = eager_compiles.one_op_program(REGISTRY[name], inputs, params)
        assert built is not None, f"{name} did not become one program"
        _programs[key] = built
    return _programs[key]


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, but for the sign and payload of NaNs (which NumPy does not define)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    want = np.ascontiguousarray(want)
    if got.dtype.kind == "f":
        nan = np.isnan(got)
        np.testing.assert_array_equal(nan, np.isnan(want))
        got, want = np.where(nan, 0, got), np.where(nan, 0, want)
    differ = got.view(np.uint8) != want.view(np.uint8)
    assert not differ.any(), f"{np.count_nonzero(differ)} bytes differ"


def cases(name: str):
    for dtypes, params, (first, second) in itertools.product(
            operand_dtypes(name), params_of(name), LAYOUTS):
        shapes = [first] if len(dtypes) == 1 else [first, second, *([first] * (len(dtypes) - 2))]
        if name == "select":  # (the condition first: the layouts' broadcast goes to y)
            shapes = [first, first, second]
        if name == "all_reduce":  # (a collective does not broadcast)
            shapes = [first] * len(dtypes)
        yield dtypes, params, shapes


def routable(name: str) -> bool:
    """Whether `name` has signatures of floats and booleans (the others never run compiled)."""
    return bool(operand_dtypes(name))


@pytest.mark.parametrize("name", [n for n in EXACT if routable(n)])
def test_each_exact_op_compiles_numpys_numbers_bit_for_bit(name):
    for dtypes, params, shapes in cases(name):
        arrays = [values(d, s, i, seed=i) for i, (d, s) in enumerate(zip(dtypes, shapes,
                                                                          strict=True))]
        with np.errstate(all="ignore"):
            want = REGISTRY[name].kernel(*arrays, **params)
            got = program(name, arrays, params)(*arrays)
        assert_same_bits(got, np.asarray(want))


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from([n for n in EXACT if routable(n)]), data=st.data())
def test_exact_ops_agree_with_numpy_on_any_values(name, data):
    dtypes, params, shapes = data.draw(st.sampled_from(list(cases(name))))
    arrays = []
    for dtype, shape in zip(dtypes, shapes, strict=True):
        elements = (st.booleans() if dtype == np.bool_ else
                    st.floats(width=8 * dtype.itemsize, allow_subnormal=True))
        arrays.append(data.draw(hnp.arrays(dtype, shape, elements=elements)))
    with np.errstate(all="ignore"):
        want = REGISTRY[name].kernel(*arrays, **params)
        got = program(name, arrays, params)(*arrays)
    assert_same_bits(got, np.asarray(want))


class FakeClock:
    """`time` for `eager_kernels`: each kernel call advances it by its given cost."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class Done:
    """A finished compile."""

    def __init__(self, result) -> None:
        self._result = result

    def done(self) -> bool:
        return True

    def result(self):
        return self._result


class Running(Done):
    def done(self) -> bool:
        return False


@pytest.mark.parametrize("program_faster", [True, False])
def test_a_trial_runs_numpy_while_compiling_then_keeps_the_faster(monkeypatch, program_faster):
    clock = FakeClock()
    monkeypatch.setattr(eager_kernels, "time", clock)
    calls = []

    def kernel(x):
        calls.append("numpy")
        clock.now += 2.0
        return x + 1

    def compiled(x):
        calls.append("program")
        clock.now += 1.0 if program_faster else 3.0
        return x + 1

    primitive = REGISTRY["relu"]
    monkeypatch.setattr(primitive, "kernel", kernel)
    routes: dict = {}
    trial = eager_kernels._Trial(primitive, {}, Running(None), routes, "key")
    routes["key"] = trial
    assert trial(1) == 2 and trial(1) == 2
    assert calls == ["numpy", "numpy"] and trial.seconds == [[], []]  # compiling: untimed
    trial.compiling = Done(compiled)
    while routes["key"] is trial:
        assert trial(1) == 2
    assert calls[2:] == ["numpy", "program"] * TRIAL_CALLS
    assert routes["key"] is (compiled if program_faster else None)


def test_a_trial_whose_op_is_not_one_program_keeps_numpy():
    routes: dict = {}
    trial = eager_kernels._Trial(REGISTRY["relu"], {}, Done(None), routes, "key")
    np.testing.assert_array_equal(trial(np.array([-1.0, 2.0])), [0.0, 2.0])
    assert routes == {"key": None}


def route_of(trace: EagerTrace, name: str, arrays: list[np.ndarray], params: dict):
    trace.process(REGISTRY[name], tuple(sf.constant(a) for a in arrays), params)
    key = (REGISTRY[name], *[(a.dtype, a.shape) for a in arrays], *params.items())
    return trace._routes[key]


def test_a_large_op_races_its_program_and_gives_numpys_bits_throughout():
    """Through the eager executor: the first call starts the compile, every call (NumPy's,
    the trial's turns, the route kept) gives NumPy's bits, and the route ends as the
    compiled program or NumPy's kernel."""
    trace = EagerTrace()
    rows = MIN_ELEMENTS // 64
    g = values(np.dtype(np.float32), (rows, 64), 0, seed=1)
    x = values(np.dtype(np.float32), (rows, 64), 1, seed=2)
    cond = x > 0
    zero = np.asarray(np.float32(0))
    want = REGISTRY["select"].kernel(cond, g, zero)
    routes = []
    for _ in range(2 * TRIAL_CALLS + 3):
        routes.append(route_of(trace, "select", [cond, g, zero], {}))
        got = trace.process(REGISTRY["select"], (sf.constant(cond), sf.constant(g),
                                                 sf.constant(zero)), {})
        assert_same_bits(got.numpy(), want)
        eager_kernels.settle()
    assert isinstance(routes[0], eager_kernels._Trial)
    assert isinstance(routes[-1], eager_compiles._ProgramOp) or routes[-1] is None
    assert isinstance(routes[0].compiling.result(), eager_compiles._ProgramOp)


def test_small_transcendental_and_switched_off_ops_stay_on_numpy(monkeypatch):
    trace = EagerTrace()
    small = np.ones((MIN_ELEMENTS // 2,), np.float32)
    large = np.ones((MIN_ELEMENTS,), np.float32)
    assert route_of(trace, "relu", [small], {}) is None
    assert route_of(trace, "exp", [large], {}) is None  # transcendental: its own polynomial
    assert route_of(trace, "maximum", [large, large], {}) is None  # signed zeros differ
    assert route_of(trace, "add", [large.astype(np.int32)] * 2, {}) is None  # integers
    assert isinstance(route_of(trace, "relu", [large], {}), eager_kernels._Trial)
    monkeypatch.setattr(config, "eager_compile", False)
    assert route_of(EagerTrace(), "relu", [large], {}) is None


@pytest.mark.parametrize("axes", [(0, 1, 2), (3,), (1, 2), (0, 1, 2, 3)])
def test_a_large_float_sum_runs_its_program_once_compiled(axes):
    """A float sum of `MIN_ELEMENTS` or more (batch norm's statistics over the leading axes
    of an NHWC image, among others) runs compiled from the call after its compile, with
    NumPy's sums to rounding; smaller ones and integer ones stay on NumPy's kernel."""
    trace = EagerTrace()
    x = np.random.default_rng(3).standard_normal((4, 8, 8, 16)).astype(np.float32)
    params = {"axes": axes, "keepdims": False}
    want = np.sum(x.astype(np.float64), axis=axes)
    assert isinstance(route_of(trace, "reduce_sum", [x], params), eager_kernels._Pending)
    eager_kernels.settle()
    got = trace.process(REGISTRY["reduce_sum"], (sf.constant(x),), params)
    assert isinstance(route_of(trace, "reduce_sum", [x], params), eager_compiles._ProgramOp)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-4)
    small = x[:1, :4, :4]
    assert route_of(trace, "reduce_sum", [small], params) is None
    assert route_of(trace, "reduce_sum", [x.astype(np.int32)], params) is None
