"""What the install's own pages share: where the configuration file is, and how values read."""

from __future__ import annotations

import os

from fastapi import Request

from watchkeeper.config import CONFIG_ENV


def config_path(request: Request) -> str:
    """The configuration file the server was started with: the one ``serve`` read, else
    ``WATCHKEEPER_CONFIG``'s, else words for it."""
    read = getattr(request.app.state, "config_file", None)
    return str(read or os.environ.get(CONFIG_ENV) or "the configuration file")


def per_mtok(value: float | None) -> str:
    """``$3.00`` (USD per million tokens); an empty string for no price."""
    if value is None:
        return ""
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:,.4f}"


def duration(seconds: float | None) -> str:
    """``45 s``, ``10 min``, ``2 h``, ``1.5 h``: a budget as a person reads it."""
    if seconds is None:
        return ""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            count = seconds / size
            return f"{count:g} {unit}" if count == int(count) else f"{count:.1f} {unit}"
    return f"{seconds:g} s"
