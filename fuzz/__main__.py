"""``python -m fuzz`` is the ``nnfuzz`` command."""

import sys

from fuzz.cli import main

sys.exit(main())
