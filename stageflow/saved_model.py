"""`sf.saved_model`: TensorFlow's names for the saved-function format of `sf.saved`.

``sf.saved_model.save(obj, export_dir)`` and ``sf.saved_model.load(export_dir)`` are
`sf.saved.save` and `sf.saved.load` (the directory holds the staged functions' IR, the
variables and a manifest; see there). TensorFlow's `signatures`, `options` and `tags`
arguments are accepted where they ask for what stageflow does anyway, and refused
otherwise; `SaveOptions` and `LoadOptions` carry TensorFlow's options, which select
nothing here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from stageflow.core.exports import public_dir as _public_dir
from stageflow.core.source import describe_location
from stageflow.saved.load import load as _load
from stageflow.saved.save import save as _save

__all__ = ["LoadOptions", "SaveOptions", "load", "save"]
__dir__ = _public_dir(globals())


@dataclass
class SaveOptions:
    """TensorFlow's ``tf.saved_model.SaveOptions``, for code that passes them to `save`.
    None changes what is written: the format holds each function's forward graph and its
    variables, and no device placements, debug information, sharding or aliases.

    >>> sf.saved_model.SaveOptions(experimental_custom_gradients=True).experimental_custom_gradients
    True
    """

    namespace_whitelist: Any = None
    save_debug_info: bool = False
    function_aliases: Any = None
    experimental_debug_stripper: bool = False
    experimental_io_device: Any = None
    experimental_variable_policy: Any = None
    experimental_custom_gradients: bool = True
    experimental_image_format: bool = False
    experimental_skip_saver: bool = False
    experimental_sharding_callback: Any = None


@dataclass
class LoadOptions:
    """TensorFlow's ``tf.saved_model.LoadOptions``, for code that passes them to `load`:
    they select nothing here (the format has no partial checkpoints or devices).

    >>> sf.saved_model.LoadOptions(allow_partial_checkpoint=True).allow_partial_checkpoint
    True
    """

    allow_partial_checkpoint: bool = False
    experimental_io_device: Any = None
    experimental_skip_checkpoint: bool = False
    experimental_variable_policy: Any = None
    experimental_load_function_aliases: bool = False


def save(obj: Any, export_dir: str | os.PathLike, signatures: Any = None,
         options: Any = None) -> None:
    """`sf.saved.save`: every traced signature of `obj`'s staged functions, and its
    variables. ``signatures`` (TensorFlow's choice of serving functions) must be None or
    staged functions of `obj`, which are saved anyway.

    >>> import shutil, tempfile
    >>> f = sf.function(lambda x: x + 1.0, input_signature=[sf.TensorSpec([2], sf.float32)])
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved_model.save(f, directory)
    >>> sf.saved_model.load(directory)(sf.constant([1.0, 2.0]))
    sf.Tensor([2., 3.], shape=(2,), dtype=float32)
    >>> shutil.rmtree(directory)
    """
    del options
    if signatures is not None and not callable(signatures) and not isinstance(signatures,
                                                                              dict):
        raise TypeError(f"sf.saved_model.save: signatures must be None, a staged function or "
                        f"a dict of them, got {type(signatures).__name__}{describe_location()}")
    _save(obj, export_dir)


def load(export_dir: str | os.PathLike, tags: Any = None, options: Any = None) -> Any:
    """`sf.saved.load`: the saved functions, callable, over variables holding the saved
    values (`tags` and `options`, TensorFlow's, select nothing here).

    >>> import shutil, tempfile
    >>> double = sf.function(lambda x: 2.0 * x, input_signature=[sf.TensorSpec([], sf.float32)])
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved_model.save(double, directory)
    >>> float(sf.saved_model.load(directory)(sf.constant(4.0)))
    8.0
    >>> shutil.rmtree(directory)
    """
    del tags, options
    return _load(export_dir)
