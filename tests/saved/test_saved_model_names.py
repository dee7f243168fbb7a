"""`sf.saved_model`: TensorFlow's names for the saved-function format, with its option
objects accepted as TensorFlow code passes them."""

from __future__ import annotations

import numpy as np

import stageflow as sf


class _Doubling(sf.Module):
    @sf.function(input_signature=[sf.TensorSpec([], sf.float32)])
    def double(self, x):
        return 2.0 * x


def test_save_and_load_take_tensorflows_option_objects(tmp_path):
    """TensorFlow code passes ``SaveOptions``/``LoadOptions`` (the guides save custom
    gradients with ``SaveOptions(experimental_custom_gradients=True)``): taken, with
    TensorFlow's fields and defaults, and the function round-trips."""
    options = sf.saved_model.SaveOptions(experimental_custom_gradients=True)
    assert sf.saved_model.SaveOptions().experimental_custom_gradients is True
    assert sf.saved_model.LoadOptions().allow_partial_checkpoint is False
    sf.saved_model.save(_Doubling(), tmp_path / "saved", options=options)
    loaded = sf.saved_model.load(tmp_path / "saved", options=sf.saved_model.LoadOptions())
    np.testing.assert_allclose(loaded.double(sf.constant(3.0)).numpy(), 6.0)
