"""Raw test output never lands in the timeline: a verify event keeps only its summary."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.records.timeline import NewEvent
from watchkeeper.timeline.service import TimelineService

SAMPLES = Path(__file__).parents[2] / "unit" / "timeline" / "samples"
SAMPLE = SAMPLES / "pytest.txt"
EMAIL, CARD = "alice@example.com", "4111 1111 1111 1111"


def _five_kb_of_pytest_output() -> str:
    text = SAMPLE.read_text(encoding="utf-8")
    head, _, tail = text.partition("=========================== short test summary info")
    noise = "".join(f"captured line {i}: mail {EMAIL} about {CARD}\n" for i in range(60))
    output = head + noise + "=========================== short test summary info" + tail
    assert len(output) >= 5000 and EMAIL in output and CARD in output
    return output


SUMMARY = (
    "3 failed, 1 error, 1 passed, 1 skipped; failed: test_demo.py::test_math, "
    "test_demo.py::TestThing::test_name, test_demo.py::test_boom, test_demo.py::test_err; "
    "first assertion: assert (1 + 1) == 3"
)


def test_a_verify_event_stores_only_the_summary(timeline: TimelineService) -> None:
    output = _five_kb_of_pytest_output()
    timeline.ingest(
        [
            NewEvent(
                "verify",
                org="acme",
                task_id="t-out",
                outcome="failed",
                detail=output,
                rationale="tests ran",
            ),
            NewEvent("tool", org="acme", task_id="t-out", name="pytest", detail=output),
            NewEvent("review", org="acme", task_id="t-out", rationale=f"ask {EMAIL} first"),
        ],
        "runner",
    )
    verify, tool, review = timeline.events(task_id="t-out")
    assert verify.detail == SUMMARY and tool.detail == SUMMARY
    assert verify.rationale == "tests ran"  # one short line is not test output
    assert review.rationale == "ask [email] first"  # other texts are kept, redacted
    for stored in (verify, tool):
        assert EMAIL not in str(stored.detail) and CARD not in str(stored.detail)
        assert "captured line" not in str(stored.detail)


def test_unrecognized_verify_output_is_described_not_kept(timeline: TimelineService) -> None:
    output = "".join(f"check {i}: {EMAIL} ok\n" for i in range(40))
    timeline.ingest([NewEvent("verify", org="acme", task_id="t-odd", detail=output)], "runner")
    (verify,) = timeline.events(task_id="t-odd")
    assert verify.detail == "test output not recognized (40 lines)"


def test_go_and_cargo_output_is_summarized_in_any_phase(timeline: TimelineService) -> None:
    go = (SAMPLES / "go_verbose.txt").read_text(encoding="utf-8")
    cargo = (SAMPLES / "cargo.txt").read_text(encoding="utf-8")
    timeline.ingest(
        [
            NewEvent("tool", org="acme", task_id="t-go", name="go test", detail=go),
            NewEvent("review", org="acme", task_id="t-go", rationale=cargo),
            NewEvent("verify", org="acme", task_id="t-go", outcome="failed", detail=cargo),
        ],
        "runner",
    )
    tool, review, verify = timeline.events(task_id="t-go")
    assert tool.detail is not None and tool.detail.startswith("3 failed, 3 passed, 1 skipped")
    assert "failed: TestSub, TestTable, TestTable/two" in tool.detail
    assert review.rationale == verify.detail
    assert verify.detail is not None and verify.detail.startswith("2 failed, 3 passed, 1 skipped")
    for stored in (tool.detail, review.rationale, verify.detail):
        assert EMAIL not in str(stored) and CARD not in str(stored)
        assert "=== RUN" not in str(stored) and "running " not in str(stored)


def test_other_test_like_text_is_described_by_its_length_in_any_phase(
    timeline: TimelineService,
) -> None:
    output = "".join(f"PASS check {i} for {EMAIL}\n" for i in range(5)) + f"FAIL check 5 {CARD}\n"
    timeline.ingest([NewEvent("tool", org="acme", task_id="t-own", detail=output)], "runner")
    (tool,) = timeline.events(task_id="t-own")
    assert tool.detail == "test output not recognized (6 lines)"
