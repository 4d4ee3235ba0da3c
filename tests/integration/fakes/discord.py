"""A local fake of Discord's HTTP API and a signer of interactions, for tests.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread) answering the
calls our channel makes, in Discord's wire format:

- ``POST /channels/{id}/messages``: creates a message. A ``nonce`` with
  ``enforce_nonce`` that the bot (the same author) used within the last few
  minutes returns the message already created, as Discord documents: "checked
  for uniqueness in the past few minutes. If another message was created by
  the same author with the same nonce, that message will be returned and no
  new message will be created."
- ``PATCH /channels/{id}/messages/{message id}``: edits content and components.
- ``POST /webhooks/{application id}/{interaction token}``: a follow-up.

Errors look like Discord's (``{"message": "...", "code": N}``; a 429 adds
``retry_after`` and ``global``). Every body we send is checked against the
``discord_typings`` TypedDicts by a small validator (TypedDicts do not check
anything at run time), and every message the fake answers with passes the
same check against ``MessageData``; problems land in ``invalid``.

``press``, ``command`` and ``ping`` build interactions that pass the same
check, sign them with a test Ed25519 key exactly as Discord does, and POST
them to our ``/webhooks/discord``. The server scaffolding, the rate limit
window and the verbs the shared chat scenarios use come from
:class:`~tests.integration.fakes.platform.FakePlatform`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Literal

import discord_typings
import httpx
from nacl.signing import SigningKey

from .platform import LOOPBACK_TLS, FakePlatform, serving
from .typeddicts import problems as problems  # the shape tests check with it too

TOKEN = "discord-test-bot-token.fake_1"
APPLICATION_ID = "1100000000000000001"
GUILD_ID = "1200000000000000001"
BOT_USER_ID = "1100000000000000001"
NONCE_WINDOW_S = 300.0
_snowflakes = itertools.count(1300000000000000001)


def snowflake() -> str:
    """A fresh id, Discord style (a decimal string)."""
    return str(next(_snowflakes))


# -- the fake ---------------------------------------------------------------------------------


@dataclass
class Stored:
    """One message, as the fake holds it."""

    id: str
    channel_id: str
    content: str
    components: list[dict[str, Any]]
    nonce: str | None
    created: float
    edits: int = 0
    #: The message this one replies to (``message_reference``), shown above it.
    reference: str | None = None

    @property
    def custom_ids(self) -> list[str]:
        """Every button's ``custom_id``, row by row."""
        return [c["custom_id"] for row in self.components for c in row.get("components", [])]

    @property
    def labels(self) -> list[str]:
        """Every button's label, row by row."""
        return [c["label"] for row in self.components for c in row.get("components", [])]

    @property
    def shown(self) -> str:
        """The text people read."""
        return self.content

    def as_dict(self) -> dict[str, Any]:
        """The message object Discord answers with."""
        body: dict[str, Any] = {
            "id": self.id,
            "channel_id": self.channel_id,
            "author": {
                "id": BOT_USER_ID,
                "username": "watchkeeper",
                "discriminator": "0",
                "global_name": None,
                "avatar": None,
                "bot": True,
            },
            "content": self.content,
            "timestamp": datetime.fromtimestamp(self.created, UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "components": self.components,
        }
        if self.nonce is not None:
            body["nonce"] = self.nonce
        if self.reference is not None:
            body["type"] = 19  # REPLY
            body["message_reference"] = {
                "message_id": self.reference,
                "channel_id": self.channel_id,
            }
        return body


@dataclass
class Followup:
    """One follow-up message to an interaction."""

    application_id: str
    token: str
    body: dict[str, Any]


@dataclass
class Call:
    """One request the fake received."""

    method: str
    path: str
    body: Any
    status: int = 200


@dataclass
class Signer:
    """The application's Ed25519 key pair; the public half goes into the test config."""

    key: SigningKey = field(default_factory=SigningKey.generate)

    @property
    def public_key(self) -> str:
        return bytes(self.key.verify_key).hex()

    def headers(self, body: bytes, timestamp: int) -> dict[str, str]:
        """``X-Signature-Ed25519`` over ``timestamp + body``, and the timestamp."""
        signature = self.key.sign(str(timestamp).encode() + body).signature.hex()
        return {
            "X-Signature-Ed25519": signature,
            "X-Signature-Timestamp": str(timestamp),
            "Content-Type": "application/json",
        }


#: Faults a test can queue for the next create calls: an error, a request held unanswered
#: and not carried out ("hang"), or carried out with its answer held until ``let_go()`` ("hold").
Fault = Literal["429", "429_global", "403", "404", "500", "hang", "hold"]


@dataclass
class FakeDiscord(FakePlatform):
    """State of the fake and the knobs tests turn."""

    NAME: ClassVar[str] = "discord"
    TITLE: ClassVar[str] = "Discord"
    CHAT: ClassVar[str] = "1400000000000000001"
    #: DEFERRED_UPDATE_MESSAGE: the card itself will be edited.
    ACK: ClassVar[tuple[int, Any]] = (200, {"type": 6})
    TEXT: ClassVar[str] = "content"
    PRIVATE: ClassVar[dict[str, Any]] = {"flags": 64}  # EPHEMERAL
    RUNS: ClassVar[dict[str, Any]] = {"type": 4}  # CHANNEL_MESSAGE_WITH_SOURCE
    MAX_TEXT: ClassVar[int] = 2000
    KEEPS_BUTTONS: ClassVar[bool] = False

    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, Stored] = field(default_factory=dict)
    followups: list[Followup] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    retry_after_s: float = 1.5
    signer: Signer = field(default_factory=Signer)
    #: Set once a create's answer is held (fault "hold").
    holding: threading.Event = field(default_factory=threading.Event)
    _let_go: threading.Event = field(default_factory=threading.Event)

    def hold_next(self) -> None:
        """The next create of a new message is carried out (the message exists), then its
        answer is held until :meth:`let_go`: the sender cannot tell whether it arrived. (A
        resend answered with a message made before passes.)"""
        with self.changed:
            self._let_go.clear()
            self.holding.clear()
            self.faults.append("hold")

    def let_go(self) -> None:
        """Answer every held create (a sender that died meanwhile gets nothing)."""
        self._let_go.set()

    def created_with(self, nonce: str) -> list[Stored]:
        """The messages created with ``nonce``: one, however often it was sent, once enforced."""
        with self.changed:
            return [m for m in self.messages.values() if m.nonce == nonce]

    def credentials(self) -> dict[str, Any]:
        """The bot token, application id and public key our ``[discord]`` table needs."""
        return {
            "bot_token": self.token,
            "application_id": APPLICATION_ID,
            "public_key": self.signer.public_key,
            "base_url": self.url,
        }

    def stored(self) -> list[Stored]:
        """Every message, in every channel."""
        return list(self.messages.values())

    def message(self, message_id: str) -> Stored:
        """The message with this snowflake."""
        return self.messages[message_id]

    def in_channel(self, channel: str) -> list[Stored]:
        """The messages of one channel, oldest first."""
        return [m for m in self.messages.values() if m.channel_id == channel]

    def followups_for(self, token: str) -> list[Followup]:
        """Follow-ups sent for one interaction token."""
        return [f for f in self.followups if f.token == token]

    def press(
        self, server_url: str, card: Any, label: str, user_id: str, username: str, timestamp: int
    ) -> tuple[httpx.Response, dict[str, Any]]:
        """A signed component interaction on ``card``'s button ``label``."""
        return press(server_url, self.signer, card, label, user_id, username, timestamp)

    def repeat(self, server_url: str, payload: dict[str, Any], timestamp: int) -> httpx.Response:
        """The same interaction, signed again."""
        return post_interaction(server_url, self.signer, payload, timestamp)

    def replies_to(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """The follow-ups sent with the interaction's token."""
        return [f.body for f in self.followups_for(payload["token"])]

    def runs(
        self, server_url: str, user_id: str, username: str, everything: bool, timestamp: int
    ) -> Any:
        """``/runs`` as an application command interaction, answered in the response."""
        asked = command_interaction(user_id, username, self.CHAT, all_=everything)
        return post_interaction(server_url, self.signer, asked, timestamp).json()

    def runs_text(self, answer: dict[str, Any]) -> str:
        """The interaction response's message content."""
        return str(answer["data"]["content"])

    @staticmethod
    def answer(response: httpx.Response) -> tuple[int, Any]:
        """Status and JSON: an interaction response is a JSON object."""
        return response.status_code, response.json()


class _Error(Exception):
    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        super().__init__(body.get("message"))
        self.status = status
        self.body = body
        self.headers = headers or {}


_CREATE = re.compile(r"^/channels/(\d+)/messages$")
_EDIT = re.compile(r"^/channels/(\d+)/messages/(\d+)$")
_FOLLOWUP = re.compile(r"^/webhooks/(\d+)/([\w.-]+)$")


def _check_components(rows: Any, invalid: list[str], path: str) -> None:
    found = problems(rows, list[discord_typings.ActionRowData], path)
    if isinstance(rows, list):
        for i, row in enumerate(rows):
            cells = row.get("components", []) if isinstance(row, dict) else []
            if not 1 <= len(cells) <= 5:
                found.append(f"{path}[{i}]: an action row holds 1 to 5 buttons, not {len(cells)}")
            for j, cell in enumerate(cells):
                found += problems(cell, discord_typings.ButtonComponentData, f"{path}[{i}][{j}]")
                if len(str(cell.get("custom_id", ""))) > 100:
                    found.append(f"{path}[{i}][{j}].custom_id: longer than 100")
                if len(str(cell.get("label", ""))) > 80:
                    found.append(f"{path}[{i}][{j}].label: longer than 80")
        if len(rows) > 5:
            found.append(f"{path}: at most 5 action rows")
    invalid.extend(found)


def _check_content(body: dict[str, Any], invalid: list[str]) -> None:
    content = body.get("content")
    if not isinstance(content, str) or not 1 <= len(content) <= 2000:
        invalid.append(f"$.content: a string of 1 to 2000 characters, got {content!r}")


def _create(fake: FakeDiscord, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    known = {"content", "components", "nonce", "enforce_nonce", "message_reference"}
    fake.invalid += [f"$.{k}: not a create-message field we expect" for k in body if k not in known]
    _check_content(body, fake.invalid)
    _check_components(body.get("components", []), fake.invalid, "$.components")
    nonce = body.get("nonce")
    if nonce is not None and (not isinstance(nonce, str | int) or len(str(nonce)) > 25):
        fake.invalid.append(f"$.nonce: at most 25 characters, got {nonce!r}")
    now = time.monotonic()
    if nonce is not None and body.get("enforce_nonce") is True:
        for stored in fake.messages.values():  # the same author: the bot, in any channel
            if stored.nonce == str(nonce) and now - stored.created < NONCE_WINDOW_S:
                return stored.as_dict()
    wait = fake._take_slot(channel_id)
    if wait is not None:
        raise _Error(
            429,
            {"message": "You are being rate limited.", "retry_after": wait, "global": False},
            {"Retry-After": str(int(wait) + 1)},
        )
    stored = Stored(
        snowflake(),
        channel_id,
        str(body.get("content", "")),
        list(body.get("components") or []),
        None if nonce is None else str(nonce),
        now,
        reference=_reference(fake, channel_id, body),
    )
    fake.messages[stored.id] = stored
    return _answer(fake, stored)


def _reference(fake: FakeDiscord, channel_id: str, body: dict[str, Any]) -> str | None:
    """The message a reply refers to; a missing one is refused unless ``fail_if_not_exists``
    is false, when the message goes out as no reply, as Discord does."""
    reference = body.get("message_reference")
    if reference is None:
        return None
    fake.invalid += problems(reference, discord_typings.MessageReferenceData, "$.message_reference")
    wanted = str(reference.get("message_id")) if isinstance(reference, dict) else ""
    found = fake.messages.get(wanted)
    if found is not None and found.channel_id == channel_id:
        return wanted
    if isinstance(reference, dict) and reference.get("fail_if_not_exists") is False:
        return None
    raise _Error(400, {"message": "Invalid Form Body", "code": 50035})


def _answer(fake: FakeDiscord, stored: Stored) -> dict[str, Any]:
    """The message object, itself checked: the fake must speak Discord's format too."""
    answer = stored.as_dict()
    fake.invalid += problems(answer, discord_typings.MessageData, "answer")
    return answer


def _edit(fake: FakeDiscord, channel_id: str, message_id: str, body: dict[str, Any]) -> Any:
    fake.invalid += [
        f"$.{k}: not an edit field we expect" for k in body if k not in {"content", "components"}
    ]
    _check_content(body, fake.invalid)
    _check_components(body.get("components", []), fake.invalid, "$.components")
    stored = fake.messages.get(message_id)
    if stored is None or stored.channel_id != channel_id:
        raise _Error(404, {"message": "Unknown Message", "code": 10008})
    stored.content = str(body.get("content", stored.content))
    stored.components = list(body.get("components", stored.components))
    stored.edits += 1
    return _answer(fake, stored)


def _followup(fake: FakeDiscord, application_id: str, token: str, body: dict[str, Any]) -> Any:
    fake.invalid += problems(body, discord_typings.InteractionMessageCallbackData, "$")
    fake.followups.append(Followup(application_id, token, body))
    stored = Stored(snowflake(), "0", str(body.get("content", "")), [], None, time.monotonic())
    return stored.as_dict()


def _fault(fake: FakeDiscord) -> bool:
    """Raise the next queued fault; True when it is "hold" (carry out, then hold the answer)."""
    if not fake.faults:
        return False
    fault = fake.faults.pop(0)
    if fault == "hold":
        return True
    if fault == "hang":
        fake._hang()
    if fault in {"429", "429_global"}:
        is_global = fault == "429_global"
        raise _Error(
            429,
            {
                "message": "You are being rate limited.",
                "retry_after": fake.retry_after_s,
                "global": is_global,
            },
            {
                "Retry-After": str(int(fake.retry_after_s) + 1),
                "X-RateLimit-Global": str(is_global).lower(),
            },
        )
    if fault == "403":
        raise _Error(403, {"message": "Missing Access", "code": 50001})
    if fault == "404":
        raise _Error(404, {"message": "Unknown Channel", "code": 10003})
    raise _Error(500, {"message": "500: Internal Server Error", "code": 0})


@contextmanager
def fake_discord() -> Iterator[FakeDiscord]:
    """Start the fake on a free port; stop it (releasing any hung request) on exit."""
    fake = FakeDiscord()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?")[0].removeprefix("/api/v10")
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = None
            try:
                status, answer, headers = 200, self._route(path, body), {}
            except _Error as exc:
                status, answer, headers = exc.status, exc.body, exc.headers
            except ConnectionAbortedError:
                self.close_connection = True
                return
            with fake.changed:
                fake.calls.append(Call(self.command, path, body, status))
                fake.changed.notify_all()
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the sender is gone (a held answer outlived it)
                self.close_connection = True

        def _route(self, path: str, body: Any) -> Any:
            if not isinstance(body, dict):
                raise _Error(400, {"message": "400: Bad Request", "code": 50109})
            followup = _FOLLOWUP.match(path)
            if followup and self.command == "POST":
                with fake.changed:
                    return _followup(fake, followup[1], followup[2], body)
            if self.headers.get("Authorization") != f"Bot {fake.token}":
                raise _Error(401, {"message": "401: Unauthorized", "code": 0})
            if path == "/users/@me" and self.command == "GET":
                return _user(BOT_USER_ID, "watchkeeper") | {"bot": True}
            create, edit = _CREATE.match(path), _EDIT.match(path)
            if create and self.command == "POST":
                hold = _fault(fake)
                with fake.changed:
                    before = len(fake.messages)
                    created = _create(fake, create[1], body)
                    if hold and len(fake.messages) == before:  # a resend: hold the next one
                        fake.faults.insert(0, "hold")
                        hold = False
                if hold:
                    fake.holding.set()
                    fake._let_go.wait(60)
                return created
            if edit and self.command == "PATCH":
                with fake.changed:
                    return _edit(fake, edit[1], edit[2], body)
            raise _Error(404, {"message": "404: Not Found", "code": 0})

        do_GET = do_POST = do_PATCH = _serve  # noqa: N815

        def handle(self) -> None:
            # A sender killed with a kept-alive connection open resets it: nothing to answer.
            with contextlib.suppress(ConnectionResetError):
                super().handle()

        def log_message(self, *args: object) -> None:
            return

    with serving(Handler, fake.released) as fake.url:
        try:
            yield fake
        finally:
            fake.let_go()


# -- interactions, signed as Discord signs them -----------------------------------------------


def _user(user_id: str, username: str) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": username,
        "discriminator": "0",
        "global_name": username,
        "avatar": None,
    }


def _guild_context(user_id: str, username: str, channel_id: str) -> dict[str, Any]:
    return {
        "id": snowflake(),
        "application_id": APPLICATION_ID,
        "guild_id": GUILD_ID,
        "guild": {
            "id": GUILD_ID,
            "name": "ops",
            "icon": None,
            "owner": False,
            "permissions": "0",
            "features": [],
        },
        "channel": {"id": channel_id, "name": "alerts", "type": 0},
        "channel_id": channel_id,
        "member": {
            "user": _user(user_id, username),
            "roles": [],
            "joined_at": "2025-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
        },
        "token": f"itok_{snowflake()}",
        "version": 1,
        "app_permissions": "0",
        "locale": "en-US",
        "guild_locale": "en-US",
        "authorizing_integration_owners": {"0": GUILD_ID},
        "context": 0,
    }


def component_interaction(
    custom_id: str, user_id: str, username: str, channel_id: str, message: dict[str, Any]
) -> dict[str, Any]:
    """A MESSAGE_COMPONENT interaction: someone pressed the button ``custom_id`` in a server."""
    interaction = {
        **_guild_context(user_id, username, channel_id),
        "type": 3,
        "data": {"custom_id": custom_id, "component_type": 2},
        "message": message,
    }
    found = problems(interaction, discord_typings.ComponentInteractionData)
    assert not found, found
    return interaction


def command_interaction(
    user_id: str, username: str, channel_id: str, *, all_: bool = False
) -> dict[str, Any]:
    """An APPLICATION_COMMAND interaction: ``/runs`` (with ``all: true`` when asked)."""
    data: dict[str, Any] = {"id": snowflake(), "name": "runs", "type": 1}
    if all_:
        data["options"] = [{"name": "all", "type": 5, "value": True}]
    interaction = {**_guild_context(user_id, username, channel_id), "type": 2, "data": data}
    found = problems(interaction, discord_typings.ApplicationCommandInteractionData)
    assert not found, found
    return interaction


def ping_interaction() -> dict[str, Any]:
    """The PING Discord sends when the endpoint URL is saved."""
    return {
        "id": snowflake(),
        "application_id": APPLICATION_ID,
        "type": 1,
        "user": _user("1", "discord"),
        "version": 1,
    }


def post_interaction(
    server_url: str,
    signer: Signer,
    interaction: dict[str, Any],
    timestamp: int,
    *,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Sign ``interaction`` as Discord does and POST it to our ``/webhooks/discord``."""
    body = json.dumps(interaction).encode()
    sent = signer.headers(body, timestamp) if headers is None else headers
    with httpx.Client(timeout=15, verify=LOOPBACK_TLS) as client:
        return client.post(f"{server_url}/webhooks/discord", content=body, headers=sent)


def press(
    server_url: str,
    signer: Signer,
    stored: Stored,
    button: str,
    user_id: str,
    username: str,
    timestamp: int,
) -> tuple[httpx.Response, dict[str, Any]]:
    """Press the button whose label is ``button`` on the message ``stored``, as ``user_id``."""
    custom_id = next(
        c["custom_id"]
        for row in stored.components
        for c in row["components"]
        if c["label"] == button
    )
    interaction = component_interaction(
        custom_id, user_id, username, stored.channel_id, stored.as_dict()
    )
    return post_interaction(server_url, signer, interaction, timestamp), interaction
