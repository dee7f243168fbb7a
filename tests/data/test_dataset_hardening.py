"""sf.data under errors and foreign checkpoints: a map function that cannot be staged runs
eagerly in parallel too; an element's error comes at that element's position and iteration
goes on, with prefetch and parallel map as without them, before and after a checkpoint
restore; saving never raises an error of an element not yet handed out; and a position
saved by another pipeline is refused, naming the stage that differs."""

import threading
import time
import warnings

import numpy as np
import pytest

import stageflow as sf
from stageflow.data.elements import error_record, rebuilt_error

BAD = (2, 7)  # the elements `checked` refuses


def refuse(value):
    if int(value) in BAD:
        raise ValueError(f"element {int(value)} is bad")
    return value


def checked(x):
    """A staged map function whose run raises on the elements in BAD."""
    return sf.numpy_function(refuse, [x], sf.TensorSpec((), sf.int64))


def outcomes(iterator, limit=100):
    """Each element (an int) or error (type and message) the iterator gives, in order,
    next() called again after an error, until it ends."""
    seen = []
    for _ in range(limit):
        try:
            seen.append(int(next(iterator)))
        except StopIteration:
            return seen
        except Exception as error:  # noqa: BLE001 - recorded in place
            seen.append(f"{type(error).__name__}: {error}")
    raise AssertionError(f"no end after {limit} outcomes: {seen}")


def plain():
    return sf.data.Dataset.range(10).map(checked).repeat(2)


AHEAD = {
    "prefetch": lambda: sf.data.Dataset.range(10).map(checked).repeat(2).prefetch(3),
    "parallel map": lambda: sf.data.Dataset.range(10).map(checked, num_parallel_calls=3)
    .repeat(2),
    "both": lambda: sf.data.Dataset.range(10).map(checked, num_parallel_calls=4)
    .prefetch(2).repeat(2).prefetch(5),
}


def test_a_map_function_that_cannot_be_staged_runs_eagerly_in_parallel_too():
    def python_only(x):
        return float(x.numpy()) * 2.0  # a concrete value: fails while traced

    data = sf.data.Dataset.from_tensor_slices(np.arange(6, dtype=np.float32))
    for parallel in (None, 3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [float(v) for v in data.map(python_only, num_parallel_calls=parallel)
                   .as_numpy_iterator()]
        assert got == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        eager = [w for w in caught if "runs eagerly" in str(w.message)]
        assert len(eager) == 1, [str(w.message) for w in caught]


@pytest.mark.parametrize("kind", sorted(AHEAD))
def test_an_element_error_comes_at_its_position_and_iteration_goes_on(kind):
    want = outcomes(iter(plain()))
    assert want.count("ValueError: element 2 is bad") == 2 and len(want) == 20
    assert outcomes(iter(AHEAD[kind]())) == want


@pytest.mark.parametrize("kind", sorted(AHEAD))
def test_a_restored_iterator_gives_the_same_elements_and_errors(tmp_path, kind):
    want = outcomes(iter(plain()))
    for position in (1, 2, 11, 16):
        original = iter(AHEAD[kind]())
        before = [outcomes_one(original) for _ in range(position)]
        path = sf.train.Checkpoint(it=original).write(str(tmp_path / f"{kind}{position}"))
        restored = iter(AHEAD[kind]())
        sf.train.Checkpoint(it=restored).restore(path).assert_consumed()
        assert before + outcomes(restored) == want, position
        assert before + outcomes(original) == want, position


def outcomes_one(iterator):
    """The next outcome, as `outcomes` records it."""
    try:
        return int(next(iterator))
    except ValueError as error:
        return f"ValueError: {error}"


def test_writing_a_checkpoint_never_raises_the_error_of_an_element_computed_ahead(tmp_path):
    """The parallel map has computed element 2 (which raises) when element 0 is handed
    out: the write saves that error in its place, and it is raised there, after the
    restore too."""
    ds = sf.data.Dataset.range(5).map(checked, num_parallel_calls=3)
    it = iter(ds)
    assert int(next(it)) == 0
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "ahead"))
    rest = [1, "ValueError: element 2 is bad", 3, 4]
    assert outcomes(it) == rest
    again = iter(ds)
    sf.train.Checkpoint(it=again).restore(path)
    assert outcomes(again) == rest


class BadElement(Exception):
    """An exception type of the user's, which a checkpoint cannot rebuild."""


def test_saved_errors_are_rebuilt_by_type_and_arguments():
    for error in (KeyError("label"), ValueError("bad", 3), sf.errors.OutOfRangeError("end"),
                  OSError(2, "No such file")):
        error.add_note("raised in sf.numpy_function")
        again = rebuilt_error(error_record(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert again.__notes__ == ["raised in sf.numpy_function"]
    foreign = rebuilt_error(error_record(BadElement("element 3")))
    assert isinstance(foreign, RuntimeError)
    assert str(foreign) == f"{__name__}.BadElement: element 3"
    with pytest.raises(ValueError, match="type name"):
        rebuilt_error({"type": 3, "args": []})


def first_stage_differs(saved, restored, tmp_path, match):
    """Restore `saved`'s position into `restored`: refused with a ValueError matching
    `match`, and `restored` keeps its own position."""
    it = iter(saved)
    next(it)
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "saved"))
    other = iter(restored)
    first = next(other)
    with pytest.raises(ValueError, match=match) as refused:
        sf.train.Checkpoint(it=other).restore(path)
    assert "does not fit this dataset's pipeline" in str(refused.value)
    return first, other


