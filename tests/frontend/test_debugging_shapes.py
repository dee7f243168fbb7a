"""sf.debugging's checks of shapes, ranks and dtypes, eagerly and staged."""

import numpy as np
import pytest

import stageflow as sf


def test_assert_shapes_symbols_sizes_and_ellipsis():
    x, y, s = sf.zeros((2, 3)), sf.zeros((3,)), sf.constant(1.0)
    sf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("Q",)), (s, ())])
    sf.debugging.assert_shapes([(x, (..., 3)), (y, (".",)), (x, (2, None))])
    sf.debugging.assert_shapes([(sf.zeros((4, 2, 3)), ("*", "N", 3)), (x, ("N", "Q"))])
    with pytest.raises(ValueError, match="'N'"):
        sf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("N",))])
    with pytest.raises(ValueError, match="rank"):
        sf.debugging.assert_shapes([(x, ("N",))])
    with pytest.raises(ValueError, match="first entry"):
        sf.debugging.assert_shapes([(x, ("N", ...))])


def test_assert_shapes_checks_unknown_dims_when_run():
    @sf.function(input_signature=[sf.TensorSpec([None], sf.float32),
                                  sf.TensorSpec([None], sf.float32)])
    def f(a, b):
        sf.debugging.assert_shapes([(a, ("N",)), (b, ("N",))])
        return a + 1.0

    np.testing.assert_array_equal(np.asarray(f(np.zeros(2, np.float32),
                                               np.zeros(2, np.float32))), [1.0, 1.0])
    with pytest.raises(sf.errors.InvalidArgumentError, match="assert_shapes"):
        f(np.zeros(2, np.float32), np.zeros(3, np.float32))


def test_static_checks():
    sf.debugging.assert_integer(sf.constant([1]))
    with pytest.raises(TypeError, match="integer"):
        sf.debugging.assert_integer(sf.constant([1.0]))
    assert float(sf.debugging.assert_scalar(sf.constant(2.0))) == 2.0
    with pytest.raises(ValueError, match="scalar"):
        sf.debugging.assert_scalar(sf.constant([2.0]))
    sf.debugging.assert_rank_at_least(sf.zeros((1, 2)), 2)
    with pytest.raises(ValueError, match="at least 3"):
        sf.debugging.assert_rank_at_least(sf.zeros((1, 2)), 3)


def test_kinds_of_values():
    assert sf.debugging.is_numeric_tensor(sf.constant([1]))
    assert not sf.debugging.is_numeric_tensor(sf.constant([True]))
    assert not sf.debugging.is_numeric_tensor(sf.constant(["a"]))
    assert not sf.debugging.is_numeric_tensor(np.zeros(2))
    sf.debugging.assert_proper_iterable((1, 2))
    for bad in (sf.constant([1]), np.zeros(2), "ab", b"ab", 3):
        with pytest.raises(TypeError):
            sf.debugging.assert_proper_iterable(bad)
    assert sf.debugging.set_log_device_placement(True) is None
