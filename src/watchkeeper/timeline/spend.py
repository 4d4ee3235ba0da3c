"""Spend: what model calls cost, grouped by org, job, role, model, provider or day.

Each call was priced when its event arrived, on the provider it ran on
(:mod:`watchkeeper.timeline.prices`); a rollup only sums. Unpriced calls are
counted, never added as zero: a report with ``unpriced > 0`` is a floor, and a
group (or a report) none of whose calls was priced has no cost (``None``), not 0.
Models are grouped by the name the price table gave them, so ``Claude-Haiku-4-5``
and ``claude-haiku-4-5`` are one model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from watchkeeper.errors import InvalidInput

if TYPE_CHECKING:
    from watchkeeper.store.timeline import SpendGroup, TimelineStore

GROUPINGS = ("org", "job", "role", "model", "provider", "day")


class SpendWhere(TypedDict, total=False):
    """Which calls a report counts: one org's, one job's, those within a time range."""

    org: str | None
    job_id: str | None
    since: datetime | None
    until: datetime | None


@dataclass(frozen=True, slots=True)
class SpendReport:
    """Groups, costliest first, and their totals."""

    by: str
    groups: tuple[SpendGroup, ...]

    @property
    def cost(self) -> float | None:
        """The priced calls' total cost in USD; ``None`` when every call was unpriced."""
        return total_cost(group.cost for group in self.groups)

    @property
    def unpriced(self) -> int:
        """Calls no price was known for."""
        return sum(group.unpriced for group in self.groups)

    def as_dict(self) -> dict[str, Any]:
        """As the API answers."""
        return {
            "by": self.by,
            "groups": [_group_dict(group) for group in self.groups],
            "totals": {
                "cost": self.cost,
                "calls": sum(group.calls for group in self.groups),
                "unpriced": self.unpriced,
                **_tokens(self.groups),
            },
        }


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of the known ``costs``; ``None`` when there are some and none is known."""
    total, known, seen = 0.0, False, False
    for cost in costs:
        seen = True
        if cost is not None:
            total, known = total + cost, True
    return total if known or not seen else None


def _group_dict(group: SpendGroup) -> dict[str, Any]:
    return {
        "key": group.key,
        "cost": group.cost,
        "calls": group.calls,
        "unpriced": group.unpriced,
        **_tokens([group]),
    }


def _tokens(groups: Sequence[SpendGroup]) -> dict[str, int]:
    return {
        "input_tokens": sum(g.input_tokens for g in groups),
        "output_tokens": sum(g.output_tokens for g in groups),
        "cache_read_tokens": sum(g.cache_read_tokens for g in groups),
        "cache_write_tokens": sum(g.cache_write_tokens for g in groups),
    }


def of_jobs(store: TimelineStore, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each job's spend over all its rounds, as the API answers it, in one query.

    A job without calls spent nothing (cost 0.0); one whose calls were all unpriced
    has no cost (``None``).
    """
    if not job_ids:
        return {}
    found = {group.key: group for group in store.spend("job", job_ids=job_ids)}
    return {job_id: _job_dict(found.get(job_id)) for job_id in job_ids}


def _job_dict(group: SpendGroup | None) -> dict[str, Any]:
    if group is None:
        return {"cost": 0.0, "calls": 0, "unpriced": 0, **_tokens([])}
    body = _group_dict(group)
    del body["key"]
    return body


def report(store: TimelineStore, by: str, **where: Unpack[SpendWhere]) -> SpendReport:
    """Spend grouped ``by`` one of :data:`GROUPINGS`, optionally for one org or job."""
    if by not in GROUPINGS:
        raise InvalidInput(f"by must be one of {', '.join(GROUPINGS)}, not {by!r}", "by")
    groups = store.spend(by, **where)
    return SpendReport(by, tuple(groups))
