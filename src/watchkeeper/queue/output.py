"""The output tail a runner sends the server when a task ends.

A task's command runs on its runner's host and writes into its run's log
there. When the task ends, the runner sends the last :data:`TAIL_BYTES` of
that log so people can read it from the server, the CLI or the dashboard.
The tail starts at a line's start (a line cut in half may hide the start of a
secret from redaction), goes through :func:`watchkeeper.redact.redact`, and
loses the control characters the API refuses (terminal colour codes, mostly).
"""

from __future__ import annotations

import re
from pathlib import Path

from watchkeeper.redact import redact

#: How much of the end of a task's output is kept on the server.
TAIL_BYTES = 64 * 1024
# Terminal escape sequences first (colours, cursor moves), so none leaves a stray "[31m".
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
# What the API refuses in free text: control characters other than tab and line breaks.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The redacted last ``limit`` bytes (at most) of the file at ``path``; empty if missing."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            start = max(0, size - limit)
            file.seek(start)
            data = file.read(limit)
    except FileNotFoundError:
        return ""
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else data
    return clean(data.decode("utf-8", "replace"), limit)


def clean(text: str, limit: int = TAIL_BYTES) -> str:
    """``text`` redacted, without control characters, and no longer than ``limit`` bytes."""
    text = _CONTROL.sub("", _ESCAPES.sub("", text))
    text = redact(text)
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    # Redaction may lengthen a text: keep its end, from a line's start where there is one.
    kept = encoded[-limit:].decode("utf-8", "ignore")
    line = kept.find("\n")
    return kept[line + 1 :] if 0 <= line < len(kept) - 1 else kept
