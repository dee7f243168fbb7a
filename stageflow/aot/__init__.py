"""`sf.aot`: compile staged functions ahead of time, to a shared library with a C header or
to PTX with a manifest (see `stageflow.aot.library`).

    lib = sf.aot.compile(predict, sf.TensorSpec([None, 784], sf.float32))
    lib.save("predict.so")                 # and predict.h beside it
"""

from stageflow.aot.library import CPUArtefact, PTXArtefact
from stageflow.aot.library import compile_function as compile  # noqa: A001 - sf.aot.compile
from stageflow.core.exports import public_dir

__all__ = ["CPUArtefact", "PTXArtefact", "compile"]
__dir__ = public_dir(globals())  # not the submodules `header`, `library`
