"""``di plugins``: the installed plugins of each group, and those that failed to load."""

from __future__ import annotations

from typing import Any

from di.plugins import GROUPS, all_plugins


def render(console: Any) -> None:
    """A table of every entry point in :data:`di.plugins.GROUPS`, with its status."""
    from rich.markup import escape
    from rich.table import Table

    from di.viewers.terminal import print_table

    found = all_plugins()
    if not found:
        console.print(f"no plugins installed (entry-point groups: {', '.join(GROUPS)})")
        return
    t = Table(title="di plugins")
    for c in ("group", "name", "object", "package", "status"):
        t.add_column(c)
    for p in found:
        status = "[green]loaded[/green]" if p.error is None else f"[red]skipped:[/red] {escape(p.error)}"
        t.add_row(p.group, p.name, escape(p.value), p.dist, status)
    print_table(console, t)
