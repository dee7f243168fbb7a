"""DLPack: tensors and NumPy arrays share memory both ways, as `tf.experimental.dlpack`
does, through the versioned and the unversioned capsule: proved by the data pointers, not
the values. (PyTorch and JAX, not dependencies, are checked where installed by
`python -m benchmarks.dlpack_interop`.)"""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core.errors import StagingError


def _address(t: sf.Tensor) -> int:
    return np.asarray(t).__array_interface__["data"][0]


def test_numpy_reads_a_tensor_without_copying_and_read_only():
    t = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    array = np.from_dlpack(t)
    assert array.__array_interface__["data"][0] == _address(t)
    np.testing.assert_array_equal(array, [[1.0, 2.0], [3.0, 4.0]])
    assert not array.flags.writeable  # the tensor never changes: NumPy is told so
    assert t.__dlpack_device__() == (1, 0)


def test_a_tensor_reads_numpy_without_copying():
    array = np.arange(6, dtype=np.int64).reshape(2, 3)
    t = sf.from_dlpack(array)
    assert t.dtype == sf.int64 and t.shape == (2, 3)
    assert _address(t) == array.__array_interface__["data"][0]
    np.testing.assert_array_equal((t * 2).numpy(), array * 2)


def test_capsules_round_trip_through_the_experimental_names():
    t = sf.constant([1, 2, 3], sf.int32)
    capsule = sf.experimental.dlpack.to_dlpack(t)
    back = sf.experimental.dlpack.from_dlpack(capsule)
    assert back.dtype == sf.int32 and _address(back) == _address(t)
    assert sf.experimental.dlpack.from_dlpack is sf.from_dlpack


def test_scalars_and_every_numeric_dtype_cross():
    for dtype in (sf.float16, sf.float32, sf.float64, sf.int8, sf.uint8, sf.int32,
                  sf.uint64, sf.bool, sf.complex64):
        t = sf.constant([1, 0], dtype)
        out = np.from_dlpack(t)
        assert out.dtype == dtype and out.tolist() == t.numpy().tolist()
    scalar = sf.constant(2.5) * 2.0  # 0-d results may be NumPy scalars: exported as 0-d
    assert np.from_dlpack(scalar).shape == () and float(np.from_dlpack(scalar)) == 5.0


def test_what_dlpack_cannot_carry_is_a_clear_error():
    with pytest.raises(BufferError, match="cannot export a bfloat16 tensor of shape"):
        np.from_dlpack(sf.constant([1.0], sf.bfloat16))
    with pytest.raises(TypeError, match="expected an object with __dlpack__ or a DLPack "
                                        "capsule, got list"):
        sf.from_dlpack([1, 2])
    with pytest.raises(TypeError, match="to_dlpack: expected a tensor, got ndarray"):
        sf.experimental.dlpack.to_dlpack(np.ones(2))


def test_gpu_tensors_are_exported_only_as_a_host_copy():
    gpus = [d for d in sf.list_devices() if "GPU" in d]
    if not gpus:
        pytest.skip("no GPU device (the suite emulates one)")
    t = sf.constant([1.0, 2.0]).to(gpus[-1])
    with pytest.raises(BufferError, match=r"on /device:GPU:\d+, and stageflow exports host "
                                          r"memory only: t.cpu\(\) copies it"):
        np.from_dlpack(t)
    np.testing.assert_array_equal(np.from_dlpack(t, copy=True), [1.0, 2.0])


def test_traced_tensors_have_no_memory_to_share():
    @sf.function
    def export(x):
        return np.from_dlpack(x)

    with pytest.raises(StagingError, match="DLPack export"):
        export(sf.constant([1.0]))


def test_the_unversioned_capsule_older_consumers_take_shares_memory_too():
    """DLPack before 1.0 (what PyTorch and JAX take when they ask for no version; NumPy
    2 asks for a versioned one): the same memory, through the legacy capsule."""
    t = sf.constant([1.0, 2.0, 3.0])

    class Legacy:
        def __dlpack__(self, **_: object) -> object:
            return t.__dlpack__()  # no max_version: the unversioned capsule

        def __dlpack_device__(self) -> tuple[int, int]:
            return t.__dlpack_device__()

    array = np.from_dlpack(Legacy())
    assert array.__array_interface__["data"][0] == _address(t)
    assert array.tolist() == [1.0, 2.0, 3.0]
