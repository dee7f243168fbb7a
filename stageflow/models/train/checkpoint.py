"""`sf.train.Checkpoint`, `CheckpointManager`, `latest_checkpoint` and the restore status.

A checkpoint saves what is reachable from the objects given to it (`graph`), in one
safetensors file per checkpoint (`storage`), and restores by matching the saved graph
against live objects (`restore`). Inside an `sf.function`, `write` and `read` are ops of
the staged graph: a `py_func` named ``checkpoint_write`` takes the variables' values where
the program reaches it, and ``checkpoint_read`` produces the saved values, which are then
assigned; pruning keeps both (they are stateful) and the compiled program runs them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.frontend.ops.control import numpy_function
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import Variable
from stageflow.models.train import deferred, storage
from stageflow.models.train.graph import is_trackable, walk
from stageflow.models.train.restore import Restore, serialize


class Checkpoint:
    """Saves and restores the objects given as keyword arguments, and everything their
    attributes reach (the paper's object graph, section 4.3)::

        ckpt = sf.train.Checkpoint(model=net, optimizer=opt)
        path = ckpt.save("/tmp/run/ckpt")        # "/tmp/run/ckpt-1"
        ...
        ckpt.restore(sf.train.latest_checkpoint("/tmp/run")).assert_consumed()

    Objects assigned later (``ckpt.dataset = iterator``) are saved too. `save_counter`
    numbers the saves and is itself saved, so numbering continues after a restore.

    Values are restored by where they are in the object graph (``weights``, an
    optimizer's slots for it...), not by variable names, with their dtypes and shapes:

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> w = sf.Variable([1.0, 2.0], name="w")
    >>> opt = sf.optimizers.Adam(0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, 0.5]), w)])
    >>> ckpt = sf.train.Checkpoint(weights=w, optimizer=opt)
    >>> path = ckpt.save(os.path.join(directory, "ckpt"))
    >>> os.path.basename(path)
    'ckpt-1'
    >>> _ = w.assign([0.0, 0.0])
    >>> _ = ckpt.restore(path).assert_consumed()   # the variable, Adam's step and slots
    >>> np.round(w.numpy(), 3), int(opt.iterations)
    (array([0.9, 1.9], dtype=float32), 1)
    >>> shutil.rmtree(directory)
    """

    def __init__(self, **objects: Any) -> None:
        for name, obj in objects.items():
            if not is_trackable(obj):
                raise TypeError(f"sf.train.Checkpoint: {name}={type(obj).__name__} holds no "
                                "state to save (pass modules, layers, optimizers, variables, "
                                "metrics, random generators, dataset iterators, NumpyState or "
                                "containers of them)")
            setattr(self, name, obj)
        with context.init_scope():
            self.save_counter = Variable(0, trainable=False, dtype=dtypes.int64,
                                         name="save_counter")

    # A nested checkpoint's counter need not be restored: only the root's numbers saves.
    _checkpoint_optional = ("save_counter",)

    def __setattr__(self, name: str, value: Any) -> None:
        if type(value) is list:  # tracked, so that elements appended later are restored
            value = ListWrapper(value)
        elif type(value) is dict:
            value = DictWrapper(value)
        super().__setattr__(name, value)
        deferred.attribute_set(self, name, value)

    def _checkpoint_children(self) -> dict[str, Any]:
        return {name: value for name, value in vars(self).items() if not name.startswith("_")}

    # -- saving -----------------------------------------------------------------------------

    def write(self, path: str) -> str:
        """Write a checkpoint to `path` (the file ``path.safetensors``), atomically, without
        numbering it or recording it as the latest; returns `path`. Inside an `sf.function`
        the write is an op of the graph, run each time the function runs."""
        path = os.fspath(path)
        if isinstance(context.current_trace(), GraphTrace):
            return self._staged_write(path)
        tensors, graph = serialize(self)
        storage.write(path, tensors, graph)
        return path

    def save(self, file_prefix: str) -> str:
        """Write the checkpoint ``{file_prefix}-{n}`` (n = `save_counter` + 1) and record it
        as its directory's latest checkpoint; returns its path."""
        if isinstance(context.current_trace(), GraphTrace):
            raise TypeError("sf.train.Checkpoint.save inside sf.function: use "
                            "ckpt.write(path) there (save numbers checkpoints and records the "
                            "latest one in Python)")
        file_prefix = os.fspath(file_prefix)
        directory = os.path.dirname(os.path.abspath(file_prefix))
        return _save(directory, lambda: self._write_numbered(file_prefix), None)[0]

    def _write_numbered(self, file_prefix: str, number: int | None = None) -> str:
        previous = int(self.save_counter.numpy())
        number = previous + 1 if number is None else number
        self.save_counter.assign(np.int64(previous + 1))
        try:
            return self.write(f"{file_prefix}-{number}")
        except BaseException:
            self.save_counter.assign(np.int64(previous))
            raise

    # -- restoring --------------------------------------------------------------------------

    def restore(self, save_path: str | None) -> CheckpointLoadStatus:
        """Restore from `save_path` (as `save` or `latest_checkpoint` returned it; None
        restores nothing, for the first run of a resumable program). Existing objects get
        their values now, all or none of them; objects created later get theirs when they
        are created. Returns a status to check what matched."""
        if save_path is None:
            return CheckpointLoadStatus(None)
        save_path = os.fspath(save_path)
        if isinstance(context.current_trace(), GraphTrace):
            self._staged_read(save_path)
            return CheckpointLoadStatus(None)
        graph, tensors = storage.read(save_path)
        restore = Restore(save_path, graph, tensors, self)
        try:
            restore.restore(0, self)
        except BaseException:
            restore.expect_partial()  # nothing was restored: nothing to report
            raise
        return CheckpointLoadStatus(restore)

    def read(self, save_path: str) -> CheckpointLoadStatus:
        """Restore a checkpoint `write` wrote (the same as `restore`). Inside an
        `sf.function` the read is an op of the graph: the saved values are assigned each
        time the function runs."""
        return self.restore(save_path)

    # -- staged -----------------------------------------------------------------------------

    def _staged_write(self, path: str) -> str:
        variables = [node.obj for node in walk(self) if isinstance(node.obj, Variable)]
        values = [variable.read_value() for variable in variables]

        def checkpoint_write(*arrays: np.ndarray) -> list:
            by_variable = {id(v): {"VARIABLE_VALUE": a}
                           for v, a in zip(variables, arrays, strict=True)}
            tensors, graph = serialize(self, lambda obj: by_variable.get(id(obj)) if isinstance(
                obj, Variable) else _state(obj))
            storage.write(path, tensors, graph)
            return []

        checkpoint_write.__qualname__ = "checkpoint_write"  # the op's name in the IR
        numpy_function(checkpoint_write, values, [])
        return path

    def _staged_read(self, path: str) -> None:
        variables = [node.obj for node in walk(self) if isinstance(node.obj, Variable)]

        def checkpoint_read() -> list:
            graph, tensors = storage.read(path)
            return Restore(path, graph, tensors, self).values_for(variables)

        checkpoint_read.__qualname__ = "checkpoint_read"
        values = numpy_function(checkpoint_read, [],
                                [TensorSpec(v.shape, v.dtype) for v in variables])
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)

    def __repr__(self) -> str:
        names = ", ".join(self._checkpoint_children())
        return f"<sf.train.Checkpoint of {names}>"


