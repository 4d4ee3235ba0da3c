"""The supervision notices say their times as every other message does: ``12:39 UTC``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from watchkeeper.watch.selfcheck import SupervisionHealth

SINCE = datetime(2026, 12, 6, 12, 39, 10, 168870, tzinfo=UTC)


def outage(health: SupervisionHealth, lasting: timedelta) -> tuple[str, str]:
    """The down and up notices' words for an outage from SINCE lasting ``lasting``."""
    down = None
    at = SINCE
    while down is None:
        down = health.failed(at, "database is locked")
        at += timedelta(seconds=30)
    up = health.succeeded(SINCE + lasting)
    assert up is not None
    return down.text, up.text


def test_the_notices_name_the_time_in_hours_and_minutes() -> None:
    down, up = outage(SupervisionHealth(down_after_s=300), timedelta(minutes=20))
    assert down == (
        "Run supervision is not working: sweeps have failed since 12:39 UTC (database is locked)"
    )
    assert up == "Run supervision is working again after failing since 12:39 UTC"


def test_an_outage_into_another_day_names_the_day_it_began() -> None:
    _, up = outage(SupervisionHealth(down_after_s=300), timedelta(hours=30))
    assert up == "Run supervision is working again after failing since 2026-12-06 12:39 UTC"
