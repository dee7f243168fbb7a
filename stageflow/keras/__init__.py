"""`sf.keras`: the model layer under Keras' names, for code written for ``tf.keras``:
``keras.layers``, ``keras.Input``, ``keras.Model``, ``keras.Sequential``,
``keras.optimizers``, ``keras.losses``, ``keras.metrics``, ``keras.callbacks``,
``keras.initializers``, ``keras.activations``, ``keras.regularizers``, ``keras.models``,
``keras.saving``, ``keras.utils``, ``keras.backend`` and ``keras.mixed_precision`` are
stageflow's own objects."""

import sys as _sys

from stageflow import layers, losses, metrics, optimizers
from stageflow.core.exports import public_dir as _public_dir
from stageflow.keras import (
    activations,
    backend,
    callbacks,
    initializers,
    mixed_precision,
    models,
    saving,
    utils,
)
from stageflow.models import regularizers
from stageflow.models.layers.sequential import Sequential
from stageflow.models.layers.symbolic import Input
from stageflow.models.training import Model

__all__ = ["Input", "Model", "Sequential", "activations", "backend", "callbacks",
           "initializers", "layers", "losses", "metrics", "mixed_precision", "models",
           "optimizers", "regularizers", "saving", "utils"]
__dir__ = _public_dir(globals())

# `from tensorflow.keras.layers import Dense`, module name swapped: the namespaces that are
# stageflow's top-level modules are importable under `stageflow.keras` too.
for _name, _module in (("layers", layers), ("losses", losses), ("metrics", metrics),
                       ("optimizers", optimizers), ("regularizers", regularizers)):
    _sys.modules[f"{__name__}.{_name}"] = _module
del _name, _module