class _Key:
    """A hashable stand-in for an unhashable container, in the restore's weak tables."""


class ListWrapper(list):
    """A list assigned to a `Checkpoint` attribute (TensorFlow's ``ListWrapper``): a plain
    list that tells a restore about elements added later, so that a value the checkpoint
    holds for ``listed[0]`` is restored when ``listed.append(v)`` adds it.

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> save = sf.train.Checkpoint()
    >>> save.listed = [sf.Variable(1.0)]
    >>> path = save.save(os.path.join(directory, "c"))
    >>> restore = sf.train.Checkpoint()
    >>> _ = restore.restore(path)
    >>> restore.listed = []
    >>> restore.listed
    ListWrapper([])
    >>> v = sf.Variable(0.0)
    >>> restore.listed.append(v)
    >>> float(v.numpy())
    1.0
    >>> shutil.rmtree(directory)
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._checkpoint_key = _Key()  # what a waiting restore is keyed by (lists: unhashable)

    def append(self, value: Any) -> None:
        """Add `value` at the end (restored if the checkpoint holds its index)."""
        super().append(value)
        deferred.attribute_set(self, str(len(self) - 1), value)

    def extend(self, values: Any) -> None:
        """Append each of `values`."""
        for value in list(values):
            self.append(value)

    def __iadd__(self, values: Any) -> ListWrapper:
        self.extend(values)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        if isinstance(index, int):
            deferred.attribute_set(self, str(index % len(self)), value)

    def __repr__(self) -> str:
        return f"ListWrapper({list.__repr__(self)})"


class DictWrapper(dict):
    """A dict assigned to a `Checkpoint` attribute: a plain dict that tells a restore about
    keys set later, so that the checkpoint's value for ``mapped['two']`` is restored when
    ``mapped['two'] = v`` sets it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checkpoint_key = _Key()

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if isinstance(key, str | int):
            deferred.attribute_set(self, str(key), value)


