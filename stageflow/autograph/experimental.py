"""`sf.autograph.experimental`: `do_not_convert`, TensorFlow's decorator leaving a
function's Python control flow as written when an `sf.function` traces it."""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.staging.autograph import do_not_convert

__all__ = ["do_not_convert"]
__dir__ = _public_dir(globals())
