"""Checkpoints under races, kills and damage: `latest_checkpoint` while another process
saves, checksums against flipped bytes (and files written before them), saves from several
threads and processes into one directory, temporaries of killed saves, and edited metadata,
each refused with one error naming the file and the field."""

import json
import multiprocessing
import os
import re
import signal
import struct
import threading
import time

import numpy as np
import pytest

import stageflow as sf
from stageflow.models.train import storage

SHAPES = [(3, 4), (5,), ()]


def objects():
    return {f"w{i}": sf.Variable(np.zeros(shape, np.float32)) for i, shape in enumerate(SHAPES)}


def save_forever(directory: str, max_to_keep: int, megabytes: int = 0) -> None:
    """Save in a loop: every variable holds the number of the save that writes it."""
    variables = objects()
    if megabytes:
        variables["big"] = sf.Variable(np.zeros(megabytes * 2**18, np.float32))
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**variables), directory,
                                         max_to_keep=max_to_keep)
    while True:
        step = float(manager._checkpoint.save_counter.numpy()) + 1
        for v in variables.values():
            v.assign(np.full(v.shape, step, np.float32))
        manager.save()


def restored_step(path: str, variables: dict, ckpt=None) -> int:
    """Restore `path` into `variables` (through `ckpt`, a checkpoint of them, if given),
    check they all hold its save's number, return it."""
    ckpt = ckpt or sf.train.Checkpoint(**variables)
    ckpt.restore(path).assert_consumed()
    step = int(ckpt.save_counter.numpy())
    assert path.endswith(f"ckpt-{step}")
    for v in variables.values():
        np.testing.assert_array_equal(v.numpy(), np.full(v.shape, step, np.float32))
    return step


# -- latest_checkpoint while another process saves (max_to_keep=1) -----------------------------

@pytest.mark.exclusive  # a race between two processes, unslowed by the other's tests
def test_latest_checkpoint_is_never_none_while_another_process_saves(tmp_path):
    """Thousands of reads while a process saves and deletes the checkpoint before: each
    names a checkpoint, and each checkpoint named restores (once) to a consistent state,
    unless the saver had deleted it again by the time the restore opened it (the pointer
    then names a newer one)."""
    directory = str(tmp_path)
    saver = multiprocessing.get_context("fork").Process(target=save_forever,
                                                         args=(directory, 1), daemon=True)
    saver.start()
    try:
        while sf.train.latest_checkpoint(directory) is None:
            time.sleep(0.001)
        variables = objects()
        reads, nones, restored, overtaken, steps = 0, 0, 0, 0, []
        # Enough reads and restores to judge, however busy the machine: up to 5000 reads,
        # more while fewer than 20 restores were made, for 20 seconds at most.
        deadline = time.monotonic() + 20
        while (reads < 5000 or restored < 20) and time.monotonic() < deadline:
            latest = sf.train.latest_checkpoint(directory)
            reads += 1
            if latest is None:
                nones += 1
                continue
            if steps and latest.endswith(f"ckpt-{steps[-1]}"):
                continue
            try:
                steps.append(restored_step(latest, variables))
                restored += 1
            except FileNotFoundError:
                assert sf.train.latest_checkpoint(directory) != latest
                overtaken += 1
    finally:
        os.kill(saver.pid, signal.SIGKILL)
        saver.join()
    assert nones == 0, f"{nones} of {reads} reads found no latest checkpoint"
    assert reads >= 1000 and restored >= 20 and restored >= 4 * overtaken, (
        reads, restored, overtaken)
    assert steps == sorted(steps)


def test_the_pointer_is_replaced_before_the_dropped_checkpoint_is_deleted(tmp_path,
                                                                         monkeypatch):
    """At the moment a save deletes the checkpoint it dropped, the pointer already names
    the new one (and never the dropped one)."""
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**objects()), str(tmp_path),
                                         max_to_keep=1)
    manager.save()
    seen = []
    remove = storage.remove

    def watch(path: str) -> None:
        seen.append((os.path.basename(path), storage.read_pointer(str(tmp_path))))
        remove(path)

    monkeypatch.setattr(storage, "remove", watch)
    manager.save()
    (name, pointer), = seen
    assert name == "ckpt-1" and pointer["latest"] == "ckpt-2" and pointer["all"] == ["ckpt-2"]


