"""``python -m stageflow.cli``: the ``stageflow`` command without the console script."""

import sys

from stageflow.cli.main import main

if __name__ == "__main__":  # not when a documentation tool imports every module
    sys.exit(main())
