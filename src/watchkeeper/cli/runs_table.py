"""The runs list as ``watchkeeper runs`` prints it: Rich tables, one per section.

Kept apart from :mod:`watchkeeper.cli.app` so the entry point's fast path prints the same
tables without loading Typer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from watchkeeper.cli.console import console

_STYLE = {
    "stalled": "yellow",
    "stuck": "red",
    "looping": "magenta",
    "failed": "bold red",
    "slow": "cyan",
}

#: One header per cell :func:`_row` gives.
_COLUMNS = (
    "kind",
    "run",
    "title",
    "status",
    "verdict",
    "last progress",
    "step",
    "incident",
    "decided",
)


def render(data: dict[str, Any], all_: bool, now: datetime | None = None) -> None:
    """Print the runs list as Rich tables, with ages counted to ``now`` (default: the time now)."""
    from rich.table import Table

    now = now or datetime.now(UTC)
    for item in data.get("unreadable", []):
        console.print(f"[bold red]unreadable[/] {item['kind']}: {item['error']}", highlight=False)
    sections = [("Needs attention", data["attention"]), ("Running", data["running"])]
    if all_:
        sections.append(("Dealt with", data.get("dealt_with", [])))
        sections.append(("Finished in the last day", data["finished"]))
    for title, items in sections:
        if not items:
            # A frame around nothing says less than one line does.
            console.print(f"{title} (0): none", highlight=False)
            continue
        table = Table(title=f"{title} ({len(items)})", title_justify="left", expand=False)
        for column in _COLUMNS:
            table.add_column(column, overflow="fold")
        for item in items:
            table.add_row(*_row(item, now))
        console.print(table)


def _row(item: dict[str, Any], now: datetime) -> list[Any]:
    from rich.text import Text

    verdict = item.get("verdict") or {}
    condition = verdict.get("condition", "")
    return [
        item["kind"],
        item["run_id"],
        item["title"],
        item["status"],
        Text(condition, style=_STYLE.get(condition, "")),
        _progress(item, now),
        (item.get("step") or "")[:60],
        str(item["incident_id"]) if item.get("incident_id") else "",
        _decided(item.get("decision")),
    ]


def _progress(item: dict[str, Any], now: datetime) -> str:
    """How long ago the work moved; for work listed from its incident while its kind cannot
    be read, when it was last seen (``last seen ..., before KIND became unreadable``)."""
    seen = item.get("last_seen")
    if isinstance(seen, dict) and seen.get("text"):
        return str(seen["text"])
    return _ago(item.get("progress_at"), now)


def _decided(decision: dict[str, Any] | None) -> str:
    if not decision:
        return ""
    return f"{decision['action']} by {decision['by']}"


def _ago(value: str | None, now: datetime) -> str:
    if not value:
        return ""
    seconds = int((now - datetime.fromisoformat(value.replace("Z", "+00:00"))).total_seconds())
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"
