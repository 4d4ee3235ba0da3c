"""Exactly one "not working" notice and one "working again" notice per outage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from watchkeeper.watch.selfcheck import NoticeKind, SupervisionHealth

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_one_down_notice_after_down_after_s_then_one_up_notice() -> None:
    health = SupervisionHealth(down_after_s=300)
    notices = [health.failed(at(s), "database is locked") for s in range(0, 900, 30)]
    down = [n for n in notices if n is not None]
    assert len(down) == 1
    assert down[0].kind is NoticeKind.DOWN
    assert down[0].at == at(300)
    assert down[0].failing_since == at(0)
    assert "not working" in down[0].text
    up = health.succeeded(at(930))
    assert up is not None
    assert up.kind is NoticeKind.UP
    assert health.succeeded(at(960)) is None


def test_a_short_outage_produces_no_notice_at_all() -> None:
    health = SupervisionHealth(down_after_s=300)
    assert health.failed(at(0), "blip") is None
    assert health.failed(at(299), "blip") is None
    assert health.succeeded(at(310)) is None
    # The clock restarts after a recovery: a new outage needs its own 300 s.
    assert health.failed(at(320), "again") is None
    assert health.failed(at(600), "again") is None
    assert health.failed(at(620), "again") is not None


def test_working_flag_follows_sweeps() -> None:
    health = SupervisionHealth(down_after_s=10)
    assert health.working
    health.failed(at(0), "x")
    assert not health.working
    health.succeeded(at(1))
    assert health.working
