"""`sf.io.gfile`: TensorFlow's `tf.io.gfile` names, on local paths.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.file_system`.
"""

from stageflow.frontend.ops.file_system import (
    GFile,
    copy,
    exists,
    glob,
    isdir,
    join,
    listdir,
    makedirs,
    mkdir,
    remove,
    rename,
    rmtree,
    walk,
)

__all__ = ["GFile", "copy", "exists", "glob", "isdir", "join", "listdir", "makedirs", "mkdir",
           "remove", "rename", "rmtree", "walk"]
