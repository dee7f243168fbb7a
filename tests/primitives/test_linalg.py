"""Eager linear algebra against NumPy: matmul (batched, broadcasting, transposes, 1-D
operands), the `@` operator, tensordot and n-ary einsum (chains, diagonals, ellipses)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import NUMERIC, arrays, assert_matches, broadcast_shapes

import stageflow as sf

DIM = st.integers(0, 4)
TOL = {"rtol": 1e-5, "atol": 1e-4}


@st.composite
def matmul_case(draw):
    dtype = draw(st.sampled_from(NUMERIC))
    batch_a, batch_b = draw(broadcast_shapes(max_dims=2, max_side=3))
    m, k, n = draw(DIM), draw(DIM), draw(DIM)
    transpose_a, transpose_b = draw(st.booleans()), draw(st.booleans())
    a = draw(arrays(dtype, batch_a + ((k, m) if transpose_a else (m, k))))
    b = draw(arrays(dtype, batch_b + ((n, k) if transpose_b else (k, n))))
    return a, b, transpose_a, transpose_b


@given(case=matmul_case())
def test_matmul_matches_numpy(case):
    a, b, transpose_a, transpose_b = case
    got = sf.matmul(sf.constant(a), sf.constant(b), transpose_a=transpose_a,
                    transpose_b=transpose_b)
    left = np.swapaxes(a, -1, -2) if transpose_a else a
    right = np.swapaxes(b, -1, -2) if transpose_b else b
    assert_matches(got, np.matmul(left, right), **TOL)


@given(case=matmul_case())
def test_matmul_operator(case):
    a, b, transpose_a, transpose_b = case
    left = np.swapaxes(a, -1, -2) if transpose_a else a
    right = np.swapaxes(b, -1, -2) if transpose_b else b
    expected = np.matmul(left, right)
    assert_matches(sf.constant(left) @ sf.constant(right), expected, **TOL)
    assert_matches(left @ sf.constant(right), expected, **TOL)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [
        ((3,), (3,)),
        ((3,), (3, 2)),
        ((2, 3), (3,)),
        ((3,), (4, 3, 2)),
        ((4, 2, 3), (3,)),
        ((0,), (0,)),
        ((0,), (0, 2)),
        ((2, 1, 2, 3), (3,)),
    ],
)
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
def test_matmul_of_vectors_follows_numpy(shape_a, shape_b, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, shape_a).astype(dtype)
    b = rng.integers(-5, 5, shape_b).astype(dtype)
    expected = np.matmul(a, b)
    assert_matches(sf.matmul(sf.constant(a), sf.constant(b)), expected)
    assert_matches(sf.constant(a) @ sf.constant(b), expected)


def test_matmul_documented_example():
    a = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    b = sf.constant([[5.0], [6.0]])
    assert_matches(sf.matmul(a, b), np.array([[17.0], [39.0]], np.float32))
    assert_matches(sf.matmul(a, a, transpose_b=True), np.array([[5.0, 11.0], [11.0, 25.0]],
                                                                  np.float32))
    assert_matches(sf.matmul(a, a, transpose_a=True), np.array([[10.0, 14.0], [14.0, 20.0]],
                                                                  np.float32))
    assert_matches(sf.matmul([[1, 2]], [[3], [4]]), np.array([[11]], np.int32))


def test_matmul_errors():
    a = sf.zeros((2, 3))
    line = sys._getframe().f_lineno + 2
    with pytest.raises(ValueError) as info:
        sf.matmul(a, sf.zeros((4, 5)))
    message = str(info.value)
    assert "matmul" in message and "(2, 3)" in message and "(4, 5)" in message
    assert f"test_linalg.py:{line}" in message
    with pytest.raises(ValueError):
        sf.matmul(sf.zeros((2, 2, 3)), sf.zeros((3, 3, 4)))
    with pytest.raises(ValueError):
        sf.matmul(sf.constant(2.0), a)
    with pytest.raises(TypeError):
        sf.matmul(a, sf.zeros((3, 2), sf.float64))
    with pytest.raises(TypeError):
        sf.matmul(sf.constant([[True]]), sf.constant([[True]]))
    with pytest.raises(ValueError):
        _ = a @ sf.zeros((2, 3))


EINSUM_SHAPES = {
    "ij,jk->ik": lambda i, j, k: [(i, j), (j, k)],
    "bij,bjk->bik": lambda i, j, k: [(2, i, j), (2, j, k)],
    "ij->ji": lambda i, j, k: [(i, j)],
    "ij->": lambda i, j, k: [(i, j)],
    "i,i->": lambda i, j, k: [(i,), (i,)],
    "ij,j->i": lambda i, j, k: [(i, j), (j,)],
    "bi,bi->b": lambda i, j, k: [(j, i), (j, i)],
    "ij,kj->ik": lambda i, j, k: [(i, j), (k, j)],
    "i,j->ij": lambda i, j, k: [(i,), (j,)],
    "ij,jk": lambda i, j, k: [(i, j), (j, k)],
    "ij->i": lambda i, j, k: [(i, j)],
    "bij,bkj->bki": lambda i, j, k: [(3, i, j), (3, k, j)],
    "ij,jk,kl->il": lambda i, j, k: [(i, j), (j, k), (k, 2)],
    "ab,bc,cd,da->": lambda i, j, k: [(i, j), (j, k), (k, 2), (2, i)],
    "i,j,k->ijk": lambda i, j, k: [(i,), (j,), (k,)],
    "ii->i": lambda i, j, k: [(i, i)],
    "ii": lambda i, j, k: [(i, i)],
    "iij->j": lambda i, j, k: [(i, i, j)],
    "...ij,...jk": lambda i, j, k: [(2, 1, i, j), (3, j, k)],
    "b...,b...->...b": lambda i, j, k: [(i, j, k), (i, 1, k)],
}


@st.composite
def einsum_equation(draw):
    """Up to four operands over up to five labels (some shared, some summed, some kept)."""
    sizes = {c: draw(st.integers(1, 3)) for c in "abcde"}
    count = draw(st.integers(1, 4))
    specs = [draw(st.lists(st.sampled_from("abcde"), max_size=3, unique=True))
             for _ in range(count)]
    used = sorted(set().union(*specs))
    output = draw(st.permutations(used)) if used else []
    output = output[:draw(st.integers(0, len(output)))]
    equation = ",".join("".join(s) for s in specs) + "->" + "".join(output)
    return equation, [tuple(sizes[c] for c in spec) for spec in specs]


@given(case=einsum_equation(), data=st.data(), way=st.sampled_from(["eager", "compiled"]))
def test_random_einsum_equations_match_numpy(case, data, way):
    equation, shapes = case
    operands = [data.draw(arrays(np.float64, shape)) for shape in shapes]
    def f(*xs):
        return sf.einsum(equation, *xs)

    run = f if way == "eager" else sf.function(f)
    got = run(*(sf.constant(x) for x in operands))
    assert_matches(got, np.einsum(equation, *operands), **TOL)


@pytest.mark.parametrize("equation", sorted(EINSUM_SHAPES))
@given(data=st.data())
def test_einsum_matches_numpy(equation, data):
    dtype = data.draw(st.sampled_from(NUMERIC))
    i, j, k = data.draw(DIM), data.draw(DIM), data.draw(DIM)
    operands = [data.draw(arrays(dtype, shape)) for shape in EINSUM_SHAPES[equation](i, j, k)]
    got = sf.einsum(equation, *(sf.constant(x) for x in operands))
    expected = np.einsum(equation, *operands)
    assert_matches(got, expected, **TOL)


def test_einsum_errors():
    with pytest.raises(ValueError):
        sf.einsum("ij,jk->ik", sf.zeros((2, 3)))
    with pytest.raises(ValueError):
        sf.einsum("ijk,jk->ik", sf.zeros((2, 3)), sf.zeros((3, 4)))
    with pytest.raises(ValueError):
        sf.einsum("ij,jk->ik", sf.zeros((2, 3)), sf.zeros((4, 5)))


@st.composite
def tensordot_case(draw):
    dtype = draw(st.sampled_from(NUMERIC))
    free_a = draw(st.lists(DIM, max_size=2))
    free_b = draw(st.lists(DIM, max_size=2))
    summed = draw(st.lists(DIM, max_size=2))
    a = draw(arrays(dtype, tuple(free_a + summed)))
    b = draw(arrays(dtype, tuple(summed + free_b)))
    return a, b, len(summed)


@given(case=tensordot_case())
def test_tensordot_with_int_axes_matches_numpy(case):
    a, b, axes = case
    got = sf.tensordot(sf.constant(a), sf.constant(b), axes)
    assert_matches(got, np.tensordot(a, b, axes), **TOL)


@given(data=st.data())
def test_tensordot_with_axis_lists_matches_numpy(data):
    dtype = data.draw(st.sampled_from(NUMERIC))
    p, q, r = data.draw(DIM), data.draw(DIM), data.draw(DIM)
    a = data.draw(arrays(dtype, (p, q, r)))
    b = data.draw(arrays(dtype, (r, 2, p)))
    axes = ([0, 2], [2, 0])
    got = sf.tensordot(sf.constant(a), sf.constant(b), axes)
    assert_matches(got, np.tensordot(a, b, axes), **TOL)
    got = sf.tensordot(sf.constant(a), sf.constant(b), ([-1], [0]))
    assert_matches(got, np.tensordot(a, b, ([-1], [0])), **TOL)


def test_tensordot_default_axes_is_two():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    assert_matches(sf.tensordot(sf.constant(a), sf.constant(b)), np.tensordot(a, b))


def test_tensordot_with_a_pair_of_ints():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_matches(sf.tensordot(sf.constant(a), sf.constant(b), axes=(1, 0)),
                   np.tensordot(a, b, axes=(1, 0)))


@pytest.mark.parametrize(
    "dtype",
    [
        sf.float16,
        sf.bfloat16,
    ],
    ids=["float16", "bfloat16"],
)
def test_linalg_keeps_half_precision_dtypes(dtype):
    a = sf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype)
    b = sf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype)
    expected = np.array([[4.0, 5.0], [10.0, 11.0]])
    for got in (sf.matmul(a, b), a @ b, sf.tensordot(a, b, 1), sf.einsum("ij,jk->ik", a, b)):
        assert got.dtype == dtype and got.shape == (2, 2)
        np.testing.assert_allclose(got.numpy().astype(np.float64), expected)
    assert sf.matmul(a, sf.constant([1.0, 1.0, 1.0], dtype)).dtype == dtype
