"""An OpenAI-compatible chat-completions endpoint as a diagnoser, with read-only tools only."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import httpx

from watchkeeper.config import DiagnoseConfig
from watchkeeper.decide.evidence import Evidence
from watchkeeper.decide.offer import DECIDING, label
from watchkeeper.errors import WatchkeeperError

MAX_ROUNDS = 4
SYSTEM = (
    "You diagnose long-running work that a supervisor flagged. Use the tools to read the "
    "evidence; they are read-only. Answer in at most four sentences: what happened, the likely "
    "cause, and the safest next step. Never suggest repeating work whose effects are unknown "
    "without checking them first."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    }
    for name, description in (
        ("get_run", "The work as its kind reports it now: status, owner liveness, progress."),
        ("get_incident_history", "The incident's history: opened, moved again, decided."),
        ("get_evidence", "Extra facts: exit status, failure detail, the tail of the log."),
    )
]


class ModelFailed(WatchkeeperError):
    """The endpoint could not give a diagnosis; the rules answer instead."""


def _tools(evidence: Evidence) -> dict[str, Callable[[], Any]]:
    return {
        "get_run": evidence.run_json,
        "get_incident_history": evidence.history_json,
        "get_evidence": evidence.facts_json,
    }


def _opening(evidence: Evidence) -> str:
    incident = evidence.incident
    opened = (
        f"Incident {incident.id}: {incident.key.kind} run {incident.key.run_id} "
        f"({incident.title!r}) was found {incident.key.condition}: {incident.reason}. "
        f"The incident is {incident.status.value} now"
    )
    if incident.resolution:
        opened += f" ({incident.resolution})"
    buttons = [label(a) for a in evidence.offered if a in DECIDING]
    # The model must not send people to a button the card no longer shows.
    offered = (
        f"The only buttons offered now are: {', '.join(buttons)}; recommend no other."
        if buttons
        else "No button can act on it now; recommend none."
    )
    return f"{opened}. Diagnose the work as get_run reports it now. {offered}"


def ask_model(config: DiagnoseConfig, evidence: Evidence) -> str:
    """Run the tool-calling conversation and return the model's final answer."""
    assert config.base_url is not None
    assert config.model is not None
    headers = {"Content-Type": "application/json"}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ModelFailed(f"the environment variable {config.api_key_env} is not set")
        headers["Authorization"] = f"Bearer {key}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _opening(evidence)},
    ]
    tools = _tools(evidence)
    url = config.base_url.rstrip("/") + "/chat/completions"
    with httpx.Client(timeout=config.timeout_s, headers=headers) as http:
        for _ in range(MAX_ROUNDS):
            message = _complete(http, url, config.model, messages)
            calls = message.get("tool_calls") or []
            if not calls:
                content = str(message.get("content") or "").strip()
                if not content:
                    raise ModelFailed("the model answered with no text")
                return content[:1500]
            messages.append(message)
            for call in calls:
                name = call.get("function", {}).get("name", "")
                tool = tools.get(name)
                result = tool() if tool else {"error": f"no tool named {name!r}"}
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.get("id", ""),
                        "content": json.dumps(result),
                    }
                )
    raise ModelFailed(f"no answer after {MAX_ROUNDS} rounds of tool calls")


def _complete(
    http: httpx.Client, url: str, model: str, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    body = {"model": model, "messages": messages, "tools": TOOLS, "tool_choice": "auto"}
    try:
        response = http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise ModelFailed(f"cannot reach {url}: {exc}") from exc
    if not response.is_success:
        raise ModelFailed(f"{url} answered HTTP {response.status_code}")
    try:
        message: dict[str, Any] = response.json()["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelFailed(f"{url} answered something that is not a chat completion") from exc
    return message