def _state(obj: Any) -> Any:
    return obj._checkpoint_state() if hasattr(obj, "_checkpoint_state") else None


class CheckpointLoadStatus:
    """What a restore matched: assertions for tests and resumable programs. `restore`
    returns it; its methods return it too, so that they chain.

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> w, b = sf.Variable([1.0, 2.0]), sf.Variable(0.5)
    >>> path = sf.train.Checkpoint(w=w, b=b).write(os.path.join(directory, "both"))
    >>> status = sf.train.Checkpoint(w=sf.Variable([0.0, 0.0])).restore(path)
    >>> status.assert_existing_objects_matched() is status    # w got its value
    True
    >>> status.assert_consumed()                              # b's value went nowhere
    Traceback (most recent call last):
    ...
    AssertionError: sf.train: values of '...' not restored (no such object yet): ...b...
    >>> _ = status.expect_partial()                           # intended: no warning
    >>> shutil.rmtree(directory)
    """

    def __init__(self, restore: Restore | None) -> None:
        self._restore = restore

    def assert_consumed(self) -> CheckpointLoadStatus:
        """Every value in the checkpoint went to an object, and every object with state got
        a value; AssertionError listing what did not."""
        self._require()
        unused = self._restore.unused()
        if unused:
            raise AssertionError(f"sf.train: values of {self._restore.path!r} not restored (no "
                                 f"such object yet): {', '.join(unused)}")
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        """Every object with state that exists now got a value from the checkpoint (values
        for objects not created yet may remain)."""
        self._require()
        unmatched = self._restore.unmatched_objects()
        if unmatched:
            raise AssertionError(f"sf.train: objects without a value in "
                                 f"{self._restore.path!r}: {', '.join(unmatched)}")
        return self

    def expect_partial(self) -> CheckpointLoadStatus:
        """Values left unused are intended: no warning about them."""
        if self._restore is not None:
            self._restore.expect_partial()
        return self

    def _require(self) -> None:
        if self._restore is None:
            raise AssertionError("sf.train: no checkpoint was restored (the path was None, or "
                                 "the restore runs inside a staged function)")


