"""Keras' ``.keras`` archives: a zip of the model's config (``config.json``: its class and
`get_config`, see `models.serializable`), the input shape it was built for, and its
weights (a checkpoint, ``model.weights``). Loading makes the model again from its config,
builds it, and restores the weights."""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from typing import Any

from stageflow.core.source import describe_location
from stageflow.models import serializable
from stageflow.models.layers import symbolic
from stageflow.models.layers.base import takes_training
from stageflow.models.train.checkpoint import Checkpoint

_WEIGHTS = "model.weights"  # the checkpoint's path in the archive, without its suffix


def save(model: Any, filepath: str | os.PathLike, overwrite: bool = True) -> None:
    """Write `model` (a `Model`) to the archive `filepath`."""
    filepath = os.fspath(filepath)
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"{type(model).__name__}.save: {filepath!r} exists and "
                              f"overwrite=False{describe_location()}")
    spec = model.input_spec
    config = {"model": serializable.serialize(model),
              "build": None if spec is None else {"input_shape": list(spec.shape),
                                                  "dtype": spec.dtype.name}}
    with tempfile.TemporaryDirectory() as directory:
        Checkpoint(model=model).write(os.path.join(directory, _WEIGHTS))
        with zipfile.ZipFile(filepath, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("config.json", json.dumps(config))
            archive.writestr("metadata.json", json.dumps({"format": "stageflow.keras"}))
            for name in sorted(os.listdir(directory)):
                archive.write(os.path.join(directory, name), name)


def load(filepath: str | os.PathLike, custom_objects: dict[str, Any] | None = None,
         safe_mode: bool = True) -> Any:
    """The model the archive `filepath` holds, its weights restored (a lambda in its
    config only with `safe_mode` off: `serializable.deserialize`)."""
    filepath = os.fspath(filepath)
    if not zipfile.is_zipfile(filepath):
        raise ValueError(f"load_model: {filepath!r} is not a .keras archive "
                         f"(Model.save writes one for a path ending in .keras)"
                         f"{describe_location()}")
    with tempfile.TemporaryDirectory() as directory:
        with zipfile.ZipFile(filepath) as archive:
            archive.extractall(directory)
        with open(os.path.join(directory, "config.json")) as file:
            config = json.load(file)
        model = serializable.deserialize(config["model"], custom_objects, safe_mode)
        build = config.get("build")
        if build is not None and model.input_spec is None:  # built as Keras builds it
            example = symbolic.examples(tuple(build["input_shape"][1:]), build["dtype"])[0]
            if takes_training(model):
                model(example, training=False)
            else:
                model(example)
        # The weights of layers still not built are restored when they are created.
        Checkpoint(model=model).restore(os.path.join(directory, _WEIGHTS)).expect_partial()
    return model
