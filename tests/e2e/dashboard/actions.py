"""The test kind's own actions: the dashboard's presses end up here."""

from __future__ import annotations

from watchkeeper.kinds.actions import ActionRequest

CALLS: list[ActionRequest] = []


def retry(request: ActionRequest) -> str:
    """Retry, as the owning system would answer it."""
    CALLS.append(request)
    return "the crawler started the run again"
