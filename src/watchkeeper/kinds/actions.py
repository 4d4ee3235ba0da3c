"""A kind's own actions as configured: an HTTP call to the owning system, or a Python function."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from watchkeeper.config import ActionConfig
from watchkeeper.contract import Action
from watchkeeper.errors import WatchkeeperError


class ActionFailed(WatchkeeperError):
    """The kind's function ran and said no, or could not be reached.

    ``words`` say why to the people in a chat; unlike the message, which the
    journal keeps, they never name the internal address the call went to.
    """

    def __init__(self, message: str, words: str | None = None) -> None:
        super().__init__(message)
        self.words = words or message


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What an action function is told: which work, which incident, who pressed.

    ``effects_checked`` is set on a retry whose presser stated they checked the
    work's effects outside (the "Retry (I checked its effects)" button): the
    kind gets the same ``retry`` either way, and may refuse one nobody checked.
    """

    action: Action
    kind: str
    run_id: str
    incident_id: int
    actor: str
    via: str
    reason: str
    effects_checked: bool = False

    @classmethod
    def for_press(
        cls,
        pressed: Action,
        kind: str,
        run_id: str,
        incident_id: int,
        actor: str,
        via: str,
        reason: str,
    ) -> ActionRequest:
        """The request for a pressed button: "Retry (I checked its effects)" is a flagged retry."""
        checked = pressed is Action.RETRY_CHECKED
        action = Action.RETRY if checked else pressed
        return cls(action, kind, run_id, incident_id, actor, via, reason, checked)

    def as_dict(self) -> dict[str, Any]:
        """The body sent to an HTTP action."""
        return {
            "action": self.action.value,
            "kind": self.kind,
            "run_id": self.run_id,
            "incident_id": self.incident_id,
            "actor": self.actor,
            "via": self.via,
            "reason": self.reason,
            "effects_checked": self.effects_checked,
        }


def perform(config: ActionConfig, request: ActionRequest) -> str:
    """Run one configured action; returns the owning system's answer or raises ActionFailed."""
    if config.entry_point is not None:
        return _call_entry_point(config.entry_point, request)
    return _call_http(config, request)


def _call_entry_point(target: str, request: ActionRequest) -> str:
    module_name, _, attribute = target.partition(":")
    try:
        function: Callable[[ActionRequest], object] = getattr(
            importlib.import_module(module_name), attribute
        )
    except (ImportError, AttributeError) as exc:
        raise ActionFailed(f"cannot load {target}: {exc}") from exc
    try:
        answer = function(request)
    except ActionFailed:
        raise
    except Exception as exc:
        raise ActionFailed(f"{target} raised {type(exc).__name__}: {exc}") from exc
    return "" if answer is None else str(answer)


def _call_http(config: ActionConfig, request: ActionRequest) -> str:
    assert config.url is not None
    url = config.url.format(
        run_id=request.run_id,
        kind=request.kind,
        incident_id=request.incident_id,
        action=request.action.value,
    )
    headers = {"Content-Type": "application/json"}
    auth = config.auth_header
    if config.auth_header_env:
        auth = os.environ.get(config.auth_header_env)
        if not auth:
            raise ActionFailed(
                f"the environment variable {config.auth_header_env} is not set",
                "the action's credentials are not set on the server",
            )
    if auth:
        headers["Authorization"] = auth
    body = None if config.method == "GET" else request.as_dict()
    try:
        # No automatic retries: an action may have effects, and runs at most once.
        response = httpx.request(
            config.method, url, json=body, headers=headers, timeout=config.timeout_s
        )
    except httpx.HTTPError as exc:
        words = (
            "the kind did not answer in time"
            if isinstance(exc, httpx.TimeoutException)
            else "the kind could not be reached"
        )
        raise ActionFailed(f"{config.method} {url} failed: {exc}", words) from exc
    answer = response.text.strip()[:2000]
    if response.status_code not in config.expected_status:
        refused = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        raise ActionFailed(
            f"{config.method} {url} answered HTTP {response.status_code}: "
            f"{answer or response.reason_phrase}",
            f"the kind refused it ({refused})" + (f": {_said(answer)}" if answer else ""),
        )
    return answer or f"HTTP {response.status_code}"


def _said(answer: str) -> str:
    """What an answer body says in words: its ``error``, ``message`` or ``detail`` when it is
    a JSON object that has one, else the body itself."""
    try:
        decoded = json.loads(answer)
    except ValueError:
        return answer
    if isinstance(decoded, dict):
        for key in ("error", "message", "detail"):
            if isinstance(decoded.get(key), str) and decoded[key]:
                return str(decoded[key])
    return answer
