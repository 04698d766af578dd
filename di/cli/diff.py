"""``di diff``: run A compared with run B, in the terminal, as JSON (``--json``) and as an HTML page (``--html``)."""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.messages import _say


def _diff(args: argparse.Namespace, console: Any) -> None:
    import json
    from pathlib import Path

    from rich.console import Console

    from di.convert.registry import expand, load_paths
    from di.engine.window import parse_window
    from di.output import atomic_write, claim, file_starts_with
    from di.viewers.diff import diff
    from di.viewers.diff.document import JSON_MARK, to_json, validate
    from di.viewers.report import is_own_report

    window = parse_window(args.window)
    inputs = [*expand(args.a), *expand(args.b)]
    if args.json and args.json != "-":
        claim(args.json, ours=file_starts_with(JSON_MARK), force=args.force, inputs=inputs, what="a diff JSON file")
    if args.html:
        if args.json and Path(args.json).resolve() == Path(args.html).resolve():
            raise ValueError(f"{args.html}: --json and --html name the same file; give each its own")
        claim(args.html, ours=is_own_report, force=args.force, inputs=inputs, what="an HTML page")
    err = Console(stderr=True, highlight=False)
    traces = []
    for path in (args.a, args.b):
        with err.status(f"loading {path}"):
            traces.append(load_paths([path], max_input_size=args.max_input_size))
    with err.status("comparing"):
        result = diff(*traces, window=window)
    if args.html:
        from di.viewers.diff.page import build_page

        with atomic_write(args.html) as fh:
            fh.write(build_page(result, names=(args.a, args.b)).encode("utf-8"))
    if args.json:
        doc = to_json(result, inputs=(args.a, args.b))
        validate(doc)
        text = json.dumps(doc, indent=1, allow_nan=False)  # its ratios are guarded: a NaN here is a bug
        if args.json == "-":  # stdout holds the JSON only
            print(text)
            return
        with atomic_write(args.json) as fh:
            fh.write(text.encode())
    from di.viewers.diff.terminal import render

    render(result, console, names=(args.a, args.b))
    _say(console, result.notes, kind="note")
    for side, trace in zip("AB", traces):
        _say(console, [f"{side}: {w}" for w in trace.meta.get("warnings", [])])
    for out in (args.json, args.html):
        if out:
            console.print(f"wrote {out}", markup=False)
