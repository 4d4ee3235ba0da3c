"""What an install has done so far, read from its tables: deliveries per channel, and counts.

The dashboard's integrations page shows each channel's last delivery and its
failures; its onboarding page ticks a step once the install shows it done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, func, select

from watchkeeper.clock import from_epoch
from watchkeeper.records.procs import HookState
from watchkeeper.store.base import Accessor
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.schema import incidents, push_runs
from watchkeeper.store.schema.notify import deliveries
from watchkeeper.store.schema.procs import proc_runs
from watchkeeper.store.schema.queue import queue_runners, queue_tasks
from watchkeeper.store.schema.timeline import forge_deliveries, forge_requests

_D = deliveries.c
#: Delivery states that end a message's life without it arriving.
FAILED = (DeliveryStatus.FAILED.value, DeliveryStatus.MAYBE_SENT.value)
_UNSETTLED = (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value)
_SENT = DeliveryStatus.SENT.value
#: The newest settled runs the GitHub result posts are counted over: enough for the page,
#: bounded however many runs the install keeps.
RESULT_RUNS = 1000
#: How the hook journal starts a GitHub result's error (``procs.github_results``).
GITHUB_ERROR = "GitHub result on "


@dataclass(frozen=True, slots=True)
class ChannelHistory:
    """One channel's messages: how many were sent and failed, and the latest one's fate."""

    channel: str
    sent: int
    failed: int
    pending: int
    last_at: datetime | None
    last_status: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class ForgeHistory:
    """One forge's webhooks (``github``, ``linear``, ``sentry``): how many and the latest."""

    source: str
    received: int
    last_at: datetime | None


@dataclass(frozen=True, slots=True)
class ResultPosts:
    """Results posted on GitHub issues and pull requests by the runs that came from them."""

    posted: int
    failed: int
    maybe: int
    last_at: datetime | None
    failure_at: datetime | None
    failure: str | None


@dataclass(frozen=True, slots=True)
class InstallCounts:
    """How much of each thing the install holds."""

    runs: int
    incidents: int
    cards_sent: int
    runners: int = 0
    tasks_done: int = 0


class InstallFactsStore(Accessor):
    """Reads for the pages that describe the install itself."""

    def channels(self) -> dict[str, ChannelHistory]:
        """Each channel that has had a message, by name."""
        totals = (
            select(
                _D.channel,
                func.sum(case((_D.status == _SENT, 1), else_=0)),
                func.sum(case((_D.status.in_(FAILED), 1), else_=0)),
                func.sum(case((_D.status.in_(_UNSETTLED), 1), else_=0)),
                func.max(_D.id),
            )
            .group_by(_D.channel)
            .subquery()
        )
        query = select(totals, _D.updated_at, _D.status, _D.error).join(
            deliveries, _D.id == totals.c[4]
        )
        with self._read("reading deliveries per channel") as conn:
            rows = conn.execute(query).all()
        return {
            row[0]: ChannelHistory(
                row[0],
                int(row[1] or 0),
                int(row[2] or 0),
                int(row[3] or 0),
                from_epoch(row[5]),
                row[6],
                row[7],
            )
            for row in rows
        }

    def last_failure(self, channel: str) -> tuple[datetime, str | None] | None:
        """When ``channel``'s latest failed message failed, and why."""
        query = (
            select(_D.updated_at, _D.error)
            .where(and_(_D.channel == channel, _D.status.in_(FAILED)))
            .order_by(_D.id.desc())
            .limit(1)
        )
        with self._read("reading a channel's last failure") as conn:
            row = conn.execute(query).first()
        return None if row is None else (from_epoch(row[0]), row[1])

    def forges(self) -> dict[str, ForgeHistory]:
        """Each forge that has sent a webhook, by source."""
        fd = forge_deliveries.c
        query = select(fd.source, func.count(), func.max(fd.received_at)).group_by(fd.source)
        with self._read("reading forge webhooks") as conn:
            rows = conn.execute(query).all()
        found = {r[0]: ForgeHistory(r[0], int(r[1]), from_epoch(r[2])) for r in rows}
        fr = forge_requests.c
        query = select(fr.source, func.count(), func.max(fr.created_at)).group_by(fr.source)
        with self._read("reading forge requests") as conn:
            for source, count, last in conn.execute(query).all():
                if source not in found:
                    found[source] = ForgeHistory(source, int(count), from_epoch(last))
        return found

    def result_posts(self, newest: int = RESULT_RUNS) -> ResultPosts:
        """How the GitHub result posts of the ``newest`` settled runs with an origin went.

        The hook journal settles a run's hooks together; a failure is GitHub's only when
        its error names a GitHub result (the run's other hooks may fail on their own).
        """
        r = proc_runs.c
        settled = (HookState.FIRED.value, HookState.FAILED.value, HookState.MAYBE_FIRED.value)
        query = (
            select(r.origin, r.hook_state, r.hook_error, r.hook_at)
            .where(r.origin.is_not(None), r.hook_state.in_(settled))
            .order_by(r.hook_at.desc())
            .limit(newest)
        )
        with self._read("reading GitHub result posts") as conn:
            rows = conn.execute(query).all()
        posted = failed = maybe = 0
        last_at = failure_at = None
        failure = None
        for origin, state, error, at in rows:
            if not isinstance(origin, dict) or origin.get("platform") != "github":
                continue
            when = from_epoch(at)
            last_at = last_at or when
            why = _github_error(error)
            if state == HookState.MAYBE_FIRED.value:
                maybe += 1
            elif why is not None:
                failed += 1
                if failure is None:
                    failure_at, failure = when, why
            else:
                posted += 1
        return ResultPosts(posted, failed, maybe, last_at, failure_at, failure)

    def counts(self) -> InstallCounts:
        """Runs of any kind, incidents and chat cards sent, runners and tasks run, so far."""
        statements = (
            select(func.count()).select_from(push_runs),
            select(func.count()).select_from(proc_runs),
            select(func.count()).select_from(queue_tasks),
            select(func.count()).select_from(incidents),
            select(func.count()).where(
                _D.purpose == "card", _D.status == _SENT, _D.channel != "log"
            ),
            select(func.count()).select_from(queue_runners),
            select(func.count()).where(queue_tasks.c.status == "succeeded"),
        )
        with self._read("counting what the install holds") as conn:
            found = [int(conn.execute(s).scalar_one()) for s in statements]
        return InstallCounts(found[0] + found[1] + found[2], found[3], found[4], found[5], found[6])


def _github_error(error: str | None) -> str | None:
    """The GitHub result's part of a run's hook errors (joined by "; "), if it failed."""
    if not error or GITHUB_ERROR not in error:
        return None
    return error[error.index(GITHUB_ERROR) :]
