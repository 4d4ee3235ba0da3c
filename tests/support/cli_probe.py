"""Run the installed command and the full Typer command line side by side, and see what each
loaded: the fast path of the entry point must say and do exactly what the full one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from .cli import WK, cli_env

#: The entry point as the installed script runs it, then every module it had loaded, as JSON
#: (a ``None`` in ``sys.modules`` is an import the entry point forbids, not one it made).
FULL_PROBE = textwrap.dedent(
    """
    import json, sys
    from watchkeeper.cli import main

    status = main()
    loaded = sorted(name for name, module in sys.modules.items() if module is not None)
    print(json.dumps({"status": status, "modules": loaded}))
    """
)

#: The whole Typer command line, never the entry point's fast path: what a user saw before.
FULL_PATH = "import sys; from watchkeeper.cli.app import main; sys.exit(main(sys.argv[1:]))"


def bare_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any ``WATCHKEEPER_*`` setting, then ``env`` on top."""
    bare = {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}
    return cli_env({**bare, **(env or {})})


def both_ways(
    cwd: Path, env: dict[str, str], *argv: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``argv`` run by the installed entry point, then by the full command line."""
    fast, full = (
        subprocess.run(
            [*command, *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env=bare_env(env),
            cwd=cwd,
            check=False,
        )
        for command in ((*WK,), (sys.executable, "-c", FULL_PATH))
    )
    return fast, full


def probe(cwd: Path, env: dict[str, str], *argv: str) -> dict[str, Any]:
    """The entry point's exit status and every module it had loaded, run with ``env``."""
    probed = subprocess.run(
        [sys.executable, "-c", FULL_PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=bare_env(env),
        cwd=cwd,
        check=False,
    )
    assert probed.stdout.strip(), probed.stderr
    result: dict[str, Any] = json.loads(probed.stdout.strip().splitlines()[-1])
    return result


def packages(modules: set[str] | list[str]) -> set[str]:
    """The top-level packages of ``modules``."""
    return {name.split(".")[0] for name in modules}
