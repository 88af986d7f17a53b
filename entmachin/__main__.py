"""``python -m entmachin ...``: the same as the ``entmachin`` command."""
import sys

from entmachin.run.cli import main

sys.exit(main())
