"""`sf.math`: TensorFlow's `tf.math` names for stageflow's elementwise math, reductions and
tests (most are also top-level `sf` names).

Exactly the public names (`__all__`): the ops `stageflow.frontend.ops` defines, documents
and marks for `sf.math` there (`namespaces.math_op`). Every module of that package is
imported here (`core.registration`), so that no marked op is left out.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.core.registration import import_modules as _import_modules
from stageflow.frontend import ops as _ops
from stageflow.frontend.ops.namespaces import MATH as _MATH

_import_modules(_ops.__name__, _ops.__path__)
globals().update(_MATH)
__all__ = sorted(_MATH)
__dir__ = _public_dir(globals())
