"""A local fake of Slack's Web API and a signer of Slack requests, for tests.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread) answering, in
Slack's wire format:

- ``POST /chat.postMessage`` and ``POST /chat.update`` with a bearer token:
  ``{"ok": true, "channel": ..., "ts": ..., "message": {...}}``, or HTTP 200
  with ``{"ok": false, "error": "channel_not_found"}`` for refusals, HTTP 429
  with ``Retry-After`` (and ``error: ratelimited``) past a per-channel limit.
- ``POST /actions/...``: a press's ``response_url``; what is posted there is
  kept in ``responses``.

Every ``blocks`` list we send is parsed with ``slack_sdk.models.blocks`` and
serialised again (``to_dict`` validates each block and element against
Slack's limits); anything that does not survive is refused with
``invalid_blocks`` and recorded in ``invalid``.

``press`` builds a real ``block_actions`` payload, signs it exactly as Slack
does (``v0=`` + HMAC-SHA256 of ``v0:{timestamp}:{body}``) and POSTs it
form-encoded to our ``/webhooks/slack``; ``command`` does the same for a
slash command. The server scaffolding, the rate limit window and the verbs the
shared chat scenarios use come from
:class:`~tests.integration.fakes.platform.FakePlatform`.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Literal
from urllib.parse import urlencode

import httpx
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from .platform import LOOPBACK_TLS, FakePlatform, serving

TOKEN = "xoxb-0000-test-token"
SIGNING_SECRET = "8f742231b10e8888abcd99aaabbb85a5"  # Slack signing secrets are hex
TEAM_ID = "T0001"
BOT_USER = "U0BOT"
_counter = itertools.count(1)


def next_ts() -> str:
    """A fresh message timestamp, Slack style."""
    n = next(_counter)
    return f"{1767614400 + n}.{n:06d}"


def block_problems(blocks: Any) -> list[str]:
    """Why Slack would refuse ``blocks`` (empty: it would not)."""
    if not isinstance(blocks, list):
        return [f"blocks: expected a list, got {type(blocks).__name__}"]
    found: list[str] = []
    for i, raw in enumerate(blocks):
        try:
            parsed = Block.parse(raw)
            if parsed is None:
                found.append(f"blocks[{i}]: not a block")
                continue
            parsed.validate_json()
            if parsed.to_dict() != raw:
                found.append(f"blocks[{i}]: does not survive a parse: {raw!r}")
        except (SlackObjectFormationError, KeyError, TypeError, ValueError) as exc:
            found.append(f"blocks[{i}]: {exc}")
    return found


@dataclass
class Posted:
    """One message in a conversation, as the fake holds it."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    edits: int = 0

    @property
    def buttons(self) -> list[dict[str, Any]]:
        """Every button of the message's actions blocks."""
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]

    @property
    def shown(self) -> str:
        """The section text people read."""
        return "\n".join(b["text"]["text"] for b in self.blocks if b.get("type") == "section")

    @property
    def labels(self) -> list[str]:
        """Every button's label, in order."""
        return [b["text"]["text"] for b in self.buttons]

    def as_dict(self) -> dict[str, Any]:
        """The message object Slack answers with."""
        body: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": "B0BOT",
            "app_id": "A0APP",
            "text": self.text,
            "ts": self.ts,
            "team": TEAM_ID,
            "blocks": self.blocks,
        }
        if self.thread_ts:
            body["thread_ts"] = self.thread_ts
        return body


@dataclass
class Call:
    """One request the fake received."""

    path: str
    body: Any
    status: int
    error: str | None = None


#: Faults a test can queue for the next chat.postMessage calls.
Fault = Literal["channel_not_found", "429", "ratelimited", "hang", "500"]


