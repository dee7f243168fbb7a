"""Iterators of the restructuring transformations (window, flat_map, interleave, unbatch,
padded_batch, bucket_by_sequence_length, scan, take_while, unique, shard, cache,
from_tensors) saved at every position and restored into a freshly built pipeline: the
restored iterator gives exactly the elements (and the same end) the uninterrupted one gives.
Unseeded shuffles inside and around the new stages check that their random state travels
with the position; a position saved by a pipeline with other arguments is refused, naming
the stage."""

import numpy as np
import pytest
from test_dataset_transforms import plain  # the same comparison of elements

import stageflow as sf

Dataset = sf.data.Dataset


def ragged(lengths):
    return Dataset.from_generator(lambda: (np.full(n, n, np.float32) for n in lengths),
                                  output_signature=sf.TensorSpec([None], sf.float32))


PIPELINES = {
    "window then flat_map": lambda: Dataset.range(11).shuffle(4).window(3, 2, 2).flat_map(
        lambda w: w.batch(3)),
    "window of pairs, prefetched": lambda: Dataset.zip((Dataset.range(9), Dataset.range(9)))
    .window(4, 3).prefetch(3).flat_map(lambda a, b: Dataset.zip((a, b.skip(1)))),
    "interleave of shuffled datasets": lambda: Dataset.range(1, 6).interleave(
        lambda x: Dataset.range(x * 10, x * 10 + x).shuffle(3), cycle_length=3, block_length=2),
    "flat_map then repeat": lambda: Dataset.range(4).flat_map(
        lambda x: Dataset.from_tensors(x).repeat(x)).repeat(2),
    "unbatch of shuffled batches": lambda: Dataset.range(10).batch(3).shuffle(3).unbatch(),
    "padded_batch": lambda: ragged([3, 1, 4, 1, 5, 2, 6]).shuffle(3).padded_batch(
        2, padding_values=-1.0),
    "bucket_by_sequence_length": lambda: ragged([3, 1, 4, 1, 5, 2, 6, 2, 1]).shuffle(4)
    .bucket_by_sequence_length(lambda r: sf.shape(r)[0], [2, 4], [2, 3, 2]),
    "scan": lambda: Dataset.range(8).shuffle(8).scan(
        (np.int64(0), np.float32(1)), lambda s, x: ((s[0] + x, s[1] * 2), s[0] * 100 + x)),
    "take_while, unique, shard": lambda: Dataset.from_tensor_slices(
        np.array([5, 1, 5, 2, 1, 3, 2, 9, 4, 0, 8, 6, 7, 11])).unique().shard(2, 1).take_while(
        lambda x: x != 7),
    "cache recording and read": lambda: Dataset.range(5).shuffle(5).cache().repeat(3),
    "from_tensors and rebatch": lambda: Dataset.from_tensors(np.arange(6)).repeat(3)
    .rebatch(4),
}


def run_after_restore(make, position, path):
    """The elements after `position` of an uninterrupted iterator, and of a fresh one
    restored from a checkpoint written there."""
    original = iter(make())
    for _ in range(position):
        next(original)
    sf.train.Checkpoint(data=original).write(path)
    expected = [plain(e) for e in original]
    restored = iter(make())
    sf.train.Checkpoint(data=restored).restore(path).assert_consumed()
    return expected, [plain(e) for e in restored]


@pytest.mark.parametrize("name", list(PIPELINES))
def test_a_restored_iterator_continues_with_the_same_elements(tmp_path, name):
    make = PIPELINES[name]
    length = sum(1 for _ in make())
    assert length > 3
    for position in range(length + 1):
        expected, got = run_after_restore(make, position, str(tmp_path / f"at{position}"))
        assert len(expected) == length - position
        assert got == expected, f"restored at {position}"


def test_a_cache_restored_in_a_fresh_dataset_reads_the_saved_record(tmp_path):
    """A restore into a pipeline whose cache is empty (another process) gets the record
    from the checkpoint, not a new pass of the stages before the cache."""
    first = Dataset.range(6).shuffle(6).cache()
    order = [int(x) for x in first]
    it = iter(first.repeat(2))
    for _ in range(8):  # into the second epoch: reading the record
        next(it)
    path = sf.train.Checkpoint(data=it).write(str(tmp_path / "cache"))
    fresh = Dataset.range(6).shuffle(6).cache().repeat(2)
    restored = iter(fresh)
    sf.train.Checkpoint(data=restored).restore(path)
    assert [int(x) for x in restored] == order[2:]


def test_a_cache_restored_reading_replaces_the_record_of_its_dataset(tmp_path):
    """A pipeline that recorded its own cache (another shuffle order) before the restore
    reads the saved record from then on, in the restored pass and the epochs after it, as
    the uninterrupted iterator does."""
    def make():
        return Dataset.range(6).shuffle(6).cache()

    saved = make()
    it = iter(saved.repeat(3))
    order = [int(next(it)) for _ in range(8)]
    path = sf.train.Checkpoint(data=it).write(str(tmp_path / "cache"))
    expected = [int(x) for x in it]
    fresh = make()
    assert len([int(x) for x in fresh]) == 6  # its own record, drawn with its own seed
    restored = iter(fresh.repeat(3))
    sf.train.Checkpoint(data=restored).restore(path)
    assert [int(x) for x in restored] == expected == order[2:6] + order[:6]


def test_an_open_dataset_made_by_another_function_is_refused(tmp_path):
    it = iter(Dataset.range(3).flat_map(lambda x: Dataset.range(x + 2).take(5)))
    next(it)
    path = sf.train.Checkpoint(data=it).write(str(tmp_path / "flat"))
    other = iter(Dataset.range(3).flat_map(lambda x: Dataset.range(x + 2).take(6)))
    with pytest.raises(ValueError, match=r"Dataset.flat_map: .*stage 2 is `take\(5\) -> "
                                         r"int64\[\]` in the checkpoint, `take\(6\) -> "):
        sf.train.Checkpoint(data=other).restore(path)


@pytest.mark.parametrize(("saved", "other", "stage"), [
    (lambda d: d.window(3), lambda d: d.window(3, 2), "window"),
    (lambda d: d.padded_batch(2, [4]), lambda d: d.padded_batch(2, [5]), "padded_batch"),
    (lambda d: d.shard(2, 0), lambda d: d.shard(2, 1), "shard"),
    (lambda d: d.interleave(Dataset.from_tensors, 2), lambda d: d.interleave(
        Dataset.from_tensors, 3), "interleave"),
])
def test_a_position_saved_with_other_arguments_is_refused(tmp_path, saved, other, stage):
    base = Dataset.from_tensor_slices(np.zeros((6, 3), np.int64))
    it = iter(saved(base))
    next(it)
    path = sf.train.Checkpoint(data=it).write(str(tmp_path / "it"))
    with pytest.raises(ValueError, match=rf"does not fit .*stage 2 is `{stage}"):
        sf.train.Checkpoint(data=iter(other(base))).restore(path)
