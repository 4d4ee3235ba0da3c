"""The ``watchkeeper`` command line, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The command as a user runs it, from this interpreter's environment.
WK = (sys.executable, "-m", "watchkeeper")


def cli_env(env: Mapping[str, str] | None = None, *, columns: int = 200) -> dict[str, str]:
    """This process's environment, a terminal ``columns`` wide, then ``env`` on top."""
    return {**os.environ, "COLUMNS": str(columns), **(env or {})}


def wk(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    columns: int = 200,
    timeout: float = 60,
    command: Sequence[str] = WK,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (the ``watchkeeper`` CLI) with ``args``; never raises on a failed exit.

    The result carries ``returncode``, ``stdout`` and ``stderr`` as text.
    """
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(env, columns=columns),
        cwd=cwd,
        check=False,
    )
