"""TensorFlow's ops on batches of sequences of different lengths: `sf.sequence_mask` and
`sf.reverse_sequence`, as comparisons and gathers."""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import range as sf_range
from stageflow.frontend.ops.shape import expand_dims, gather, reshape, transpose
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["reverse_sequence", "sequence_mask"]


def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = dtypes.bool_) -> Tensor:
    """``mask[..., j] = j < lengths[...]``: which of `maxlen` steps each sequence has
    (TensorFlow's ``tf.sequence_mask``); `maxlen` defaults to the longest length, which must
    then be known (eagerly, or given in a staged function).

    lengths: int tensor of any shape; returns lengths.shape + [maxlen] of `dtype`.

    >>> sf.sequence_mask([1, 3, 2], 4)
    sf.Tensor([[ True, False, False, False],
               [ True,  True,  True, False],
               [ True,  True, False, False]], shape=(3, 4), dtype=bool)
    """
    lengths = convert_to_tensor(lengths)
    if maxlen is None:
        known = get_static_value(lengths)
        if known is None:
            raise ValueError(f"sequence_mask: maxlen defaults to the largest length, which a "
                             f"trace does not have: pass maxlen{describe_location()}")
        maxlen = int(known.max()) if known.size else 0
    steps = sf_range(int(maxlen), dtype=lengths.dtype)
    return ew.cast(ew.less(steps, expand_dims(lengths, -1)), dtypes.as_dtype(dtype))


def reverse_sequence(input: Any, seq_lengths: Any, seq_axis: int,  # noqa: A002
                     batch_axis: int = 0) -> Tensor:
    """Each batch entry's first ``seq_lengths[b]`` steps along `seq_axis` reversed, the rest
    left in place (TensorFlow's ``tf.reverse_sequence``: padded sequences reversed).

    >>> sf.reverse_sequence([[1, 2, 3], [4, 5, 6]], [2, 3], seq_axis=1)
    sf.Tensor([[2, 1, 3],
               [6, 5, 4]], shape=(2, 3), dtype=int32)
    """
    x = convert_to_tensor(input)
    seq_axis = normalize_axis(seq_axis, x.ndim)
    batch_axis = normalize_axis(batch_axis, x.ndim)
    if seq_axis == batch_axis:
        raise ValueError(f"reverse_sequence: seq_axis and batch_axis must differ"
                         f"{describe_location()}")
    rest = [a for a in range(x.ndim) if a not in (batch_axis, seq_axis)]
    perm = [batch_axis, seq_axis, *rest]
    moved = transpose(x, perm)
    batch, steps = moved.shape[0], moved.shape[1]
    if batch is None or steps is None:
        raise ValueError(f"reverse_sequence: the batch and sequence dims must be known"
                         f"{describe_location()}")
    lengths = ew.cast(convert_to_tensor(seq_lengths), dtypes.int32)
    t = sf_range(steps, dtype=dtypes.int32)
    length = expand_dims(lengths, 1)  # [batch, 1]
    source = ew.where(ew.less(t, length), length - 1 - t, t)  # [batch, steps]
    flat = source + expand_dims(sf_range(batch, dtype=dtypes.int32) * steps, 1)
    rows = gather(reshape(moved, (batch * steps, *moved.shape[2:])), reshape(flat, (-1,)))
    inverse = [perm.index(a) for a in range(x.ndim)]
    return transpose(reshape(rows, moved.shape), inverse)
