"""Durations as people write them on a command line or in a form: ``90``, ``45s``,
``10m``, ``2h30m``, ``1.5h``, ``1d``.

A leaf of its own, free of the command-line framework and the configuration model, so
the fast ``run`` path reads ``--budget`` and ``--timeout`` exactly as the full one does.
"""

from __future__ import annotations

import math
import re

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def seconds_of(text: str) -> float | None:
    """The seconds ``text`` says (a bare number is seconds; a leading ``-`` makes it
    negative, for the caller to refuse in its own words); ``None``: not a duration
    (``inf`` and ``nan`` included)."""
    written = text.strip().lower().replace(" ", "")
    sign = -1.0 if written.startswith("-") else 1.0
    written = written.removeprefix("-")
    try:
        bare = float(written)
    except ValueError:
        pass
    else:
        return sign * bare if math.isfinite(bare) else None
    parts = _PART.findall(written)
    if not parts or "".join(number + unit for number, unit in parts) != written:
        return None
    return sign * sum(float(number) * _UNITS[unit] for number, unit in parts)
