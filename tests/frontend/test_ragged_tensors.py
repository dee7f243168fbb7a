"""`sf.RaggedTensor` and `sf.ragged` against plain Python lists and TensorFlow's guide
(``ragged_tensor.ipynb``, ``tensor.ipynb``): its printed outputs reproduced, every
constructor, conversion, index and reduction eagerly and staged (interpreted and compiled
give the same numbers), gradients of reductions with respect to the values against
finite differences, and errors naming the op and the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
rng = np.random.default_rng(5)


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def _line_of(fn, text: str) -> str:
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{first + offset}"


def _rows(n: int, longest: int = 4) -> list[list[float]]:
    return [rng.standard_normal(rng.integers(0, longest + 1)).round(3).tolist()
            for _ in range(n)]


# -- TensorFlow's guide, its printed outputs ------------------------------------------------

DIGITS = [[3, 1, 4, 1], [], [5, 9, 2], [6], []]


def test_the_guides_overview_prints_what_tensorflow_prints():
    digits = sf.ragged.constant(DIGITS)
    assert str(sf.add(digits, 3)) == "<sf.RaggedTensor [[6, 4, 7, 4], [], [8, 12, 5], [9], []]>"
    mean = sf.reduce_mean(digits, axis=1)
    assert mean.dtype == sf.float64  # the mean of integers, as TensorFlow's
    np.testing.assert_allclose(mean.numpy(), [2.25, np.nan, 16 / 3, 6.0, np.nan])
    assert str(sf.concat([digits, [[5, 3]]], axis=0)) == (
        "<sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9, 2], [6], [], [5, 3]]>")
    assert str(digits[0]) == "sf.Tensor([3, 1, 4, 1], shape=(4,), dtype=int32)"
    assert str(digits[:, :2]) == "<sf.RaggedTensor [[3, 1], [], [5, 9], [6], []]>"
    assert str(digits[:, -2:]) == "<sf.RaggedTensor [[4, 1], [], [9, 2], [6], []]>"
    assert str(digits + sf.ragged.constant([[1, 2, 3, 4], [], [5, 6, 7], [8], []])) == (
        "<sf.RaggedTensor [[4, 3, 7, 5], [], [10, 15, 9], [14], []]>")
    assert str(sf.ragged.map_flat_values(lambda x: x * 2 + 1, digits)) == (
        "<sf.RaggedTensor [[7, 3, 9, 3], [], [11, 19, 5], [13], []]>")
    assert str(sf.tile(digits, [1, 2])) == (
        "<sf.RaggedTensor [[3, 1, 4, 1, 3, 1, 4, 1], [], [5, 9, 2, 5, 9, 2], [6, 6], []]>")
    words = sf.ragged.constant([["So", "long"], ["thanks", "for", "all", "the", "fish"]])
    assert str(sf.strings.substr(words, 0, 2)) == (
        "<sf.RaggedTensor [[b'So', b'lo'], [b'th', b'fo', b'al', b'th', b'fi']]>")
    assert str(sf.map_fn(sf.math.square, digits)) == (
        "<sf.RaggedTensor [[9, 1, 16, 1], [], [25, 81, 4], [36], []]>")
    assert digits.to_list() == DIGITS
    array = digits.numpy()
    assert array.dtype == object and [a.tolist() for a in array] == DIGITS
    assert all(a.dtype == np.int32 for a in array)


def test_the_guides_constructors():
    values = [3, 1, 4, 1, 5, 9, 2]
    want = "<sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>"
    assert str(sf.RaggedTensor.from_value_rowids(values, [0, 0, 0, 0, 2, 2, 3])) == want
    assert str(sf.RaggedTensor.from_row_lengths(values, [4, 0, 2, 1])) == want
    assert str(sf.RaggedTensor.from_row_splits(values, [0, 4, 4, 6, 7])) == want
    assert str(sf.ragged.constant([["Hi"], ["How", "are", "you"]])) == (
        "<sf.RaggedTensor [[b'Hi'], [b'How', b'are', b'you']]>")
    assert str(sf.ragged.constant([[[1, 2], [3]], [[4, 5]]])) == (
        "<sf.RaggedTensor [[[1, 2], [3]], [[4, 5]]]>")
    nested = sf.RaggedTensor.from_nested_row_splits(
        flat_values=[10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
        nested_row_splits=([0, 1, 1, 5], [0, 3, 3, 5, 9, 10]))
    assert str(nested) == ("<sf.RaggedTensor [[[10, 11, 12]], [], [[], [13, 14], "
                           "[15, 16, 17, 18], [19]]]>")
    assert nested.shape == (3, None, None) and nested.ragged_rank == 2
    uniform = sf.RaggedTensor.from_row_splits(
        values=[[1, 3], [0, 0], [1, 3], [5, 3], [3, 3], [1, 2]], row_splits=[0, 3, 4, 6])
    assert uniform.shape == (3, None, 2) and uniform.ragged_rank == 1
    assert uniform.flat_values.shape == (6, 2)
    padded = [[1, 3, -1, -1], [2, -1, -1, -1], [4, 5, 8, 9]]
    assert str(sf.RaggedTensor.from_tensor(padded, padding=-1)) == (
        "<sf.RaggedTensor [[1, 3], [2], [4, 5, 8, 9]]>")
    assert sf.RaggedTensor.from_tensor(padded, lengths=[1, 0, 3]).to_list() == [[1], [], [4, 5, 8]]
    assert sf.RaggedTensor.from_tensor(padded).to_list() == padded


def test_the_guides_errors_for_bad_constants():
    with pytest.raises(ValueError, match="mix strings and numbers"):
        sf.ragged.constant([["one", "two"], [3, 4]])
    with pytest.raises(ValueError, match="all scalar values must have the same nesting depth"):
        sf.ragged.constant(["A", ["B", "C"]])


def test_the_guides_indexing():
    queries = sf.ragged.constant([["Who", "is", "George", "Washington"],
                                  ["What", "is", "the", "weather", "tomorrow"], ["Goodnight"]])
    assert queries[1].numpy().tolist() == [b"What", b"is", b"the", b"weather", b"tomorrow"]
    assert queries[1, 2].numpy() == b"the"
    assert queries[1:].to_list() == [[b"What", b"is", b"the", b"weather", b"tomorrow"],
                                     [b"Goodnight"]]
    assert queries[:, :3].to_list() == [[b"Who", b"is", b"George"], [b"What", b"is", b"the"],
                                        [b"Goodnight"]]
    assert queries[:, -2:].to_list() == [[b"George", b"Washington"], [b"weather", b"tomorrow"],
                                         [b"Goodnight"]]
    rt = sf.ragged.constant([[[1, 2, 3], [4]], [[5], [], [6]], [[7]], [[8, 9], [10]]])
    assert str(rt[1]) == "<sf.RaggedTensor [[5], [], [6]]>"
    assert rt[3, 0].numpy().tolist() == [8, 9]
    assert str(rt[:, 1:3]) == "<sf.RaggedTensor [[[4]], [[], [6]], [], [[10]]]>"
    # every row has one row of one value: TensorFlow prints them as one NumPy array
    assert str(rt[:, -1:]) == "<sf.RaggedTensor [[[4]],\n\n [[6]],\n\n [[7]],\n\n [[10]]]>"


def test_the_guides_conversions_and_shapes():
    sentences = sf.ragged.constant([["Hi"], ["Welcome", "to", "the", "fair"], ["Have", "fun"]])
    dense = sentences.to_tensor(default_value="", shape=[None, 10])
    assert dense.shape == (3, 10) and dense.numpy()[1, :5].tolist() == [
        b"Welcome", b"to", b"the", b"fair", b""]
    sparse = sentences.to_sparse()
    assert sparse.indices.numpy().tolist() == [[0, 0], [1, 0], [1, 1], [1, 2], [1, 3], [2, 0],
                                               [2, 1]]
    assert sparse.dense_shape.numpy().tolist() == [3, 4]
    st = sf.SparseTensor(indices=[[0, 0], [2, 0], [2, 1]], values=["a", "b", "c"],
                         dense_shape=[3, 3])
    assert str(sf.RaggedTensor.from_sparse(st)) == "<sf.RaggedTensor [[b'a'], [], [b'b', b'c']]>"
    rt = sf.ragged.constant([[1, 2], [3, 4, 5], [6], [], [7]])
    assert rt.values.numpy().tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert rt.row_splits.numpy().tolist() == [0, 2, 5, 6, 6, 7]
    assert rt[1].numpy().tolist() == [3, 4, 5]
    assert sf.ragged.constant([[1], [2, 3], [], [4]]).shape == (4, None)
    assert sf.ragged.constant([["Hi"], ["How", "are", "you"]]).shape.as_list() == [2, None]
    assert sf.ragged.constant([["Hi"], ["How", "are", "you"]]).bounding_shape().numpy(
    ).tolist() == [2, 3]
    ragged_list = [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]
    assert str(sf.ragged.constant(ragged_list)) == (
        "<sf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>")


def test_the_guides_row_wise_concatenation_and_broadcasting():
    x = sf.ragged.constant([["John"], ["a", "big", "dog"], ["my", "cat"]])
    y = sf.ragged.constant([["fell", "asleep"], ["barked"], ["is", "fuzzy"]])
    assert sf.concat([x, y], axis=1).to_list() == [
        [b"John", b"fell", b"asleep"], [b"a", b"big", b"dog", b"barked"],
        [b"my", b"cat", b"is", b"fuzzy"]]
    assert str(sf.ragged.constant([[1, 2], [3]]) + 3) == "<sf.RaggedTensor [[4, 5], [6]]>"
    x = sf.ragged.constant([[10, 87, 12], [19, 53], [12, 32]])
    assert (x + [[1000], [2000], [3000]]).to_list() == [[1010, 1087, 1012], [2019, 2053],
                                                        [3012, 3032]]
    x = sf.ragged.constant([[[1, 2], [3, 4], [5, 6]], [[7, 8]]], ragged_rank=1)
    assert (x + sf.constant([[10]])).to_list() == [[[11, 12], [13, 14], [15, 16]], [[17, 18]]]
    x = sf.ragged.constant([[[[1], [2]], [], [[3]], [[4]]], [[[5], [6]], [[7]]]],
                           ragged_rank=2)
    assert (x + sf.constant([10, 20, 30])).to_list() == [
        [[[11, 21, 31], [12, 22, 32]], [], [[13, 23, 33]], [[14, 24, 34]]],
        [[[15, 25, 35], [16, 26, 36]], [[17, 27, 37]]]]


def test_the_guides_broadcasting_errors():
    x = sf.ragged.constant([[1, 2, 3], [4], [5, 6]])
    with pytest.raises(sf.errors.InvalidArgumentError, match="different row splits"):
        x + sf.ragged.constant([[10, 20], [30, 40], [50]])
    with pytest.raises(sf.errors.InvalidArgumentError, match="does not broadcast"):
        sf.ragged.constant([[1, 2], [3, 4, 5, 6], [7]]) + sf.constant(
            [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])


# -- against Python lists ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_reductions_match_python(mode):
    rows = _rows(6)
    rows[2] = []

    def f(rt):
        return (sf.reduce_sum(rt, axis=1), sf.reduce_mean(rt, axis=1), sf.reduce_max(rt, axis=1),
                sf.reduce_min(rt, axis=-1), sf.reduce_prod(rt, axis=1), sf.reduce_sum(rt),
                sf.reduce_max(rt, axis=0))

    total, mean, most, least, product, everything, columns = staged(mode, f)(
        sf.ragged.constant(rows, dtype=sf.float64))
    low, high = np.finfo(np.float64).min, np.finfo(np.float64).max
    np.testing.assert_allclose(total, [sum(r) for r in rows])
    np.testing.assert_allclose(mean, [np.mean(r) if r else np.nan for r in rows])
    np.testing.assert_allclose(most, [max(r) if r else low for r in rows])
    np.testing.assert_allclose(least, [min(r) if r else high for r in rows])
    np.testing.assert_allclose(product, [np.prod(r) for r in rows])
    np.testing.assert_allclose(everything, sum(map(sum, rows)))
    width = max(map(len, rows))
    np.testing.assert_allclose(columns, [max(r[j] for r in rows if len(r) > j)
                                         for j in range(width)])


@pytest.mark.parametrize("mode", MODES)
def test_methods_match_python(mode):
    rows = [[1.0, 2.0], [], [3.0, 4.0, 5.0], [6.0]]

    def f(rt):
        return (rt.to_tensor(), rt.to_tensor(-1.0, shape=[None, 2]), rt.row_lengths(),
                rt.value_rowids(), rt.nrows(), rt[2], rt[1:3], rt[:, 1:], rt * 2.0 + rt,
                sf.ragged.map_flat_values(sf.exp, rt), -rt, 10.0 - rt, rt.bounding_shape())

    (dense, cut, lengths, rowids, nrows, row, sliced, tails, arithmetic, exps, negated,
     reflected, bounds) = staged(mode, f)(sf.ragged.constant(rows))
    np.testing.assert_array_equal(dense, [[1, 2, 0], [0, 0, 0], [3, 4, 5], [6, 0, 0]])
    np.testing.assert_array_equal(cut, [[1, 2], [-1, -1], [3, 4], [6, -1]])
    assert lengths.numpy().tolist() == [2, 0, 3, 1] and lengths.dtype == sf.int64
    assert rowids.numpy().tolist() == [0, 0, 2, 2, 2, 3] and int(nrows) == 4
    assert row.numpy().tolist() == [3, 4, 5]
    assert sliced.to_list() == [[], [3.0, 4.0, 5.0]]
    assert tails.to_list() == [[2.0], [], [4.0, 5.0], []]
    assert arithmetic.to_list() == [[3 * v for v in r] for r in rows]
    np.testing.assert_allclose(exps.flat_values, np.exp([1, 2, 3, 4, 5, 6]), rtol=1e-6)
    assert negated.to_list() == [[-v for v in r] for r in rows]
    assert reflected.to_list() == [[10 - v for v in r] for r in rows]
    assert bounds.numpy().tolist() == [4, 3]


@pytest.mark.parametrize("mode", MODES)
def test_concat_along_rows_and_within_rows(mode):
    a, b = [[1, 2], [3]], [[4], [], [5, 6]]

    def f(x, y, z):
        return sf.concat([x, y], axis=0), sf.concat([x, z], axis=1)

    stacked, joined = staged(mode, f)(sf.ragged.constant(a), sf.ragged.constant(b),
                                      sf.ragged.constant([[7], [8, 9]]))
    assert stacked.to_list() == a + b
    assert joined.to_list() == [[1, 2, 7], [3, 8, 9]]


@pytest.mark.parametrize("mode", MODES)
def test_the_guides_palindromes_reverse_rows_and_values(mode):
    def make_palindrome(x, axis):
        return sf.concat([x, sf.reverse(x, [axis])], axis)

    rows = [[1, 2], [3], [4, 5, 6]]
    within = staged(mode, make_palindrome)(sf.ragged.constant(rows), 1)
    assert str(within) == "<sf.RaggedTensor [[1, 2, 2, 1], [3, 3], [4, 5, 6, 6, 5, 4]]>"
    across = staged(mode, make_palindrome)(sf.ragged.constant(rows), 0)
    assert across.to_list() == rows + rows[::-1]
    assert sf.reverse(sf.ragged.constant([[1, 2], [], [3]]), [0]).to_list() == [[3], [], [1, 2]]


@pytest.mark.parametrize("mode", MODES)
def test_tile_and_map_fn_match_python(mode):
    rows = [[1, 2], [], [3]]

    def f(rt):
        return (sf.tile(rt, [2, 3]), sf.map_fn(lambda row: row * 10, rt),
                sf.map_fn(sf.reduce_sum, rt, fn_output_signature=sf.int32),
                sf.strings.length(sf.strings.as_string(rt)) if mode == "eager" else rt)

    tiled, mapped, sums, lengths = staged(mode, f)(sf.ragged.constant(rows))
    assert tiled.to_list() == [r * 3 for r in rows] * 2
    assert mapped.to_list() == [[10 * v for v in r] for r in rows]
    assert sums.numpy().tolist() == [3, 0, 3]
    if mode == "eager":  # strings are host-only values
        assert lengths.to_list() == [[1, 1], [], [1]]


def test_constructors_agree_with_each_other_on_random_rows():
    for _ in range(5):
        rows = _rows(int(rng.integers(1, 7)))
        values = [v for r in rows for v in r]
        lengths = [len(r) for r in rows]
        ids = [i for i, r in enumerate(rows) for _ in r]
        splits = np.cumsum([0, *lengths]).tolist()
        rt = sf.ragged.constant(rows, dtype=sf.float32)
        for other in (sf.RaggedTensor.from_row_lengths(np.float32(values), lengths),
                      sf.RaggedTensor.from_row_splits(np.float32(values), splits),
                      sf.RaggedTensor.from_value_rowids(np.float32(values), ids, len(rows))):
            assert other.to_list() == rt.to_list()
        dense = rt.to_tensor().numpy()
        assert sf.RaggedTensor.from_tensor(dense, lengths=lengths).to_list() == rt.to_list()


def test_strings_split_gives_ragged_rows():
    text = sf.constant(["Gray wolf", "Quick brown fox", "Lazy dog"])
    words = sf.strings.split(text)
    assert words.to_list() == [[b"Gray", b"wolf"], [b"Quick", b"brown", b"fox"],
                               [b"Lazy", b"dog"]]
    assert words.row_lengths().numpy().tolist() == [2, 3, 2]


# -- sf.function: arguments, results, the cache key, loops ---------------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_a_new_number_of_values_reuses_the_trace(jit):
    @sf.function(jit=jit)
    def rows_times_two(rt):
        return rt * 2, sf.reduce_sum(rt, axis=1)

    for rows in ([[1.0, 2.0], [3.0], []], [[1.0], [], [4.0, 5.0, 6.0, 7.0]]):
        doubled, sums = rows_times_two(sf.ragged.constant(rows))
        assert doubled.to_list() == [[2 * v for v in r] for r in rows]
        np.testing.assert_allclose(sums, [sum(r) for r in rows])
    assert rows_times_two.tracing_count == 1
    rows_times_two(sf.ragged.constant([[1.0], [2.0]]))  # another number of rows
    assert rows_times_two.tracing_count == 2
    rows_times_two(sf.ragged.constant([[1, 2], [3]]))  # another dtype
    assert rows_times_two.tracing_count == 3


def test_reduce_retracing_leaves_the_number_of_rows_open():
    @sf.function(reduce_retracing=True)
    def per_row(rt):
        return sf.reduce_sum(rt, axis=1), rt + 1, rt[0], rt.nrows()

    for rows in ([[1, 2], [3]], [[1], [2, 3], [4]], [[5], [], [6, 7], [8]], [[1]]):
        sums, plus_one, first, count = per_row(sf.ragged.constant(rows))
        assert sums.numpy().tolist() == [sum(r) for r in rows]
        assert plus_one.to_list() == [[v + 1 for v in r] for r in rows]
        assert first.numpy().tolist() == rows[0] and int(count) == len(rows)
    assert per_row.tracing_count == 2  # the first signature, then one with any rows


@pytest.mark.parametrize("jit", [False, True])
def test_input_signature_and_concrete_functions(jit):
    spec = sf.RaggedTensorSpec(shape=[None, None], dtype=sf.int32)

    @sf.function(input_signature=[spec], jit=jit)
    def max_and_min(rt):
        return sf.math.reduce_max(rt, axis=-1), sf.math.reduce_min(rt, axis=-1)

    most, least = max_and_min(sf.ragged.constant([[1, 2], [3], [4, 5, 6]]))
    assert most.numpy().tolist() == [2, 3, 6] and least.numpy().tolist() == [1, 3, 4]
    most, _ = max_and_min(sf.ragged.constant([[7], [8, 9]]))
    assert most.numpy().tolist() == [7, 9] and max_and_min.tracing_count == 1
    with pytest.raises(TypeError, match="dtype float32, the signature expects int32"):
        max_and_min(sf.ragged.constant([[1.0]]))

    @sf.function(jit=jit)
    def increment(x):
        return x + 1

    rt = sf.ragged.constant([[1, 2], [3], [4, 5, 6]])
    concrete = increment.get_concrete_function(rt)
    assert str(concrete(rt)) == "<sf.RaggedTensor [[2, 3], [4], [5, 6, 7]]>"


@pytest.mark.parametrize("jit", [False, True])
def test_carried_through_a_loop_over_tensors(jit):
    @sf.function(jit=jit)
    def grow(rt, n):
        for _ in sf.range(n):
            rt = rt * 2.0 + 1.0
        return rt

    result = grow(sf.ragged.constant([[1.0, 2.0], [3.0]]), sf.constant(3))
    assert result.to_list() == [[15.0, 23.0], [31.0]]


# -- gradients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_gradients_of_reductions_match_finite_differences(mode):
    lengths = [2, 0, 3, 1]
    weights = np.float64([1.0, 2.0, 3.0, 4.0])
    nonempty = np.float64([1.0, 0.0, 3.0, 4.0])  # the empty row's max is the lowest float

    def loss(values):
        rt = sf.RaggedTensor.from_row_lengths(values, lengths)
        return (sf.reduce_sum(sf.reduce_sum(rt, axis=1) * weights)
                + sf.reduce_sum(sf.where(nonempty > 0, sf.reduce_max(rt, axis=1), 0.0) * nonempty)
                + sf.reduce_sum(sf.reduce_mean(rt * rt, axis=1)[0:1])
                + sf.reduce_sum(rt.to_tensor(shape=[None, 3])[:, 1] * weights))

    def gradient(values):
        with sf.GradientTape() as tape:
            tape.watch(values)
            total = loss(values)
        return tape.gradient(total, values)

    x = rng.standard_normal(6)
    got = staged(mode, gradient)(sf.constant(x)).numpy()
    want = numeric_gradient(lambda v: float(loss(sf.constant(v))), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_a_tape_over_a_staged_function_taking_a_ragged_tensor(jit):
    @sf.function(jit=jit)
    def loss(rt):
        return (sf.reduce_sum(sf.reduce_max(rt, axis=1)) + sf.reduce_sum(sf.reduce_mean(rt, axis=1))
                + sf.reduce_sum(rt.to_tensor() * 2.0)
                + sf.reduce_sum(sf.concat([rt, rt * 3.0], axis=0).flat_values))  # sizes unknown

    values = sf.constant([1.0, 5.0, 2.0])
    with sf.GradientTape() as tape:
        tape.watch(values)
        total = loss(sf.RaggedTensor.from_row_lengths(values, [2, 1]))
    assert float(total) == 7.0 + 5.0 + 16.0 + 32.0
    np.testing.assert_allclose(tape.gradient(total, values), [6.5, 7.5, 8.0])


# -- errors ---------------------------------------------------------------------------------


def test_errors_name_the_op_and_the_line():
    def bad_splits():
        return sf.RaggedTensor.from_row_splits([1, 2, 3], [0, 2])

    with pytest.raises(sf.errors.InvalidArgumentError,
                       match=r"from_row_splits: the last row split \(2\) must be the number of "
                             r"values \(3\)") as info:
        bad_splits()
    assert _line_of(bad_splits, "from_row_splits") in str(info.value)
    with pytest.raises(sf.errors.InvalidArgumentError, match="row_splits must be sorted"):
        sf.RaggedTensor.from_row_splits([1, 2, 3], [0, 2, 1, 3])
    with pytest.raises(sf.errors.InvalidArgumentError, match="value_rowids must be sorted"):
        sf.RaggedTensor.from_value_rowids([1, 2], [1, 0])
    with pytest.raises(IndexError, match="row 5 is out of range for 2 rows"):
        sf.ragged.constant([[1], [2]])[5]
    with pytest.raises(ValueError, match="RaggedTensor is built with sf.ragged.constant"):
        sf.RaggedTensor([1], [0, 1])

    @sf.function
    def mismatched(x, y):
        return x + y

    with pytest.raises(sf.errors.InvalidArgumentError, match="different row splits"):
        mismatched(sf.ragged.constant([[1], [2, 3]]), sf.ragged.constant([[1, 2], [3]]))

    def dense_op_on_ragged():
        return sf.matmul(sf.ragged.constant([[1.0], [2.0, 3.0]]), sf.ones((2, 2)))

    with pytest.raises(TypeError, match=r"this op takes tensors, not an sf.RaggedTensor \(its "
                                        r"\.to_tensor\(\) gives a dense tensor\)") as info:
        dense_op_on_ragged()
    assert _line_of(dense_op_on_ragged, "sf.matmul") in str(info.value)

    @sf.function
    def reads_back(rt):
        return rt.to_list()

    with pytest.raises(TypeError, match="RaggedTensor.to_list reads the values"):
        reads_back(sf.ragged.constant([[1]]))


def test_from_uniform_row_length_and_the_other_factories():
    inner = sf.RaggedTensor.from_row_splits([10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
                                            [0, 3, 5, 9, 10])
    rt = sf.RaggedTensor.from_uniform_row_length(inner, uniform_row_length=2)
    assert rt.shape == (2, 2, None) and rt.ragged_rank == 2
    assert rt.to_list() == [[[10, 11, 12], [13, 14]], [[15, 16, 17, 18], [19]]]
    assert str(rt) == ("<sf.RaggedTensor [[[10, 11, 12], [13, 14]],\n"
                       " [[15, 16, 17, 18], [19]]]>")
    staged = sf.function(lambda v: sf.RaggedTensor.from_uniform_row_length(v, 2).row_splits)
    assert staged(sf.constant([1, 2, 3, 4])).numpy().tolist() == [0, 2, 4]
    values = [3, 1, 4, 1, 5, 9, 2]
    want = [[3, 1, 4, 1], [], [5, 9], [2]]
    assert sf.RaggedTensor.from_row_starts(values, [0, 4, 4, 6]).to_list() == want
    assert sf.RaggedTensor.from_row_limits(values, [4, 4, 6, 7]).to_list() == want
    nested = sf.RaggedTensor.from_nested_row_lengths([1, 2, 3], ([1, 1], [2, 1]))
    assert nested.to_list() == [[[1, 2]], [[3]]]
    assert sf.RaggedTensor.from_nested_value_rowids([1, 2, 3], ([0, 1], [0, 0, 1])).to_list() \
        == [[[1, 2]], [[3]]]


def test_printing_follows_tensorflow_numpy_text():
    rt = sf.RaggedTensor.from_row_splits(
        values=[[1, 3], [0, 0], [1, 3], [5, 3], [3, 3], [1, 2]], row_splits=[0, 3, 4, 6])
    assert str(rt) == ("<sf.RaggedTensor [[[1, 3],\n  [0, 0],\n  [1, 3]], [[5, 3]], [[3, 3],\n"
                       "                      [1, 2]]]>")
    assert str(sf.ragged.constant([[1.0, 2.5], [3.0]])) == "<sf.RaggedTensor [[1.0, 2.5], [3.0]]>"
    assert str(sf.ragged.range(np.zeros(0, np.int64))) == "<sf.RaggedTensor []>"


def test_embeddings_and_bigrams_of_ragged_words():
    """TensorFlow's ragged guide: embedding lookups of ragged ids, a dense marker column
    concatenated around ragged rows, and bigrams joined from two slices of them."""
    queries = sf.ragged.constant([["Who", "is"], ["Pause"]])
    table = sf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    ids = sf.ragged.constant([[1, 3], [0]])
    looked = sf.nn.embedding_lookup(table, ids)
    assert looked.to_list() == [[[2.0, 3.0], [6.0, 7.0]], [[0.0, 1.0]]]
    marker = sf.fill([queries.nrows(), 1], "#")
    padded = sf.concat([marker, queries, marker], axis=1)
    bigrams = sf.strings.join([padded[:, :-1], padded[:, 1:]], separator="+")
    assert bigrams.to_list() == [[b"#+Who", b"Who+is", b"is+#"], [b"#+Pause", b"Pause+#"]]
    with pytest.raises(sf.errors.InvalidArgumentError, match="different row splits"):
        sf.strings.join([padded, queries])