@dataclass
class FakeSlack(FakePlatform):
    """State of the fake and the knobs tests turn."""

    NAME: ClassVar[str] = "slack"
    TITLE: ClassVar[str] = "Slack"
    CHAT: ClassVar[str] = "C0ALERTS"
    #: An empty 200: the card is edited through the Web API, nothing replaces it here.
    ACK: ClassVar[tuple[int, Any]] = (200, b"")
    TEXT: ClassVar[str] = "text"
    PRIVATE: ClassVar[dict[str, Any]] = {"response_type": "ephemeral", "replace_original": False}
    RUNS: ClassVar[dict[str, Any]] = {"response_type": "ephemeral"}
    MAX_TEXT: ClassVar[int] = 40000
    KEEPS_BUTTONS: ClassVar[bool] = True

    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    messages: list[Posted] = field(default_factory=list)
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)
    retry_after_s: int = 3
    _urls: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def credentials(self) -> dict[str, Any]:
        """The bot token and signing secret our ``[slack]`` table needs."""
        return {"bot_token": self.token, "signing_secret": SIGNING_SECRET, "base_url": self.url}

    def stored(self) -> list[Posted]:
        """Every message, in every conversation."""
        return list(self.messages)

    def message(self, message_id: str) -> Posted:
        """The message with this ``ts``."""
        return next(m for m in self.messages if m.ts == message_id)

    def in_channel(self, channel: str) -> list[Posted]:
        """The messages of one conversation, oldest first."""
        return [m for m in self.messages if m.channel == channel]

    def response_url(self) -> str:
        """A fresh ``response_url`` for one press."""
        return f"{self.url}/actions/{TEAM_ID}/{next(self._urls)}/r3sp0nse"

    def press(
        self, server_url: str, card: Any, label: str, user_id: str, username: str, timestamp: int
    ) -> tuple[httpx.Response, dict[str, Any]]:
        """A signed ``block_actions`` payload for ``card``'s button ``label``."""
        return press(server_url, self, card, label, user_id, username, timestamp)

    def repeat(self, server_url: str, payload: dict[str, Any], timestamp: int) -> httpx.Response:
        """The same payload, signed again."""
        return post_form(server_url, "/webhooks/slack", {"payload": json.dumps(payload)}, timestamp)

    def replies_to(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """What was posted to the press's ``response_url``."""
        return self.responses.get(payload["response_url"].removeprefix(self.url), [])

    def runs(
        self, server_url: str, user_id: str, username: str, everything: bool, timestamp: int
    ) -> Any:
        """``/runs`` as a slash command, answered in the HTTP response."""
        return command(server_url, "all" if everything else "", user_id, timestamp, username).json()

    def runs_text(self, answer: dict[str, Any]) -> str:
        """The response's text."""
        return str(answer["text"])

    @staticmethod
    def answer(response: httpx.Response) -> tuple[int, Any]:
        """Status and raw body: Slack wants nothing in it."""
        return response.status_code, response.content


class _Refusal(Exception):
    def __init__(self, error: str, status: int = 200, headers: dict[str, str] | None = None):
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = headers or {}


def _check_body(fake: FakeSlack, body: dict[str, Any], allowed: set[str]) -> None:
    unknown = [f"{k}: not an argument we expect" for k in body if k not in allowed]
    found = unknown + block_problems(body.get("blocks", []))
    if not isinstance(body.get("text"), str) or not body.get("text"):
        found.append("text: the fallback text is required")
    if found:
        fake.invalid.extend(found)
        raise _Refusal("invalid_blocks")


def _post(fake: FakeSlack, body: dict[str, Any]) -> dict[str, Any]:
    _check_body(fake, body, {"channel", "text", "blocks", "thread_ts"})
    channel = str(body.get("channel") or "")
    if not channel or channel in fake.missing:
        raise _Refusal("channel_not_found")
    if fake._take_slot(channel) is not None:
        # Slack's Retry-After is a whole number of seconds of its own choosing.
        raise _Refusal("ratelimited", 429, {"Retry-After": str(fake.retry_after_s)})
    posted = Posted(
        channel, next_ts(), body["text"], list(body.get("blocks", [])), body.get("thread_ts")
    )
    fake.messages.append(posted)
    return {"ok": True, "channel": channel, "ts": posted.ts, "message": posted.as_dict()}


def _update(fake: FakeSlack, body: dict[str, Any]) -> dict[str, Any]:
    _check_body(fake, body, {"channel", "ts", "text", "blocks"})
    found = [
        m for m in fake.messages if m.channel == body.get("channel") and m.ts == body.get("ts")
    ]
    if not found:
        raise _Refusal("message_not_found")
    posted = found[0]
    posted.text, posted.blocks = body["text"], list(body.get("blocks", []))
    posted.edits += 1
    return {
        "ok": True,
        "channel": posted.channel,
        "ts": posted.ts,
        "text": posted.text,
        "message": posted.as_dict(),
    }


def _respond(fake: FakeSlack, path: str, body: dict[str, Any]) -> dict[str, Any]:
    allowed = {"response_type", "replace_original", "delete_original", "text", "blocks"}
    found = [f"response_url {k}: not a field we expect" for k in body if k not in allowed]
    if body.get("response_type") not in {"ephemeral", "in_channel"}:
        found.append(f"response_url response_type: {body.get('response_type')!r}")
    if not isinstance(body.get("text"), str):
        found.append("response_url text: required")
    fake.invalid.extend(found)
    fake.responses.setdefault(path, []).append(body)
    return {"ok": True}


def _fault(fake: FakeSlack) -> None:
    if not fake.faults:
        return
    fault = fake.faults.pop(0)
    if fault == "hang":
        fake._hang()
    if fault == "429":
        raise _Refusal("ratelimited", 429, {"Retry-After": str(fake.retry_after_s)})
    if fault == "500":
        raise _Refusal("internal_error", 500)
    raise _Refusal(fault)


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    """Start the fake on a free port; stop it (releasing any hung request) on exit."""
    fake = FakeSlack()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = None
            status, headers = 200, {}
            try:
                answer = self._route(path, body)
            except _Refusal as exc:
                status, headers = exc.status, exc.headers
                answer = {"ok": False, "error": exc.error}
            except ConnectionAbortedError:
                self.close_connection = True
                return
            with fake.changed:
                fake.calls.append(Call(path, body, status, answer.get("error")))
                fake.changed.notify_all()
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _route(self, path: str, body: Any) -> dict[str, Any]:
            if not isinstance(body, dict):
                raise _Refusal("invalid_json")
            if path.startswith("/actions/"):
                with fake.changed:
                    return _respond(fake, path, body)
            if self.headers.get("Authorization") != f"Bearer {fake.token}":
                raise _Refusal(
                    "not_authed" if "Authorization" not in self.headers else "invalid_auth"
                )
            if path == "/auth.test":
                return {
                    "ok": True,
                    "url": "https://fake.slack.com/",
                    "team": "Fake",
                    "user": "watchkeeper",
                    "team_id": "T0FAKE",
                    "user_id": "U0BOT",
                }
            if path == "/chat.postMessage":
                _fault(fake)
                with fake.changed:
                    return _post(fake, body)
            if path == "/chat.update":
                with fake.changed:
                    return _update(fake, body)
            raise _Refusal("unknown_method", 404)

        def log_message(self, *args: object) -> None:
            return

    with serving(Handler, fake.released) as fake.url:
        yield fake


# -- requests from Slack, signed as Slack signs them ------------------------------------------


def signature_headers(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """``X-Slack-Signature``: ``v0=`` + HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def post_form(
    server_url: str,
    path: str,
    fields: dict[str, str],
    timestamp: int,
    *,
    secret: str = SIGNING_SECRET,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``fields`` form-encoded and signed to our ``path``."""
    body = urlencode(fields).encode()
    sent = signature_headers(secret, body, timestamp) if headers is None else headers
    with httpx.Client(timeout=15, verify=LOOPBACK_TLS) as client:
        return client.post(f"{server_url}{path}", content=body, headers=sent)


def block_actions(
    posted: Posted, label: str, user_id: str, username: str, response_url: str
) -> dict[str, Any]:
    """The ``block_actions`` payload of a press on the button ``label`` of ``posted``."""
    button = next(b for b in posted.buttons if b["text"]["text"] == label)
    actions_block = next(b for b in posted.blocks if b.get("type") == "actions")
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": username, "name": username, "team_id": TEAM_ID},
        "api_app_id": "A0APP",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": posted.ts,
            "channel_id": posted.channel,
            "is_ephemeral": False,
        },
        "trigger_id": f"{next(_counter)}.1.abc",
        "team": {"id": TEAM_ID, "domain": "ops"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": posted.channel, "name": "alerts"},
        "message": posted.as_dict(),
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": button["action_id"],
                "block_id": actions_block.get("block_id", "b1"),
                "text": button["text"],
                "value": button.get("value", ""),
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def press(
    server_url: str,
    fake: FakeSlack,
    posted: Posted,
    label: str,
    user_id: str,
    username: str,
    timestamp: int,
) -> tuple[httpx.Response, dict[str, Any]]:
    """Press ``label`` on ``posted`` as ``user_id``; the answer and the payload sent."""
    payload = block_actions(posted, label, user_id, username, fake.response_url())
    fields = {"payload": json.dumps(payload)}
    return post_form(server_url, "/webhooks/slack", fields, timestamp), payload


def command(
    server_url: str, text: str, user_id: str, timestamp: int, username: str = "someone"
) -> httpx.Response:
    """The ``/runs`` slash command as Slack sends it."""
    fields = {
        "token": "legacy-verification-token",
        "team_id": TEAM_ID,
        "team_domain": "ops",
        "channel_id": "C0ALERTS",
        "channel_name": "alerts",
        "user_id": user_id,
        "user_name": username,
        "command": "/runs",
        "text": text,
        "api_app_id": "A0APP",
        "response_url": "https://hooks.slack.invalid/commands/1/2/3",
        "trigger_id": "1.2.3",
    }
    return post_form(server_url, "/webhooks/slack/commands", fields, timestamp)
