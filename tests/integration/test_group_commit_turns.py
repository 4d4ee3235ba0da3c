"""Group commit: requests queued behind a write take their turns in order, ``most`` at a time.

While one group is being recorded, the requests that arrive wait their turn; when
it commits, the first of them leads the next group, which takes as many as fit in
``most`` items, and so on until none is left. Each request gets its own answers,
and a request whose write is interrupted fails alone without leaving others waiting.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from watchkeeper.errors import StoreError
from watchkeeper.store.group_commit import GroupCommit

from ..support.waiting import wait_for


def test_requests_queued_behind_a_write_are_recorded_most_at_a_time_in_order() -> None:
    release = threading.Event()
    recorded: list[list[str]] = []

    def record(items: list[str]) -> list[str]:
        if items == ["first"]:
            release.wait(timeout=60)
        recorded.append(items)
        return [f"ok {item}" for item in items]

    group: GroupCommit[str, str] = GroupCommit(record, window_s=0.01, most=2)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(group.run, ["first"])
        wait_for(lambda: group._busy and not group._pending, what="the first write to lead")
        queued: list[Future[list[str]]] = []
        for n in range(5):
            queued.append(pool.submit(group.run, [f"r{n}"]))
            wait_for(lambda: len(group._pending) == len(queued), what=f"request {n} to queue")
        release.set()
        answers = [first.result(timeout=60), *(f.result(timeout=60) for f in queued)]

    assert answers == [["ok first"], *([f"ok r{n}"] for n in range(5))]
    assert recorded == [["first"], ["r0", "r1"], ["r2", "r3"], ["r4"]]
    assert group.recent == [(1, 1), (2, 2), (2, 2), (1, 1)]
    assert not group._busy and not group._pending


def test_an_interrupted_write_fails_its_group_and_the_next_group_is_still_recorded() -> None:
    release = threading.Event()

    class Interrupted(BaseException):
        """Not an error of the database: the write itself was cut short."""

    def record(items: list[str]) -> list[str]:
        if "cut" in items:
            release.wait(timeout=60)
            raise Interrupted
        return [f"ok {item}" for item in items]

    group: GroupCommit[str, str] = GroupCommit(record, window_s=0.01, most=10)

    def send(items: list[str]) -> list[str] | str:
        try:
            return group.run(items)
        except Interrupted:
            return "interrupted"
        except StoreError as exc:
            return str(exc)

    with ThreadPoolExecutor(3) as pool:
        cut = pool.submit(send, ["cut"])
        wait_for(lambda: group._busy and not group._pending, what="the cut write to lead")
        after = [pool.submit(send, [f"r{n}"]) for n in range(2)]
        wait_for(lambda: len(group._pending) == 2, what="the others to queue")
        release.set()
        answers = [cut.result(timeout=60), *(f.result(timeout=60) for f in after)]

    assert answers == ["interrupted", ["ok r0"], ["ok r1"]]
    assert group.recent[-1] == (2, 2)