# -- checksums ---------------------------------------------------------------------------------

def edit_header(file: str, change) -> None:
    """Rewrite `file` with its JSON header changed by `change(header)`, the data unchanged
    (its length and the data's start follow, as a tool editing the metadata would)."""
    with open(file, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def flip(file: str, position: int, bit: int = 0) -> None:
    with open(file, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ (1 << bit)]))


def data_start(file: str) -> int:
    with open(file, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


@pytest.mark.parametrize("megabytes", [0, 8])  # the sums made at once, and by threads
def test_a_flipped_data_bit_is_refused_naming_the_file_and_the_tensor(tmp_path, megabytes):
    values = {"a": np.arange(12, dtype=np.float32).reshape(3, 4),
              "b": np.linspace(0, 1, megabytes * 2**18 or 7).astype(np.float32),
              "c": np.array([True, False])}
    path = sf.train.Checkpoint(**{k: sf.Variable(v) for k, v in values.items()}).write(
        str(tmp_path / "w"))
    file = storage.file_of(path)
    start = data_start(file)
    with open(file, "rb") as f:
        header = json.loads(f.read(start)[8:])
    for key in values:
        begin, end = header[key]["data_offsets"]
        for position, bit in [(begin, 0), (end - 1, 7), ((begin + end) // 2, 3)]:
            flip(file, start + position, bit)
            with pytest.raises(ValueError) as error:
                sf.train.Checkpoint(**{k: sf.Variable(np.zeros_like(v))
                                       for k, v in values.items()}).restore(path)
            assert isinstance(error.value, storage.CheckpointError)
            assert f"{file!r} does not match its checksum: the tensor {key!r}" \
                in str(error.value)
            flip(file, start + position, bit)
    targets = {k: sf.Variable(np.zeros_like(v)) for k, v in values.items()}
    sf.train.Checkpoint(**targets).restore(path).assert_consumed()  # flipped back: restores
    for key, value in values.items():
        np.testing.assert_array_equal(targets[key].numpy(), value)


def test_a_header_reading_the_same_bytes_as_another_dtype_or_shape_is_refused(tmp_path):
    path = sf.train.Checkpoint(v=sf.Variable(np.ones((2, 3), np.float32))).write(
        str(tmp_path / "w"))
    for field, value in [("dtype", "I32"), ("shape", [3, 2])]:
        file = storage.file_of(path)
        with open(file, "rb") as f:
            original = f.read()
        edit_header(file, lambda header, field=field, value=value:
                    header["v"].__setitem__(field, value))
        with pytest.raises(ValueError, match="does not match its checksum: the tensor 'v'"):
            storage.read(path)
        with open(file, "wb") as f:
            f.write(original)


def test_checkpoints_written_before_the_checksums_still_restore(tmp_path):
    """A file without the checksums' metadata (as every file written before them) restores
    as it did: unverified."""
    v = sf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    path = sf.train.Checkpoint(v=v, n=sf.Variable(3)).write(str(tmp_path / "old"))
    edit_header(storage.file_of(path),
                lambda header: header["__metadata__"].pop(storage.CHECKSUMS_KEY))
    target = sf.Variable(np.zeros((2, 3), np.float32))
    sf.train.Checkpoint(v=target, n=sf.Variable(0)).restore(path).assert_consumed()
    np.testing.assert_array_equal(target.numpy(), v.numpy())


def test_an_edited_object_graph_is_refused_by_its_checksum(tmp_path):
    """An edit the schema accepts (another edge name) changes what is restored where: the
    graph's checksum refuses it."""
    path = sf.train.Checkpoint(a=sf.Variable(1.0), b=sf.Variable(2.0)).write(
        str(tmp_path / "w"))

    def swap(header):
        graph = json.loads(header["__metadata__"][storage.GRAPH_KEY])
        children = graph["nodes"][0]["children"]
        children[0][1], children[1][1] = children[1][1], children[0][1]
        header["__metadata__"][storage.GRAPH_KEY] = json.dumps(graph)

    edit_header(storage.file_of(path), swap)
    with pytest.raises(ValueError, match="does not match its checksum: its object graph"):
        sf.train.Checkpoint(a=sf.Variable(0.0), b=sf.Variable(0.0)).restore(path)


# -- saves from several threads and processes, killed saves ---------------------------------

def checkpoint_files(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n != storage.POINTER)


def test_threads_saving_through_one_manager_keep_exactly_max_to_keep(tmp_path):
    directory = str(tmp_path)
    variables = objects()
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**variables), directory,
                                         max_to_keep=3)
    barrier = threading.Barrier(4)

    def save() -> None:
        barrier.wait()
        for _ in range(10):
            manager.save()

    threads = [threading.Thread(target=save) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = [os.path.basename(p) for p in manager.checkpoints]
    assert names == ["ckpt-38", "ckpt-39", "ckpt-40"]
    assert checkpoint_files(directory) == [n + ".safetensors" for n in sorted(names)]
    assert storage.read_pointer(directory)["all"] == names


def save_n(directory: str, count: int, start: threading.Event) -> None:
    """A process of its own saving `count` checkpoints through a manager of its own."""
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**objects()), directory,
                                         max_to_keep=3, checkpoint_name=f"p{os.getpid()}")
    start.wait()
    for _ in range(count):
        manager.save()