def test_a_position_of_a_pipeline_with_other_dtypes_is_refused(tmp_path):
    floats = sf.data.Dataset.range(10).map(lambda x: sf.cast(x, sf.float32)).shuffle(4, 0)
    ints = sf.data.Dataset.range(10).map(lambda x: x * 2).shuffle(4, 0)
    _, other = first_stage_differs(
        floats, ints, tmp_path, r"stage 2 is `map -> float32\[\]` in the checkpoint, "
                                r"`map -> int64\[\]` here")
    assert next(other).dtype == sf.int64


def test_a_position_of_a_pipeline_of_another_structure_is_refused(tmp_path):
    single = sf.data.Dataset.range(10).map(lambda x: x + 1).shuffle(4, 0)
    pairs = sf.data.Dataset.range(10).map(lambda x: (x, x)).shuffle(4, 0)
    first_stage_differs(single, pairs, tmp_path, r"`map -> int64\[\]` in the checkpoint, "
                                                 r"`map -> \(int64\[\], int64\[\]\)` here")
    first_stage_differs(sf.data.Dataset.range(10).batch(3), sf.data.Dataset.range(10).batch(4),
                        tmp_path, r"stage 2 is `batch\(3\) -> int64\[\?\]`")
    first, other = first_stage_differs(sf.data.Dataset.range(6).prefetch(2),
                                       sf.data.Dataset.range(6), tmp_path,
                                       "it has 2 stages, this one 1")
    assert (int(first), int(next(other))) == (0, 1)


def test_a_saved_buffer_of_other_elements_is_refused_without_a_pipeline_description():
    """A checkpoint written before positions named their pipeline: the buffer's elements
    are checked against the stage's spec."""
    floats = iter(sf.data.Dataset.range(10).map(lambda x: sf.cast(x, sf.float32))
                  .shuffle(4, 0))
    next(floats)
    state = floats._checkpoint_state()
    del state["pipeline"]
    ints = iter(sf.data.Dataset.range(10).map(lambda x: x * 2).shuffle(4, 0))
    with pytest.raises(ValueError, match=r"a saved element is float32\[\], the pipeline's "
                                         r"elements are int64\[\] here"):
        ints._checkpoint_prepare(state, "restore")


def test_the_pipeline_description_leaves_out_parallelism_and_prefetch_sizes(tmp_path):
    """num_parallel_calls and a prefetch's size change no element: a position saved with
    one value restores into a pipeline with another."""
    def pipeline(parallel, size):
        return sf.data.Dataset.range(8).map(checked, num_parallel_calls=parallel) \
            .prefetch(size)

    it = iter(pipeline(4, 6))
    assert [outcomes_one(it) for _ in range(2)] == [0, 1]
    path = sf.train.Checkpoint(it=it).write(str(tmp_path / "tuned"))
    again = iter(pipeline(None, 1))
    sf.train.Checkpoint(it=again).restore(path)
    assert outcomes(again) == ["ValueError: element 2 is bad", 3, 4, 5, 6,
                               "ValueError: element 7 is bad"]


def test_a_parallel_map_makes_the_first_call_of_each_signature_alone():
    """Parallel first calls would each compile the staged function's program: the first
    call of a signature runs alone, the later ones in parallel."""
    ds = sf.data.Dataset.range(48).batch(8).map(lambda x: x * 2, num_parallel_calls=4)
    staged, lock = ds._staged, threading.Lock()
    running, done = [0], []
    overlaps = []  # per call: how many ran at its start, and whether one had finished

    def spy(*args):
        with lock:
            running[0] += 1
            overlaps.append((running[0], bool(done)))
        try:
            time.sleep(0.05)  # long enough for the other threads to arrive
            return staged(*args)
        finally:
            with lock:
                running[0] -= 1
                done.append(1)

    spy.get_concrete_function = staged.get_concrete_function
    ds._staged = spy
    assert [int(b[0]) for b in ds.as_numpy_iterator()] == [0, 16, 32, 48, 64, 80]
    assert sum(1 for _, after_one in overlaps if not after_one) == 1, overlaps
    assert max(count for count, _ in overlaps) > 1, overlaps


def test_the_spec_of_a_map_that_cannot_be_staged_after_a_shuffle():
    """The spec is the first element's, from a pass of its own: the shuffle's seed of that
    pass takes its epoch too, which must be a valid seed."""
    def python_only(x):
        return float(x.numpy()) / 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = sf.data.Dataset.range(6).shuffle(3, seed=1).map(python_only).prefetch(2)
        assert ds.element_spec == sf.TensorSpec((), sf.float32)
        assert sorted(float(v) for v in ds) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
