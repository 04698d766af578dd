"""``python -m di`` runs the CLI."""

import sys

from di.cli import main

sys.exit(main())
