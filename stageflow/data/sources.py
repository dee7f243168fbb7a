"""The iterators inside a pipeline: one stateful source per dataset stage.

Each source yields elements (`elements.Element`, NumPy nests) from `next()` until it raises
StopIteration, and says where it is with `state()` (JSON values and arrays, for
checkpoints); `restore(state)` continues from such a state. A restored source yields exactly
what the saved one would have: shuffle sources save their random generator and buffer, and
sources that run ahead (parallel `map`, `prefetch`) save the elements they computed but did
not hand out yet, beside the position of their input.

An error raised while computing an element belongs to that element's position: the consumer
gets it where the element would have come and the next `next()` goes on (as in `tf.data`).
Sources that run ahead keep it as an `elements.Failure` in the element's place, hand it out
there, and save it there; saving never raises it.

Sources that hold elements get the spec of one (`structure`) as a function: it is asked
only by a restore with elements to rebuild, so making a pipeline never computes a spec.

A source is restored only freshly made, never while in use (`Iterator` makes a new pipeline,
restores it and only then swaps it in), so a failing restore leaves the live one intact.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from stageflow.core import nest
from stageflow.data.elements import (
    Element,
    Failure,
    Outcome,
    Window,
    flat_leaves,
    pack,
    settle,
    stack,
    unpack,
)

Structure = Callable[[], Any]  # the spec of one element, computed when first asked


class Source:
    """A pipeline stage's iterator (the base: no input, no state)."""

    def next(self) -> Element:
        raise StopIteration

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        del state

    def close(self) -> None:
        """Stop background work (threads) of this stage and the stages before it."""


class Stage(Source):
    """A source reading one input source: its state holds the input's position."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner

    def state(self) -> dict[str, Any]:
        return {"inner": self.inner.state()}

    def restore(self, state: dict[str, Any]) -> None:
        self.inner.restore(state["inner"])

    def close(self) -> None:
        self.inner.close()


class Group(Source):
    """A source reading several input sources: its state holds each one's position."""

    def __init__(self, parts: list[Source]) -> None:
        self.parts = parts

    def state(self) -> dict[str, Any]:
        return {"parts": [part.state() for part in self.parts]}

    def restore(self, state: dict[str, Any]) -> None:
        for part, saved in zip(self.parts, state["parts"], strict=True):
            part.restore(saved)

    def close(self) -> None:
        for part in self.parts:
            part.close()


class Slices(Source):
    """Row `index` of every leaf, in turn."""

    def __init__(self, columns: list[np.ndarray], rebuild: Callable[[list], Element],
                 count: int) -> None:
        self.columns, self.rebuild, self.count, self.index = columns, rebuild, count, 0

    def next(self) -> Element:
        if self.index >= self.count:
            raise StopIteration
        self.index += 1
        return self.rebuild([column[self.index - 1] for column in self.columns])

    def state(self) -> dict[str, Any]:
        return {"index": self.index}

    def restore(self, state: dict[str, Any]) -> None:
        index = int(state["index"])
        if not 0 <= index <= self.count:
            raise ValueError(f"position {index} is outside a dataset of {self.count} elements")
        self.index = index


class Generated(Source):
    """The elements of a Python generator; its position is the count it yielded, and a
    restore replays the generator that far (generators cannot be saved)."""

    def __init__(self, start: Callable[[], Iterator], convert: Callable[[Any], Element]) -> None:
        self.start, self.convert = start, convert
        self.iterator = start()
        self.count = 0

    def next(self) -> Element:
        element = self.convert(next(self.iterator))
        self.count += 1
        return element

    def state(self) -> dict[str, Any]:
        return {"count": self.count}

    def restore(self, state: dict[str, Any]) -> None:
        count = int(state["count"])
        for done in range(count):
            try:
                next(self.iterator)
            except StopIteration:
                raise ValueError(f"the generator yields {done} elements now, the saved "
                                 f"position is {count}") from None
        self.count = count


