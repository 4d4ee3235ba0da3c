"""The job queue's store: jobs, tasks, runners, leases, provisions, spend and timelines.

Moves only; the rules live in ``queue/``. One module per job, one class each,
and :class:`QueueStore` is all of them over one engine:

- ``jobs``: submit, resume, and every read of jobs and tasks
- ``control``: cancel, retry and delete, as a person asks
- ``runners``: register, heartbeat, stop, and who holds what
- ``leases``: lease, renew, complete, fail (with ``statements``, built once)
- ``ends``: several outcomes in one transaction, each under its own lease
- ``onepass``: PostgreSQL with no capped org: a runner's outcomes and next lease in one
  statement, the lease rule judging what it claimed before the commit
- ``setaside``: a claimed row that cannot be read is failed with its reason, not leased
- ``recovery``: take back leases whose runner is gone
- ``markers``: the interrupted marker of start-up reconciliation
- ``output``: the redacted output tail a runner sends when its task ends
- ``results``: the journal of posting a job's end where it came from (GitHub)
- ``facts`` and ``provisions``: what the lease and blocked-reason rules read
- ``rows`` and ``ledger``: rows as records; the timeline and spend every move leaves

A lease also mints the task's own API token (``store/tokens.py``); every move
that ends a lease (completion, failure, cancel, recovery of a lapsed or
abandoned lease, a new lease) removes it in the same transaction.
"""

from __future__ import annotations

from watchkeeper.store.queue.control import Control
from watchkeeper.store.queue.ends import End, Ends
from watchkeeper.store.queue.facts import Facts
from watchkeeper.store.queue.jobs import Jobs
from watchkeeper.store.queue.leases import Leases
from watchkeeper.store.queue.markers import INTERRUPTED, Markers
from watchkeeper.store.queue.output import Output, TaskOutput
from watchkeeper.store.queue.picking import Admit
from watchkeeper.store.queue.provisions import Provisions
from watchkeeper.store.queue.recovery import Recoveries
from watchkeeper.store.queue.results import Results
from watchkeeper.store.queue.runners import Runners

__all__ = ["INTERRUPTED", "Admit", "End", "QueueStore", "TaskOutput"]


class QueueStore(
    Jobs, Control, Runners, Leases, Ends, Recoveries, Markers, Facts, Provisions, Output, Results
):
    """Reads and moves the queue's rows. Every move is one transaction."""
