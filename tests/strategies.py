"""Hypothesis strategies and NumPy comparison helpers shared by the eager-op tests.

Shapes include 0-d and zero-size arrays; values are kept small so that no op in the tests
overflows, divides by zero or leaves its domain unless a test asks for it.
"""

from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from staged_modes import stage_each_op

import stageflow as sf
from stageflow.core import context
from stageflow.testing.strategies import axes  # noqa: F401 - shared with the campaigns

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
                                   np.uint64))
NUMERIC = FLOATS + INTS
INDICES = (np.dtype(np.int32), np.dtype(np.int64))  # what gather takes, as in TensorFlow
BOOL = np.dtype(np.bool_)
ALL = NUMERIC + (BOOL,)
COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))

MAX_DIMS = 4
MAX_SIDE = 4

# Absolute/relative tolerances for results computed with the same dtype as the reference.
TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-3),
    np.dtype(np.float32): (2e-6, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.complex64): (2e-6, 1e-6),
    np.dtype(np.complex128): (1e-12, 1e-12),
}


def shapes(min_dims: int = 0, max_dims: int = MAX_DIMS, min_side: int = 0,
           max_side: int = MAX_SIDE) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes, 0-d and zero-size ones included by default."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcast_shapes(num_shapes: int = 2, min_dims: int = 0, max_dims: int = MAX_DIMS,
                     min_side: int = 0, max_side: int = MAX_SIDE):
    """Tuples of `num_shapes` shapes that broadcast together under NumPy's rules."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, min_side=min_side,
        max_side=max_side,
    ).map(lambda b: b.input_shapes)


def elements(dtype, lo: float = -10, hi: float = 10, nonzero: bool = False):
    """Scalars of `dtype` in [lo, hi] (booleans ignore the bounds; complex numbers have a
    modulus of at most max(|lo|, |hi|), and of at least 0.25 if `nonzero`)."""
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return st.booleans()
    if dtype.kind == "c":
        return st.complex_numbers(min_magnitude=0.25 if nonzero else 0,
                                  max_magnitude=max(abs(lo), abs(hi)), allow_infinity=False,
                                  allow_nan=False, allow_subnormal=False,
                                  width=dtype.itemsize * 8)
    if dtype.kind in "iu":  # the bounds clipped to the dtype's range
        info = np.iinfo(dtype)
        values = st.integers(max(int(lo), int(info.min)), min(int(hi), int(info.max)))
        return values.filter(bool) if nonzero else values
    lo, hi = _representable(lo, dtype, hi), _representable(hi, dtype, lo)
    values = st.floats(
        lo, hi, width=dtype.itemsize * 8, allow_nan=False, allow_infinity=False,
        allow_subnormal=False,
    )
    return values.filter(lambda v: abs(v) >= 0.25) if nonzero else values


def _representable(bound: float, dtype: np.dtype, toward: float) -> float:
    """`bound` rounded to `dtype`, stepping towards `toward` if rounding moved it outwards."""
    value = dtype.type(bound)
    if (value < bound < toward) or (value > bound > toward):
        value = np.nextafter(value, dtype.type(toward))
    return float(value)


def arrays(dtype, shape=None, lo: float = -10, hi: float = 10, nonzero: bool = False):
    """NumPy arrays of `dtype` with `shape` (a shape or a strategy; default: any shape)."""
    return hnp.arrays(
        np.dtype(dtype), shapes() if shape is None else shape,
        elements=elements(dtype, lo, hi, nonzero),
    )


def numpy_axis(axis):
    """The same axis argument in the form NumPy accepts."""
    return tuple(axis) if isinstance(axis, list) else axis


def assert_matches(got, expected, *, dtype=None, rtol: float | None = None,
                   atol: float | None = None) -> None:
    """`got` is a tensor with exactly the shape and dtype of `expected` and close values.

    Integers and booleans must match exactly; floats within the dtype's tolerance (or the
    given one), complex numbers by the modulus of the difference. `dtype` overrides the
    expected dtype (the reference may be computed wider).
    """
    assert isinstance(got, sf.Tensor), f"expected an sf.Tensor, got {type(got).__name__}"
    expected = np.asarray(expected)
    want_dtype = np.dtype(expected.dtype if dtype is None else dtype)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    assert isinstance(got.shape, tuple)
    assert got.dtype == want_dtype, f"dtype {got.dtype} != {want_dtype}"
    value = got.numpy()
    assert value.shape == expected.shape
    assert value.dtype == want_dtype
    if want_dtype.kind in "fc" or want_dtype == sf.bfloat16:
        default_rtol, default_atol = TOLERANCES.get(want_dtype, (1e-2, 1e-2))
        wide = np.complex128 if want_dtype.kind == "c" else np.float64
        np.testing.assert_allclose(
            value.astype(wide), expected.astype(wide),
            rtol=default_rtol if rtol is None else rtol,
            atol=default_atol if atol is None else atol,
            equal_nan=True,
        )
    else:
        np.testing.assert_array_equal(value, expected.astype(want_dtype))


def numeric_gradient(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The gradient of scalar `fn` at `x` by central differences, element by element."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (fn(up) - fn(down)) / (2 * eps)
    return grad


def _eager_fast() -> bool:
    flags = getattr(context, "state", context)
    return bool(getattr(flags, "eager_fast", True))


@contextlib.contextmanager
def dispatch(path: str):
    """Run ops on the eager fast path ("fast"), through `Primitive.bind` ("slow"), or
    each op traced into a verified graph function and interpreted ("staged")."""
    if path == "fast":
        assert _eager_fast(), "some other trace is active"
        yield
    elif path == "staged":
        with stage_each_op():
            assert not _eager_fast()
            yield
    else:
        with context.slow_path():
            assert not _eager_fast()
            yield


PATHS = ("fast", "slow", "staged")