def _save(directory: str, write: Callable[[], str], max_to_keep: int | None
          ) -> tuple[str, list[str]]:
    """`write()` a checkpoint into `directory` and record it as the latest, keeping the
    newest `max_to_keep` (None: all); returns its path and the kept paths, oldest first.

    It runs under the directory's lock, from the pointer as it is then (another manager or
    process may have saved since this one looked), so that saves to one directory, from any
    thread or process, never lose one another's checkpoints from the list. The pointer is
    replaced before the dropped files are deleted, naming them as dropped: a reader never
    finds it naming a deleted file, and the next save deletes those a killed save left,
    as it deletes the temporary files of killed saves."""
    os.makedirs(directory, exist_ok=True)
    with storage.locked(directory):
        storage.sweep(directory)
        pointer = storage.read_pointer(directory)
        for path in storage.dropped_files(directory, pointer):
            storage.remove(path)
        path = write()
        kept = [p for p in (os.path.join(directory, name) for name in pointer.get("all", []))
                if os.path.abspath(p) != os.path.abspath(path)
                and os.path.exists(storage.file_of(p))] + [path]
        dropped = kept[:-max_to_keep] if max_to_keep else []
        kept = kept[len(dropped):]
        storage.write_pointer(directory, path, kept, dropped)
        for old in dropped:
            storage.remove(old)
    return path, kept


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The path of the latest checkpoint `save` recorded in `checkpoint_dir`, or None: a
    resumable program restores it, None restoring nothing on its first run.

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> ckpt = sf.train.Checkpoint(step=sf.Variable(0))
    >>> print(sf.train.latest_checkpoint(directory))
    None
    >>> _ = ckpt.restore(sf.train.latest_checkpoint(directory))   # a first run: nothing
    >>> for _ in range(2):
    ...     _ = ckpt.save(os.path.join(directory, "ckpt"))
    >>> os.path.basename(sf.train.latest_checkpoint(directory))
    'ckpt-2'
    >>> shutil.rmtree(directory)
    """
    directory = os.fspath(checkpoint_dir)
    pointer = storage.read_pointer(directory)
    while pointer:
        path = os.path.join(directory, pointer["latest"])
        if os.path.exists(storage.file_of(path)):
            return path
        # A save replaced the pointer and deleted the checkpoint it named since it was
        # read: the pointer read again names one that exists, unless the file was deleted
        # by other means (then the pointer is the same, and there is no latest checkpoint).
        again = storage.read_pointer(directory)
        if again == pointer:
            return None
        pointer = again
    return None


class CheckpointManager:
    """Numbered checkpoints in one directory, keeping the newest `max_to_keep` (None: all).

    Its list survives the process: a new manager on the same directory continues it. The
    pointer file names a checkpoint only once it is complete, and old checkpoints are
    deleted only after the pointer stopped naming them. Saves are serialized, those of one
    manager from several threads and those of all managers and processes saving into the
    directory, and each keeps the newest `max_to_keep` of the directory's list; a manager
    deletes what saves killed in the middle left (temporary files, dropped checkpoints)
    when it starts and when it saves.

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> ckpt = sf.train.Checkpoint(w=sf.Variable([1.0, 2.0]))
    >>> manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=2)
    >>> for _ in range(3):
    ...     _ = manager.save()
    >>> [os.path.basename(path) for path in manager.checkpoints]     # ckpt-1 deleted
    ['ckpt-2', 'ckpt-3']
    >>> again = sf.train.CheckpointManager(ckpt, directory)      # in a later process
    >>> os.path.basename(again.latest_checkpoint)
    'ckpt-3'
    >>> shutil.rmtree(directory)
    """

    def __init__(self, checkpoint: Checkpoint, directory: str, max_to_keep: int | None = 5,
                 checkpoint_name: str = "ckpt") -> None:
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"sf.train.CheckpointManager: max_to_keep must be >= 1 or None, "
                             f"got {max_to_keep}")
        self._checkpoint = checkpoint
        self.directory = os.fspath(directory)
        self.max_to_keep = max_to_keep
        self._prefix = os.path.join(self.directory, checkpoint_name)
        self._lock = threading.Lock()
        pointer = storage.read_pointer(self.directory)
        paths = [os.path.join(self.directory, name) for name in pointer.get("all", [])]
        self._checkpoints = [p for p in paths if os.path.exists(storage.file_of(p))]
        storage.sweep(self.directory)

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoints, oldest first."""
        return list(self._checkpoints)

    @property
    def latest_checkpoint(self) -> str | None:
        return self._checkpoints[-1] if self._checkpoints else None

    def save(self, checkpoint_number: int | None = None) -> str:
        """Save a new checkpoint (numbered by the checkpoint's `save_counter`, or
        `checkpoint_number`), make it the latest, drop the oldest beyond `max_to_keep`."""
        with self._lock:  # this manager's saves in turn, on file systems without locks too
            path, self._checkpoints = _save(
                self.directory,
                lambda: self._checkpoint._write_numbered(self._prefix, checkpoint_number),
                self.max_to_keep)
        return path


