"""The jobs page's text filter is applied by the database: only matching jobs are read."""

from __future__ import annotations

from tests.integration.queue.conftest import submit
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Job
from watchkeeper.server.web.jobsview import JobsView, find, matches

TITLES = [
    "Summarise the Q3 report",
    "summarise q4",
    "100% done_check",
    "1000 done-check",
    "Crème brûlée recipe",
    "CRÈME fraîche",
    "plain",
    "Straße works",
    "ﬁnal ﬁle",
]


def _view(q: str) -> JobsView:
    return JobsView.parse({"q": q})


def _all_matching(queue: QueueService, q: str) -> list[str]:
    """What the filter must find: every job, read whole, kept by the page's own rule."""
    view = _view(q)
    jobs: list[Job] = queue.scan_jobs().jobs
    return [job.id for job in jobs if matches(job, view)]


def test_the_text_filter_reads_only_the_jobs_that_match(queue: QueueService) -> None:
    for n in range(60):
        submit(queue, title=f"filler job {n}")
    for title in TITLES:
        submit(queue, title=title)
    page = find(queue, _view("SUMMARISE"))
    assert sorted(job.title for job in page.jobs) == ["Summarise the Q3 report", "summarise q4"]
    # The two that match, and the four holding letters beyond ASCII (whose case folding the
    # page judges itself); before, every one of the 69 jobs was read to find them.
    assert page.scanned == 2 + 4


def test_the_database_finds_what_the_page_s_own_rule_finds(queue: QueueService) -> None:
    """A guard: wildcards are literal, case does not matter, accents match, and letters whose
    case folds to two (ß to ss, ﬁ to fi) are still found as the page's rule finds them."""
    jobs = [submit(queue, title=title) for title in TITLES]
    needles = ["%", "_", "0%", "done_", "done-", "Q3", "crème", "CRÈME", "BRÛLÉE", "e b", "ss"]
    needles += ["SSE", "fi", "FILE", "ß"]
    needles.append(jobs[2].id.upper())
    for needle in needles:
        found = [job.id for job in find(queue, _view(needle)).jobs]
        assert found == _all_matching(queue, needle), needle
