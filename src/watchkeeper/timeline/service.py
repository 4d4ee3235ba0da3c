"""Timeline events: every run explains itself, one event per phase.

A runner (or any reporter) sends events such as ``round_start``,
``implementer``, ``tool``, ``review``, ``verify`` and ``session_end``, each
with its outcome, duration, role, model and provider, token usage and, where
the phase explains itself, a short rationale. Events are append-only and
outlive the task they describe. Before an event is stored, each text field is
redacted (:func:`watchkeeper.redact.redact`) and capped, so secrets never land in
the timeline; a text that is test output (any text of a ``verify`` event but a
one-line note, or any text, of any phase, that looks like a test runner's output) is
replaced by its summary (:mod:`watchkeeper.timeline.testoutput`), so raw test
output never does. The call is priced on the provider it ran on
(:mod:`watchkeeper.timeline.prices`). The records themselves are in
:mod:`watchkeeper.records.timeline`.

Progress. A round may carry a fingerprint (say, a hash of the diff and the
verify result). :func:`progress_time` says when a task last made progress:

* an event outside any round (no ``round``) is progress when it happens;
* a round whose fingerprint differs from the previous fingerprinted round's
  is progress, at the time of its last event; a round that repeats it is not,
  however many events it sends: a task looping on the same change stalls;
* a round without a fingerprint counts as progress until the task's first
  fingerprint (reporters that never fingerprint are judged by their events);
  after that, a round is progress only once its fingerprint shows it moved.

The task kind's hook is :meth:`TimelineService.last_progress_at` (and
``last_progress_many`` for a sweep): the later of it and the task's own
``progress_at`` is the task's progress.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Unpack

from watchkeeper.clock import Now, to_epoch, utcnow
from watchkeeper.records.timeline import Fact, Ingested, NewEvent, TimelineEvent
from watchkeeper.redact import redact
from watchkeeper.store.job_records import JobRecordStore
from watchkeeper.store.price_overrides import PriceOverrideStore
from watchkeeper.store.timeline import INSERTED, TimelineStore, event_from_mapping
from watchkeeper.timeline import models, record, spend, testoutput
from watchkeeper.timeline.forge import Forge, Submit
from watchkeeper.timeline.prices import Pricer
from watchkeeper.timeline.record import RecordKeys
from watchkeeper.timeline.sentry import Resume, Sentry

if TYPE_CHECKING:
    from watchkeeper.config import ForgeConfig, Settings
    from watchkeeper.records.queue import Job
    from watchkeeper.store import Store

log = logging.getLogger(__name__)

#: The phases a runner reports; other names are allowed.
PHASES = ("round_start", "implementer", "tool", "review", "verify", "session_end")
MAX_BATCH = 5000
TEXT_MAX = 1000
NAME_MAX = 200
TRUNCATED = " [truncated]"
#: Receives each stored batch (the OpenTelemetry exporter is one).
Exporter = Callable[[Sequence[TimelineEvent]], None]
#: The order :meth:`TimelineService.values` builds a row in: the store's.
_ROW = (
    "org",
    "job_id",
    "task_id",
    "at",
    "day",
    "received_at",
    "phase",
    "round",
    "fingerprint",
    "outcome",
    "duration_s",
    "name",
    "role",
    "model",
    "provider",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "unpriced",
    "price_model",
    "price_provider",
    "price_version",
    "rationale",
    "detail",
    "reporter",
)
if _ROW != INSERTED:  # a column added to the table must be added to the row too
    raise RuntimeError(f"timeline rows are built as {_ROW}, the table takes {INSERTED}")
_COST, _UNPRICED = _ROW.index("cost"), _ROW.index("unpriced")
#: How long the prices an admin set are trusted before the database is asked again: a
#: price set through another replica prices this one's new events within this time.
OVERRIDES_FRESH_S = 5.0


def clean(text: str | None, limit: int = TEXT_MAX) -> str | None:
    """``text`` redacted and capped at ``limit`` characters (never raw output)."""
    if text is None:
        return None
    return _capped(redact(text), limit)


def _capped(cleaned: str, limit: int) -> str:
    if len(cleaned) <= limit:
        return cleaned
    return cleaned[: limit - len(TRUNCATED)] + TRUNCATED


def progress_time(facts: Iterable[Fact]) -> float | None:
    """When a task last made progress, by the rules in the module's docstring."""
    best: float | None = None
    rounds: dict[int, list[Any]] = {}
    for at, number, fingerprint in facts:
        if number is None:
            best = at if best is None else max(best, at)
            continue
        entry = rounds.setdefault(number, [None, at])
        if entry[0] is None:
            entry[0] = fingerprint
        entry[1] = max(entry[1], at)
    previous: str | None = None
    fingerprinting = False
    for number in sorted(rounds):
        fingerprint, last = rounds[number]
        if fingerprint is None and fingerprinting:
            continue
        if fingerprint is not None:
            fingerprinting, moved = True, fingerprint != previous
            previous = fingerprint
            if not moved:
                continue
        best = last if best is None else max(best, last)
    return best


