"""The jobs list's view: filters, order, grouping and page, all carried in the URL.

The queue lists jobs newest first, batch by batch, filtered by fleet, org and
whether a task is unfinished; the rolled-up status and the text filter are
applied here, and a page stops reading as soon as it has what it shows, so
a filtered list of 10,000 jobs reads only as far as it must. The oldest-first
order reads the whole (bounded) list once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any
from urllib.parse import urlencode

from watchkeeper.queue import rollup
from watchkeeper.queue.service import QueueService, unfinished
from watchkeeper.records.queue import CANCELLABLE, RETRYABLE, Job, JobStatus, TaskStatus

STATUSES = tuple(s.value for s in JobStatus)
SORTS = ("newest", "oldest")
PER_PAGE = (25, 50, 100, 200)
#: The most jobs one list request reads; beyond, the page says the search was cut.
SCAN_LIMIT = 5_000
_BATCH = 500
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True, slots=True)
class JobsView:
    """Everything that decides what the list shows; ``query()`` is its shareable URL."""

    status: str = ""
    fleet: str = ""
    org: str = ""
    q: str = ""
    sort: str = "newest"
    group: bool = True
    page: int = 1
    per: int = 50

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> JobsView:
        """From query parameters; anything unknown falls back to the default."""
        status = params.get("status", "")
        fleet, org = params.get("fleet", "").strip(), params.get("org", "").strip()
        sort = params.get("sort", "newest")
        per = _int(params.get("per"), 50)
        return cls(
            status=status if status in STATUSES else "",
            fleet=fleet if _NAME.match(fleet) else "",
            org=org if _NAME.match(org) else "",
            q=params.get("q", "").strip()[:200],
            sort=sort if sort in SORTS else "newest",
            group=params.get("group", "day") != "none",
            page=max(1, min(_int(params.get("page"), 1), 10_000)),
            per=per if per in PER_PAGE else 50,
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The non-default parameters (after ``changes``), in a stable order."""
        view = replace(self, **changes)
        found = {
            "status": view.status,
            "fleet": view.fleet,
            "org": view.org,
            "q": view.q,
            "sort": "" if view.sort == "newest" else view.sort,
            "group": "" if view.group else "none",
            "page": "" if view.page == 1 else str(view.page),
            "per": "" if view.per == 50 else str(view.per),
        }
        return {key: value for key, value in found.items() if value}

    def query(self, **changes: Any) -> str:
        """``/web/jobs?...`` for this view (after ``changes``)."""
        encoded = urlencode(self.params(**changes))
        return "/web/jobs" + (f"?{encoded}" if encoded else "")

    def fragment(self) -> str:
        """The list alone for this view, as live updates fetch it."""
        return "/web/fragments/jobs" + self.query().removeprefix("/web/jobs")

    @property
    def filtered(self) -> bool:
        """Whether any filter narrows the list."""
        return bool(self.status or self.fleet or self.org or self.q)


@dataclass(frozen=True, slots=True)
class JobsPage:
    """One page of the list: its jobs, whether more follow, whether the search was cut."""

    jobs: tuple[Job, ...]
    has_more: bool
    scanned: int
    cut: bool


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default


def matches(job: Job, view: JobsView) -> bool:
    """The filters the store cannot apply: rolled-up status and text."""
    if view.status and rollup.of_job(job).value != view.status:
        return False
    if view.q:
        needle = view.q.casefold()
        haystack = f"{job.id} {job.title} {job.submitted_by}".casefold()
        return needle in haystack
    return True


def find(queue: QueueService, view: JobsView) -> JobsPage:
    """The page ``view`` asks for, reading the queue only as far as needed."""
    start = (view.page - 1) * view.per
    found = queue.scan_jobs(
        fleet=view.fleet or None,
        org=view.org or None,
        active=unfinished(JobStatus(view.status)) if view.status else None,
        keep=lambda job: matches(job, view),
        text=view.q,
        need=None if view.sort == "oldest" else start + view.per + 1,
        batch=_BATCH,
        most=SCAN_LIMIT,
    )
    jobs = found.jobs[::-1] if view.sort == "oldest" else found.jobs
    shown = jobs[start : start + view.per]
    return JobsPage(tuple(shown), len(jobs) > start + view.per, found.scanned, found.cut)


_CANCELS = frozenset(status.value for status in CANCELLABLE)
_RETRIES = frozenset(status.value for status in RETRYABLE)


def actions(job: Mapping[str, Any]) -> list[str]:
    """What a press can do to ``job`` (its API form) now, by the rules the queue's control
    applies: cancel stops unfinished tasks, retry restarts ended ones, delete is refused
    while a task runs."""
    statuses = {str(task["status"]) for task in job["tasks"]}
    offered = []
    if statuses & _CANCELS:
        offered.append("cancel")
    if statuses & _RETRIES:
        offered.append("retry")
    if TaskStatus.RUNNING.value not in statuses:
        offered.append("delete")
    return offered


#: The most rows a live refresh keeps in view after they stopped matching the filters.
MOST_KEPT = 200
_JOB_ID = re.compile(r"^[a-z]-[0-9a-f]{1,60}$")


def shown_ids(value: str | None) -> list[str]:
    """The job ids a page shows (``shown=a,b,...`` from a live refresh), well-formed only."""
    ids = [part for part in (value or "").split(",") if _JOB_ID.match(part)]
    return list(dict.fromkeys(ids))[:MOST_KEPT]


def keep_shown(queue: QueueService, page: JobsPage, view: JobsView, shown: list[str]) -> JobsPage:
    """``page`` with the jobs a viewer still has on screen that stopped matching the filters
    (a cancelled job under "queued"), in their place: a live list does not pull a row from
    under the viewer's pointer. Deleted jobs do go."""
    have = {job.id for job in page.jobs}
    kept = [job for job in map(queue.find_job, (i for i in shown if i not in have)) if job]
    if not kept:
        return page
    merged = sorted(
        [*page.jobs, *kept], key=lambda j: (j.created_at, j.id), reverse=view.sort != "oldest"
    )
    return replace(page, jobs=tuple(merged))


def by_day(jobs: tuple[Job, ...], group: bool) -> list[tuple[str, list[Job]]]:
    """Jobs under a heading per day they were created (one untitled group when not grouping)."""
    if not group:
        return [("", list(jobs))]
    return [
        (day, list(items))
        for day, items in groupby(jobs, key=lambda j: j.created_at.strftime("%Y-%m-%d"))
    ]


def spend_text(spend: Mapping[str, Any] | None) -> str:
    """A job's spend in a few words: ``$0.1620 · 30k tokens``, ``unpriced · 2k tokens``,
    ``$0.16 + 2 unpriced · 31k tokens``; ``no calls`` when it made none.

    Unpriced calls are named, never counted as free.
    """
    if not spend or not spend.get("calls"):
        return "no calls"
    cost, unpriced = spend.get("cost"), int(spend.get("unpriced") or 0)
    if cost is None:
        shown = "unpriced"
    else:
        shown = f"${cost:,.4f}" if cost < 1 else f"${cost:,.2f}"
        if unpriced:
            shown += f" + {unpriced} unpriced"
    tokens = int(spend.get("input_tokens") or 0) + int(spend.get("output_tokens") or 0)
    return f"{shown} · {_count(tokens)} tokens"


def _count(number: int) -> str:
    """``950``, ``1.5k``, ``30k``, ``2.1M``."""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if number >= size:
            return f"{number / size:.1f}".removesuffix(".0") + unit
    return str(number)
