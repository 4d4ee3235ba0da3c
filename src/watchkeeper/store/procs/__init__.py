"""Process runs, parks and session wake breakers. Moves only; the rules live in ``procs/``.

Every move is one conditional statement in one transaction, so two engines
(or an engine and an ``abort`` from the command line) never both win. One
module per job, and :class:`ProcStore` is all of them over one engine:

- ``runs``: register, start, progress and end runs, and every read of them
- ``hooks``: the completion-hook journal
- ``parks``: parked sessions and each session's wake breaker
- ``rows``: rows as records
"""

from __future__ import annotations

from watchkeeper.store.opening import open_store
from watchkeeper.store.procs.hooks import Hooks
from watchkeeper.store.procs.parks import Parks
from watchkeeper.store.procs.rows import run_from_row
from watchkeeper.store.procs.runs import Runs

__all__ = ["ProcStore", "open_store", "run_from_row"]


class ProcStore(Runs, Hooks, Parks):
    """Reads and moves process runs, parks and session breakers."""
