"""``python -m onceflow`` is the ``onceflow`` command."""

import sys

from onceflow.cli import main

sys.exit(main())
