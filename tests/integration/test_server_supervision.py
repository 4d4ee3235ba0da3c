"""The server's supervision with loops that really fail: a crash is restarted, counted and
logged; too many make the tree give up, and its checks say so. The database is real."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from watchkeeper.errors import Conflict
from watchkeeper.runtime import Runtime
from watchkeeper.server.health import Level, assess
from watchkeeper.server.supervision import ServerSupervision
from watchkeeper.supervise import ManualClock


class Flaky:
    """A loop whose first ``crashes`` runs lose their connection; later ones run until told."""

    def __init__(self, crashes: int) -> None:
        self.crashes = crashes
        self.starts = 0

    async def __call__(self, stop: asyncio.Event) -> None:
        self.starts += 1
        if self.starts <= self.crashes:
            raise ConnectionResetError("the peer went away")
        await stop.wait()


async def _until(clock: ManualClock, holds: Callable[[], bool], what: str) -> None:
    """Move the tree's clock a second at a time until ``holds()`` (restarts wait on it)."""
    async with asyncio.timeout(30):
        while not holds():
            clock.advance(1.0)
            await asyncio.sleep(0.01)
    assert holds(), what


def _check(sup: ServerSupervision, name: str) -> dict[str, object]:
    return next(c for c in sup.snapshot()["health"] if c["name"] == name)


def test_a_crashing_loop_is_restarted_counted_and_logged(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    flaky, steady = Flaky(crashes=2), Flaky(crashes=0)
    clock = ManualClock()

    async def scenario() -> None:
        sup = ServerSupervision(
            runtime,
            [("steady", steady, "never fails"), ("flaky", flaky, "fails twice")],
            clock=clock,
        )
        await sup.start()
        try:
            await _until(
                clock,
                lambda: (
                    sup.child("flaky")["restarts"] == 2 and sup.child("flaky")["state"] == "running"
                ),
                "flaky restarted twice and running",
            )
            flaky_now, steady_now = sup.child("flaky"), sup.child("steady")
            assert (
                flaky_now["last_exit"] == "error: raised ConnectionResetError('the peer went away')"
            )
            assert (steady_now["restarts"], steady.starts) == (0, 1)  # one for one
            assert sup.snapshot()["trees"][0]["restarts"] == 2
            assert _check(sup, "store")["status"] == "healthy"
        finally:
            await sup.stop()
        assert [c["state"] for c in sup.snapshot()["trees"][0]["children"]] == ["stopped"] * 2

    with caplog.at_level(logging.INFO, logger="watchkeeper.server.supervision"):
        asyncio.run(scenario())
    crashes = [r for r in caplog.records if "the supervisor restarts it" in r.getMessage()]
    assert len(crashes) == 2
    assert "server/flaky error" in crashes[0].getMessage()
    assert sum("Restarting server/flaky" in r.getMessage() for r in caplog.records) == 2
    stops = [r.getMessage() for r in caplog.records if "stopped (shutdown" in r.getMessage()]
    assert [m.split()[1] for m in stops] == ["server/flaky", "server/steady"]  # reverse order


def test_more_restarts_than_the_intensity_allows_make_the_tree_give_up(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Flaky(crashes=1_000)
    clock = ManualClock()

    async def scenario() -> None:
        sup = ServerSupervision(runtime, [("broken", broken, "always fails")], clock=clock)
        await sup.start()
        try:
            await _until(clock, lambda: sup.gave_up, "the tree giving up")
            tree = sup.snapshot()["trees"][0]
            assert tree["state"] == "gave_up"
            assert tree["children"][0]["state"] == "gave_up"
            # The checks run beside the tree: they still say how it is.
            async with asyncio.timeout(30):
                while _check(sup, "broken running")["status"] != "unhealthy":
                    await sup.monitor.run_once()
            # /healthz is failing, so an orchestrator restarts the process: the cure here.
            health = assess(runtime, runtime.cluster.health(), sup)
            assert health.code == 503
            (cause,) = [c for c in health.causes if c.check == "loops"]
            assert cause.status is Level.FAILING
            assert cause.detail.startswith("server/broken is not running: the supervision tree")
            # Nothing can be restarted in a tree that gave up: the answer says what to do.
            with pytest.raises(Conflict, match=r"gave up.*restart the server"):
                await sup.restart_child("server/broken")
        finally:
            await sup.stop()

    with caplog.at_level(logging.INFO, logger="watchkeeper.server.supervision"):
        asyncio.run(scenario())
    assert broken.starts == 6  # the first start and five restarts: the sixth is too many
    assert any("gave up after 6 restarts" in r.getMessage() for r in caplog.records)