_DAYS: dict[int, str] = {}


def _remember(memo: dict[str, str], text: str, limit: int) -> str:
    cleaned = memo[text] = _capped(redact(text), limit)
    return cleaned


def _stored_text(memo: dict[str, str], text: str, verify: bool) -> str:
    """A rationale or detail as stored: test output (in any phase) as its summary, other
    text cleaned."""
    if testoutput.is_test_output(text, verify):
        cleaned = _capped(testoutput.describe(text), TEXT_MAX)
    else:
        cleaned = _capped(redact(text), TEXT_MAX)
    memo[text] = cleaned
    return cleaned


def day_of(at: float) -> str:
    """The UTC day an epoch second falls on, as spend is grouped (``YYYY-MM-DD``)."""
    number = int(at // 86400)
    day = _DAYS.get(number)
    if day is None:
        if len(_DAYS) > 4096:
            _DAYS.clear()
        day = _DAYS[number] = datetime.fromtimestamp(number * 86400, UTC).date().isoformat()
    return day


class TimelineService:
    """Ingests, prices and reads timeline events."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Now = utcnow,
        exporters: Sequence[Exporter] = (),
    ) -> None:
        self.store: TimelineStore = TimelineStore(store.engine)
        self.kept = JobRecordStore(store.engine)
        self.pricer = Pricer(settings.prices)
        self.overrides = PriceOverrideStore(store.engine)
        self.clock = clock
        self.exporters = list(exporters)
        self._overrides_read = -OVERRIDES_FRESH_S

    def fresh_prices(self, *, now: bool = False) -> Pricer:
        """The pricer with the admin's overrides as stored (read again when stale or ``now``).

        By the monotonic clock: it bounds a cache, it is no fact about the work.
        """
        moment = time.monotonic()
        if now or moment - self._overrides_read >= OVERRIDES_FRESH_S:
            self.pricer.use_stored(models.stored_overrides(self.overrides.stored()))
            self._overrides_read = moment
        return self.pricer

    def model_prices(self) -> list[models.ModelPrice]:
        """The models in use and those given a price, each with its price and its source."""
        return models.listing(self.overrides, self.fresh_prices(now=True), self.clock())

    def set_price(self, provider: str, model: str, prices: models.Prices, by: str) -> None:
        """Price new calls of ``model`` on ``provider`` at ``prices`` (unless the file does)."""
        models.set_price(self.overrides, self.pricer, provider, model, prices, by, self.clock())
        self.fresh_prices(now=True)

    def clear_price(self, provider: str, model: str) -> bool:
        """Remove an admin's price for ``model`` on ``provider``; whether there was one."""
        cleared = self.overrides.clear(provider, model)
        self.fresh_prices(now=True)
        return cleared

    def ingest(self, events: Sequence[NewEvent], reporter: str) -> Ingested:
        """Store ``events`` in one transaction (all or nothing), priced and redacted."""
        now = self.clock()
        values = self.values(events, now, to_epoch(now) or 0.0, reporter)
        self.store.append_values(values)
        cost = sum(row[_COST] or 0.0 for row in values)
        unpriced = sum(1 for row in values if row[_UNPRICED])
        log.info(
            "Stored %d timeline event(s) from %s",
            len(values),
            reporter,
            extra={"action": "timeline_ingest"},
        )
        if self.exporters:
            self._export(values)
        return Ingested(len(values), cost, unpriced)

    def row(self, event: NewEvent, now: datetime, received: float, reporter: str) -> dict[str, Any]:
        """The stored row of one event: priced, redacted, capped."""
        return dict(zip(_ROW, self.values([event], now, received, reporter)[0], strict=True))

    def values(
        self, events: Sequence[NewEvent], now: datetime, received: float, reporter: str
    ) -> list[tuple[Any, ...]]:
        """Each event's stored row as the store takes it (:data:`_ROW` order).

        Ingest's hot loop: rows are built straight as tuples, with what every row
        shares looked up once, and a text that repeats within the batch (a tool's
        name, a stock rationale) is redacted once. The copies of raw texts this keeps
        live only as long as the call.
        """
        price = self.fresh_prices().columns
        names: dict[str, str] = {}
        texts: dict[str, str] = {}
        verified: dict[str, str] = {}
        days = _DAYS
        reporter = reporter[:200]
        now_at = to_epoch(now) or 0.0
        rows: list[tuple[Any, ...]] = []
        for event in events:
            at_time = event.at
            if at_time is None:
                at_time, at = now, now_at
            elif at_time.tzinfo is None:
                at = at_time.replace(tzinfo=UTC).timestamp()
            else:
                at = at_time.timestamp()
            number = int(at // 86400)
            day = days.get(number) or day_of(at)
            usage = event.usage
            cost, unpriced, price_model, price_provider, version = price(
                event.provider, event.model, usage, at_time, number
            )
            name, rationale, detail = event.name, event.rationale, event.detail
            if name is not None:
                name = names.get(name) or _remember(names, name, NAME_MAX)
            verify = event.phase == "verify"
            memo = verified if verify else texts
            if rationale is not None:
                rationale = memo.get(rationale) or _stored_text(memo, rationale, verify)
            if detail is not None:
                detail = memo.get(detail) or _stored_text(memo, detail, verify)
            row = (
                event.org,
                event.job_id,
                event.task_id,
                at,
                day,
                received,
                event.phase,
                event.round,
                event.fingerprint,
                event.outcome,
                event.duration_s,
                name,
                event.role,
                event.model,
                event.provider,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                cost,
                unpriced,
                price_model,
                price_provider,
                version,
                rationale,
                detail,
                reporter,
            )
            rows.append(row)
        return rows

    def _export(self, values: Sequence[tuple[Any, ...]]) -> None:
        events = [
            event_from_mapping({"id": 0, **dict(zip(_ROW, row, strict=True))}) for row in values
        ]
        for exporter in self.exporters:
            try:
                exporter(events)
            except Exception:  # an exporter must never lose the batch, which is stored
                log.exception("A timeline exporter failed", extra={"action": "timeline_export"})

    def events(
        self, *, job_id: str | None = None, task_id: str | None = None, limit: int = 10_000
    ) -> list[TimelineEvent]:
        """Events of a job or a task, oldest first."""
        return self.store.events(job_id=job_id, task_id=task_id, limit=limit)

    def links(self, job_id: str) -> list[dict[str, Any]]:
        """The signed links a forge added to a job's record (merges), oldest first."""
        return self.store.links(job_id)

    def spend(self, by: str, **where: Unpack[spend.SpendWhere]) -> spend.SpendReport:
        """Spend grouped ``by`` one key, costliest first; ``where`` narrows the calls counted."""
        return spend.report(self.store, by, **where)

    def spend_of_jobs(self, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each job's spend over all its rounds (:func:`spend.of_jobs`), in one query."""
        return spend.of_jobs(self.store, job_ids)

    def record(self, job_id: str, job: Job | None, keys: RecordKeys) -> dict[str, Any]:
        """The execution record of finished ``job`` (``None``: deleted), with its links.

        Signed once, the first time it is asked for after the job ended, and kept: later
        reads answer the record as it was signed. A job resumed and ended again (more
        tasks) gets a new one; a deleted job answers the last one kept.
        """
        latest = self.kept.latest(job_id)
        tasks = len(job.tasks) if job is not None else None
        if latest is not None and (tasks is None or latest[0] == tasks):
            return record.with_links(latest[1], job_id, self.links(job_id))
        now = self.clock()
        body = record.assemble(job_id, job, self.events(job_id=job_id), [], now)
        kept = self.kept.keep(job_id, tasks or 0, record.sign(body, keys), now)
        return record.with_links(kept, job_id, self.links(job_id))

    def still_matches(self, kept: dict[str, Any], job: Job | None) -> bool:
        """Whether a record's rounds and spend are still what its job's events say."""
        job_id = str(kept.get("job", {}).get("id", ""))
        events = self.events(job_id=job_id)
        if job is None and not events:
            return True  # nothing left to compare with
        fresh = record.assemble(job_id, job, events, [], self.clock())
        return record.same_timeline(kept, fresh)

    def forge(self, config: ForgeConfig, key: RecordKeys, submit: Submit | None = None) -> Forge:
        """The forge webhooks' handler, linking merges into this timeline's records."""
        return Forge(self.store, config, key, submit=submit, clock=self.clock)

    def sentry(self, config: ForgeConfig, submit: Submit, resume: Resume) -> Sentry:
        """Sentry's webhook triage, its jobs linked into this timeline."""
        return Sentry(self.store, config, submit=submit, resume=resume, clock=self.clock)

    def last_progress_at(self, task_id: str) -> datetime | None:
        """When the task last made progress by its timeline; ``None`` without events."""
        return self.last_progress_many([task_id]).get(task_id)

    def last_progress_many(self, task_ids: Sequence[str]) -> dict[str, datetime]:
        """:meth:`last_progress_at` for many tasks in one query."""
        found: dict[str, datetime] = {}
        for task_id, facts in self.store.progress_facts(task_ids).items():
            at = progress_time(facts)
            if at is not None:
                found[task_id] = datetime.fromtimestamp(at, UTC)
        return found
