"""`sf.SparseTensor` and `sf.sparse` against dense NumPy references and TensorFlow's guide
(``sparse_tensor.ipynb``, ``tensor.ipynb``): its printed outputs reproduced, each op
eagerly and staged (interpreted and compiled alike), the trace keyed on the dense shape
and not on the number of entries, gradients of `sparse_dense_matmul` against finite
differences, and errors naming the op and the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
rng = np.random.default_rng(11)


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def _line_of(fn, text: str) -> str:
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{first + offset}"


def _random_sparse(shape: tuple[int, ...], count: int, dtype=np.float64):
    """Distinct random positions (shuffled) and values, and the dense array they make."""
    positions = rng.choice(int(np.prod(shape)), size=count, replace=False)
    indices = np.stack(np.unravel_index(positions, shape), axis=1).astype(np.int64)
    values = rng.standard_normal(count).astype(dtype)
    dense = np.zeros(shape, dtype)
    dense[tuple(indices.T)] = values
    return indices, values, dense


def _entries(st) -> dict:
    return {tuple(i): v for i, v in zip(st.indices.numpy().tolist(), st.values.numpy().tolist(),
                                        strict=True)}


# -- TensorFlow's guide ------------------------------------------------------------------------


def test_the_guides_printed_sparse_tensor():
    st1 = sf.sparse.SparseTensor(indices=[[0, 3], [2, 4]], values=[10, 20], dense_shape=[3, 10])
    assert str(st1) == (
        "SparseTensor(indices=sf.Tensor([[0, 3],\n           [2, 4]], shape=(2, 2), "
        "dtype=int64), values=sf.Tensor([10, 20], shape=(2,), dtype=int32), "
        "dense_shape=sf.Tensor([ 3, 10], shape=(2,), dtype=int64))")
    assert st1.shape == (3, 10) and st1.dtype == sf.int32


def test_the_guides_conversions_sums_and_products():
    st2 = sf.sparse.from_dense([[1, 0, 0, 8], [0, 0, 0, 0], [0, 0, 3, 0]])
    assert _entries(st2) == {(0, 0): 1, (0, 3): 8, (2, 2): 3}
    assert st2.dense_shape.numpy().tolist() == [3, 4]
    np.testing.assert_array_equal(sf.sparse.to_dense(st2),
                                  [[1, 0, 0, 8], [0, 0, 0, 0], [0, 0, 3, 0]])
    st_a = sf.SparseTensor(indices=[[0, 2], [3, 4]], values=[31, 2], dense_shape=[4, 10])
    st_b = sf.SparseTensor(indices=[[0, 2], [3, 0]], values=[56, 38], dense_shape=[4, 10])
    st_sum = sf.sparse.add(st_a, st_b)
    assert st_sum.indices.numpy().tolist() == [[0, 2], [3, 0], [3, 4]]
    assert st_sum.values.numpy().tolist() == [87, 38, 2]
    st_c = sf.SparseTensor(indices=([0, 1], [1, 0], [1, 1]), values=[13, 15, 17],
                           dense_shape=(2, 2))
    product = sf.sparse.sparse_dense_matmul(st_c, sf.constant([[4], [6]]))
    assert str(product) == "sf.Tensor([[ 78],\n           [162]], shape=(2, 1), dtype=int32)"
    plus_5 = sf.sparse.map_values(sf.add, st2, 5)
    np.testing.assert_array_equal(sf.sparse.to_dense(plus_5), [[6, 0, 0, 13], [0, 0, 0, 0],
                                                               [0, 0, 8, 0]])
    rebuilt = sf.SparseTensor(st2.indices, st2.values + 5, st2.dense_shape)
    np.testing.assert_array_equal(sf.sparse.to_dense(rebuilt), sf.sparse.to_dense(plus_5))
    assert str(sf.sparse.reduce_max(sf.sparse.from_dense([-5, 0, -3]))) == (
        "sf.Tensor(-3, shape=(), dtype=int32)")  # stored entries only, as TensorFlow's
    tensor_guide = sf.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1, 2],
                                          dense_shape=[3, 4])
    np.testing.assert_array_equal(sf.sparse.to_dense(tensor_guide),
                                  [[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]])


def test_the_guides_concat_and_slices():
    a = sf.SparseTensor([[2, 4], [3, 3], [3, 4], [4, 3], [4, 4], [5, 4]], [1] * 6, [8, 5])
    b = sf.SparseTensor([[0, 2], [1, 1], [1, 3], [2, 0], [2, 4], [2, 5], [3, 5], [4, 5], [5, 0],
                         [5, 4], [5, 5], [6, 1], [6, 3], [7, 2]], [1] * 14, [8, 6])
    c = sf.SparseTensor([[3, 0], [4, 0]], [1, 1], [8, 6])
    pattern = sf.sparse.to_dense(sf.sparse.concat(axis=1, sp_inputs=[a, b, c]))
    want = np.concatenate([sf.sparse.to_dense(s).numpy() for s in (a, b, c)], axis=1)
    np.testing.assert_array_equal(pattern, want)
    assert pattern.shape == (8, 17)
    assert sf.sparse.to_dense(sf.sparse.slice(a, start=[0, 0], size=[8, 5])).shape == (8, 5)
    sliced = sf.sparse.to_dense(sf.sparse.slice(b, start=[0, 5], size=[8, 6]))
    np.testing.assert_array_equal(sliced, want[:, 10:11])
    assert sf.sparse.to_dense(sf.sparse.slice(c, start=[0, 10], size=[8, 6])).shape == (8, 0)


def test_the_guides_ragged_strings_through_sparse_concat():
    x = sf.ragged.constant([["John"], ["a", "big", "dog"], ["my", "cat"]])
    y = sf.ragged.constant([["fell", "asleep"], ["barked"], ["is", "fuzzy"]])
    joined = sf.sparse.concat(sp_inputs=[x.to_sparse(), y.to_sparse()], axis=1)
    assert sf.sparse.to_dense(joined, "").numpy().tolist() == [
        [b"John", b"", b"", b"fell", b"asleep"], [b"a", b"big", b"dog", b"barked", b""],
        [b"my", b"cat", b"", b"is", b"fuzzy"]]


def test_the_guides_staged_matmul_with_a_transpose():
    @sf.function
    def f(x, y):
        return sf.sparse.sparse_dense_matmul(x, y)

    a = sf.SparseTensor(indices=[[0, 3], [2, 4]], values=[15, 25], dense_shape=[3, 10])
    b = sf.sparse.to_dense(sf.sparse.transpose(a))
    np.testing.assert_array_equal(f(a, b), [[225, 0, 0], [0, 0, 0], [0, 0, 625]])


# -- against NumPy ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_ops_match_numpy(mode):
    indices, values, dense = _random_sparse((4, 5), 7)
    other_indices, other_values, other_dense = _random_sparse((4, 5), 5)
    matrix = rng.standard_normal((5, 3))
    left = rng.standard_normal((2, 4))

    def f(st, other, full, m, lhs):
        return (sf.sparse.to_dense(st), sf.sparse.to_dense(sf.sparse.reorder(st)),
                sf.sparse.to_dense(sf.sparse.add(st, other)), sf.sparse.add(st, full),
                sf.sparse.sparse_dense_matmul(st, m),
                sf.sparse.sparse_dense_matmul(st, m[:4], adjoint_a=True),
                sf.sparse.sparse_dense_matmul(lhs, st),
                sf.sparse.reduce_sum(st), sf.sparse.reduce_sum(st, axis=1),
                sf.sparse.reduce_sum(st, axis=0, keepdims=True),
                sf.sparse.to_dense(st * 3.0), sf.sparse.to_dense(st * full),
                sf.sparse.to_dense(sf.sparse.reshape(st, [2, -1])),
                sf.sparse.to_dense(sf.sparse.transpose(st)),
                sf.sparse.to_dense(sf.sparse.from_dense(full)))

    st = sf.SparseTensor(indices, values, [4, 5])
    other = sf.SparseTensor(other_indices, other_values, [4, 5])
    results = staged(mode, f)(st, other, sf.constant(other_dense), sf.constant(matrix),
                              sf.constant(left))
    wants = (dense, dense, dense + other_dense, dense + other_dense, dense @ matrix,
             dense.T @ matrix[:4], left @ dense, dense.sum(), dense.sum(axis=1),
             dense.sum(axis=0, keepdims=True), dense * 3, dense * other_dense,
             dense.reshape(2, 10), dense.T, other_dense)
    for got, want in zip(results, wants, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_reorder_and_add_give_row_major_order(mode):
    indices, values, dense = _random_sparse((3, 4, 2), 9)

    def f(st):
        return sf.sparse.reorder(st), sf.sparse.add(st, st)

    ordered, doubled = staged(mode, f)(sf.SparseTensor(indices, values, [3, 4, 2]))
    order = np.lexsort(indices.T[::-1])
    np.testing.assert_array_equal(ordered.indices, indices[order])
    np.testing.assert_allclose(ordered.values, values[order])
    np.testing.assert_array_equal(doubled.indices, indices[order])
    np.testing.assert_allclose(doubled.values, 2 * values[order])
    assert ordered.shape == (3, 4, 2)


# -- sf.function --------------------------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_a_new_number_of_entries_reuses_the_trace(jit):
    @sf.function(jit=jit)
    def scaled_rows(st, m):
        return sf.sparse.sparse_dense_matmul(st * 2.0, m), st

    m = rng.standard_normal((5, 2))
    for count in (3, 6, 0):
        indices, values, dense = _random_sparse((4, 5), count)
        product, returned = scaled_rows(sf.SparseTensor(indices, values, [4, 5]), sf.constant(m))
        np.testing.assert_allclose(product, 2 * dense @ m, rtol=1e-12)
        assert isinstance(returned, sf.SparseTensor) and returned.shape == (4, 5)
        np.testing.assert_allclose(sf.sparse.to_dense(returned), dense)
    assert scaled_rows.tracing_count == 1
    scaled_rows(sf.SparseTensor([[0, 0]], np.float64([1.0]), [3, 5]), sf.constant(m))  # new shape
    assert scaled_rows.tracing_count == 2


@pytest.mark.parametrize("jit", [False, True])
def test_input_signature_and_loops(jit):
    @sf.function(input_signature=[sf.SparseTensorSpec([2, 3], sf.float32)], jit=jit)
    def total(st):
        return sf.sparse.reduce_sum(st)

    assert float(total(sf.SparseTensor([[0, 1], [1, 2]], [1.5, 2.0], [2, 3]))) == 3.5
    with pytest.raises(TypeError, match="dtype int32, the signature expects float32"):
        total(sf.SparseTensor([[0, 1]], [1], [2, 3]))

    @sf.function(jit=jit)
    def doubled(st, n):
        i = sf.constant(0)
        while i < n:
            st = st * 2.0
            i += 1
        return st

    result = doubled(sf.SparseTensor([[0, 1]], [1.5], [2, 3]), sf.constant(3))
    assert result.values.numpy().tolist() == [12.0]


# -- gradients ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_matmul_gradients_match_finite_differences(mode):
    indices, values, _ = _random_sparse((3, 4), 5)
    dense = rng.standard_normal((4, 2))
    weights = rng.standard_normal((3, 2))

    def loss(v, d):
        st = sf.SparseTensor(indices, v, [3, 4])
        return (sf.reduce_sum(sf.sparse.sparse_dense_matmul(st, d) * weights)
                + sf.sparse.reduce_sum(sf.sparse.map_values(sf.square, st)))

    def gradients(v, d):
        with sf.GradientTape() as tape:
            tape.watch([v, d])
            total = loss(v, d)
        return tape.gradient(total, [v, d])

    got_v, got_d = staged(mode, gradients)(sf.constant(values), sf.constant(dense))
    want_v = numeric_gradient(lambda v: float(loss(sf.constant(v), sf.constant(dense))), values)
    want_d = numeric_gradient(lambda d: float(loss(sf.constant(values), sf.constant(d))), dense)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_d, want_d, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_a_tape_over_a_staged_function_taking_a_sparse_tensor(jit):
    @sf.function(jit=jit)
    def loss(st, d):
        weights = sf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        return (sf.reduce_sum(sf.sparse.sparse_dense_matmul(st, d)) + sf.sparse.reduce_sum(st)
                + sf.reduce_sum(sf.sparse.to_dense(st) * weights)
                + sf.reduce_sum(sf.sparse.add(st, st).values))  # entries' count unknown

    values, dense = sf.constant([2.0, 3.0]), sf.ones((3, 2))
    with sf.GradientTape() as tape:
        tape.watch([values, dense])
        total = loss(sf.SparseTensor([[0, 1], [1, 2]], values, [2, 3]), dense)
    got_values, got_dense = tape.gradient(total, [values, dense])
    np.testing.assert_allclose(got_values, [3.0 + 2.0 + 2.0, 3.0 + 6.0 + 2.0])
    np.testing.assert_allclose(got_dense, [[0, 0], [2, 2], [3, 3]])


# -- errors -------------------------------------------------------------------------------------


def test_errors_name_the_op_and_the_line():
    def out_of_range():
        return sf.SparseTensor([[0, 1], [3, 0]], [1, 2], [3, 3])

    with pytest.raises(sf.errors.InvalidArgumentError,
                       match=r"index \[3, 0\] \(entry 1\) is out of bounds for dense_shape "
                             r"\[3, 3\]") as info:
        out_of_range()
    assert _line_of(out_of_range, "sf.SparseTensor(") in str(info.value)
    with pytest.raises(ValueError, match="indices have 3 columns but dense_shape has rank 2"):
        sf.SparseTensor([[0, 1, 2]], [1], [3, 3])
    with pytest.raises(ValueError, match="2 indices but 1 values"):
        sf.SparseTensor([[0, 1], [1, 1]], [1], [3, 3])
    with pytest.raises(sf.errors.InvalidArgumentError, match="dense_shape must not be negative"):
        sf.SparseTensor([[0, 0]], [1], [2, -1])
    with pytest.raises(sf.errors.InvalidArgumentError, match="indices repeat an entry"):
        sf.sparse.to_dense(sf.SparseTensor([[0, 1], [0, 1]], [1, 2], [2, 2]))
    a = sf.SparseTensor([[0, 0]], [1.0], [2, 2])
    with pytest.raises(sf.errors.InvalidArgumentError, match="sf.sparse.add: operand shapes"):
        sf.sparse.add(a, sf.SparseTensor([[0, 0]], [1.0], [2, 3]))
    with pytest.raises(ValueError, match="sf.sparse.sparse_dense_matmul: inner dims differ"):
        sf.sparse.sparse_dense_matmul(a, sf.ones((3, 1)))
    with pytest.raises(ValueError, match="sf.sparse.reshape: cannot reshape"):
        sf.sparse.reshape(a, [3, 2])
    with pytest.raises(TypeError, match="sf.sparse.to_dense: expected an sf.SparseTensor"):
        sf.sparse.to_dense(sf.ones((2, 2)))
    with pytest.raises(NotImplementedError, match="sf.sparse.reduce_max: over all axes only"):
        sf.sparse.reduce_max(a, axis=0)

    @sf.function
    def dense_op(st):
        return sf.exp(st)

    with pytest.raises(TypeError, match=r"this op takes tensors, not an sf.SparseTensor "
                                        r"\(sf.sparse.to_dense gives a dense tensor\)"):
        dense_op(a)
