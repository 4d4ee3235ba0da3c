"""A runtime whose push kinds act through a small local HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings


def acting_kinds(service_url: str) -> dict[str, Any]:
    """swarm_task can cancel and retry; chat_turn can cancel and close the turn."""

    def action(path: str) -> dict[str, Any]:
        return {"url": f"{service_url}/{path}/{{run_id}}", "auth_header": "Bearer owner-secret"}

    return {
        "swarm_task": {"actions": {"cancel": action("cancel"), "retry": action("retry")}},
        "chat_turn": {"actions": {"cancel": action("cancel"), "close_turn": action("close")}},
    }


def acting_runtime(
    tmp_path: Path, store: Store, clock: ManualClock, service_url: str, **overrides: Any
) -> Runtime:
    """A runtime on ``store`` with actions wired to ``service_url``."""
    settings = make_settings(tmp_path, store.url, kinds=acting_kinds(service_url), **overrides)
    return Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
