"""The relay: reports this host's runs to the server that records them, while they go on.

``python -m watchkeeper.procs.relay DATA_DIR``, with ``WATCHKEEPER_URL`` (and
``WATCHKEEPER_TOKEN``) in its environment, started by ``watchkeeper run`` in a
session of its own once a run is recorded on a server (:mod:`watchkeeper.procs.reported`).

One relay serves each data folder: it holds a lock on ``relay.lock`` there, and a
second one leaves at once. Every :data:`TICK_S` it settles the folder's runs (as
any engine does: witnesses, timeouts, shims gone, completion hooks) and reports
each run with news: its output as the log grows, its end once all the output is
sent, and at least every few seconds that it is still there. A run the server was
asked to abort is aborted here. It leaves once no run is active and every ended
one is reported; runs ended while the server did not answer for
:data:`GIVE_UP_S` are left for ``watchkeeper reclaim`` to report.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import time
from pathlib import Path

from watchkeeper.client.wire import TOKEN_ENV, URL_ENV
from watchkeeper.procs.reported import Left, Reporter, open_engine

log = logging.getLogger(__name__)
#: How often the relay settles and reports.
TICK_S = 0.5
#: How long ended runs wait for a server that does not answer before the relay leaves them.
GIVE_UP_S = 600.0
LOCK_NAME = "relay.lock"


def serve(reporter: Reporter, held: int) -> None:
    """Report ``reporter``'s runs until none is left, holding the folder's lock ``held``."""
    while True:
        try:
            _relay(reporter)
        finally:
            os.close(held)  # releases the lock
        # A run recorded as the lock went found a relay still there, which left: look again.
        if not reporter.engine.runs():
            return
        again = _lock(reporter.engine.data_dir / LOCK_NAME)
        if again is None:
            return  # another relay took over
        held = again


def _lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _relay(reporter: Reporter) -> None:
    failing_since: float | None = None
    while True:
        left = reporter.pass_over()
        if left.error is None:
            if failing_since is not None:
                log.info("The server answers again", extra={"action": "proc_relay"})
            failing_since = None
        elif failing_since is None:
            failing_since = time.monotonic()
            log.warning("Reporting to the server failed: %s", left.error)
        if _done(left, failing_since):
            return
        time.sleep(TICK_S)


def _done(left: Left, failing_since: float | None) -> bool:
    if left.active:
        return False
    if not left.unreported:
        return True
    return failing_since is not None and time.monotonic() - failing_since >= GIVE_UP_S


def main(args: list[str]) -> int:
    """Entry point: ``DATA_DIR``."""
    from watchkeeper.client import Client

    if len(args) != 1 or not os.environ.get(URL_ENV):
        sys.stderr.write(f"usage: {URL_ENV}=URL python -m watchkeeper.procs.relay DATA_DIR\n")
        return 2
    data_dir = Path(args[0])
    held = _lock(data_dir / LOCK_NAME)
    if held is None:
        return 0  # another relay serves this folder, and will find the new run
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    engine = open_engine(data_dir)
    client = Client(os.environ[URL_ENV], os.environ.get(TOKEN_ENV) or None)
    try:
        serve(Reporter(client, engine), held)
    finally:
        client.close()
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
