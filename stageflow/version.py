"""`sf.version`: stageflow's version, under TensorFlow's name for it (``tf.version``); the
string is stageflow's own (`sf.__version__`), never TensorFlow's."""

from stageflow.core.config import VERSION

__all__ = ["VERSION"]
