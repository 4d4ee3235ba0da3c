"""Durations as tools take them: seconds (``90``) or ``45s``, ``10m``, ``2h30m``, ``1d``,
read as the command line reads ``--budget`` and ``--timeout``."""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError

from watchkeeper.durations import seconds_of

#: What the tools' schemas say a duration is.
DURATION_HELP = "a duration: seconds (90) or 45s, 10m, 2h30m, 1d"


def seconds(value: str | float | None, name: str) -> float | None:
    """``value`` in seconds (``None`` stays ``None``); a tool error says what was wrong."""
    if value is None:
        return None
    read = seconds_of(str(value))
    if read is None:
        raise ToolError(
            f"{name} {value!r} is not a duration: write seconds (90) or counts of s, m, h "
            "and d (45s, 10m, 2h30m, 1d)"
        )
    if read <= 0:
        raise ToolError(f"{name} {value!r}: must be more than zero")
    return read


def bounded(value: str | float | None, name: str, default_s: float, most_s: float) -> float:
    """``value`` in seconds, ``default_s`` when left out, at most ``most_s``."""
    read = seconds(value, name)
    return min(default_s if read is None else read, most_s)
