"""The ``di`` command line. Library and environment errors become one line on stderr and exit
code 2; an internal error (a bug) one line naming a log file with its traceback, and exit code 70.

One module per concern: :mod:`.run` holds :func:`main` (the console script's entry point) and the process
around a command, :mod:`.failures` the exit codes and error lines (and the bug log), :mod:`.messages` the
warning and note lines, :mod:`.parser` the argparse definition and its shared options, :mod:`.loading` the
loading of a command's inputs, and one module per subcommand named after it (:mod:`.convert`, :mod:`.info`,
:mod:`.analyze`, :mod:`.report`, :mod:`.diff`, :mod:`.dashboard`, :mod:`.plugins`, :mod:`.demo`,
:mod:`.record`, :mod:`.view`; ``di warmup`` is :mod:`di.warmup`). The names other modules import are
re-exported here. Heavy packages (polars, numba, rich) import inside the functions that need them:
importing the CLI stays light.
"""

from __future__ import annotations

from di.cli.failures import EXIT_BUG, EXIT_INPUT, EXIT_PIPE
from di.cli.info import _info_here, show_info
from di.cli.messages import _say
from di.cli.parser import EXAMPLES, _parser
from di.cli.report import _report_here
from di.cli.run import main

__all__ = [
    "EXAMPLES",
    "EXIT_BUG",
    "EXIT_INPUT",
    "EXIT_PIPE",
    "_info_here",
    "_parser",
    "_report_here",
    "_say",
    "main",
    "show_info",
]
