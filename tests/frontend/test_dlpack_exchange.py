"""DLPack: tensors and NumPy / PyTorch (/ JAX where installed) arrays share memory both
ways, as `tf.experimental.dlpack` does: proved by the data pointers, not the values."""

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


def test_pytorch_shares_memory_both_ways():
    torch = pytest.importorskip("torch")  # installed for the benchmarks, not a dependency
    t = sf.constant([1.0, 2.0, 3.0])
    shared = torch.from_dlpack(t)
    assert shared.data_ptr() == _address(t)
    assert shared.tolist() == [1.0, 2.0, 3.0] and shared.dtype == torch.float32
    source = torch.arange(4, dtype=torch.int64)
    back = sf.from_dlpack(source)
    assert back.dtype == sf.int64 and _address(back) == source.data_ptr()
    source[0] = 7  # the producer wrote: the memory is one (documented: it must not)
    assert back.numpy().tolist() == [7, 1, 2, 3]


def test_jax_reads_and_gives_tensors():
    jax = pytest.importorskip("jax")
    t = sf.constant([1.0, 2.0])
    array = jax.dlpack.from_dlpack(t)  # JAX may copy to meet its alignment: values only
    assert array.tolist() == [1.0, 2.0]
    back = sf.from_dlpack(jax.numpy.arange(3.0, dtype=jax.numpy.float32))
    assert back.numpy().tolist() == [0.0, 1.0, 2.0]
