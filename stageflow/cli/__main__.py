"""``python -m stageflow.cli``: the ``stageflow`` command without the console script."""

import sys

from stageflow.cli.main import main

sys.exit(main())