def test_managers_in_several_processes_keep_one_list_of_max_to_keep(tmp_path):
    """Three processes, each with its own manager (and names), saving into one directory:
    the pointer keeps the newest three of them all, and no other file remains."""
    directory = str(tmp_path)
    context = multiprocessing.get_context("fork")
    start = context.Event()
    savers = [context.Process(target=save_n, args=(directory, 8, start)) for _ in range(3)]
    for saver in savers:
        saver.start()
    start.set()
    for saver in savers:
        saver.join()
        assert saver.exitcode == 0
    pointer = storage.read_pointer(directory)
    assert len(pointer["all"]) == 3 and pointer["latest"] == pointer["all"][-1]
    assert checkpoint_files(directory) == sorted(n + ".safetensors" for n in pointer["all"])
    for name in pointer["all"]:
        sf.train.Checkpoint(**objects()).restore(os.path.join(directory, name)) \
            .assert_consumed()


def temporaries(directory: str) -> list[str]:
    return [n for n in os.listdir(directory) if ".tmp-" in n]


def test_a_save_killed_in_the_middle_leaves_no_temporary_after_the_next_start(tmp_path):
    """A saver of 16 MB checkpoints killed while the temporary file of a save after its
    first exists, three times: the next manager on the directory deletes the temporaries,
    and every checkpoint it keeps restores."""
    directory = str(tmp_path)
    context = multiprocessing.get_context("fork")
    for _ in range(3):
        before = sf.train.latest_checkpoint(directory)
        saver = context.Process(target=save_forever, args=(directory, 2, 16), daemon=True)
        saver.start()
        deadline = time.monotonic() + 60
        while sf.train.latest_checkpoint(directory) == before and time.monotonic() < deadline:
            time.sleep(0.001)
        while not temporaries(directory) and time.monotonic() < deadline:
            time.sleep(0.0005)
        os.kill(saver.pid, signal.SIGKILL)
        saver.join()
    assert temporaries(directory), "no save was killed in the middle"

    def big() -> dict:
        return {**objects(), "big": sf.Variable(np.zeros(16 * 2**18, np.float32))}

    variables = big()
    ckpt = sf.train.Checkpoint(**variables)
    manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=2)
    assert temporaries(directory) == []
    step = restored_step(manager.latest_checkpoint, variables, ckpt)
    for v in variables.values():
        v.assign(np.full(v.shape, step + 1, np.float32))
    manager.save()
    assert temporaries(directory) == [] and len(manager.checkpoints) == 2
    for path in manager.checkpoints:
        restored_step(path, big())


