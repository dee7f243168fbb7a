"""TensorFlow names added to `sf`, `sf.math`, `sf.nn`, `sf.linalg` and `sf.errors`: values
TensorFlow gives (hard-coded), eagerly and staged (interpreted and compiled), NumPy
references, and gradients against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from tests.strategies import numeric_gradient

WAYS = ["eager", "interpreted", "compiled"]


def way(name, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")


@pytest.mark.parametrize("name", WAYS)
def test_math_values_match_tensorflow(name):
    def ops(x, y):
        return (sf.math.divide_no_nan(x, y), sf.math.multiply_no_nan(x, y),
                sf.math.squared_difference(x, y), sf.math.xlogy(x, y + 1.0),
                sf.math.log_sigmoid(x), sf.math.cumulative_logsumexp(x),
                sf.math.reduce_std(x), sf.math.reduce_variance(x),
                sf.math.reduce_euclidean_norm(x), sf.math.softplus(x),
                sf.math.polyval([1.0, 2.0, 3.0], x))

    x = sf.constant([0.0, 1.0, 2.0])
    y = sf.constant([0.0, 4.0, 2.0])
    got = [t.numpy() for t in way(name, ops)(x, y)]
    np.testing.assert_allclose(got[0], [0.0, 0.25, 1.0])
    np.testing.assert_allclose(got[1], [0.0, 4.0, 4.0])
    np.testing.assert_allclose(got[2], [0.0, 9.0, 0.0])
    np.testing.assert_allclose(got[3], [0.0, np.log(5.0), 2 * np.log(3.0)], rtol=1e-6)
    np.testing.assert_allclose(got[4], [-0.6931472, -0.3132617, -0.126928], rtol=1e-5)
    np.testing.assert_allclose(got[5], [0.0, 1.3132617, 2.4076061], rtol=1e-6)
    np.testing.assert_allclose(got[6], np.std([0.0, 1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(got[7], np.var([0.0, 1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(got[8], np.sqrt(5.0), rtol=1e-6)
    np.testing.assert_allclose(got[9], np.log1p(np.exp([0.0, 1.0, 2.0])), rtol=1e-6)
    np.testing.assert_allclose(got[10], [3.0, 6.0, 11.0])


def test_integer_math_matches_tensorflow():
    assert sf.math.floormod([-7, 7], 3).numpy().tolist() == [2, 1]
    assert sf.math.truediv(sf.constant([1, 2]), sf.constant([2, 4])).dtype == np.float64
    assert sf.math.count_nonzero([[0, 1], [2, 0]], axis=1).numpy().tolist() == [1, 1]
    assert sf.math.count_nonzero([[0, 1], [2, 0]]).dtype == np.int64
    assert sf.math.bincount([1, 1, 3]).numpy().tolist() == [0, 2, 0, 1]
    np.testing.assert_allclose(sf.math.bincount([1, 1, 3], weights=[0.5, 1.0, 2.0],
                                                minlength=6).numpy(), [0, 1.5, 0, 2, 0, 0])
    assert sf.math.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1]).numpy().tolist() == [
        [1, 0, 0], [0, 1, 1], [0, 0, 1]]
    assert sf.histogram_fixed_width([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0], [0.0, 5.0],
                                    nbins=5).numpy().tolist() == [2, 1, 1, 0, 2]
    assert sf.math.in_top_k([1, 0], [[0.1, 0.9, 0.0], [0.2, 0.5, 0.3]], 1).numpy().tolist() \
        == [True, False]
    assert sf.searchsorted([[1, 3, 5]], [[0, 3, 6]]).numpy().tolist() == [[0, 1, 3]]
    assert sf.searchsorted([[1, 3, 5]], [[0, 3, 6]], side="right").numpy().tolist() == [
        [0, 2, 3]]


@pytest.mark.parametrize("name", WAYS)
def test_segment_reductions_match_tensorflow(name):
    def ops(data, ids):
        return (sf.math.unsorted_segment_mean(data, ids, 3),
                sf.math.unsorted_segment_max(data, ids, 3),
                sf.math.unsorted_segment_min(data, ids, 3))

    mean, high, low = way(name, ops)(sf.constant([1.0, 2.0, 3.0, 4.0]), sf.constant([0, 1, 0, 1]))
    np.testing.assert_allclose(mean.numpy(), [2.0, 3.0, 0.0])
    np.testing.assert_allclose(high.numpy(), [3.0, 4.0, np.finfo(np.float32).min])
    np.testing.assert_allclose(low.numpy(), [1.0, 2.0, np.finfo(np.float32).max])


@pytest.mark.parametrize("name", WAYS)
def test_array_ops_match_tensorflow(name):
    x = sf.reshape(sf.range(24), (2, 3, 4))

    def ops(x, lengths):
        return (*sf.unstack(x[0], axis=1),
                sf.sequence_mask(lengths, 4),
                sf.reverse_sequence(x[:, :, 0], [2, 3], seq_axis=1),
                sf.strided_slice(x, [0, 1, 1], [2, 3, 4], [1, 1, 2], shrink_axis_mask=1),
                sf.strided_slice(x, [0, 0], [0, 2], [1, 1], ellipsis_mask=1),
                sf.broadcast_dynamic_shape(sf.shape(x), [1, 4]))

    got = [t.numpy() for t in way(name, ops)(x, sf.constant([1, 3, 2]))]
    xn = np.arange(24).reshape(2, 3, 4)
    for i in range(4):
        np.testing.assert_array_equal(got[i], xn[0][:, i])
    np.testing.assert_array_equal(got[4], np.arange(4) < np.array([1, 3, 2])[:, None])
    np.testing.assert_array_equal(got[5], [[4, 0, 8], [20, 16, 12]])
    np.testing.assert_array_equal(got[6], [[5, 7], [9, 11]])
    np.testing.assert_array_equal(got[7], xn[..., 0:2])
    np.testing.assert_array_equal(got[8], [2, 3, 4])


def test_lists_shapes_and_stitching():
    parts = sf.dynamic_partition([10, 20, 30, 40], [0, 1, 0, 1], 2)
    assert [p.numpy().tolist() for p in parts] == [[10, 30], [20, 40]]
    merged = sf.dynamic_stitch([[0, 2], [1, 0]], [[1.0, 3.0], [2.0, 9.0]])
    np.testing.assert_array_equal(merged.numpy(), [9.0, 2.0, 3.0])  # the later one wins
    assert [s.numpy().tolist() for s in sf.shape_n([sf.zeros((2, 3)), sf.zeros(4)])] == [
        [2, 3], [4]]
    assert [t.numpy() for t in sf.identity_n([1, 2.0])] == [1, 2.0]
    assert sf.broadcast_static_shape(sf.TensorShape([2, 1]), sf.TensorShape([3])).as_list() == [
        2, 3]
    with pytest.raises(ValueError):
        sf.broadcast_static_shape(sf.TensorShape([2]), sf.TensorShape([3]))
    with pytest.raises(sf.errors.InvalidArgumentError):
        sf.ensure_shape(sf.zeros((2, 3)), [None, 4])
    np.testing.assert_array_equal(sf.get_static_value(sf.constant([1, 2])), [1, 2])


@pytest.mark.parametrize("name", WAYS)
def test_nn_names_match_tensorflow(name):
    def ops(x, image):
        return (sf.nn.selu(x), sf.nn.l2_loss(x),
                sf.nn.weighted_cross_entropy_with_logits(sf.constant([1.0, 0.0]), x, 2.0),
                sf.nn.max_pool(sf.reshape(image, (1, 16, 1)), 2, 2, "VALID"),
                sf.nn.avg_pool(image, 2, 2, "VALID"),
                sf.nn.pool(image, [2, 2], "MAX", strides=[2, 2]),
                sf.nn.local_response_normalization(sf.reshape(image[:, :1, :2, :], (1, 1, 2, 1)) *
                                                   sf.ones((1, 1, 1, 4)), depth_radius=1))

    image = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    got = [t.numpy() for t in way(name, ops)(sf.constant([0.5, -1.0]), image)]
    np.testing.assert_allclose(got[0], [0.5253505, -1.1113307], rtol=1e-6)
    np.testing.assert_allclose(got[1], 0.625)
    np.testing.assert_allclose(got[2], [0.948154, 0.31326166], rtol=1e-6)
    np.testing.assert_array_equal(got[3].reshape(-1), np.arange(1, 16, 2))
    np.testing.assert_array_equal(got[4].reshape(2, 2), [[2.5, 4.5], [10.5, 12.5]])
    np.testing.assert_array_equal(got[5].reshape(2, 2), [[5, 7], [13, 15]])
    squares = np.array([0.0, 1.0])[:, None] ** 2 * np.array([2, 3, 3, 2])
    np.testing.assert_allclose(got[6].reshape(2, 4),
                               np.array([[0.0], [1.0]]) / np.sqrt(1 + squares), rtol=1e-6)
    assert sf.nn.top_k is sf.math.top_k and sf.nn.in_top_k is sf.math.in_top_k


@pytest.mark.parametrize("name", WAYS)
def test_linalg_names_match_tensorflow(name):
    def ops(a):
        return (sf.linalg.band_part(a, 1, 0), sf.linalg.adjoint(a),
                sf.linalg.matvec(a, sf.constant([1.0, 1.0, 1.0])),
                sf.linalg.set_diag(a, sf.constant([7.0, 8.0, 9.0])),
                sf.linalg.logdet(sf.matmul(a, a, transpose_b=True) + sf.eye(3)),
                sf.linalg.cross(a[0], a[1]), sf.linalg.normalize(a[0])[1])

    an = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [2.0, 0.0, 1.0]], np.float32)
    got = [t.numpy() for t in way(name, ops)(sf.constant(an))]
    np.testing.assert_array_equal(got[0], np.tril(np.triu(an, -1)))
    np.testing.assert_array_equal(got[1], an.T)
    np.testing.assert_allclose(got[2], an.sum(1))
    np.testing.assert_array_equal(got[3], an - np.diag(np.diag(an)) + np.diag([7, 8, 9]))
    np.testing.assert_allclose(got[4], np.linalg.slogdet(an @ an.T + np.eye(3))[1], rtol=1e-5)
    np.testing.assert_allclose(got[5], np.cross(an[0], an[1]))
    np.testing.assert_allclose(got[6], [np.sqrt(5.0)], rtol=1e-6)


@pytest.mark.parametrize(("fn", "x"), [
    (lambda x: sf.math.divide_no_nan(x, x + 2.0), [0.5, 1.5]),
    (lambda x: sf.math.xlogy(x, x + 1.0), [0.5, 1.5]),
    (lambda x: sf.math.log_sigmoid(x), [-2.0, 0.3]),
    (lambda x: sf.math.reduce_std(x), [0.5, 1.5, 4.0]),
    (lambda x: sf.math.cumulative_logsumexp(x), [0.5, -1.5, 4.0]),
    (lambda x: sf.math.unsorted_segment_mean(x, [0, 1, 0], 2), [0.5, 1.5, 4.0]),
    (lambda x: sf.math.unsorted_segment_max(x, [0, 1, 0], 2), [0.5, 1.5, 4.0]),
    (lambda x: sf.nn.selu(x), [-0.5, 1.5]),
    (lambda x: sf.nn.weighted_cross_entropy_with_logits([1.0, 0.0], x, 3.0), [-0.5, 1.5]),
    (lambda x: sf.linalg.cross(x, [1.0, 2.0, 3.0]), [0.5, 1.5, 4.0]),
    (lambda x: sf.reverse_sequence(sf.reshape(x, (1, 3)), [2], seq_axis=1), [0.5, 1.5, 4.0]),
    (lambda x: sf.unstack(x)[1] * 3.0, [0.5, 1.5, 4.0]),
])
def test_gradients_match_finite_differences(fn, x):
    x = np.array(x, np.float64)
    weights = np.linspace(1.0, 2.0, np.size(fn(sf.constant(x)).numpy()))

    def loss(v):
        return sf.reduce_sum(sf.reshape(fn(v), (-1,)) * weights)

    with sf.GradientTape() as tape:
        v = sf.constant(x)
        tape.watch(v)
        value = loss(v)
    got = tape.gradient(value, v).numpy()
    expected = numeric_gradient(lambda a: float(loss(sf.constant(a)).numpy()), x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_scopes_and_control():
    with sf.name_scope("block") as outer:
        with sf.name_scope("dense") as inner:
            assert (outer, inner) == ("block/", "block/dense/")

    @sf.function
    def step(v):
        update = v.assign_add(1.0)
        with sf.control_dependencies([update]):
            return v.read_value() * 2.0

    v = sf.Variable(1.0)
    assert float(step(v)) == 4.0
    sf.no_gradient("MyOp")
    with pytest.raises(TypeError):
        sf.no_gradient(3)
    twice = sf.recompute_grad(lambda t: t * 2.0)
    assert float(twice(sf.constant(3.0))) == 6.0
    choose = sf.function(lambda x: sf.case([(x < 0, lambda: -x), (x > 3, lambda: 2 * x)],
                                           default=lambda: x))
    assert [int(choose(sf.constant(v))) for v in (-2, 5, 1)] == [2, 10, 1]
    assert sf.timestamp().dtype == np.float64
    assert sf.version.VERSION == sf.__version__
    assert sf.test.is_built_with_cuda() == sf.test.is_gpu_available()


def test_errors_follow_tensorflows_hierarchy():
    for cls in (sf.errors.NotFoundError, sf.errors.ResourceExhaustedError,
                sf.errors.UnimplementedError, sf.errors.FailedPreconditionError,
                sf.errors.CancelledError, sf.errors.UnknownError, sf.errors.AbortedError,
                sf.errors.AlreadyExistsError, sf.errors.DataLossError,
                sf.errors.DeadlineExceededError, sf.errors.InternalError,
                sf.errors.PermissionDeniedError, sf.errors.UnavailableError,
                sf.errors.UnauthenticatedError, sf.errors.InvalidArgumentError,
                sf.errors.OutOfRangeError):
        assert issubclass(cls, sf.errors.OpError)
    assert issubclass(sf.errors.InvalidArgumentError, ValueError)  # existing excepts hold
    error = sf.errors.NotFoundError(None, None, "missing")
    assert (error.message, str(error), error.error_code) == ("missing", "missing", 5)
    with pytest.raises(sf.errors.OpError):
        sf.gather(sf.constant([1.0]), [1])
