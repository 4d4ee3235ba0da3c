"""Timeline events as OpenTelemetry spans, following the GenAI semantic conventions.

Optional: ``pip install watchkeeper[otel]``. Without OpenTelemetry installed,
:func:`exporter` answers ``None`` and nothing else changes.

* a ``session_end`` event is the session: ``invoke_agent {name}`` (the
  other events of its task in the same batch become its children);
* a ``tool`` event is ``execute_tool {name}``;
* any other event with a model is a model call: ``chat {model}``;
* the remaining phases (``round_start``, ``verify``, ...) are internal spans
  named after the phase.

Attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens`` (cached tokens included),
``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
``gen_ai.usage.cache_creation.input_tokens``, ``gen_ai.agent.name``,
``gen_ai.tool.name``; cost and our own facts under ``watchkeeper.*``.
A span starts at the event's time less its duration and ends at its time.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from watchkeeper.records.timeline import TimelineEvent

SESSION_PHASES = frozenset({"session_end", "session"})
FAILED_OUTCOMES = frozenset({"failed", "error", "errored", "timeout"})


def available() -> bool:
    """Whether the OpenTelemetry API is installed."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:
        return False


def _ns(event: TimelineEvent, start: bool) -> int:
    moment = event.started_at if start else event.at
    return int(moment.timestamp() * 1_000_000_000)


def operation(event: TimelineEvent) -> tuple[str, str]:
    """The span's operation name and span name for one event."""
    if event.phase in SESSION_PHASES:
        return "invoke_agent", f"invoke_agent {event.name or event.role or 'agent'}"
    if event.phase == "tool":
        return "execute_tool", f"execute_tool {event.name or 'tool'}"
    if event.model:
        return "chat", f"chat {event.model}"
    return event.phase, event.phase


def attributes(event: TimelineEvent) -> dict[str, Any]:
    """The span's attributes: GenAI conventions, then ``watchkeeper.*``."""
    op, _ = operation(event)
    found: dict[str, Any] = {"gen_ai.operation.name": op, "watchkeeper.phase": event.phase}
    optional = {
        "gen_ai.provider.name": event.provider,
        "gen_ai.request.model": event.model,
        "gen_ai.response.model": event.price.model if event.price.version else event.model,
        "gen_ai.agent.name": event.name if op == "invoke_agent" else None,
        "gen_ai.tool.name": event.name if op == "execute_tool" else None,
        "watchkeeper.job_id": event.job_id,
        "watchkeeper.task_id": event.task_id,
        "watchkeeper.org": event.org,
        "watchkeeper.round": event.round,
        "watchkeeper.round_fingerprint": event.fingerprint,
        "watchkeeper.outcome": event.outcome,
        "watchkeeper.role": event.role,
        "watchkeeper.rationale": event.rationale,
        "watchkeeper.cost_usd": event.price.cost,
        "watchkeeper.price.version": event.price.version,
    }
    found.update({key: value for key, value in optional.items() if value is not None})
    usage = event.usage
    if event.model or not usage.empty:
        found.update(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
                "watchkeeper.unpriced": event.price.unpriced,
            }
        )
    return found


class OtelExporter:
    """Exports batches of stored events as spans through a tracer provider."""

    def __init__(self, tracer_provider: Any = None) -> None:
        from opentelemetry import trace

        provider = tracer_provider or trace.get_tracer_provider()
        self._trace = trace
        self._tracer = provider.get_tracer("watchkeeper.timeline")

    def __call__(self, events: Sequence[TimelineEvent]) -> None:
        """One span per event; a task's session span parents its other events."""
        by_task: dict[str | None, list[TimelineEvent]] = {}
        for event in events:
            by_task.setdefault(event.task_id, []).append(event)
        for group in by_task.values():
            sessions = [event for event in group if event.phase in SESSION_PHASES]
            parent = self._span(sessions[0], None) if sessions else None
            context = None if parent is None else self._trace.set_span_in_context(parent)
            for event in group:
                if parent is None or event is not sessions[0]:
                    self._span(event, context).end(end_time=_ns(event, start=False))
            if parent is not None:
                parent.end(end_time=_ns(sessions[0], start=False))

    def _span(self, event: TimelineEvent, context: Any) -> Any:
        op, name = operation(event)
        kind = self._trace.SpanKind.CLIENT if op == "chat" else self._trace.SpanKind.INTERNAL
        span = self._tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes(event),
            start_time=_ns(event, start=True),
        )
        if event.outcome in FAILED_OUTCOMES:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.outcome))
        return span


def exporter(tracer_provider: Any = None) -> OtelExporter | None:
    """An exporter on ``tracer_provider`` (default: the global one), or ``None`` without OTel."""
    if not available():
        return None
    return OtelExporter(tracer_provider)
