"""`sf.signal`: Fourier and cosine transforms, frames, windows, spectrograms and the mel
scale, against NumPy's FFT and values TensorFlow gives, eagerly, staged and through
gradients."""

import numpy as np
import pytest

import stageflow as sf
from tests.strategies import numeric_gradient

SIGNAL = np.sin(np.arange(10) * 0.7).astype(np.float32)
RNG = np.random.RandomState(0)


def _complex(shape):
    return (RNG.randn(*shape) + 1j * RNG.randn(*shape)).astype(np.complex64)


@pytest.mark.parametrize("n", [1, 4, 7, 16])
def test_fft_and_ifft_match_numpy(n):
    z = _complex((3, n))
    np.testing.assert_allclose(sf.signal.fft(z).numpy(), np.fft.fft(z), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sf.signal.ifft(z).numpy(), np.fft.ifft(z), rtol=1e-4, atol=1e-5)
    assert sf.signal.fft(z).dtype == sf.complex64


@pytest.mark.parametrize("n", [5, 8])
def test_rfft_and_irfft_match_numpy_and_invert(n):
    x = RNG.randn(2, n).astype(np.float32)
    spectrum = sf.signal.rfft(x)
    np.testing.assert_allclose(spectrum.numpy(), np.fft.rfft(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sf.signal.irfft(spectrum, [n]).numpy(), x, atol=1e-5)
    np.testing.assert_allclose(sf.signal.irfft(spectrum, [n]).numpy(),
                               np.fft.irfft(np.fft.rfft(x), n), atol=1e-5)


def test_rfft_and_irfft_lengths_as_tensorflow():
    np.testing.assert_allclose(sf.signal.rfft(SIGNAL[:5], [8]).numpy(), np.array(
        [2.827865 + 0.j, -0.4898387 - 2.0513616j, -0.6504616 + 0.2189917j,
         -0.1801376 - 0.0804622j, -0.1869891 + 0.j]), atol=1e-5)
    odd = sf.signal.irfft(sf.constant([1 + 2j, 3 - 1j, 0.5 + 0.5j], sf.complex64), [5])
    np.testing.assert_allclose(odd.numpy(), [1.6, 0.6718826, -0.2836916, -1.1343424,
                                             0.1461515], atol=1e-5)
    assert sf.signal.rfft(sf.constant([1.0, 2.0], sf.float64)).dtype == sf.complex128


def test_fft2d_and_ifft2d_match_numpy():
    z = _complex((2, 3, 4))
    np.testing.assert_allclose(sf.signal.fft2d(z).numpy(), np.fft.fft2(z), atol=1e-4)
    np.testing.assert_allclose(sf.signal.ifft2d(z).numpy(), np.fft.ifft2(z), atol=1e-5)


def test_transforms_refuse_wrong_dtypes():
    with pytest.raises(TypeError, match="sf.signal.rfft"):
        sf.signal.rfft(sf.constant([1, 2]))
    with pytest.raises(TypeError, match="sf.signal.fft"):
        sf.signal.fft(sf.constant([1, 2]))


def test_dct_as_tensorflow():
    x = SIGNAL[:5]
    np.testing.assert_allclose(sf.signal.dct(x).numpy(), [5.65573, -0.8946257, -2.3605182,
                                                          0.0227448, -0.2611348], atol=1e-5)
    np.testing.assert_allclose(sf.signal.dct(x, norm="ortho").numpy(),
                               [1.2646596, -0.2829055, -0.7464614, 0.0071925, -0.0825781],
                               atol=1e-5)
    np.testing.assert_allclose(sf.signal.dct(x, type=3).numpy(),
                               [4.0416636, -2.0356624, -1.3009232, -0.2664652, -0.4386132],
                               atol=1e-5)
    np.testing.assert_allclose(sf.signal.idct(x, norm="ortho").numpy(),
                               [1.2780863, -0.643733, -0.411388, -0.0842636, -0.1387017],
                               atol=1e-5)
    np.testing.assert_allclose(sf.signal.dct(x, n=7).numpy(),
                               [5.65573, 1.5717888, -3.0862741, -1.8273375, -0.0220716,
                                -0.239029, -0.150398], atol=1e-5)
    ortho = sf.signal.dct(x, norm="ortho")
    np.testing.assert_allclose(sf.signal.idct(ortho, norm="ortho").numpy(), x, atol=1e-5)


def test_frame_and_overlap_and_add_as_tensorflow():
    framed = sf.signal.frame(np.arange(12).reshape(6, 2), 3, 2, axis=0)
    assert framed.numpy().tolist() == [[[0, 1], [2, 3], [4, 5]], [[4, 5], [6, 7], [8, 9]]]
    assert sf.signal.frame(sf.range(5), 3, 2, pad_end=True).numpy().tolist() == [
        [0, 1, 2], [2, 3, 4], [4, 0, 0]]
    assert sf.signal.frame(sf.range(2), 3, 1).shape == (0, 3)
    added = sf.signal.overlap_and_add(np.arange(12.0).reshape(2, 2, 3).astype(np.float32), 1)
    assert added.numpy().tolist() == [[0.0, 4.0, 6.0, 5.0], [6.0, 16.0, 18.0, 11.0]]


def test_windows_as_tensorflow():
    np.testing.assert_allclose(sf.signal.hann_window(5, periodic=False).numpy(),
                               [0.0, 0.5, 1.0, 0.5, 0.0], atol=1e-7)
    np.testing.assert_allclose(sf.signal.hamming_window(4).numpy(), [0.08, 0.54, 1.0, 0.54],
                               atol=1e-7)
    assert sf.signal.hann_window(1).numpy().tolist() == [1.0]
    assert sf.signal.hann_window(3, dtype=sf.float64).dtype == sf.float64


STFT = np.array([[1.9268963 + 0.j, -0.6857294 - 1.5253613j, -0.4878462 + 0.7898507j,
                  0.1832472 - 0.0471868j, 0.0537603 + 0.j],
                 [-1.9455721 + 0.j, 1.5239477 + 0.7085733j, -0.473752 - 0.7975063j,
                  -0.0502689 + 0.1823985j, -0.0542815 + 0.j]])
INVERSE = [0.0, 0.0402636, 0.5543154, 0.8632094, 0.2093676, -0.2192395, -0.8715758,
           -0.5526295, -0.0394541]


def test_stft_and_inverse_stft_as_tensorflow_eagerly_and_staged():
    @sf.function
    def staged(x):
        spectrum = sf.signal.stft(x, 6, 3, fft_length=8)
        return spectrum, sf.signal.inverse_stft(spectrum, 6, 3, fft_length=8)

    for spectrum, inverse in [staged(sf.constant(SIGNAL)),
                              (sf.signal.stft(SIGNAL, 6, 3, fft_length=8),
                               sf.signal.inverse_stft(sf.signal.stft(SIGNAL, 6, 3, 8), 6, 3, 8))]:
        assert spectrum.dtype == sf.complex64
        np.testing.assert_allclose(spectrum.numpy(), STFT, atol=1e-5)
        np.testing.assert_allclose(inverse.numpy(), INVERSE, atol=1e-5)
    assert sf.signal.stft(SIGNAL, 4, 3, pad_end=True).shape == (4, 3)


def test_transforms_stage():
    z = _complex((2, 4))

    @sf.function
    def staged(z):
        return sf.signal.fft(z), sf.signal.ifft2d(z), sf.signal.dct(sf.math.real(z))

    result = staged(sf.constant(z))
    np.testing.assert_allclose(result[0].numpy(), np.fft.fft(z), atol=1e-4)
    np.testing.assert_allclose(result[1].numpy(), np.fft.ifft2(z), atol=1e-5)


def test_mel_matrix_and_mfccs_as_tensorflow():
    np.testing.assert_allclose(sf.signal.linear_to_mel_weight_matrix(3, 6, 1000, 50.0,
                                                                      450.0).numpy(),
                               [[0.0, 0.0, 0.0], [0.6039491, 0.0, 0.0],
                                [0.2938438, 0.7061562, 0.0], [0.0, 0.3078846, 0.6921154],
                                [0.0, 0.0, 0.4159771], [0.0, 0.0, 0.0]], atol=1e-5)
    np.testing.assert_allclose(
        sf.signal.mfccs_from_log_mel_spectrograms(SIGNAL[:8].reshape(2, 4)).numpy(),
        [[1.76273, -0.6562554, -0.383229, -0.0106622],
         [-1.3221648, 1.0015851, 0.2874472, 0.0162728]], atol=1e-5)


def test_gradients_match_finite_differences():
    x0 = RNG.randn(12)

    def loss(x):
        spectrum = sf.signal.stft(x, 6, 3, fft_length=8)
        power = sf.math.real(spectrum) ** 2 + sf.math.imag(spectrum) ** 2
        return sf.reduce_sum(power * np.arange(5.0)) + sf.reduce_sum(
            sf.signal.dct(x, norm="ortho") * np.arange(12.0))

    x = sf.constant(x0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        value = loss(x)
    got = tape.gradient(value, x).numpy()
    expected = numeric_gradient(lambda a: float(loss(sf.constant(a)).numpy()), x0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
