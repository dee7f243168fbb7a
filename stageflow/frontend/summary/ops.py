"""`sf.summary.scalar`, `histogram`, `image`, `text`: each a `numpy_function` that writes.

One mechanism serves every kind (`_write`): the summary is a `numpy_function` without
results, whose inputs are the step, the data and, where `record_if` gave a traced tensor,
the condition. Eagerly it runs at once; in a staged function it is an op with a callback
effect, which passes keep and which runs at every call, interpreted or from compiled
code, with that call's values and step (a variable step, such as an optimizer's
``iterations``, is read when the op runs). The writer is the default one when the summary
is made, so a staged function keeps the writer it was traced under, as in TensorFlow. The
data's record is built on the host (`events`), as TensorFlow 2's summaries make them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import dtypes, lazy
from stageflow.core.source import describe_location
from stageflow.frontend.ops.control import numpy_function
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.summary.writers import default_writer, recording_condition, resolve_step
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

if TYPE_CHECKING:
    from stageflow.frontend.summary import events
else:
    events = lazy.module("stageflow.frontend.summary.events")

__all__ = ["histogram", "image", "scalar", "text"]

_IMAGE_CHANNELS = (1, 3, 4)


def _write(kind: str, step: Any, tensors: Sequence[Tensor],
           record: Callable[..., events.Summary]) -> bool | Tensor:
    """Write ``record(*values of tensors)`` at the step to the default writer: now, or at
    each call of the function being traced. False where no writer is the default or
    `record_if` says no; a traced condition is returned as it is (what the op will do)."""
    what = f"sf.summary.{kind}"
    writer = default_writer()
    if writer is None:
        return False
    condition = recording_condition()
    traced = isinstance(condition, SymbolicTensor)
    if not traced and not bool(condition):
        return False
    step_tensor = convert_to_tensor(resolve_step(step, what))
    if step_tensor.shape != () or not dtypes.is_integer(step_tensor.dtype):
        raise ValueError(f"{what}: the step must be an integer scalar, got "
                         f"{step_tensor.dtype.name}{list(step_tensor.shape)}"
                         f"{describe_location()}")
    inputs = [step_tensor, *tensors]
    if traced:
        inputs.append(convert_to_tensor(condition, dtypes.as_dtype(bool)))

    def write(step_value: np.ndarray, *values: np.ndarray) -> list:
        if traced:
            *values, holds = values
            if not holds:
                return []
        writer.write(record(*values), int(step_value))
        return []

    write.__qualname__ = what
    numpy_function(write, inputs, [])
    return condition if traced else True


def scalar(name: str, data: Any, step: Any = None, description: str | None = None
           ) -> bool | Tensor:
    """Write a scalar (cast to float32) under `name` at `step` (default: the default step)
    to the default writer, for TensorBoard's scalars dashboard. True when written, False
    where no writer is the default or `record_if` says no.

    In a staged function it writes at every call, that call's value at that call's step.

    >>> import tempfile
    >>> with sf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     sf.summary.scalar("loss", sf.constant(0.5), step=1)
    True
    """
    value = convert_to_tensor(data)
    if value.shape != ():
        raise ValueError(f"sf.summary.scalar: {name!r} must be a scalar, got shape "
                         f"{list(value.shape)}{describe_location()}")
    return _write("scalar", step, [value],
                  lambda v: events.scalar_pb(name, v.astype(np.float32), description))


def histogram(name: str, data: Any, step: Any = None, buckets: int | None = None,
              description: str | None = None) -> bool | Tensor:
    """Write a histogram of all of `data`'s elements in `buckets` equal-width buckets
    (default 30) between its least and greatest, for the histograms and distributions
    dashboards (TensorFlow 2's buckets: [left, right, count] each).

    >>> import tempfile
    >>> with sf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     sf.summary.histogram("weights", sf.constant([0.0, 1.0, 1.0, 3.0]), step=0)
    True
    """
    if buckets is not None and (not isinstance(buckets, int) or buckets < 0):
        raise ValueError(f"sf.summary.histogram: buckets must be a non-negative int, got "
                         f"{buckets!r}{describe_location()}")
    return _write("histogram", step, [convert_to_tensor(data)],
                  lambda v: events.histogram_pb(name, v, buckets, description))


def image(name: str, data: Any, step: Any = None, max_outputs: int = 3,
          description: str | None = None) -> bool | Tensor:
    """Write up to `max_outputs` images of `data` [k, height, width, channels] (channels 1,
    3 or 4: grey, RGB, RGBA), floats in [0, 1] or uint8, each as a PNG, for the images
    dashboard. Floats become bytes as TensorFlow's ``convert_image_dtype`` makes them:
    ``x * 255.5``, clipped to [0, 255] and truncated.

    >>> import tempfile
    >>> with sf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     sf.summary.image("noise", sf.random.uniform([2, 8, 8, 1]), step=0)
    True
    """
    images = convert_to_tensor(data)
    shape = images.shape
    if len(shape) != 4 or shape[3] not in (*_IMAGE_CHANNELS, None):  # None: checked when run
        raise ValueError(f"sf.summary.image: {name!r} must be [k, height, width, channels] "
                         f"with 1, 3 or 4 channels, got shape {list(shape)}"
                         f"{describe_location()}")
    if images.dtype != np.uint8 and not dtypes.is_floating(images.dtype):
        raise TypeError(f"sf.summary.image: {name!r} must be floats in [0, 1] or uint8, got "
                        f"{images.dtype.name}{describe_location()}")
    return _write("image", step, [images],
                  lambda v: events.image_summary(name, _bytes(v[:max_outputs]), description))


def _bytes(images: np.ndarray) -> np.ndarray:
    """Images as uint8, floats in [0, 1] scaled as TensorFlow's ``convert_image_dtype``."""
    if images.dtype == np.uint8:
        return images
    return np.clip(images.astype(np.float64) * 255.5, 0, 255).astype(np.uint8)


def text(name: str, data: str | Sequence[str], step: Any = None,
         description: str | None = None) -> bool | Tensor:
    """Write text (a string, or nested lists of them, shown as a table) for the text
    dashboard, which renders it as Markdown. The text is fixed when a staged function is
    traced (stageflow has no string tensors); it is written at every call, at its step.

    >>> import tempfile
    >>> with sf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     sf.summary.text("notes", "learning rate *halved*", step=2)
    True
    """
    strings = np.asarray(data, dtype=object)
    if not all(isinstance(s, str | bytes) for s in strings.flat):
        raise TypeError(f"sf.summary.text: {name!r} must be a string or lists of strings, "
                        f"got {data!r}{describe_location()}")
    return _write("text", step, [], lambda: events.text_pb(name, strings, description))
