"""sf.data's transformations that restructure elements (from_tensors, unbatch, padded_batch,
window, flat_map, interleave, scan, take_while, unique, shard, cache, ...) against the same
computation in plain Python/NumPy and against the examples of TensorFlow's API docs; and
`cardinality` against the number of elements iteration gives."""

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf

Dataset = sf.data.Dataset


def plain(value):
    """Elements (tensors, arrays, nests of them) as Python values, to compare."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return type(value)(plain(v) for v in value)
    if isinstance(value, Dataset):
        return [plain(v) for v in value]
    return np.asarray(value).tolist()


def elements(ds):
    return [plain(e) for e in ds]


# -- sources -----------------------------------------------------------------------------------


def test_from_tensors_is_one_element_of_the_whole_nest():
    ds = Dataset.from_tensors({"x": np.arange(6.0, dtype=np.float32).reshape(2, 3), "y": 4})
    assert elements(ds) == [{"x": [[0, 1, 2], [3, 4, 5]], "y": 4}]
    assert ds.element_spec == {"x": sf.TensorSpec((2, 3), sf.float32),
                               "y": sf.TensorSpec((), sf.int32)}
    assert int(ds.cardinality()) == 1
    # TensorFlow's example: from_tensors([1, 2, 3]) is one vector, from_tensor_slices three
    assert elements(Dataset.from_tensors([1, 2, 3])) == [[1, 2, 3]]


def test_from_generator_takes_tensorflows_older_output_types_and_output_shapes():
    def pairs():
        yield [1, 2, 3], [10]
        yield [4, 5], [11, 12]

    typed = Dataset.from_generator(pairs, (sf.int32, sf.int32))
    assert typed.element_spec == (sf.TensorSpec([None], sf.int32),
                                  sf.TensorSpec([None], sf.int32))
    shaped = Dataset.from_generator(pairs, output_types=(sf.int64, sf.float32),
                                    output_shapes=([None], [None]))
    assert [(a.dtype.name, b.dtype.name) for a, b in shaped] == [("int64", "float32")] * 2
    assert elements(shaped) == [([1, 2, 3], [10.0]), ([4, 5], [11.0, 12.0])]
    with pytest.raises(ValueError, match="output_signature says"):
        elements(Dataset.from_generator(pairs, (sf.int32, sf.int32), ([3], [1])))
    with pytest.raises(TypeError, match="output_signature="):
        Dataset.from_generator(pairs, (sf.TensorSpec([None]), sf.TensorSpec([None])))
    with pytest.raises(TypeError, match="not both"):
        Dataset.from_generator(pairs, (sf.int32, sf.int32),
                               output_signature=(sf.TensorSpec([None]),) * 2)
    with pytest.raises(ValueError, match="output_shapes must have the elements' structure"):
        Dataset.from_generator(pairs, (sf.int32, sf.int32), [None])
    named = Dataset.from_generator(lambda: iter([{"ids": [1, 2], "label": 0}]),
                                   {"ids": sf.int64, "label": sf.int32},
                                   {"ids": [None], "label": []})
    assert named.element_spec == {"ids": sf.TensorSpec([None], sf.int64),
                                  "label": sf.TensorSpec((), sf.int32)}
    assert elements(named) == [{"ids": [1, 2], "label": 0}]


# -- unbatch, padded_batch --------------------------------------------------------------------


@given(count=st.integers(0, 12), size=st.integers(1, 5), drop=st.booleans())
@settings(max_examples=25, deadline=None)
def test_unbatch_undoes_batch(count, size, drop):
    rows = np.arange(count * 2, dtype=np.float32).reshape(count, 2)
    batched = Dataset.from_tensor_slices((rows, np.arange(count))).batch(size, drop)
    kept = count // size * size if drop else count
    got = elements(batched.unbatch())
    assert got == [(rows[i].tolist(), i) for i in range(kept)]
    assert elements(batched.rebatch(3)) == [
        (rows[i:min(i + 3, kept)].tolist(), list(range(i, min(i + 3, kept))))
        for i in range(0, kept, 3)]


def test_rebatch_takes_one_batch_size():
    with pytest.raises(ValueError, match=r"rebatch: batch_size is one size here, got \[2, 3\]"):
        Dataset.range(6).batch(2).rebatch([2, 3])


def test_unbatch_needs_a_leading_dim_shared_by_every_leaf():
    with pytest.raises(ValueError, match=r"unbatch: every leaf .* leading dim.*\n  at .*"
                                         r"test_dataset_transforms.py"):
        Dataset.range(3).unbatch()
    ragged = Dataset.from_tensors((np.zeros((2, 3)), np.zeros(3))).unbatch()
    with pytest.raises(ValueError, match=r"have shapes \[\(2, 3\), \(3,\)\]"):
        elements(ragged)


def ragged_rows(lengths):
    return Dataset.from_generator(lambda: (np.full(n, n, np.int32) for n in lengths),
                                  output_signature=sf.TensorSpec([None], sf.int32))


@given(lengths=st.lists(st.integers(0, 5), max_size=9), size=st.integers(1, 4),
       drop=st.booleans(), fixed=st.sampled_from([None, 5, 7]))
@settings(max_examples=25, deadline=None)
def test_padded_batch_matches_numpy_padding(lengths, size, drop, fixed):
    got = [b.tolist() for b in ragged_rows(lengths).padded_batch(
        size, padded_shapes=None if fixed is None else [fixed], padding_values=-3,
        drop_remainder=drop).as_numpy_iterator()]
    expected = []
    for start in range(0, len(lengths), size):
        group = lengths[start:start + size]
        if drop and len(group) < size:
            break
        width = fixed if fixed is not None else max(group)
        batch = np.full((len(group), width), -3, np.int32)
        for i, n in enumerate(group):
            batch[i, :n] = n
        expected.append(batch.tolist())
    assert got == expected


def test_padded_batch_reproduces_tensorflows_examples():
    a = Dataset.from_generator(lambda: ([x] * x for x in range(1, 5)), sf.int32)
    assert [b.tolist() for b in a.padded_batch(2).as_numpy_iterator()] == \
        [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert [b.tolist() for b in a.padded_batch(2, padded_shapes=5).as_numpy_iterator()] == \
        [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]], [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]
    assert [b.tolist() for b in a.padded_batch(2, padded_shapes=5, padding_values=-1)
            .as_numpy_iterator()] == \
        [[[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]], [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]]]
    pairs = [([1, 2, 3], [10]), ([4, 5], [11, 12])]
    e = Dataset.from_generator(lambda: iter(pairs), (sf.int32, sf.int32))
    assert elements(e.padded_batch(2, padding_values=(-1, 100))) == \
        [([[1, 2, 3], [4, 5, -1]], [[10, 100], [11, 12]])]
    assert e.padded_batch(2, padded_shapes=([4], [None])).element_spec == \
        (sf.TensorSpec((None, 4), sf.int32), sf.TensorSpec((None, None), sf.int32))


def test_padded_batch_refuses_elements_larger_than_the_padded_shape_at_the_users_line():
    with pytest.raises(ValueError, match=r"shape \[3\] do not fit padded shape \[2\]"):
        Dataset.from_tensors(np.zeros(3)).padded_batch(2, padded_shapes=[2])
    ds = ragged_rows([1, 4]).padded_batch(2, padded_shapes=[3])  # the line named below
    with pytest.raises(ValueError, match=r"shape \(4,\) is larger than the padded shape \[3\]"
                                         r"\n  at .*test_dataset_transforms.py:\d+: ds = "):
        elements(ds)
    with pytest.raises(ValueError, match="padding_values must have the elements' structure"):
        Dataset.from_tensors((np.zeros(2), np.zeros(2))).padded_batch(2, padding_values=(1,))


# -- bucket_by_sequence_length ------------------------------------------------------------------

TF_ELEMENTS = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22]]


def test_bucket_by_sequence_length_reproduces_tensorflows_examples():
    ds = Dataset.from_generator(lambda: TF_ELEMENTS, sf.int64, output_shapes=[None])
    three = ds.bucket_by_sequence_length(lambda elem: sf.shape(elem)[0], [3, 5], [2, 2, 2])
    assert [b.tolist() for b in three.as_numpy_iterator()] == [
        [[1, 2, 3, 4], [5, 6, 7, 0]], [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]],
        [[0, 0], [21, 22]]]
    to_boundary = ds.bucket_by_sequence_length(
        lambda elem: sf.shape(elem)[0], bucket_boundaries=[4, 7], bucket_batch_sizes=[2, 2, 2],
        pad_to_bucket_boundary=True, padding_values=-1)
    assert [b.tolist() for b in to_boundary.as_numpy_iterator()] == [
        [[0, -1, -1], [5, 6, 7]], [[1, 2, 3, 4, -1, -1], [7, 8, 9, 10, 11, -1]],
        [[21, 22, -1]], [[13, 14, 15, 16, 19, 20]]]
    assert to_boundary.element_spec == sf.TensorSpec((None, None), sf.int64)


def buckets_in_python(lengths, boundaries, sizes, drop):
    """Each row (n copies of n) to the bucket whose bounds hold n; a full bucket is a batch
    padded with 0 to its longest row; at the end the buckets left, in bucket order."""
    held, out = [[] for _ in sizes], []

    def batch(rows):
        width = max(len(r) for r in rows)
        return [r + [0] * (width - len(r)) for r in rows]

    for n in lengths:
        b = sum(n >= boundary for boundary in boundaries)
        held[b].append([n] * n)
        if len(held[b]) == sizes[b]:
            out.append(batch(held[b]))
            held[b] = []
    return out + ([] if drop else [batch(rows) for rows in held if rows])


@given(lengths=st.lists(st.integers(1, 9), max_size=14),
       boundaries=st.lists(st.integers(2, 8), max_size=3, unique=True).map(sorted),
       data=st.data(), drop=st.booleans())
@settings(max_examples=30, deadline=None)
def test_bucket_by_sequence_length_matches_python(lengths, boundaries, data, drop):
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=len(boundaries) + 1,
                               max_size=len(boundaries) + 1))
    ds = ragged_rows(lengths).bucket_by_sequence_length(
        lambda row: sf.shape(row)[0], boundaries, sizes, drop_remainder=drop)
    assert [b.tolist() for b in ds.as_numpy_iterator()] == \
        buckets_in_python(lengths, boundaries, sizes, drop)


def test_bucket_by_sequence_length_checks_its_arguments():
    rows = Dataset.from_tensor_slices(np.zeros((5, 3), np.float32))
    with pytest.raises(ValueError, match=r"bucket_batch_sizes needs len\(bucket_boundaries\) "
                                         r"\+ 1 = 3 sizes, got 2"):
        rows.bucket_by_sequence_length(lambda r: 3, [2, 4], [1, 1])
    with pytest.raises(ValueError, match="bucket_boundaries must increase"):
        rows.bucket_by_sequence_length(lambda r: 3, [4, 2], [1, 1, 1])
    with pytest.raises(ValueError, match="no_padding=True takes no padded_shapes"):
        rows.bucket_by_sequence_length(lambda r: 3, [2], [1, 1], padded_shapes=[4],
                                       no_padding=True)
    plain_batches = rows.bucket_by_sequence_length(lambda r: sf.shape(r)[0], [2], [2, 2],
                                                   no_padding=True)
    assert [b.shape for b in plain_batches.as_numpy_iterator()] == [(2, 3), (2, 3), (1, 3)]
    too_long = ragged_rows([2, 5]).bucket_by_sequence_length(
        lambda r: sf.shape(r)[0], [3], [1, 1], pad_to_bucket_boundary=True)
    with pytest.raises(sf.errors.InvalidArgumentError, match=r"length < max\(bucket_boundaries\)"
                                                             r" = 3, got 5"):
        list(too_long)


# -- window, flat_map, interleave -------------------------------------------------------------


def windows_in_python(count, size, shift, stride, drop):
    """TensorFlow's windows: one starting at every `shift`th element while any is left."""
    out = []
    for start in range(0, count, shift):
        window = list(range(start, count, stride))[:size]
        if drop and len(window) < size:
            break
        out.append(window)
    return out


