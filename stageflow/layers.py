"""`sf.layers`: Keras-style layers.

Exactly the public names (`__all__`) of the modules of `stageflow.models.layers`, one per
kind of layer, where they are defined and documented: the implementation modules' imports
and helpers stay out of `dir(sf.layers)`. The names are written out, so that readers and
tools see the API here; tests/test_api_names.py checks that they are the implementation
modules' `__all__`.
"""

from stageflow.models.activations import get_activation
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.activation import ELU, Activation, LeakyReLU, PReLU, ReLU, Softmax
from stageflow.models.layers.attention import MultiHeadAttention
from stageflow.models.layers.base import Layer
from stageflow.models.layers.convolutional import (
    Conv1D,
    Conv2D,
    Conv2DTranspose,
    DepthwiseConv2D,
    SeparableConv2D,
)
from stageflow.models.layers.core import Dense, Embedding, Lambda
from stageflow.models.layers.image_preprocessing import (
    CenterCrop,
    RandomContrast,
    RandomCrop,
    RandomFlip,
    Resizing,
)
from stageflow.models.layers.merging import (
    Add,
    Average,
    Concatenate,
    Dot,
    Maximum,
    Minimum,
    Multiply,
    Subtract,
)
from stageflow.models.layers.normalization import (
    BatchNormalization,
    LayerNormalization,
    UnitNormalization,
)
from stageflow.models.layers.passthrough import Identity, InputLayer, Masking
from stageflow.models.layers.pooling import (
    AveragePooling1D,
    AveragePooling2D,
    AvgPool1D,
    AvgPool2D,
    GlobalAveragePooling1D,
    GlobalAveragePooling2D,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPooling1D,
    GlobalMaxPooling2D,
    MaxPool1D,
    MaxPool2D,
    MaxPooling1D,
    MaxPooling2D,
)
from stageflow.models.layers.preprocessing import Normalization, Rescaling
from stageflow.models.layers.recurrent import GRU, LSTM, SimpleRNN
from stageflow.models.layers.regularization import (
    ActivityRegularization,
    Dropout,
    GaussianDropout,
    GaussianNoise,
    SpatialDropout1D,
    SpatialDropout2D,
)
from stageflow.models.layers.reshaping import (
    Cropping1D,
    Cropping2D,
    Flatten,
    Permute,
    RepeatVector,
    Reshape,
    UpSampling1D,
    UpSampling2D,
    ZeroPadding1D,
    ZeroPadding2D,
)
from stageflow.models.layers.sequential import Sequential
from stageflow.models.layers.symbolic import Input
from stageflow.models.layers.wrappers import Bidirectional, TimeDistributed

__all__ = ["Activation", "ActivityRegularization", "Add", "Average", "AveragePooling1D",
           "AveragePooling2D", "AvgPool1D", "AvgPool2D", "BatchNormalization", "Bidirectional",
           "CenterCrop", "Concatenate", "Conv1D", "Conv2D", "Conv2DTranspose", "Cropping1D",
           "Cropping2D", "Dense", "DepthwiseConv2D", "Dot", "Dropout", "ELU", "Embedding",
           "Flatten", "GRU", "GaussianDropout", "GaussianNoise", "GlobalAveragePooling1D",
           "GlobalAveragePooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalMaxPool1D",
           "GlobalMaxPool2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "Identity", "Input",
           "InputLayer", "LSTM", "Lambda", "Layer", "LayerNormalization", "LeakyReLU", "Masking",
           "MaxPool1D", "MaxPool2D", "MaxPooling1D", "MaxPooling2D", "Maximum", "Minimum",
           "MultiHeadAttention", "Multiply", "Normalization", "PReLU", "Permute", "RandomContrast",
           "RandomCrop", "RandomFlip", "ReLU", "RepeatVector", "Rescaling", "Reshape", "Resizing",
           "SeparableConv2D", "Sequential", "SimpleRNN", "Softmax", "SpatialDropout1D",
           "SpatialDropout2D", "Subtract", "TimeDistributed", "UnitNormalization", "UpSampling1D",
           "UpSampling2D", "ZeroPadding1D", "ZeroPadding2D", "get_activation", "get_initializer"]
