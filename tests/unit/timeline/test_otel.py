"""Timeline events as OpenTelemetry GenAI spans; without OpenTelemetry nothing breaks."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchkeeper.records.timeline import Price, TimelineEvent, Usage

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from watchkeeper.timeline import otel

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _event(n: int, phase: str, **more: object) -> TimelineEvent:
    return TimelineEvent(
        id=n,
        phase=phase,
        at=T0 + timedelta(seconds=10 * n),
        received_at=T0,
        reporter="runner",
        job_id="j-1",
        task_id="t-1",
        **more,
    )


def test_events_become_invoke_agent_chat_and_execute_tool_spans() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = otel.OtelExporter(provider)
    exporter(
        [
            _event(
                1,
                "implementer",
                duration_s=4.0,
                model="claude-haiku-4-5",
                provider="anthropic",
                role="implementer",
                usage=Usage(1200, 300, 800, 100),
                price=Price(0.0021, False, "claude-haiku-4-5", "anthropic", "genai-prices 0.2.3"),
            ),
            _event(2, "tool", name="pytest", duration_s=2.0, outcome="failed"),
            _event(3, "round_start", round=2),
            _event(4, "session_end", name="coder", duration_s=45.0, outcome="ok"),
        ]
    )
    spans = {span.name: span for span in memory.get_finished_spans()}
    provider.shutdown()
    assert set(spans) == {
        "chat claude-haiku-4-5",
        "execute_tool pytest",
        "round_start",
        "invoke_agent coder",
    }
    chat = spans["chat claude-haiku-4-5"]
    assert chat.kind is SpanKind.CLIENT
    assert dict(chat.attributes or {}) | {} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-haiku-4-5",
        "gen_ai.response.model": "claude-haiku-4-5",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.cache_read.input_tokens": 800,
        "gen_ai.usage.cache_creation.input_tokens": 100,
        "watchkeeper.cost_usd": 0.0021,
        "watchkeeper.unpriced": False,
        "watchkeeper.price.version": "genai-prices 0.2.3",
        "watchkeeper.phase": "implementer",
        "watchkeeper.role": "implementer",
        "watchkeeper.job_id": "j-1",
        "watchkeeper.task_id": "t-1",
    }
    assert chat.end_time - chat.start_time == 4_000_000_000
    tool = spans["execute_tool pytest"]
    assert tool.attributes["gen_ai.tool.name"] == "pytest"
    assert tool.status.status_code is StatusCode.ERROR
    session = spans["invoke_agent coder"]
    assert session.attributes["gen_ai.agent.name"] == "coder"
    assert session.parent is None
    for name in ("chat claude-haiku-4-5", "execute_tool pytest", "round_start"):
        assert spans[name].parent is not None
        assert spans[name].parent.span_id == session.context.span_id
        assert spans[name].context.trace_id == session.context.trace_id


def test_without_opentelemetry_the_timeline_works_and_exports_nothing(tmp_path: Path) -> None:
    # (The server itself needs FastAPI, which brings the OpenTelemetry API along.)
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if it were not installed
from watchkeeper.timeline import forge, otel, record, spend
assert otel.available() is False and otel.exporter() is None
from watchkeeper.client import timeline as client_timeline
from watchkeeper.cli.app import timeline
from watchkeeper.config import parse
from watchkeeper.store import Store
from watchkeeper.records.timeline import NewEvent
from watchkeeper.timeline.service import TimelineService
store = Store("sqlite:///" + sys.argv[1])
service = TimelineService(store, parse({}))
done = service.ingest([NewEvent("tool", name="ruff")], "me")
assert done.count == 1
store.close()
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "wk.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
