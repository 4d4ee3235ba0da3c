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

import _thread
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
    #: Whether this request gathers and records the next group.
    lead: bool = False
    #: Held while the request waits its turn; released once it is done or is to lead.
    waiter: _thread.LockType | None = None


@dataclass(eq=False)
class GroupCommit(Generic[E, O]):
    """Records lists of items from many threads together; ``record`` does one transaction.

    Each waiting request sleeps on a lock of its own, released once: when the commit
    holding its items ends, or when it is handed the lead of the next group. A request
    joining a group wakes nobody unless it fills the group, so a group of n requests
    costs n wake-ups, not one per waiter for every request that joins.
    """

    record: Callable[[list[E]], list[O]]
    window_s: float = WINDOW_S
    most: int = MOST
    #: Sizes (requests, items) of the groups recorded, newest last; a few kept.
    recent: list[tuple[int, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: A leader waiting for company sleeps here until the window ends or the group is full.
    _full: threading.Condition = field(init=False)
    _pending: list[_Request[E, O]] = field(default_factory=list)
    _pending_items: int = 0
    #: Whether a request leads now (gathering or recording); the others wait their turn.
    _busy: bool = False
    _gathering: bool = False
    #: Whether the last group had more than one request: only then does a leader wait.
    company: bool = False

    def __post_init__(self) -> None:
        self._full = threading.Condition(self._lock)

    def run(self, items: Sequence[E]) -> list[O]:
        """Record ``items`` with whatever else is sent now; their answers, in order."""
        request: _Request[E, O] = _Request(list(items))
        with self._lock:
            self._pending.append(request)
            self._pending_items += len(request.items)
            if not self._busy:
                self._busy = request.lead = True
            else:
                if self._gathering and self._pending_items >= self.most:
                    self._full.notify()
                request.waiter = waiter = _thread.allocate_lock()
                waiter.acquire()
        if request.waiter is not None:
            request.waiter.acquire()  # until done, or handed the lead
        if not request.done:
            self._record(self._gather())
        if request.error is not None:
            raise request.error
        assert request.answer is not None
        return request.answer

    def _gather(self) -> list[_Request[E, O]]:
        """Lead: wait for company (only then, and only to fill the group), take the pending."""
        with self._lock:
            if self.company:
                deadline = time.monotonic() + self.window_s
                self._gathering = True
                while self._pending_items < self.most and (left := deadline - time.monotonic()) > 0:
                    self._full.wait(left)
                self._gathering = False
            taken = count = 0
            for request in self._pending:
                if taken and count + len(request.items) > self.most:
                    break
                taken += 1
                count += len(request.items)
            group = self._pending[:taken]
            del self._pending[:taken]
            self._pending_items -= count
            self.company = taken > 1
        return group

    def _record(self, group: list[_Request[E, O]]) -> None:
        try:
            self._record_together(group)
        finally:
            with self._lock:
                for request in group:
                    if request.answer is None and request.error is None:
                        # Not an error of the database (a bug, an interrupt): no waiter hangs.
                        request.error = StoreError("not recorded: its write was interrupted")
                    request.done = True
                    if not request.lead and request.waiter is not None:
                        request.waiter.release()
                if self._pending:
                    # The first to wait leads the next group; the others sleep on.
                    following = self._pending[0]
                    following.lead = True
                    assert following.waiter is not None
                    following.waiter.release()
                else:
                    self._busy = False
                self.recent = [*self.recent[-15:], (len(group), sum(len(r.items) for r in group))]

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
