"""``python -m pytest_fmlbench.cli``: the ``fmlbench`` command without its console script (tests run it so)."""

import sys

from .commands import main

sys.exit(main())
