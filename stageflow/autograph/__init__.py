"""`sf.autograph`: what AutoGraph makes of a function (`to_code`, `to_graph`), and
`experimental.do_not_convert` to leave one as written.

`sf.function` converts the user's functions by itself (``autograph=True``); these names are
TensorFlow's ``tf.autograph`` for inspecting and steering that conversion. They are defined
and documented in `stageflow.staging.autograph.conversion`.
"""

from stageflow.autograph import experimental
from stageflow.core.exports import public_dir as _public_dir
from stageflow.staging.autograph import to_code, to_graph

__all__ = ["experimental", "to_code", "to_graph"]
__dir__ = _public_dir(globals())
