"""The ``watchkeeper`` command's entry point, kept apart so it runs before anything heavy.

``import httpx`` also loads httpx's own command-line client (Rich progress bars,
Pygments lexers) whenever Rich is installed. The command never uses it, and it is a
good part of the start-up: ``None`` in ``sys.modules`` makes that one import fail,
which httpx allows for. Library users who import :mod:`watchkeeper` are not affected.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run the command line."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    # The commands typed or sent most skip the command-line framework (see each module).
    from watchkeeper.cli.fast.commands import main as ask_or_report
    from watchkeeper.cli.fast.run import main as run_here

    for fast_path in (run_here, ask_or_report):
        status = fast_path(sys.argv[1:])
        if status is not None:
            return status
    from watchkeeper.cli.app import main as run

    return run()