@given(count=st.integers(0, 14), size=st.integers(1, 4), shift=st.integers(1, 5),
       stride=st.integers(1, 3), drop=st.booleans())
@settings(max_examples=40, deadline=None)
def test_window_matches_python_and_its_cardinality_counts_it(count, size, shift, stride, drop):
    ds = Dataset.range(count).window(size, shift, stride, drop)
    got = [[int(x) for x in window] for window in ds]
    assert got == windows_in_python(count, size, shift, stride, drop)
    assert int(ds.cardinality()) == len(got)


def test_window_reproduces_tensorflows_examples():
    def listed(ds):
        return [[int(x) for x in window] for window in ds]

    assert listed(Dataset.range(7).window(3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert listed(Dataset.range(7).window(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert listed(Dataset.range(7).window(3, 2, drop_remainder=True)) == \
        [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    assert listed(Dataset.range(7).window(3, 1, 2, drop_remainder=True)) == \
        [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    pairs = Dataset.from_tensor_slices(([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])).window(2)
    assert pairs.element_spec == (sf.data.DatasetSpec(sf.TensorSpec((), sf.int32)),) * 2
    assert elements(pairs) == [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])]
    named = Dataset.from_tensor_slices({"a": [1, 2, 3], "b": [4, 5, 6]}).window(2)
    assert elements(named) == [{"a": [1, 2], "b": [4, 5]}, {"a": [3], "b": [6]}]
    # the usual sliding window of batches
    slid = Dataset.range(6).window(4, shift=1, drop_remainder=True).flat_map(
        lambda w: w.batch(4, drop_remainder=True))
    assert slid.element_spec == sf.TensorSpec((4,), sf.int64)
    assert elements(slid) == [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]]
    zipped = pairs.flat_map(lambda x, y: Dataset.zip((x.batch(2), y.batch(2))))
    assert elements(zipped) == [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])]
    with pytest.raises(ValueError, match=r"Dataset.window: shift must be >= 1, got 0\n  at .*"
                                         r"test_dataset_transforms.py"):
        Dataset.range(3).window(2, 0)


def test_flat_map_reproduces_tensorflows_example_and_names_a_function_without_a_dataset():
    ds = Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert elements(ds.flat_map(Dataset.from_tensor_slices)) == list(range(1, 10))
    assert ds.flat_map(Dataset.from_tensor_slices).element_spec == sf.TensorSpec((), sf.int32)
    repeated = Dataset.range(4).flat_map(lambda x: Dataset.from_tensors(x).repeat(x))
    assert elements(repeated) == [1, 2, 2, 3, 3, 3]
    assert int(repeated.cardinality()) == sf.data.UNKNOWN_CARDINALITY
    bad = Dataset.range(3).flat_map(lambda x: x * 2)  # the line named below
    with pytest.raises(TypeError, match=r"flat_map: map_func must return a Dataset, got "
                                        r"Tensor\n  at .*test_dataset_transforms.py:\d+: bad"):
        elements(bad)


def interleave_in_python(lengths, cycle, block):
    """TensorFlow's interleave of datasets of `lengths[i]` copies of i, written with lists:
    turns go round a cycle of open lists, each turn taking `block` items from its list (an
    empty place first opening the next input's); a list that gives fewer has ended and
    frees its place."""
    pending, slots, out = list(range(len(lengths))), [None] * cycle, []
    while pending or any(slot is not None for slot in slots):
        for s in range(cycle):
            if slots[s] is None and pending:
                i = pending.pop(0)
                slots[s] = [i] * lengths[i]
            if slots[s] is not None:
                taken = slots[s][:block]
                out += taken
                slots[s] = slots[s][block:] if len(taken) == block else None
    return out


@given(lengths=st.lists(st.integers(0, 5), max_size=7), cycle=st.integers(1, 4),
       block=st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_interleave_matches_round_robin_in_python(lengths, cycle, block):
    counts = np.array(lengths, np.int64)
    ds = Dataset.from_tensor_slices((np.arange(len(lengths)), counts)) if lengths else \
        Dataset.from_tensor_slices((np.zeros(0, np.int64), counts))
    got = ds.interleave(lambda i, n: Dataset.from_tensors(i).repeat(n), cycle_length=cycle,
                        block_length=block)
    assert [int(x) for x in got] == interleave_in_python(lengths, cycle, block)


def test_interleave_reproduces_tensorflows_examples():
    ds = Dataset.range(1, 6).interleave(lambda x: Dataset.from_tensors(x).repeat(6),
                                        cycle_length=2, block_length=4)
    assert elements(ds) == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                            3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    # cycle_length=1 is flat_map
    nested = Dataset.range(1, 4).interleave(lambda x: Dataset.range(x), cycle_length=1)
    assert elements(nested) == [0, 0, 1, 0, 1, 2]
    with pytest.raises(ValueError, match="block_length must be >= 1"):
        Dataset.range(3).interleave(Dataset.range, cycle_length=2, block_length=0)


# -- scan, reduce, take_while, unique, get_single_element --------------------------------------


@given(values=st.lists(st.integers(-50, 50), max_size=10))
@settings(max_examples=20, deadline=None)
def test_scan_and_reduce_match_numpy(values):
    ds = Dataset.from_tensor_slices(np.array(values, np.int64))
    sums = ds.scan(np.int64(0), lambda s, x: (s + x, s + x))
    assert elements(sums) == np.cumsum(values, dtype=np.int64).tolist()
    total, count = ds.reduce((np.int64(0), np.int64(0)), lambda s, x: (s[0] + x, s[1] + 1))
    assert (int(total), int(count)) == (sum(values), len(values))


def test_scan_reproduces_tensorflows_example_and_keeps_the_states_dtypes():
    ds = Dataset.range(10).scan(sf.constant(0, dtype=sf.int64),
                                lambda state, i: (state + i, state + i))
    assert elements(ds) == [0, 1, 3, 6, 10, 15, 21, 28, 36, 45]
    assert ds.element_spec == sf.TensorSpec((), sf.int64)
    assert int(ds.cardinality()) == 10
    # a tuple element comes as one argument, after the state
    pairs = Dataset.from_tensor_slices(([1.0, 2.0], [3.0, 4.0]))
    products = pairs.scan(np.float32(1), lambda p, xy: (p * xy[0] * xy[1], p))
    assert elements(products) == [1.0, 3.0]
    changed = Dataset.range(3).scan(np.int64(0), lambda s, x: (sf.cast(s, sf.float32), x))
    with pytest.raises(TypeError, match=r"scan: the function returned the state float32\[\], "
                                        r"the initial state is int64\[\]"):
        elements(changed)
    with pytest.raises(TypeError, match=r"reduce: .*state \(int64\[\], int64\[\]\)"):
        Dataset.range(3).reduce(np.int64(0), lambda s, x: (s, x))


def test_take_while_unique_and_get_single_element():
    assert elements(Dataset.range(10).take_while(lambda x: x < 5)) == [0, 1, 2, 3, 4]
    values = [3, 1, 3, 3, 2, 1, 7, 2]
    ds = Dataset.from_tensor_slices(np.array(values))
    assert elements(ds.take_while(lambda x: x != 2)) == \
        list(itertools.takewhile(lambda x: x != 2, values))
    assert elements(ds.unique()) == list(dict.fromkeys(values))
    assert elements(Dataset.from_tensor_slices([1, 37, 2, 37, 2, 1]).unique()) == [1, 37, 2]
    with pytest.raises(TypeError, match=r"unique: elements must be int32 or int64 scalars, "
                                        r"got float32\[\]"):
        Dataset.from_tensor_slices([1.0]).unique()
    with pytest.raises(TypeError, match="take_while: the predicate must return a bool"):
        elements(ds.take_while(lambda x: x))
    assert plain(Dataset.from_tensors(({"a": [1, 2]}, 3.5)).get_single_element()) == \
        ({"a": [1, 2]}, 3.5)
    with pytest.raises(sf.errors.InvalidArgumentError, match="the dataset was empty"):
        Dataset.range(0).get_single_element()
    with pytest.raises(sf.errors.InvalidArgumentError, match="more than one element"):
        Dataset.range(2).get_single_element()


# -- shard, cache, apply ------------------------------------------------------------------------


@given(count=st.integers(0, 20), shards=st.integers(1, 5), data=st.data())
@settings(max_examples=25, deadline=None)
def test_shard_is_a_strided_slice(count, shards, data):
    index = data.draw(st.integers(0, shards - 1))
    ds = Dataset.range(count).shard(shards, index)
    assert elements(ds) == list(range(count))[index::shards]
    assert int(ds.cardinality()) == len(range(count)[index::shards])


def test_shard_checks_its_index():
    with pytest.raises(ValueError, match=r"shard: index must be in \[0, num_shards=2\), got 2"):
        Dataset.range(4).shard(2, 2)


def test_cache_computes_the_elements_once_and_keeps_a_shuffles_first_order():
    calls = []

    def noted(x):
        calls.append(int(x))
        return x

    ds = Dataset.range(5).map(
        lambda x: sf.numpy_function(noted, [x], sf.TensorSpec((), sf.int64))).cache()
    partial = iter(ds)
    next(partial)  # a pass that does not finish records nothing
    assert elements(ds.repeat(2)) == [0, 1, 2, 3, 4] * 2
    assert elements(ds) == [0, 1, 2, 3, 4]
    assert calls == [0, 0, 1, 2, 3, 4]
    shuffled = Dataset.range(8).shuffle(8).cache()
    first = elements(shuffled)
    assert sorted(first) == list(range(8))
    assert elements(shuffled.repeat(3)) == first * 3
    with pytest.raises(ValueError, match="only the in-memory cache"):
        Dataset.range(3).cache("/tmp/cache")


def test_range_takes_an_output_type_and_skip_minus_one_skips_everything():
    ds = Dataset.range(1, 8, 3, output_type=sf.int32)
    assert ds.element_spec == sf.TensorSpec((), sf.int32)
    assert elements(ds) == [1, 4, 7]
    assert elements(ds.skip(-1)) == []
    assert int(ds.skip(-1).cardinality()) == 0


def test_apply_passes_the_dataset_and_needs_one_back():
    assert elements(Dataset.range(5).apply(lambda ds: ds.skip(2))) == [2, 3, 4]
    with pytest.raises(TypeError, match="transformation_func must return a Dataset, got list"):
        Dataset.range(5).apply(lambda ds: [ds])


# -- cardinality --------------------------------------------------------------------------------


INFINITE, UNKNOWN = sf.data.INFINITE_CARDINALITY, sf.data.UNKNOWN_CARDINALITY


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: Dataset.range(42), 42),
    (lambda: Dataset.range(42).batch(5), 9),
    (lambda: Dataset.range(42).batch(5, drop_remainder=True), 8),
    (lambda: Dataset.range(42).repeat(), INFINITE),
    (lambda: Dataset.range(0).repeat(), 0),
    (lambda: Dataset.range(4).repeat(3).skip(5).take(4), 4),
    (lambda: Dataset.range(4).repeat().take(7), 7),
    (lambda: Dataset.range(4).repeat().skip(7), INFINITE),
    (lambda: Dataset.range(42).filter(lambda x: x > 10), UNKNOWN),
    (lambda: Dataset.range(42).filter(lambda x: x > 10).repeat(), INFINITE),
    (lambda: Dataset.range(42).filter(lambda x: x > 10).take(3), UNKNOWN),
    (lambda: Dataset.zip((Dataset.range(3), Dataset.range(5).repeat())), 3),
    (lambda: Dataset.range(3).concatenate(Dataset.range(2)), 5),
    (lambda: Dataset.range(3).enumerate().map(lambda i, x: x).prefetch(2), 3),
    (lambda: Dataset.range(12).batch(4).unbatch(), UNKNOWN),  # the batch dim is unknown
    (lambda: Dataset.range(12).batch(4, drop_remainder=True).unbatch(), 12),
    (lambda: Dataset.range(7).window(3, 2), 4),
    (lambda: Dataset.from_generator(lambda: iter(range(3))), UNKNOWN),
])
def test_cardinality_follows_tensorflows_rules(make, expected):
    count = make().cardinality()
    assert count.dtype.name == "int64"
    assert int(count) == expected
    if expected >= 0:
        assert len(list(make())) == expected


