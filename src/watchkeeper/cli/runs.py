"""``watchkeeper runs``: what needs attention, what runs, and what finished."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import typer

from watchkeeper.cli.common import console, local_runtime
from watchkeeper.cli.options import SERVER, STORE, TOKEN, connect

_STYLE = {"stalled": "yellow", "stuck": "red", "failed": "bold red", "slow": "cyan"}


def runs(
    ctx: typer.Context,
    all_: bool = typer.Option(False, "--all", "-a", help="add what finished in the last day"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
    watch: float | None = typer.Option(
        None, "--watch", min=0.1, metavar="SECONDS", help="show it again every SECONDS; Ctrl-C ends"
    ),
) -> None:
    """List what needs attention and what runs, as the server sees it."""

    def show() -> None:
        data = _from_store(ctx, store, all_) if store else _from_server(server, token, all_)
        if as_json:
            console.print_json(json.dumps(data))
            return
        render(data, all_)

    if watch is None:
        show()
    else:
        _watch(watch, show)


def _watch(every: float, show: Callable[[], None]) -> None:
    """``show``, then again every ``every`` seconds until Ctrl-C: the way out, not an error."""
    import time

    try:
        while True:
            if console.is_terminal:
                console.clear()
            show()
            console.print(f"again every {every:g} s; Ctrl-C ends", style="dim", highlight=False)
            time.sleep(every)
    except KeyboardInterrupt:
        return


def _from_server(server: str | None, token: str | None, all_: bool) -> dict[str, Any]:
    with connect(server, token) as client:
        return client.runs(all=all_)


def _from_store(ctx: typer.Context, store: str, all_: bool) -> dict[str, Any]:
    import asyncio

    from watchkeeper.watch.overview import overview_json

    with local_runtime(ctx, store) as runtime:
        overview = asyncio.run(runtime.overview(include_finished=all_))
    return overview_json(overview, limit=int(os.environ.get("WATCHKEEPER_RUNS_LIMIT", "500")))


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
        table = Table(title=f"{title} ({len(items)})", title_justify="left", expand=False)
        for column in (
            "kind",
            "run",
            "title",
            "status",
            "verdict",
            "last progress",
            "step",
            "incident",
        ):
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
        _ago(item.get("progress_at"), now),
        (item.get("step") or "")[:60],
        str(item["incident_id"]) if item.get("incident_id") else "",
        _decided(item.get("decision")),
    ]


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