class Mapped(Stage):
    """`apply` of each input element; with ``parallel > 1`` that many calls run at once
    in threads (compiled functions and NumPy kernels release the GIL), in input order.
    An input element's error and an `apply` that raises take the element's place among
    the results."""

    def __init__(self, inner: Source, apply: Callable[[Element], Element], parallel: int,
                 structure: Structure) -> None:
        super().__init__(inner)
        self.apply, self.parallel, self.structure = apply, parallel, structure
        self.pool = ThreadPoolExecutor(parallel) if parallel > 1 else None
        self.pending: deque[Future | Outcome] = deque()  # restored ones, sequential too
        self.inner_done = False

    def next(self) -> Element:
        if self.pool is not None:
            self._fill(self.pool)
        if self.pending:
            head = self.pending.popleft()
            return head.result() if isinstance(head, Future) else settle(head)
        if self.inner_done:
            raise StopIteration
        return self.apply(self.inner.next())

    def _fill(self, pool: ThreadPoolExecutor) -> None:
        """Start calls on input elements until `parallel` results are pending."""
        while len(self.pending) < self.parallel and not self.inner_done:
            try:
                element = self.inner.next()
            except StopIteration:
                self.inner_done = True
            except Exception as error:  # noqa: BLE001 - raised at its element's place
                self.pending.append(Failure(error))
            else:
                self.pending.append(pool.submit(self.apply, element))

    def state(self) -> dict[str, Any]:
        wait([p for p in self.pending if isinstance(p, Future)])
        self.pending = deque(_settled(p) if isinstance(p, Future) else p
                             for p in self.pending)
        return {**super().state(), "ahead": pack(list(self.pending)),
                "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        # Absent from the checkpoints of sequential maps written before maps saved them.
        self.pending = deque(unpack(state.get("ahead", {"count": 0}), self.structure))
        self.inner_done = bool(state.get("inner_done", False))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        super().close()


def _settled(future: Future) -> Outcome:
    """A finished call's result, or its error as a `Failure` (not raised: it belongs to
    its element's place)."""
    error = future.exception()
    return future.result() if error is None else Failure(error)


class Shuffled(Stage):
    """A buffer of `size` input elements; each step hands out a uniformly drawn one and
    refills its place (TensorFlow's shuffle). The draws come from a PCG64 generator
    seeded with `seed` (the dataset's seed and the epoch), saved with the buffer."""

    def __init__(self, inner: Source, size: int, seed: list[int], structure: Structure
                 ) -> None:
        super().__init__(inner)
        self.size, self.structure = size, structure
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        self.buffer: list[Element] = []
        self.inner_done = False

    def next(self) -> Element:
        while not self.inner_done and len(self.buffer) < self.size:
            try:
                self.buffer.append(self.inner.next())
            except StopIteration:
                self.inner_done = True
        if not self.buffer:
            raise StopIteration
        chosen = int(self.rng.integers(len(self.buffer)))
        self.buffer[chosen], self.buffer[-1] = self.buffer[-1], self.buffer[chosen]
        return self.buffer.pop()

    def state(self) -> dict[str, Any]:
        return {**super().state(), "buffer": pack(self.buffer),
                "rng": self.rng.bit_generator.state, "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.buffer = unpack(state["buffer"], self.structure)
        self.rng.bit_generator.state = state["rng"]
        self.inner_done = bool(state["inner_done"])


class Batched(Stage):
    """`size` consecutive input elements combined (stacked, or padded and stacked); a last
    short batch unless dropped."""

    def __init__(self, inner: Source, size: int, drop_remainder: bool,
                 combine: Callable[[list[Element]], Element] = stack) -> None:
        super().__init__(inner)
        self.size, self.drop_remainder, self.combine = size, drop_remainder, combine

    def next(self) -> Element:
        elements = []
        for _ in range(self.size):
            try:
                elements.append(self.inner.next())
            except StopIteration:
                break
        if not elements or (self.drop_remainder and len(elements) < self.size):
            raise StopIteration
        return self.combine(elements)


class Bucketed(Stage):
    """Input elements gathered in buckets (`bucket` picks one); a bucket holding its size
    in elements gives them combined, and when the input ends the buckets left give theirs
    in bucket order (none that is short when `drop_remainder`). The buckets are saved."""

    def __init__(self, inner: Source, bucket: Callable[[Element], int], sizes: list[int],
                 combine: Callable[[int, list[Element]], Element], drop_remainder: bool,
                 structure: Structure) -> None:
        super().__init__(inner)
        self.bucket, self.sizes, self.combine = bucket, sizes, combine
        self.drop_remainder, self.structure = drop_remainder, structure
        self.buckets: list[list[Element]] = [[] for _ in sizes]
        self.inner_done = False

    def next(self) -> Element:
        while not self.inner_done:
            try:
                element = self.inner.next()
            except StopIteration:
                self.inner_done = True
                break
            index = self.bucket(element)
            self.buckets[index].append(element)
            if len(self.buckets[index]) == self.sizes[index]:
                full, self.buckets[index] = self.buckets[index], []
                return self.combine(index, full)
        for index, held in enumerate(self.buckets):
            if held:
                self.buckets[index] = []
                if not self.drop_remainder:
                    return self.combine(index, held)
        raise StopIteration

    def state(self) -> dict[str, Any]:
        return {**super().state(), "buckets": [pack(held) for held in self.buckets],
                "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        if len(state["buckets"]) != len(self.sizes):
            raise ValueError(f"{len(state['buckets'])} buckets were saved, this stage has "
                             f"{len(self.sizes)}")
        self.buckets = [unpack(held, self.structure) for held in state["buckets"]]
        self.inner_done = bool(state["inner_done"])


class Listed(Source):
    """The elements of a list, in turn (a window's rows, a completed cache)."""

    def __init__(self, elements: list[Element]) -> None:
        self.elements, self.index = elements, 0

    def next(self) -> Element:
        if self.index >= len(self.elements):
            raise StopIteration
        self.index += 1
        return self.elements[self.index - 1]

    def state(self) -> dict[str, Any]:
        return {"index": self.index}

    def restore(self, state: dict[str, Any]) -> None:
        index = int(state["index"])
        if not 0 <= index <= len(self.elements):
            raise ValueError(f"position {index} is outside {len(self.elements)} elements")
        self.index = index


class Unbatched(Stage):
    """The rows of each input element, in turn; `split` checks an element and gives its
    rows. The state holds the element being split and the next row's index."""

    def __init__(self, inner: Source, split: Callable[[Element], list[Element]],
                 structure: Structure) -> None:
        super().__init__(inner)
        self.split, self.structure = split, structure
        self.current: Element | None = None
        self.rows: list[Element] = []
        self.index = 0

    def next(self) -> Element:
        while self.index >= len(self.rows):
            element = self.inner.next()
            self.current, self.rows, self.index = element, self.split(element), 0
        self.index += 1
        return self.rows[self.index - 1]

    def state(self) -> dict[str, Any]:
        held = [] if self.index >= len(self.rows) else [self.current]
        return {**super().state(), "current": pack(held), "index": self.index}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        held = unpack(state["current"], self.structure)
        self.current = held[0] if held else None
        self.rows = self.split(self.current) if held else []
        self.index = int(state["index"]) if held else 0


class Windowed(Stage):
    """Windows of `size` input elements `stride` apart, one starting every `shift`
    elements (TensorFlow's `window`): a buffer holds the span of the next window; each
    window is the input's structure with a `Window` of rows for each leaf."""

    def __init__(self, inner: Source, size: int, shift: int, stride: int,
                 drop_remainder: bool, structure: Structure) -> None:
        super().__init__(inner)
        self.size, self.shift, self.stride = size, shift, stride
        self.drop_remainder, self.structure = drop_remainder, structure
        self.buffer: list[Element] = []
        self.to_skip = 0  # input elements before the next window's start
        self.inner_done = False

    def _pull(self) -> Element | None:
        try:
            return self.inner.next()
        except StopIteration:
            self.inner_done = True
            return None

    def next(self) -> Element:
        while self.to_skip and not self.inner_done:
            if self._pull() is not None:
                self.to_skip -= 1
        span = (self.size - 1) * self.stride + 1
        while len(self.buffer) < span and not self.inner_done:
            element = self._pull()
            if element is not None:
                self.buffer.append(element)
        rows = self.buffer[::self.stride][:self.size]
        if not rows or (self.drop_remainder and len(rows) < self.size):
            raise StopIteration
        dropped = min(self.shift, len(self.buffer))
        del self.buffer[:dropped]
        self.to_skip = self.shift - dropped
        specs, treedef = nest.flatten(self.structure())
        columns = zip(*(flat_leaves(row) for row in rows), strict=True)
        return nest.unflatten(treedef, [Window(list(column), spec)
                                        for column, spec in zip(columns, specs, strict=True)])

    def state(self) -> dict[str, Any]:
        return {**super().state(), "buffer": pack(self.buffer), "to_skip": self.to_skip,
                "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.buffer = unpack(state["buffer"], self.structure)
        self.to_skip = int(state["to_skip"])
        self.inner_done = bool(state["inner_done"])


# Opens the dataset a function makes of an input element (the `number`th opened): its
# source, and a function giving what saving it needs beside the source's state (the
# pipeline's stages: computed when saved, not when opened); given such a saved slot, the
# source is restored to it (the pipeline checked first).
Describe = Callable[[], "dict[str, Any]"]
Opener = Callable[[Element, int, "dict[str, Any] | None"], "tuple[Source, Describe]"]


class Slot:
    """An input element's dataset, open in an `Interleaved` cycle."""

    __slots__ = ("describe", "element", "number", "source")

    def __init__(self, element: Element, number: int, source: Source,
                 describe: Describe) -> None:
        self.element, self.number, self.source = element, number, source
        self.describe = describe


class Interleaved(Stage):
    """TensorFlow's `interleave` (and `flat_map`, a cycle of one): up to `cycle_length`
    datasets made of input elements are open; `block_length` elements are taken from each
    in turn; a dataset that ends frees its place for the next input element's when the
    turn comes back to it. Each open dataset is saved as its input element and its
    source's state, and restored by making it again of that element."""

    def __init__(self, inner: Source, opener: Opener, cycle_length: int, block_length: int,
                 structure: Structure) -> None:
        super().__init__(inner)
        self.opener, self.structure = opener, structure
        self.cycle_length, self.block_length = cycle_length, block_length
        self.slots: list[Slot | None] = [None] * cycle_length
        self.cycle = self.block = self.opened = 0
        self.inner_done = False

    def _advance(self) -> None:
        self.block, self.cycle = 0, (self.cycle + 1) % self.cycle_length

    def next(self) -> Element:
        while not self.inner_done or any(self.slots):
            slot = self.slots[self.cycle]
            if slot is not None:
                try:
                    element = slot.source.next()
                except StopIteration:
                    slot.source.close()
                    self.slots[self.cycle] = None
                    self._advance()
                    continue
                self.block += 1
                if self.block == self.block_length:
                    self._advance()
                return element
            if self.inner_done:
                self._advance()
                continue
            try:
                element = self.inner.next()
            except StopIteration:
                self.inner_done = True
                continue
            number, self.opened = self.opened, self.opened + 1
            self.slots[self.cycle] = Slot(element, number, *self.opener(element, number, None))
        raise StopIteration

    def state(self) -> dict[str, Any]:
        slots = [None if slot is None else
                 {**slot.describe(), "element": pack([slot.element]), "number": slot.number,
                  "source": slot.source.state()} for slot in self.slots]
        return {**super().state(), "slots": slots, "cycle": self.cycle, "block": self.block,
                "opened": self.opened, "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        if len(state["slots"]) != self.cycle_length:
            raise ValueError(f"{len(state['slots'])} datasets were open, the cycle here "
                             f"has {self.cycle_length}")
        for i, saved in enumerate(state["slots"]):
            if saved is not None:
                element = unpack(saved["element"], self.structure)[0]
                number = int(saved["number"])
                self.slots[i] = Slot(element, number, *self.opener(element, number, saved))
        self.cycle, self.block = int(state["cycle"]), int(state["block"])
        self.opened, self.inner_done = int(state["opened"]), bool(state["inner_done"])

    def close(self) -> None:
        for slot in self.slots:
            if slot is not None:
                slot.source.close()
        super().close()


class Scanned(Stage):
    """`step(state, element)` gives the next state and the output element, from `initial`
    (TensorFlow's `scan`); the state is saved with the input's position."""

    def __init__(self, inner: Source, step: Callable[[Element, Element], tuple],
                 initial: Element, structure: Structure) -> None:
        super().__init__(inner)
        self.step, self.carried, self.structure = step, initial, structure

    def next(self) -> Element:
        self.carried, output = self.step(self.carried, self.inner.next())
        return output

    def state(self) -> dict[str, Any]:
        return {**super().state(), "carried": pack([self.carried])}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.carried = unpack(state["carried"], self.structure)[0]


class TakenWhile(Stage):
    """The input elements until the first for which `keep` is false."""

    def __init__(self, inner: Source, keep: Callable[[Element], bool]) -> None:
        super().__init__(inner)
        self.keep, self.done = keep, False

    def next(self) -> Element:
        if self.done:
            raise StopIteration
        element = self.inner.next()
        if not self.keep(element):
            self.done = True
            raise StopIteration
        return element

    def state(self) -> dict[str, Any]:
        return {**super().state(), "done": self.done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.done = bool(state["done"])


class Unique(Stage):
    """The input elements (integer scalars) not seen before; the seen ones are saved."""

    def __init__(self, inner: Source, dtype: np.dtype) -> None:
        super().__init__(inner)
        self.dtype, self.seen = dtype, set()

    def next(self) -> Element:
        while True:
            element = self.inner.next()
            if int(element) not in self.seen:
                self.seen.add(int(element))
                return element

    def state(self) -> dict[str, Any]:
        return {**super().state(), "seen": np.array(sorted(self.seen), self.dtype)}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.seen = {int(v) for v in np.asarray(state["seen"]).reshape(-1)}


class Sharded(Stage):
    """Every `count`th input element, from the `index`th (TensorFlow's `shard`)."""

    def __init__(self, inner: Source, count: int, index: int) -> None:
        super().__init__(inner)
        self.count, self.index, self.position = count, index, 0

    def next(self) -> Element:
        while self.position % self.count != self.index:
            self.inner.next()
            self.position += 1
        element = self.inner.next()
        self.position += 1
        return element

    def state(self) -> dict[str, Any]:
        return {**super().state(), "position": self.position}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.position = int(state["position"])


class Cached(Source):
    """The input's elements, recorded by a pass that completes and read from the record by
    the passes made after it (`store` holds it for the dataset; a pass restored while
    recording replaces it when it completes, as the uninterrupted pass did). A pass reading
    the record saves the record with its position, so that a restore in another process
    has it (and makes it the dataset's); a pass recording saves what it recorded so far."""

    def __init__(self, make: Callable[[], Source], store: list[list[Element]],
                 structure: Structure) -> None:
        self.make, self.store, self.structure = make, store, structure
        self.recording = not store
        self.inner: Source = make() if self.recording else Listed(store[0])
        self.recorded: list[Element] = []

    def next(self) -> Element:
        try:
            element = self.inner.next()
        except StopIteration:
            if self.recording:
                self.store[:] = [self.recorded]
            raise
        if self.recording:
            self.recorded.append(element)
        return element

    def state(self) -> dict[str, Any]:
        if isinstance(self.inner, Listed) and not self.recording:
            return {"cache": pack(self.inner.elements), "index": self.inner.index}
        return {"inner": self.inner.state(), "recorded": pack(self.recorded)}

    def restore(self, state: dict[str, Any]) -> None:
        self.inner.close()
        self.recording = "cache" not in state
        if self.recording:
            self.inner = self.make()
            self.inner.restore(state["inner"])
            self.recorded = unpack(state["recorded"], self.structure)
            return
        self.inner = Listed(unpack(state["cache"], self.structure))
        self.inner.restore({"index": state["index"]})
        self.store[:] = [self.inner.elements]

    def close(self) -> None:
        self.inner.close()


class Repeated(Source):
    """The input `count` times (None: forever), a fresh input source per epoch; an epoch
    that yields nothing ends the repetition rather than spinning."""

    def __init__(self, make: Callable[[int], Source], count: int | None) -> None:
        self.make, self.count = make, count
        self.epoch = 0
        self.inner: Source | None = make(0) if count is None or count > 0 else None
        self.yielded = False

    def next(self) -> Element:
        while self.inner is not None:
            try:
                element = self.inner.next()
            except StopIteration:
                self.inner.close()
                self.epoch += 1
                more = self.yielded and (self.count is None or self.epoch < self.count)
                self.inner = self.make(self.epoch) if more else None
                self.yielded = False
                continue
            self.yielded = True
            return element
        raise StopIteration

    def state(self) -> dict[str, Any]:
        inner = None if self.inner is None else self.inner.state()
        return {"epoch": self.epoch, "inner": inner, "yielded": self.yielded}

    def restore(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        if self.inner is not None:
            self.inner.close()
        self.inner = None
        if state["inner"] is not None:
            self.inner = self.make(self.epoch)
            self.inner.restore(state["inner"])
        self.yielded = bool(state["yielded"])

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


class Counted(Source):
    """``start``, ``start + 1``, ... as int64 scalars, without end."""

    def __init__(self, start: int) -> None:
        self.start, self.index = start, 0

    def next(self) -> Element:
        self.index += 1
        return np.int64(self.start + self.index - 1)

    def state(self) -> dict[str, Any]:
        return {"index": self.index}

    def restore(self, state: dict[str, Any]) -> None:
        self.index = int(state["index"])


class Filtered(Stage):
    """The input elements for which `keep` is true."""

    def __init__(self, inner: Source, keep: Callable[[Element], bool]) -> None:
        super().__init__(inner)
        self.keep = keep

    def next(self) -> Element:
        while True:
            element = self.inner.next()
            if self.keep(element):
                return element


class Zipped(Group):
    """One element from each input, as a tuple, until the shortest ends."""

    def next(self) -> Element:
        elements = []
        for part in self.parts:  # a loop, not a generator: StopIteration must escape
            elements.append(part.next())
        return tuple(elements)


class Concatenated(Group):
    """The first input's elements, then the second's."""

    def __init__(self, first: Source, second: Source) -> None:
        super().__init__([first, second])
        self.current = 0

    def next(self) -> Element:
        while self.current < len(self.parts):
            try:
                return self.parts[self.current].next()
            except StopIteration:
                self.current += 1
        raise StopIteration

    def state(self) -> dict[str, Any]:
        return {**super().state(), "current": self.current}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.current = int(state["current"])


class Taken(Stage):
    """The first `count` input elements (after skipping `skip`)."""

    def __init__(self, inner: Source, count: int | None, skip: int) -> None:
        super().__init__(inner)
        self.count, self.skip = count, skip
        self.position = 0

    def next(self) -> Element:
        while self.position < self.skip:
            self.inner.next()
            self.position += 1
        if self.count is not None and self.position >= self.skip + self.count:
            raise StopIteration
        element = self.inner.next()
        self.position += 1
        return element

    def state(self) -> dict[str, Any]:
        return {**super().state(), "position": self.position}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.position = int(state["position"])


class Prefetched(Stage):
    """A background thread keeps up to `size` input elements ready, and an input's error
    in its element's place (the thread goes on past it, as the input would). Saving pauses
    the thread: the state is the ready elements and errors, and the input's position
    behind them."""

    def __init__(self, inner: Source, size: int, structure: Structure) -> None:
        super().__init__(inner)
        self.size, self.structure = size, structure
        self.ready: deque[Outcome] = deque()
        self.inner_done = False
        self.changed = threading.Condition()
        self.stopping = False
        self.thread: threading.Thread | None = None

    def _produce(self) -> None:
        while True:
            with self.changed:
                while len(self.ready) >= self.size and not self.stopping:
                    self.changed.wait()
                if self.stopping:
                    return
            try:
                outcome = self.inner.next()
            except StopIteration:
                with self.changed:
                    self.inner_done = True
                    self.changed.notify_all()
                return
            except BaseException as error:  # noqa: BLE001 - handed to the consumer
                outcome = Failure(error)
            with self.changed:
                self.ready.append(outcome)
                self.changed.notify_all()

    def next(self) -> Element:
        if self.thread is None and not self.inner_done:
            self.stopping = False
            self.thread = threading.Thread(target=self._produce, daemon=True,
                                           name="sf.data prefetch")
            self.thread.start()
        with self.changed:
            while not self.ready and not self.inner_done:
                self.changed.wait()
            if not self.ready:
                raise StopIteration
            outcome = self.ready.popleft()
            self.changed.notify_all()
        return settle(outcome)

    def _pause(self) -> None:
        if self.thread is not None:
            with self.changed:
                self.stopping = True
                self.changed.notify_all()
            self.thread.join()
            self.thread = None

    def state(self) -> dict[str, Any]:
        self._pause()  # restarted by the next `next()`
        return {**super().state(), "ahead": pack(list(self.ready)),
                "inner_done": self.inner_done}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.ready = deque(unpack(state["ahead"], self.structure))
        self.inner_done = bool(state["inner_done"])

    def close(self) -> None:
        self._pause()
        super().close()


__all__ = ["Batched", "Bucketed", "Cached", "Concatenated", "Counted", "Describe", "Filtered",
           "Generated", "Group", "Interleaved", "Listed", "Mapped", "Opener", "Prefetched",
           "Repeated", "Scanned", "Sharded", "Shuffled", "Slices", "Slot", "Source", "Stage",
           "Taken", "TakenWhile", "Unbatched", "Unique", "Windowed", "Zipped"]
