"""Group commit: what many threads write at once is recorded in one transaction.

Every request joins a group. One request at a time leads: it waits up to
``window_s`` for others to join (only when the last group had company, so a
lone writer is never held back), or until ``most`` items are gathered, then
records the group in one transaction and wakes the others. Requests arriving
meanwhile form the next group. Each request is answered only after the commit
that holds its items.

When the group's transaction fails as a whole, nothing of it was recorded, and
each request of a group of several is tried again alone, so one request's bad
value fails only that request. The queue's outcomes (each fenced by its own
lease, so a retry of a commit whose fate is unknown finds the lease ended and
cannot double an outcome) and the press history use it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from watchkeeper.errors import StoreError

E = TypeVar("E")
O = TypeVar("O")  # noqa: E741 - the outcome's type

#: How long a leader waits for company; a few writers' rows land within it.
WINDOW_S = 0.002
#: Outcomes one transaction records at most; beyond, the next group takes them.
MOST = 500


@dataclass(eq=False)
class _Request(Generic[E, O]):
    items: list[E]
    answer: list[O] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass(eq=False)
class GroupCommit(Generic[E, O]):
    """Records lists of items from many threads together; ``record`` does one transaction."""

    record: Callable[[list[E]], list[O]]
    window_s: float = WINDOW_S
    most: int = MOST
    #: Sizes (requests, items) of the groups recorded, newest last; a few kept.
    recent: list[tuple[int, int]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _pending: list[_Request[E, O]] = field(default_factory=list)
    _busy: bool = False
    #: Whether the last group had more than one request: only then does a leader wait.
    company: bool = False

    def run(self, items: Sequence[E]) -> list[O]:
        """Record ``items`` with whatever else is sent now; their answers, in order."""
        request: _Request[E, O] = _Request(list(items))
        with self._cond:
            self._pending.append(request)
            self._cond.notify_all()
            while self._busy and not request.done:
                self._cond.wait()
            if not request.done:
                group = self._gather()
        if not request.done:
            self._record(group)
        if request.error is not None:
            raise request.error
        assert request.answer is not None
        return request.answer

    def _gather(self) -> list[_Request[E, O]]:
        """Lead: wait for company (under the lock), then take the pending requests."""
        self._busy = True
        if self.company:
            deadline = time.monotonic() + self.window_s
            while self._count() < self.most and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
        group: list[_Request[E, O]] = []
        count = 0
        while self._pending and (not group or count + len(self._pending[0].items) <= self.most):
            count += len(self._pending[0].items)
            group.append(self._pending.pop(0))
        self.company = len(group) > 1
        return group

    def _count(self) -> int:
        return sum(len(request.items) for request in self._pending)

    def _record(self, group: list[_Request[E, O]]) -> None:
        try:
            self._record_together(group)
        finally:
            with self._cond:
                for request in group:
                    if request.answer is None and request.error is None:
                        # Not an error of the database (a bug, an interrupt): no waiter hangs.
                        request.error = StoreError("not recorded: its write was interrupted")
                    request.done = True
                self._busy = False
                self.recent = [*self.recent[-15:], (len(group), sum(len(r.items) for r in group))]
                self._cond.notify_all()

    def _record_together(self, group: list[_Request[E, O]]) -> None:
        items = [item for request in group for item in request.items]
        try:
            answers = self.record(items)
        except Exception as exc:  # noqa: BLE001 - each request gets its own verdict below
            if len(group) == 1:
                group[0].error = exc
                return
            for request in group:
                try:
                    request.answer = self.record(request.items)
                except Exception as alone:  # noqa: BLE001 - this request's own failure
                    request.error = alone
            return
        start = 0
        for request in group:
            request.answer = answers[start : start + len(request.items)]
            start += len(request.items)