def test_len_is_the_known_cardinality_and_a_dataset_is_always_true():
    assert len(Dataset.range(7).window(3, 2)) == 4
    with pytest.raises(TypeError, match="The dataset is infinite."):
        len(Dataset.range(3).repeat())
    with pytest.raises(TypeError, match="The dataset length is unknown."):
        len(Dataset.range(3).filter(lambda x: x > 0))
    assert Dataset.range(0) and Dataset.range(3).filter(lambda x: x > 0)
    assert list(Dataset.range(3).filter(lambda x: x > 0).as_numpy_iterator()) == [1, 2]


# -- the methods' examples --------------------------------------------------------------------


NEW_METHODS = ["__len__", "range", "from_tensors", "from_generator", "unbatch", "rebatch",
               "padded_batch", "bucket_by_sequence_length", "window", "flat_map", "interleave",
               "scan", "take_while", "unique", "cache", "shard", "apply", "reduce",
               "get_single_element", "cardinality"]


@pytest.mark.parametrize("name", NEW_METHODS)
def test_each_method_has_an_example_that_runs(name):
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(getattr(Dataset, name), name, globs={"sf": sf, "np": np})
             if t.examples]
    assert tests, f"Dataset.{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


# -- inside staged functions, and functions of windows ------------------------------------------