def test_a_temporary_being_written_is_not_swept(tmp_path):
    """A temporary whose writer lives (it holds its lock) stays; a dead one's goes."""
    write_end = tmp_path / "ckpt-1.safetensors.tmp-0123456789ab"
    dead = tmp_path / "ckpt-2.safetensors.tmp-ba9876543210"
    other = tmp_path / "notes.tmp-0123456789ab"  # not a checkpoint's: left alone
    for path in (write_end, dead, other):
        path.write_bytes(b"x")
    context = multiprocessing.get_context("fork")
    locked, done = context.Event(), context.Event()

    def hold() -> None:
        import fcntl
        descriptor = os.open(write_end, os.O_RDONLY)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        locked.set()
        done.wait(60)

    holder = context.Process(target=hold, daemon=True)
    holder.start()
    assert locked.wait(60)
    try:
        assert storage.sweep(str(tmp_path)) == [dead.name]
        assert sorted(os.listdir(tmp_path)) == sorted([write_end.name, other.name])
    finally:
        done.set()
        holder.join()


def test_checkpoints_dropped_by_a_killed_save_are_deleted_by_the_next(tmp_path, monkeypatch):
    """A save stopped after it replaced the pointer, before it deleted what it dropped: the
    next save deletes it."""
    directory = str(tmp_path)
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**objects()), directory,
                                         max_to_keep=1)
    manager.save()

    def killed(path: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(storage, "remove", killed)
    with pytest.raises(KeyboardInterrupt):
        manager.save()
    monkeypatch.undo()
    assert checkpoint_files(directory) == ["ckpt-1.safetensors", "ckpt-2.safetensors"]
    assert sf.train.latest_checkpoint(directory).endswith("ckpt-2")
    ckpt = sf.train.Checkpoint(**objects())
    resumed = sf.train.CheckpointManager(ckpt, directory, max_to_keep=1)
    ckpt.restore(resumed.latest_checkpoint).assert_consumed()
    resumed.save()
    assert checkpoint_files(directory) == ["ckpt-3.safetensors"]


# -- edited metadata ---------------------------------------------------------------------------

def graph_edit(change):
    def edit(header):
        graph = json.loads(header["__metadata__"][storage.GRAPH_KEY])
        change(graph)
        header["__metadata__"][storage.GRAPH_KEY] = json.dumps(graph)
    return edit


def deep(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# (the field the error names, the edit of the header)
EDITS = [
    ("header.v.dtype", lambda h: h["v"].pop("dtype")),
    ("header.v.shape", lambda h: h["v"].__setitem__("shape", "x")),
    ("header.v.shape[0]", lambda h: h["v"].__setitem__("shape", [-2, 3])),
    ("header.v.shape", lambda h: h["v"].__setitem__("shape", [10**30, 0])),
    ("header.v.data_offsets", lambda h: h["v"].__setitem__("data_offsets", [0, 2**70])),
    ("header.__metadata__['stageflow.object_graph']",
     lambda h: h["__metadata__"].__setitem__(storage.GRAPH_KEY, 7)),
    ("header.__metadata__['stageflow.object_graph']",
     lambda h: h["__metadata__"].__setitem__(storage.GRAPH_KEY, "[" * 10**5 + "]" * 10**5)),
    ("header.__metadata__['stageflow.checksums']",
     lambda h: h["__metadata__"].__setitem__(storage.CHECKSUMS_KEY, "{")),
    ("checksums.xxh3_64.tensors.v", lambda h: h["__metadata__"].__setitem__(
        storage.CHECKSUMS_KEY, json.dumps({"xxh3_64": {"graph": "0" * 16, "tensors": {}}}))),
    ("object_graph.nodes[0].children", graph_edit(lambda g: g["nodes"][0].pop("children"))),
    ("object_graph.nodes[0].children[0][1]",
     graph_edit(lambda g: g["nodes"][0]["children"][0].__setitem__(1, 99))),
    ("object_graph.nodes[0].slots[0]",
     graph_edit(lambda g: g["nodes"][0].__setitem__("slots", [[0, "m"]]))),
    ("object_graph.nodes[1].kind", graph_edit(lambda g: g["nodes"][1].__setitem__("kind", 5))),
    ("object_graph.nodes[1].state",
     graph_edit(lambda g: g["nodes"][1].__setitem__("state", 5))),
    ("object_graph.nodes[2].state[0][0]",
     graph_edit(lambda g: g["nodes"][2].__setitem__("state", [deep(150)]))),
    ("object_graph.nodes[2].state.__tensor__",
     graph_edit(lambda g: g["nodes"][2].__setitem__("state", {"__tensor__": "nothing"}))),
    ("object_graph.nodes", graph_edit(lambda g: g.__setitem__("nodes", {}))),
    ("object_graph.format", graph_edit(lambda g: g.__setitem__("format", 2))),
]


@pytest.mark.parametrize("with_checksums", [True, False])
@pytest.mark.parametrize(("field", "edit"), EDITS, ids=[f for f, _ in EDITS])
def test_edited_metadata_is_refused_naming_the_file_and_the_field(tmp_path, field, edit,
                                                                  with_checksums):
    """Deleted, retyped, huge and deeply nested fields: one CheckpointError (a ValueError)
    naming the file and the field, in a file with checksums and in one written before them:
    the schema is checked first."""
    ckpt = sf.train.Checkpoint(v=sf.Variable(np.ones((2, 3), np.float32)),
                               s=sf.train.NumpyState())
    path = ckpt.write(str(tmp_path / "w"))
    file = storage.file_of(path)
    if not with_checksums and "checksums" not in field:
        edit_header(file, lambda h: h["__metadata__"].pop(storage.CHECKSUMS_KEY))
    edit_header(file, edit)
    with pytest.raises(ValueError) as error:
        sf.train.Checkpoint(v=sf.Variable(np.zeros((2, 3), np.float32)),
                            s=sf.train.NumpyState()).restore(path)
    assert type(error.value) is storage.CheckpointError, error.value
    assert str(error.value).startswith(f"sf.train: {file!r} ")
    assert f"field {field}" in str(error.value)


def test_a_retyped_object_state_in_a_file_without_checksums_names_the_object(tmp_path):
    """What the schema cannot know (an object's own state layout) its check refuses, naming
    the checkpoint and the object, before anything is restored."""
    state = sf.train.NumpyState()
    state.count = 3
    path = sf.train.Checkpoint(stats=state).write(str(tmp_path / "w"))

    def retype(header):
        header["__metadata__"].pop(storage.CHECKSUMS_KEY)
        graph_edit(lambda g: g["nodes"][1].__setitem__("state", {"value": [1]}))(header)

    edit_header(storage.file_of(path), retype)
    fresh = sf.train.NumpyState()
    fresh.count = 0
    where = re.escape(f"{path}'): stats: the saved value of a NumpyState")
    with pytest.raises(ValueError, match=where):
        sf.train.Checkpoint(stats=fresh).restore(path)
    assert fresh.count == 0


POINTERS = {
    "latest": {"latest": 5, "all": []},
    "all": {"latest": "ckpt-1", "all": "ckpt-1"},
    "all[0]": {"latest": "ckpt-1", "all": ["../elsewhere/ckpt-1"]},
    "(the whole file)": ["ckpt-1"],
    "dropped": {"latest": "ckpt-1", "all": ["ckpt-1"], "dropped": None},
}


@pytest.mark.parametrize("field", list(POINTERS))
def test_an_edited_pointer_file_is_refused_naming_it_and_the_field(tmp_path, field):
    ckpt = sf.train.Checkpoint(v=sf.Variable(1.0))
    ckpt.save(str(tmp_path / "ckpt"))
    pointer = tmp_path / storage.POINTER
    pointer.write_text(json.dumps(POINTERS[field]))
    for reader in (lambda: sf.train.latest_checkpoint(str(tmp_path)),
                   lambda: sf.train.CheckpointManager(ckpt, str(tmp_path))):
        with pytest.raises(ValueError) as error:
            reader()
        assert type(error.value) is storage.CheckpointError
        assert str(error.value).startswith(f"sf.train: {str(pointer)!r} is not a valid "
                                           f"checkpoint pointer file: field {field} ")


def test_state_nested_deeper_than_a_read_accepts_is_refused_when_saved(tmp_path):
    state = sf.train.NumpyState()
    state.tree = deep(150)
    with pytest.raises(TypeError, match="nests deeper than 100 levels"):
        sf.train.Checkpoint(s=state).write(str(tmp_path / "w"))
    assert os.listdir(tmp_path) == []
