"""``/runs`` in chat: the runs list as a few lines of text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from watchkeeper.watch.lifecycle import Judged
from watchkeeper.watch.overview import Overview

MAX_LINES = 30


def _line(item: Judged, suffix: str = "") -> str:
    verdict = item.verdict.condition.value if item.verdict else item.run.status.value
    step = f" · {item.run.step[:60]}" if item.run.step else ""
    return f"• {item.run.title} ({item.run.kind} {item.run.run_id}) {verdict}{step}{suffix}"


def _seen(overview: Overview, item: Judged) -> str:
    seen = overview.last_seen.get((item.run.kind, item.run.run_id))
    return "" if seen is None else f" — {seen.text}"


def render(overview: Overview, include_finished: bool) -> str:
    """Needs attention, runs, and (with ``all``) finished work, dealt-with incidents labelled."""
    lines: list[str] = []

    def section(title: str, items: tuple[Judged, ...], suffix: str = "") -> None:
        lines.append(f"{title} ({len(items)})")
        lines.extend(_line(item, suffix + _seen(overview, item)) for item in items[:MAX_LINES])
        if len(items) > MAX_LINES:
            lines.append(f"… and {len(items) - MAX_LINES} more")

    for read in overview.unreadable:
        lines.append(f"Unreadable: {read.kind}: {read.error}")
    section("Needs attention", overview.attention)
    section("Running", overview.running)
    if include_finished:
        section("Dealt with", overview.dealt_with, " — dealt with")
        section("Finished in the last day", overview.finished)
    return "\n".join(lines)


async def runs_text(read: Callable[[bool], Awaitable[Overview]], argument: str) -> str:
    """The answer to ``/runs`` (or ``/runs all``); ``read(include_finished)`` reads the runs."""
    include = argument.strip().lower() == "all"
    return render(await read(include), include)
