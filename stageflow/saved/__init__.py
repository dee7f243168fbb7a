"""`sf.saved`: staged functions and modules saved as IR text, variable values and a
manifest, reloadable and callable without the Python source that defined them.

    sf.saved.save(model, "model_dir")      # every traced signature of its staged methods
    loaded = sf.saved.load("model_dir")    # another process, the defining module gone
    loaded.predict(x)                      # compiled from the saved IR
"""

from stageflow.core.exports import public_dir
from stageflow.saved.load import LoadedFunction, LoadedModule, load
from stageflow.saved.save import save

__all__ = ["LoadedFunction", "LoadedModule", "load", "save"]
__dir__ = public_dir(globals())  # not the submodules `manifest`, `structure`
