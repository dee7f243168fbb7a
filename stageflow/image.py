"""`sf.image`: TensorFlow's ``tf.image`` (flips, rotations, crops and pads, dtype
conversion, brightness, contrast, standardization, grayscale, resizing, colour spaces,
random augmentations, image measures and Sobel edges), eager and staged.

Exactly the public names (`__all__`) of `stageflow.frontend.ops.image`,
`image_resize`, `image_fit`, `image_color`, `image_random` and `image_quality` (in
`stageflow.frontend.ops`), where they are defined and documented.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.image import *  # noqa: F403
from stageflow.frontend.ops.image import __all__ as _image
from stageflow.frontend.ops.image_color import *  # noqa: F403
from stageflow.frontend.ops.image_color import __all__ as _color
from stageflow.frontend.ops.image_fit import *  # noqa: F403
from stageflow.frontend.ops.image_fit import __all__ as _fit
from stageflow.frontend.ops.image_quality import *  # noqa: F403
from stageflow.frontend.ops.image_quality import __all__ as _quality
from stageflow.frontend.ops.image_random import *  # noqa: F403
from stageflow.frontend.ops.image_random import __all__ as _random
from stageflow.frontend.ops.image_resize import *  # noqa: F403
from stageflow.frontend.ops.image_resize import __all__ as _resize

__all__ = sorted([*_image, *_color, *_fit, *_quality, *_random, *_resize])
__dir__ = _public_dir(globals())
