"""``di plugins``: the installed plugins (connectors, analyses, report panels) and those that failed to load."""

from __future__ import annotations

import argparse
from typing import Any


def _plugins(args: argparse.Namespace, console: Any) -> None:
    from di.viewers.plugins import render

    render(console)
