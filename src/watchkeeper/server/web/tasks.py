"""Which icon a task shows, on every surface: the same rules as ``static/dashboard.js``;
and the end of a task's output its card shows.

Precedence, first match wins:

1. a terminal status (succeeded, failed, cancelled) shows its own icon;
2. a pending approval, then a running task (a spinner);
3. a task interrupted by a restart shows the red alert "Interrupted by restart";
4. a stuck task;
5. a queued task shows its blocked reason: waiting reasons keep a spinner,
   problems show a static warning.

An update that leaves out ``interrupted`` keeps the task's previous marker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from watchkeeper.queue.output import cut_note, end_of

if TYPE_CHECKING:
    from watchkeeper.queue.service import QueueService

INTERRUPTED_LABEL = "Interrupted by restart"
#: How much of the end of a task's output its card shows; a link leads to all of it.
SHOWN_OUTPUT_BYTES = 8 * 1024
#: Queued and waiting its turn: shown with a spinner.
WAITING_REASONS = frozenset({"awaiting_runner", "provisioning", "runners_busy"})
#: Queued and in trouble until someone changes something: a static warning.
PROBLEM_REASONS = frozenset(
    {"no_runner", "runner_offline", "concurrency_cap", "compute_cap", "provision_failed"}
)
TERMINAL = {"succeeded": "completed", "failed": "failed", "cancelled": "cancelled"}
LABELS = {
    "completed": "Completed",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "approval": "Waiting for approval",
    "running": "Running",
    "interrupted": INTERRUPTED_LABEL,
    "stuck": "Stuck: its lease lapsed",
    "waiting": "Waiting",
    "warning": "Blocked",
    "queued": "Queued",
}


def interrupted(task: Mapping[str, Any]) -> bool:
    """Whether the task's API form says a restart interrupted it."""
    marker = task.get("interrupted")
    if marker is None:
        marker = task.get("interrupted_at")
    return bool(marker)


def blocked_code(task: Mapping[str, Any]) -> str | None:
    """The blocked reason's code while queued."""
    blocked = task.get("blocked")
    return str(blocked.get("code")) if isinstance(blocked, Mapping) else None


def icon(task: Mapping[str, Any]) -> str:
    """The icon's name (see the module's precedence)."""
    status = str(task.get("status", ""))
    if status in TERMINAL:
        return TERMINAL[status]
    if task.get("pending_approval") or status == "waiting":
        return "approval"
    if status == "running":
        return "running"
    if interrupted(task):
        return "interrupted"
    if status == "stuck":
        return "stuck"
    code = blocked_code(task)
    if code in WAITING_REASONS:
        return "waiting"
    if code in PROBLEM_REASONS:
        return "warning"
    return "queued"


def label(task: Mapping[str, Any]) -> str:
    """The icon's accessible label and tooltip (with the blocked reason when there is one)."""
    name = icon(task)
    blocked = task.get("blocked")
    if name in ("waiting", "warning") and isinstance(blocked, Mapping):
        return str(blocked.get("message") or LABELS[name])
    return LABELS[name]


def shown_output(queue: QueueService, task_id: str) -> dict[str, Any] | None:
    """The end of the task's output for its card (``None`` if none reached the server).

    While a run ships output, its newest pieces; once it ended, the tail its
    runner sent, unless a later run shipped output since.
    """
    shipped = queue.outputs.shipped(task_id, last=2)
    ended = queue.outputs.kept(task_id)
    if shipped is None and ended is None:
        return None
    live = shipped is not None and (
        shipped.running or ended is None or shipped.updated_at > ended.recorded_at
    )
    text = shipped.text if live and shipped is not None else ended.tail if ended else ""
    return {
        "text": end_of(text, SHOWN_OUTPUT_BYTES),
        "running": bool(shipped and shipped.running),
        "note": cut_note(shipped) if shipped is not None else None,
    }
