"""The ``watchkeeper`` command line, run as a real subprocess (or, for its help, in process)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from watchkeeper.cli import main

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


def wk_here(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """``watchkeeper ARGS`` through the same entry point as :func:`wk`, in this process: for
    what the command prints where the process boundary is not what is tested (a process
    costs about half a second to start, this a few milliseconds)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv, saved_columns = sys.argv, os.environ.get("COLUMNS")
    sys.argv = ["watchkeeper", *args]
    os.environ["COLUMNS"] = str(columns)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = main()
            except SystemExit as exit_:
                status = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = saved_argv
        if saved_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved_columns
    return subprocess.CompletedProcess(
        ["watchkeeper", *args], status or 0, stdout.getvalue(), stderr.getvalue()
    )