def test_reduce_and_get_single_element_staged_give_the_eager_values_each_run():
    ds = Dataset.from_tensor_slices(np.arange(1.0, 6.0, dtype=np.float32))

    def both(start):
        total = ds.reduce(start, lambda s, x: s + x * x)
        return total, ds.skip(2).take(1).get_single_element()

    staged = sf.function(both)
    for start in (0.0, 10.0):
        eager = both(np.float32(start))
        got = staged(sf.constant(start))
        assert [float(v) for v in got] == [float(v) for v in eager] == [start + 55.0, 3.0]
    with pytest.raises(sf.errors.InvalidArgumentError, match="had more than one element"):
        sf.function(lambda: ds.get_single_element())()


def test_functions_of_window_datasets_run_eagerly_and_cannot_return_datasets():
    windows = Dataset.range(7).window(3)
    sums = windows.map(lambda w: w.reduce(np.int64(0), lambda s, x: s + x))
    assert sums.element_spec == sf.TensorSpec((), sf.int64)
    assert elements(sums) == [3, 12, 6]
    assert elements(windows.filter(lambda w: w.cardinality() == 3).flat_map(lambda w: w)) == \
        list(range(6))
    with pytest.raises(TypeError, match=r"padded_batch: the elements are datasets \(dataset "
                                        r"of int64\[\], a window's\)"):
        windows.padded_batch(2)
    with pytest.raises(TypeError, match="returned a dataset, which elements here cannot hold"):
        elements(windows.map(lambda w: w.batch(2)))
    it = iter(windows)
    with pytest.raises(TypeError, match="holding datasets .* cannot enter a staged function"):
        sf.function(lambda: next(it), autograph=False)()


