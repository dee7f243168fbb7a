"""`sf.layers`: Keras-style layers.

Exactly the public names (`__all__`) of the modules of `stageflow.models.layers`, one per
kind of layer, where they are defined and documented: the implementation modules' imports
and helpers stay out of `dir(sf.layers)`. The names are written out, so that readers and
tools see the API here; tests/test_api_names.py checks that they are the implementation
modules' `__all__`.
"""

from stageflow.models.activations import get_activation
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.activation import ReLU
from stageflow.models.layers.attention import MultiHeadAttention
from stageflow.models.layers.base import Layer
from stageflow.models.layers.convolutional import Conv2D
from stageflow.models.layers.core import Dense, Embedding, Lambda
from stageflow.models.layers.merging import Add, Concatenate
from stageflow.models.layers.normalization import BatchNormalization, LayerNormalization
from stageflow.models.layers.pooling import AveragePooling2D, GlobalAveragePooling2D, MaxPool2D
from stageflow.models.layers.recurrent import GRU, LSTM, SimpleRNN
from stageflow.models.layers.regularization import Dropout
from stageflow.models.layers.reshaping import Flatten, Reshape
from stageflow.models.layers.sequential import Sequential
from stageflow.models.layers.symbolic import Input

__all__ = ["GRU", "LSTM", "Add", "AveragePooling2D", "BatchNormalization", "Concatenate",
           "Conv2D", "Dense", "Dropout", "Embedding", "Flatten", "GlobalAveragePooling2D",
           "Input", "Lambda", "Layer", "LayerNormalization", "MaxPool2D", "MultiHeadAttention",
           "ReLU", "Reshape", "Sequential", "SimpleRNN", "get_activation", "get_initializer"]
