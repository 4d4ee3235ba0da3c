"""A newcomer's first card: from ``git clone`` to the demo's first card in the terminal.

The README's path, timed step by step on a fresh clone of this repository:

1. ``git clone`` of the repository into a temporary folder;
2. ``make venv``: the virtual environment and every pinned dependency, as
   ``make serve`` does before it serves (pip's own cache is used as on any machine
   that installed Python packages before; ``--cold`` empties a private cache
   first, which needs the package index);
3. ``.venv/bin/watchkeeper demo``: until its first card (a task that hit its time
   limit, with its buttons) is printed.

Run::

    .venv/bin/python bench/first_card.py [--repo .] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty, Queue

CARD = re.compile(r"card \d+: .* failed")
WAIT_S = 600.0


def timed(what: str, argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Run ``argv`` to its end; its wall time in seconds (it must succeed)."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return time.monotonic() - started


def until_first_card(clone: Path, env: dict[str, str]) -> float:
    """Start the demo; seconds until its first card is printed."""
    started = time.monotonic()
    demo = subprocess.Popen(
        [str(clone / ".venv" / "bin" / "watchkeeper"), "demo"],
        cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: Queue[str] = Queue()

    def pump() -> None:
        for line in demo.stdout or []:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while time.monotonic() - started < WAIT_S:
            try:
                line = lines.get(timeout=1.0)
            except Empty:
                if demo.poll() is not None:
                    ended = f"the demo ended ({demo.returncode}) before its card"
                    raise SystemExit(ended) from None
                continue
            if CARD.search(line):
                return time.monotonic() - started
        raise SystemExit(f"no card within {WAIT_S:.0f} s")
    finally:
        demo.terminate()
        demo.wait(timeout=30)


def main() -> None:
    """Parse the options, take the README's path once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", default=".", help="the repository to clone (default: here)")
    parser.add_argument("--cold", action="store_true", help="an empty pip cache of its own")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATCHKEEPER_")}
    env.pop("VIRTUAL_ENV", None)
    with tempfile.TemporaryDirectory(prefix="wk-first-card-") as tmp:
        if args.cold:
            env["PIP_CACHE_DIR"] = str(Path(tmp) / "pip-cache")
        clone = Path(tmp) / "watchkeeper"
        cloning = ["git", "clone", "-q", args.repo, str(clone)]
        figures = {
            "clone_s": timed("git clone", cloning, Path(tmp), env),
            "install_s": timed("make venv", ["make", "venv"], clone, env),
        }
        figures["demo_to_card_s"] = until_first_card(clone, env)
    figures["total_s"] = sum(figures.values())
    figures["load_at_end"] = os.getloadavg()[0]
    for name in ("clone_s", "install_s", "demo_to_card_s", "total_s"):
        print(f"{name:16} {figures[name]:8.1f} s")
    print(f"load average at the end: {figures['load_at_end']:.2f} (2 cores)")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
