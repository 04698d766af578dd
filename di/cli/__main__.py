"""``python -m di.cli`` runs the CLI, as ``python -m di`` does."""

import sys

from di.cli import main

if __name__ == "__main__":
    sys.exit(main())
