"""`sf.layers`: Keras-style layers.

Exactly the public names (`__all__`) of `stageflow.frontend.layers`, `.attention`,
`.normalization_layers` and `.recurrent` (in `stageflow.frontend`), where they are defined
and documented: the implementation modules' imports and helpers stay out of
`dir(sf.layers)`. The names are written out, so that readers and tools see the API here;
tests/test_api_names.py checks that they are the implementation modules' `__all__`.
"""

from stageflow.frontend.attention import MultiHeadAttention, Reshape
from stageflow.frontend.layers import (
    Add,
    AveragePooling2D,
    BatchNormalization,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAveragePooling2D,
    Layer,
    MaxPool2D,
    ReLU,
    Sequential,
    get_activation,
    get_initializer,
)
from stageflow.frontend.normalization_layers import Embedding, LayerNormalization
from stageflow.frontend.recurrent import GRU, LSTM, SimpleRNN

__all__ = ["GRU", "LSTM", "Add", "AveragePooling2D", "BatchNormalization", "Conv2D", "Dense",
           "Dropout", "Embedding", "Flatten", "GlobalAveragePooling2D", "Layer",
           "LayerNormalization", "MaxPool2D", "MultiHeadAttention", "ReLU", "Reshape",
           "Sequential", "SimpleRNN", "get_activation", "get_initializer"]
