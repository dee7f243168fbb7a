"""Zero-copy exchange of tensors with other array libraries through DLPack.

`from_dlpack` makes a tensor of any object with ``__dlpack__`` (a NumPy array, a PyTorch
or JAX CPU tensor) or of a DLPack capsule, over the producer's memory; `to_dlpack` makes the
capsule of a tensor (`Tensor.__dlpack__`, which NumPy's, PyTorch's and JAX's
``from_dlpack`` call themselves). Host memory only: a GPU producer's array is refused by
NumPy's reader, which says so; copy it to the host on its side first.

The shared memory is the tensor's, and tensors never change: the producer must not write
to it while the tensor lives (as with TensorFlow's DLPack tensors).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.tensor import DLPACK_CPU, Tensor

__all__ = ["from_dlpack", "to_dlpack"]

_CAPSULE = type(np.empty(0).__dlpack__())


class _Capsule:
    """A bare DLPack capsule as the object NumPy's reader takes (a capsule carries no
    device: a capsule of device memory is refused when NumPy reads it)."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DLPACK_CPU, 0)


def to_dlpack(tensor: Any) -> Any:
    """A DLPack capsule over `tensor`'s memory, for an older library's ``from_dlpack``
    that takes capsules (newer ones take the tensor itself).

    >>> capsule = sf.experimental.dlpack.to_dlpack(sf.constant([1.0, 2.0]))
    >>> sf.experimental.dlpack.from_dlpack(capsule)
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a tensor, got {type(tensor).__name__}"
                        f"{describe_location()}")
    return tensor.__dlpack__()  # a traced tensor's raises: it has no memory to share


def from_dlpack(dlcapsule_or_obj: Any) -> Tensor:
    """A tensor sharing the memory of `dlcapsule_or_obj`: an object with ``__dlpack__``
    (``np.ndarray``, ``torch.Tensor``, ``jax.Array`` on the CPU) or a DLPack capsule.

    The dtype is the producer's (one of stageflow's dtypes; NumPy's reader has no
    bfloat16); a read-only producer gives a read-only tensor. Raises ``BufferError`` (or
    the reader's error) for device memory: copy to the host first (``t.cpu()`` in PyTorch).

    >>> import numpy as np
    >>> array = np.arange(3, dtype=np.float32)
    >>> t = sf.from_dlpack(array)
    >>> t
    sf.Tensor([0., 1., 2.], shape=(3,), dtype=float32)
    >>> np.shares_memory(np.asarray(t), array)
    True
    """
    source = dlcapsule_or_obj
    if isinstance(source, _CAPSULE):
        source = _Capsule(source)
    elif not hasattr(source, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack "
                        f"capsule, got {type(source).__name__}{describe_location()}")
    try:
        array = np.from_dlpack(source)
    except (BufferError, TypeError, ValueError, RuntimeError) as error:
        raise type(error)(f"from_dlpack: cannot read {type(dlcapsule_or_obj).__name__}: "
                          f"{error}{describe_location()}") from None
    if array.dtype not in dtypes.ALL or not array.dtype.isnative:
        raise TypeError(f"from_dlpack: dtype {array.dtype} is not a stageflow dtype"
                        f"{describe_location()}")
    return context.current_trace().constant(array)
