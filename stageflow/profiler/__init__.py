"""`sf.profiler`: a trace of what ran, for Perfetto and ``chrome://tracing``.

``with sf.profiler.trace(logdir):`` records, on the thread that ran each, the eager ops
(name, shapes, dtypes, device, the user's line), the calls of staged functions (their
signature, what they ran as, their kernels and fused ops), the compile stages of a first
call (tracing, each pass, LLVM) and the copies between devices, then writes them as one
Trace Event Format file. TensorFlow's ``tf.profiler.experimental`` names are in
`sf.profiler.experimental` (`start`, `stop`, `Trace` for spans of your own).
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.profiler import experimental
from stageflow.profiler.experimental import Profile as _Profile
from stageflow.profiler.experimental import ProfilerOptions as _ProfilerOptions

__all__ = ["experimental", "trace"]
__dir__ = _public_dir(globals())


def trace(logdir: str, options: _ProfilerOptions | None = None) -> _Profile:
    """Record a trace of the block into `logdir` (a context manager); the written file's
    path is the manager's `path` afterwards. Open it in https://ui.perfetto.dev or
    ``chrome://tracing``. `options`: `sf.profiler.experimental.ProfilerOptions`.

    >>> import tempfile
    >>> with sf.profiler.trace(tempfile.mkdtemp()) as profile:
    ...     y = sf.matmul(sf.ones((2, 3)), sf.ones((3, 4)))
    >>> profile.path
    '...trace.json'
    """
    return _Profile(logdir, options)
