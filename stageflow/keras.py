"""`sf.keras`: the model layer under Keras' names, for code written for ``tf.keras``:
``keras.layers``, ``keras.Model``, ``keras.Sequential``, ``keras.optimizers``,
``keras.losses``, ``keras.metrics`` and ``keras.callbacks`` are stageflow's own objects."""

from stageflow import layers, losses, metrics, optimizers
from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import callbacks
from stageflow.models.layers.sequential import Sequential
from stageflow.models.training import Model

__all__ = ["Model", "Sequential", "callbacks", "layers", "losses", "metrics", "optimizers"]
__dir__ = _public_dir(globals())
