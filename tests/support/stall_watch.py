"""Says what stopped a test process's threads, when something did.

Tests run live servers and kind reads in threads of the test process. On a loaded
CI machine some of them have stood still for 10 to 30 s at once (a kind's read
"timed out after 10 s", a server answered no request for 30 s), which no test
could explain afterwards: by then the stall was over.

A thread of Python code cannot watch for this, since it stops with the others. The
interpreter's fault handler can: its watchdog is a C thread that runs without the
interpreter's lock. A Python thread here re-arms it every second; when Python threads
have not run for :data:`STALL_S`, it writes every thread's stack to this process's
file. The watchdog cannot tell which thread held the interpreter, so the run's summary
shows, for each stall, the test it was in and the threads whose top frame is not a wait
(a collection shows as the frame that allocated when it started).
"""

from __future__ import annotations

import faulthandler
import os
import re
import threading
from pathlib import Path
from typing import IO

#: Python threads standing still this long (a thread is woken every second) is a stall.
STALL_S = 5.0
#: Where each test process writes its stalls: set by the first process, read by all.
DIR_ENV = "WATCHKEEPER_TEST_STALL_DIR"
#: Frames of each thread shown in the summary (the file keeps them all).
SHOWN_LINES = 6


class StallWatch:
    """Re-arms the fault handler's watchdog while this process's Python threads run."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._rearm, name="stall-watch", daemon=True)

    def start(self) -> None:
        """Begin watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and disarm the watchdog."""
        self._stop.set()
        self._thread.join()
        faulthandler.cancel_dump_traceback_later()
        self.file.close()

    def _rearm(self) -> None:
        while True:
            faulthandler.dump_traceback_later(STALL_S, file=self.file)
            if self._stop.wait(1.0):
                return


def start(folder: Path, name: str) -> StallWatch:
    """Watch this process, writing its stalls to ``folder/stalls-NAME.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    watch = StallWatch((folder / f"stalls-{name}.txt").open("w", encoding="utf-8"))
    watch.start()
    return watch


def summary(folder: Path) -> list[str]:
    """One paragraph per stall seen by any process: the test it was in, and the threads
    that were not waiting (one of them held the interpreter, unless none did)."""
    lines: list[str] = []
    for path in sorted(folder.glob("stalls-*.txt")):
        dumps = path.read_text(encoding="utf-8", errors="replace").split("Timeout (")[1:]
        for dump in dumps:
            blocks = [block.strip().splitlines() for block in dump.split("\n\n")]
            threads = [
                block for block in blocks if block and "(most recent call first)" in block[0]
            ]
            tests = [line.strip() for block in threads for line in block if "/tests/" in line]
            test = next((line for line in reversed(tests) if " in test_" in line), "no test")
            lines.append(f"{path.stem}: threads stood still {STALL_S:g} s or more, in {test}")
            busy = [block for block in threads if len(block) > 1 and not _waits(block[1])]
            if not busy:
                lines.append("  every thread was waiting: the process was not scheduled")
            for block in busy:
                lines.extend("  " + line.strip() for line in block[1 : 1 + SHOWN_LINES])
                lines.append("  ...")
    return lines


#: Frames a thread stands in while it waits for something (it holds no interpreter lock).
_WAITING_FRAMES = (
    "wait select poll acquire get recv_into recv accept sleep read readline join"
    " _wait_for_tstate_lock _worker _rearm"
)
_WAITING = re.compile(rf"in ({'|'.join(_WAITING_FRAMES.split())})$")


def _waits(top_frame: str) -> bool:
    return bool(_WAITING.search(top_frame.strip()))


def folder_from_env(default: Path) -> Path:
    """The run's stall folder: the one the first process chose, or ``default``."""
    return Path(os.environ.setdefault(DIR_ENV, str(default)))
