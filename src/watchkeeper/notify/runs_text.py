"""``/runs`` in chat: the runs list as a few lines of text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from watchkeeper.errors import StoreError
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


def _section(
    overview: Overview, title: str, items: tuple[Judged, ...], suffix: str = ""
) -> list[str]:
    lines = [f"{title} ({len(items)})"]
    lines.extend(_line(item, suffix + _seen(overview, item)) for item in items[:MAX_LINES])
    if len(items) > MAX_LINES:
        lines.append(f"… and {len(items) - MAX_LINES} more")
    return lines


def render(overview: Overview, include_finished: bool) -> str:
    """Needs attention, runs, and (with ``all``) finished work, dealt-with incidents labelled."""
    lines: list[str] = []

    def section(title: str, items: tuple[Judged, ...], suffix: str = "") -> None:
        lines.extend(_section(overview, title, items, suffix))

    for read in overview.unreadable:
        lines.append(f"Unreadable: {read.kind}: {read.error}")
    section("Needs attention", overview.attention)
    section("Running", overview.running)
    if include_finished:
        section("Dealt with", overview.dealt_with, " — dealt with")
        section("Finished in the last day", overview.finished)
    return "\n".join(lines)


async def runs_text(
    read: Callable[[bool], Awaitable[Overview]],
    argument: str,
    *,
    down: Callable[[StoreError], str] | None = None,
    last_known: Callable[[], Overview | None] | None = None,
) -> str:
    """The answer to ``/runs`` (or ``/runs all``); ``read(include_finished)`` reads the runs.

    When watchkeeper's own store cannot be reached, ``down`` words the first
    line and ``last_known`` gives what the last good check saw, if anything.
    """
    include = argument.strip().lower() == "all"
    try:
        return render(await read(include), include)
    except StoreError as exc:
        if down is None:
            raise
        text = down(exc)
    known = None if last_known is None else last_known()
    if known is None:
        return text
    # Only what needed attention: a sweep's read leaves out running work it can show is fine.
    lines = [text, f"As of the last good check at {known.generated_at:%Y-%m-%d %H:%M} UTC:"]
    lines += _section(known, "Needs attention", known.attention)
    return "\n".join(lines)
