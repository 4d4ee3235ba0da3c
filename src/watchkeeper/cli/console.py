"""The command line's two consoles (standard output and standard error), without Typer.

Kept apart from :mod:`watchkeeper.cli.app` so the entry point's fast path prints through
the same consoles, and so the same way, as every full command.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_PIPED_WIDTH = 10_000


class _LazyConsole:
    """A Rich console created on first use: most commands print little, and start fast."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            found = Console(stderr=self._stderr)
            if not found.is_terminal and "COLUMNS" not in os.environ:
                # Piped into grep or a file: a line is cut where it ends, not at Rich's 80 columns.
                found = Console(stderr=self._stderr, width=_PIPED_WIDTH)
            self._console = found
        return getattr(self._console, name)


console: Any = _LazyConsole()
err_console: Any = _LazyConsole(stderr=True)