def test_a_staged_loop_over_sliding_windows_and_padded_batches_gives_the_eager_sums():
    series = np.arange(10, dtype=np.float32)
    windows = Dataset.from_tensor_slices(series).window(4, shift=2, drop_remainder=True) \
        .flat_map(lambda w: w.batch(4, drop_remainder=True))
    padded = ragged_rows([1, 3, 2, 4, 1]).padded_batch(2, padded_shapes=[4],
                                                       drop_remainder=True)

    def sums():
        total = sf.zeros((4,))
        for window in windows:
            total += window
        count = sf.zeros((4,), sf.int32)
        for batch in padded:
            count += sf.reduce_sum(batch, axis=0)
        return total, count

    starts = range(0, 7, 2)
    want = np.sum([series[s:s + 4] for s in starts], axis=0)
    rows = np.zeros((4, 4), np.int32)
    for i, n in enumerate([1, 3, 2, 4]):
        rows[i, :n] = n
    staged = sf.function(sums)
    for total, count in (sums(), staged(), staged()):  # each staged call a new pass
        np.testing.assert_allclose(total.numpy(), want)
        np.testing.assert_array_equal(count.numpy(), rows.sum(axis=0))
    assert "dataset_get_next" in staged.get_concrete_function().ir()


def test_data_experimental_shows_exactly_its_public_names():
    module = sf.data.experimental
    assert all(hasattr(module, name) for name in module.__all__)
    assert [n for n in dir(module) if not n.startswith("_")] == sorted(module.__all__)
    assert module.AUTOTUNE == sf.data.AUTOTUNE
    assert (module.INFINITE_CARDINALITY, module.UNKNOWN_CARDINALITY) == (-1, -2)
