"""What the canvas is given of a breaker's recent calls: times in UTC, and a failure's
reason redacted whole before it is shortened."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from watchkeeper.server.web.canvas_service import REASON_CHARS, recent_calls
from watchkeeper.supervise import CircuitBreaker, ManualClock

PASSWORD = "hunter2hunter2"
#: A token that reads as one only whole: cut short, its shape no longer matches it.
TOKEN = "ghp_" + "A1b2C3d4E5" * 4


def _fail(message: str) -> None:
    raise RuntimeError(message)


def test_calls_reach_the_canvas_newest_first_in_utc_with_reasons_redacted_then_cut() -> None:
    clock = ManualClock(datetime(2025, 3, 4, 12, 39, 5, tzinfo=UTC))
    breaker = CircuitBreaker("notify:mail", fail_max=10, clock=clock)
    breaker.call(lambda: None)
    clock.advance(1.0)
    with pytest.raises(RuntimeError):
        breaker.call(_fail, f"refused: password={PASSWORD}")
    clock.advance(1.0)
    # The token sits where a cut made before redaction would halve it.
    long = f"{'x' * (REASON_CHARS - 30)} {TOKEN} and more after it"
    with pytest.raises(RuntimeError):
        breaker.call(_fail, long)
    shown = recent_calls(breaker)
    assert [(c["at"], c["ok"]) for c in shown] == [
        ("2025-03-04T12:39:07Z", False),
        ("2025-03-04T12:39:06Z", False),
        ("2025-03-04T12:39:05Z", True),
    ]
    assert shown[1]["reason"] == "RuntimeError: refused: password=[redacted]"
    assert shown[2]["reason"] is None
    cut = shown[0]["reason"]
    assert len(cut) == REASON_CHARS
    assert cut.endswith("…")
    assert cut.startswith("RuntimeError: xxx")
    assert PASSWORD not in str(shown)
    assert "ghp_" not in cut
