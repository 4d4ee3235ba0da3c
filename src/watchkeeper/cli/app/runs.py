"""``watchkeeper runs``: what needs attention, what runs, and what finished."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import typer

from watchkeeper.cli.app.common import local_runtime
from watchkeeper.cli.app.options import SERVER, STORE, TOKEN, connect
from watchkeeper.cli.console import console
from watchkeeper.cli.runs_table import render


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
