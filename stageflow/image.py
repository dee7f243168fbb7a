"""`sf.image`: TensorFlow's ``tf.image`` basics (flips, rotations, crops and pads, dtype
conversion, brightness, contrast, standardization, grayscale, resizing), eager and staged.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.image` and
`stageflow.frontend.ops.image_resize`, where they are defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.image import *  # noqa: F403
from stageflow.frontend.ops.image import __all__ as _image
from stageflow.frontend.ops.image_resize import *  # noqa: F403
from stageflow.frontend.ops.image_resize import __all__ as _resize

__all__ = sorted([*_image, *_resize])
__dir__ = _public_dir(globals())
