"""sf.data: each source and transformation against plain Python/NumPy, iterators restored
from checkpoints at every position of a pipeline (shuffle, parallel map, prefetch, repeat),
and datasets consumed inside staged functions."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stageflow as sf

IMAGES = np.arange(60, dtype=np.float32).reshape(10, 3, 2)
LABELS = np.arange(10, dtype=np.int64)


def as_numpy(dataset):
    return list(dataset.as_numpy_iterator())


def labels_of(batches):
    return [b[1].tolist() for b in batches]


def test_from_tensor_slices_gives_rows_of_every_leaf_as_tensors():
    ds = sf.data.Dataset.from_tensor_slices({"x": IMAGES, "y": LABELS})
    elements = list(ds)
    assert len(elements) == 10
    assert isinstance(elements[3]["x"], sf.Tensor)
    np.testing.assert_array_equal(elements[3]["x"].numpy(), IMAGES[3])
    assert int(elements[3]["y"].numpy()) == 3
    assert ds.element_spec == {"x": sf.TensorSpec((3, 2), sf.float32),
                               "y": sf.TensorSpec((), sf.int64)}
    python = sf.data.Dataset.from_tensor_slices([[1.0, 2.0], [3.0, 4.0]])
    assert python.element_spec == sf.TensorSpec((2,), sf.float32)  # sf.constant's dtypes


def test_from_tensor_slices_needs_one_leading_dim():
    with pytest.raises(ValueError, match="same leading dim"):
        sf.data.Dataset.from_tensor_slices((IMAGES, LABELS[:4]))
    with pytest.raises(ValueError, match="same leading dim"):
        sf.data.Dataset.from_tensor_slices(np.float32(1.0))


@given(size=st.integers(1, 12), batch=st.integers(1, 5), drop=st.booleans())
def test_batch_matches_numpy_slicing(size, batch, drop):
    data = np.arange(size * 2, dtype=np.int32).reshape(size, 2)
    got = as_numpy(sf.data.Dataset.from_tensor_slices(data).batch(batch, drop_remainder=drop))
    stop = size - size % batch if drop else size
    want = [data[i:min(i + batch, stop)] for i in range(0, stop, batch)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    spec = sf.data.Dataset.from_tensor_slices(data).batch(batch, drop).element_spec
    assert spec.shape == ((batch if drop else None), 2)


def test_shuffle_is_a_seeded_permutation_reshuffled_each_epoch():
    ds = sf.data.Dataset.from_tensor_slices(LABELS).shuffle(4, seed=7)
    first, second = as_numpy(ds), as_numpy(ds)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first != second  # a new order per epoch
    again = sf.data.Dataset.from_tensor_slices(LABELS).shuffle(4, seed=7)
    assert as_numpy(again) == first  # the same seed: the same orders
    fixed = sf.data.Dataset.from_tensor_slices(LABELS).shuffle(
        10, seed=1, reshuffle_each_iteration=False)
    assert as_numpy(fixed) == as_numpy(fixed)
    # A buffer of 1 cannot reorder; a small buffer moves elements only so far.
    assert as_numpy(sf.data.Dataset.from_tensor_slices(LABELS).shuffle(1)) == list(range(10))
    window = as_numpy(sf.data.Dataset.from_tensor_slices(np.arange(100)).shuffle(3, seed=0))
    assert all(value <= position + 2 for position, value in enumerate(window))


def test_repeat_take_skip():
    ds = sf.data.Dataset.range(4)
    assert as_numpy(ds.repeat(3)) == [0, 1, 2, 3] * 3
    assert as_numpy(ds.repeat().take(10)) == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert as_numpy(ds.skip(1).take(2)) == [1, 2]
    assert as_numpy(ds.take(-1)) == [0, 1, 2, 3]
    assert as_numpy(ds.take(0).repeat()) == []  # an empty epoch ends an endless repeat
    assert as_numpy(sf.data.Dataset.range(2, 11, 3)) == [2, 5, 8]


def test_map_is_staged_once_per_signature_and_runs_in_parallel_in_order():
    traces = []

    def scale(x, y):
        traces.append(1)
        return x * 2.0, y + 1

    ds = sf.data.Dataset.from_tensor_slices((IMAGES, LABELS))
    serial = as_numpy(ds.map(scale))
    assert len(traces) == 1  # one trace for the one element signature
    parallel = as_numpy(ds.map(scale, num_parallel_calls=sf.data.AUTOTUNE))
    for (a, b), (c, d), image, label in zip(serial, parallel, IMAGES, LABELS, strict=True):
        np.testing.assert_array_equal(a, image * 2)
        np.testing.assert_array_equal(c, image * 2)
        assert b == d == label + 1
    assert ds.map(scale).element_spec == (sf.TensorSpec((3, 2), sf.float32),
                                          sf.TensorSpec((), sf.int64))


def test_a_map_function_that_cannot_be_staged_runs_eagerly_with_a_warning():
    def python_only(x):
        return float(x.numpy()) + 0.5  # a concrete value: fails while traced

    ds = sf.data.Dataset.from_tensor_slices(np.arange(3, dtype=np.float32)).map(python_only)
    with pytest.warns(UserWarning, match="runs eagerly"):
        assert as_numpy(ds) == [0.5, 1.5, 2.5]


def test_from_generator_restarts_each_epoch_and_checks_its_signature():
    def numbers(stop):
        for i in range(stop):
            yield i, np.full((2,), i, np.float32)

    signature = (sf.TensorSpec((), sf.int32), sf.TensorSpec((2,), sf.float32))
    ds = sf.data.Dataset.from_generator(numbers, output_signature=signature, args=(3,))
    assert ds.element_spec == signature
    assert [int(i) for i, _ in ds] == [0, 1, 2]
    assert [int(i) for i, _ in ds] == [0, 1, 2]
    assert [b[0].tolist() for b in as_numpy(ds.batch(2))] == [[0, 1], [2]]
    bad = sf.data.Dataset.from_generator(lambda: iter([(1, np.zeros(3))]),
                                         output_signature=signature)
    with pytest.raises(ValueError, match="output_signature"):
        as_numpy(bad)
    with pytest.raises(TypeError, match="generator function"):
        sf.data.Dataset.from_generator(numbers(3))


def test_errors_in_a_prefetched_pipeline_reach_the_consumer():
    def broken():
        yield np.float32(1.0)
        raise RuntimeError("the source broke")

    it = iter(sf.data.Dataset.from_generator(broken).prefetch(2))
    assert float(next(it).numpy()) == 1.0
    with pytest.raises(RuntimeError, match="the source broke"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def pipeline():
    """Every stateful stage: shuffle (random state and buffer), a parallel map (results
    computed ahead), batch, repeat (epochs), prefetch (a thread running ahead)."""
    return (sf.data.Dataset.from_tensor_slices((IMAGES, LABELS))
            .shuffle(5)  # no seed: the iterator's state carries the drawn one
            .map(lambda x, y: (x + 1.0, y), num_parallel_calls=3)
            .batch(3)
            .repeat(3)
            .prefetch(4))


@given(position=st.integers(0, 12))
def test_a_restored_iterator_continues_with_the_same_batches(tmp_path_factory, position):
    path = str(tmp_path_factory.mktemp("data") / "it")
    original = iter(pipeline())
    for _ in range(position):
        next(original)
    sf.train.Checkpoint(data=original).write(path)
    expected = [(x.numpy(), y.numpy()) for x, y in original]
    assert len(expected) == 12 - position  # 3 epochs of 4 batches

    restored = iter(pipeline())  # a new pipeline, with another shuffle seed
    next(restored)
    sf.train.Checkpoint(data=restored).restore(path).assert_consumed()
    got = [(x.numpy(), y.numpy()) for x, y in restored]
    assert len(got) == len(expected)
    for (a, b), (c, d) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_a_generator_iterator_restores_by_replaying(tmp_path):
    ds = sf.data.Dataset.from_generator(lambda: iter(range(6)))
    it = iter(ds)
    next(it), next(it)
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "g"))
    again = iter(ds)
    sf.train.Checkpoint(it=again).restore(path)
    assert [int(v) for v in again] == [2, 3, 4, 5]


def test_restoring_into_another_pipeline_raises_and_keeps_the_position(tmp_path):
    it = iter(sf.data.Dataset.range(5).shuffle(2, seed=0))
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "it"))
    other = iter(sf.data.Dataset.range(5).batch(2))
    next(other)
    with pytest.raises(ValueError, match="does not fit this dataset's pipeline"):
        sf.train.Checkpoint(it=other).restore(path)
    assert next(other).numpy().tolist() == [2, 3]


def test_a_training_step_staged_over_a_dataset_loop():
    ds = sf.data.Dataset.from_tensor_slices(IMAGES).batch(3, drop_remainder=True)

    @sf.function
    def total():
        s = sf.zeros((3, 2))
        for batch in ds:
            s += sf.reduce_sum(batch, axis=0)
        return s

    want = IMAGES[:9].sum(axis=0)
    np.testing.assert_allclose(total().numpy(), want)
    np.testing.assert_allclose(total().numpy(), want)  # each call is a new pass
    ir = total.get_concrete_function().ir()
    assert "dataset_start" in ir and "dataset_get_next" in ir and "sf.while" in ir


def test_next_inside_a_staged_function_takes_one_element_per_call():
    it = iter(sf.data.Dataset.from_tensor_slices(LABELS[:2]))

    @sf.function
    def step():
        return next(it) * 10

    assert [int(step().numpy()), int(step().numpy())] == [0, 10]
    with pytest.raises(sf.errors.OutOfRangeError, match="end of the dataset"):
        step()


def test_a_python_loop_over_a_dataset_while_traced_is_refused():
    ds = sf.data.Dataset.range(3)

    def loop():
        for x in ds:
            sf.print(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        staged = sf.function(loop, autograph=False)
        with pytest.raises(TypeError, match="let AutoGraph stage the loop"):
            staged()


def test_arguments_are_checked():
    ds = sf.data.Dataset.range(3)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ds.batch(0)
    with pytest.raises(ValueError, match="buffer_size must be >= 1"):
        ds.shuffle(0)


def test_filter_zip_enumerate_and_concatenate():
    ds = sf.data.Dataset.range(10)
    assert as_numpy(ds.filter(lambda x: x % 3 == 0)) == [0, 3, 6, 9]
    pairs = as_numpy(sf.data.Dataset.zip((ds, ds.map(lambda x: x * 2).take(3))))
    assert [tuple(int(v) for v in p) for p in pairs] == [(0, 0), (1, 2), (2, 4)]
    assert [(int(i), int(x)) for i, x in as_numpy(sf.data.Dataset.range(5, 8).enumerate(1))] \
        == [(1, 5), (2, 6), (3, 7)]
    joined = ds.take(2).concatenate(sf.data.Dataset.range(100, 102))
    assert as_numpy(joined) == [0, 1, 100, 101]
    with pytest.raises(TypeError, match="bool scalar"):
        as_numpy(ds.filter(lambda x: x * 2))
    with pytest.raises(TypeError, match="differ in structure"):
        ds.concatenate(sf.data.Dataset.from_tensor_slices(IMAGES))
    with pytest.raises(TypeError, match="tuple of datasets"):
        sf.data.Dataset.zip((ds, [1, 2]))


@given(position=st.integers(0, 13))  # 10 even numbers, then 3 pairs
def test_restoring_through_filter_zip_enumerate_and_concatenate(tmp_path_factory, position):
    def pipeline():
        evens = sf.data.Dataset.range(20).filter(lambda x: x % 2 == 0).shuffle(4)
        return evens.enumerate().concatenate(
            sf.data.Dataset.zip((sf.data.Dataset.range(3), sf.data.Dataset.range(3))))

    path = str(tmp_path_factory.mktemp("pipes") / "it")
    original = iter(pipeline())
    for _ in range(position):
        next(original)
    sf.train.Checkpoint(it=original).write(path)
    expected = [tuple(int(v) for v in item) for item in original]
    restored = iter(pipeline())
    sf.train.Checkpoint(it=restored).restore(path)
    assert [tuple(int(v) for v in item) for item in restored] == expected


def test_elements_of_different_shapes_batch_to_an_error_and_checkpoint_in_a_buffer(tmp_path):
    """`batch` names the shapes it cannot stack; a shuffle buffer of such elements is saved
    element by element and restored to the same order."""
    def ragged():
        return (np.arange(n, dtype=np.float32) for n in range(1, 7))

    ds = sf.data.Dataset.from_generator(ragged, output_signature=sf.TensorSpec([None], sf.float32))
    with pytest.raises(ValueError, match=r"cannot be stacked .* \[\[\(1,\)\], \[\(2,\)\]\]"):
        next(iter(ds.batch(2)))
    it = iter(ds.shuffle(4, seed=0))
    next(it)
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "ragged"))
    rest = [x.numpy().tolist() for x in it]
    assert sorted(map(len, rest)) == [1, 2, 3, 5, 6]  # with the 4 the first call took
    again = iter(ds.shuffle(4, seed=0))
    sf.train.Checkpoint(it=again).restore(path)
    assert [x.numpy().tolist() for x in again] == rest