class PythonState:
    """Python state in a checkpoint: subclasses define `serialize` (a JSON value or NumPy
    array nest) and `deserialize` (its inverse), as TensorFlow's ``PythonState``: state
    that is not tensors (a counter, a vocabulary) saved and restored with the model's.

    >>> import os, shutil, tempfile
    >>> class Epoch(sf.train.PythonState):
    ...     def __init__(self):
    ...         self.number = 0
    ...     def serialize(self):
    ...         return self.number
    ...     def deserialize(self, value):
    ...         self.number = value
    >>> directory = tempfile.mkdtemp()
    >>> epoch = Epoch()
    >>> epoch.number = 7
    >>> path = sf.train.Checkpoint(epoch=epoch).write(os.path.join(directory, "run"))
    >>> resumed = Epoch()
    >>> _ = sf.train.Checkpoint(epoch=resumed).restore(path)
    >>> resumed.number
    7
    >>> shutil.rmtree(directory)
    """

    def serialize(self) -> Any:
        raise NotImplementedError

    def deserialize(self, value: Any) -> None:
        raise NotImplementedError

    def _checkpoint_state(self) -> Any:
        return {"value": self.serialize()}

    def _checkpoint_prepare(self, saved: Any, where: str) -> Any:
        if not isinstance(saved, dict) or list(saved) != ["value"]:
            raise ValueError(f"{where}: the saved state of a {type(self).__name__} must be "
                             f"{{'value': ...}}, got {type(saved).__name__}")
        value = saved["value"]
        return lambda: self.deserialize(value)


class NumpyState(PythonState):
    """Attributes holding NumPy arrays or JSON values (numbers, strings, lists, dicts),
    saved and restored by name::

        state = sf.train.NumpyState()
        state.mean = np.zeros(3)
        sf.train.Checkpoint(stats=state).save(prefix)

    Arrays come back with their dtype and shape:

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> stats = sf.train.NumpyState()
    >>> stats.mean, stats.count = np.array([0.5, 1.5], np.float32), 10
    >>> path = sf.train.Checkpoint(stats=stats).write(os.path.join(directory, "stats"))
    >>> stats.mean, stats.count = np.zeros(2, np.float32), 0
    >>> _ = sf.train.Checkpoint(stats=stats).restore(path)
    >>> stats.mean, stats.count
    (array([0.5, 1.5], dtype=float32), 10)
    >>> shutil.rmtree(directory)
    """

    def serialize(self) -> dict[str, Any]:
        return dict(vars(self))

    def deserialize(self, value: dict[str, Any]) -> None:
        for name, saved in value.items():
            setattr(self, name, saved)

    def _checkpoint_prepare(self, saved: Any, where: str) -> Any:
        commit = super()._checkpoint_prepare(saved, where)
        value = saved["value"]
        if not isinstance(value, dict) or any(
                name.startswith("__") and name.endswith("__") for name in value):
            raise ValueError(f"{where}: the saved value of a NumpyState must be a dict of its "
                             f"attributes (no __special__ names), got "
                             f"{type(value).__name__}")
        return commit

    def __repr__(self) -> str:
        return f"<sf.train.NumpyState {', '.join(vars(self))}>"


__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "NumpyState",
           "PythonState", "latest_checkpoint"]
