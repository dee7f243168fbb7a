"""Keras' global settings (``keras.config``): the default float dtype of layers' variables,
the fuzz factor added to denominators, and the image data format."""

from __future__ import annotations

__all__ = ["epsilon", "floatx", "image_data_format", "set_epsilon", "set_floatx",
           "set_image_data_format"]

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_settings = {"floatx": "float32", "epsilon": 1e-7, "image_data_format": "channels_last"}


def floatx() -> str:
    """The default float dtype, by name: that of the variables of layers whose input is
    not floating (``"float32"`` unless `set_floatx` changed it).

    >>> sf.keras.backend.floatx()
    'float32'
    """
    return _settings["floatx"]


def set_floatx(value: str) -> None:
    """Set the default float dtype: ``"float16"``, ``"bfloat16"``, ``"float32"`` or
    ``"float64"``.

    >>> sf.keras.backend.set_floatx("float64")
    >>> sf.keras.backend.floatx()
    'float64'
    >>> sf.keras.backend.set_floatx("float32")
    """
    name = getattr(value, "name", value)
    if name not in _FLOATS:
        raise ValueError(f"set_floatx: unknown floatx {value!r} (one of {', '.join(_FLOATS)})")
    _settings["floatx"] = str(name)


def epsilon() -> float:
    """The fuzz factor of numeric expressions (``1e-7`` unless `set_epsilon` changed it).

    >>> sf.keras.backend.epsilon()
    1e-07
    """
    return _settings["epsilon"]


def set_epsilon(value: float) -> None:
    """Set the fuzz factor.

    >>> sf.keras.backend.set_epsilon(1e-5)
    >>> sf.keras.backend.epsilon()
    1e-05
    >>> sf.keras.backend.set_epsilon(1e-7)
    """
    _settings["epsilon"] = float(value)


def image_data_format() -> str:
    """The image layout layers assume: ``"channels_last"`` (NHWC) unless changed.

    >>> sf.keras.backend.image_data_format()
    'channels_last'
    """
    return _settings["image_data_format"]


def set_image_data_format(data_format: str) -> None:
    """Set the image layout: ``"channels_last"`` or ``"channels_first"``.

    >>> sf.keras.backend.set_image_data_format("channels_last")
    """
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"set_image_data_format: unknown data format {data_format!r} (use "
                         f"'channels_last' or 'channels_first')")
    _settings["image_data_format"] = data_format
