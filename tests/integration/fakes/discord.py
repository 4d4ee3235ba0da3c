"""A local fake of Discord's HTTP API and a signer of interactions, for tests.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread) answering the
calls our channel makes, in Discord's wire format:

- ``POST /channels/{id}/messages``: creates a message. A ``nonce`` with
  ``enforce_nonce`` that this channel saw within the last few minutes returns
  the message already created, as Discord does: no duplicate.
- ``PATCH /channels/{id}/messages/{message id}``: edits content and components.
- ``POST /webhooks/{application id}/{interaction token}``: a follow-up.

Errors look like Discord's (``{"message": "...", "code": N}``; a 429 adds
``retry_after`` and ``global``). Every body we send is checked against the
``discord_typings`` TypedDicts by a small validator (TypedDicts do not check
anything at run time), and every message the fake answers with passes the
same check against ``MessageData``; problems land in ``invalid``.

``press``, ``command`` and ``ping`` build interactions that pass the same
check, sign them with a test Ed25519 key exactly as Discord does, and POST
them to our ``/webhooks/discord``.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import ssl
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

import discord_typings
import httpx
from nacl.signing import SigningKey
from typing_extensions import get_type_hints, is_typeddict

TOKEN = "discord-test-bot-token.fake_1"
APPLICATION_ID = "1100000000000000001"
GUILD_ID = "1200000000000000001"
BOT_USER_ID = "1100000000000000001"
NONCE_WINDOW_S = 300.0
_snowflakes = itertools.count(1300000000000000001)
#: One TLS context for every test client: building one per client costs ~0.1 s (the fakes
#: speak plain HTTP, so it is never used for a handshake).
LOOPBACK_TLS = ssl.create_default_context()


def snowflake() -> str:
    """A fresh id, Discord style (a decimal string)."""
    return str(next(_snowflakes))


# -- a validator for TypedDicts ---------------------------------------------------------------


def problems(value: Any, expected: Any, path: str = "$") -> list[str]:
    """Why ``value`` is not an instance of the type ``expected`` (empty: it is)."""
    if expected is Any or expected is object:
        return []
    origin = get_origin(expected)
    if is_typeddict(origin):
        return problems(value, origin, path)
    if is_typeddict(expected):
        return _typed_dict(value, expected, path)
    if origin is Union or origin is types.UnionType:
        found = [problems(value, option, path) for option in get_args(expected)]
        if any(not f for f in found):
            return []
        return min(found, key=len)
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in get_args(expected)):
            return []
        return [f"{path}: {value!r} is not one of {get_args(expected)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        (item,) = get_args(expected) or (Any,)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        return []
    return _scalar(value, expected, path)


def _typed_dict(value: Any, expected: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({expected.__name__}), got {type(value).__name__}"]
    hints = _hints(expected)
    found = [f"{path}.{k}: required by {expected.__name__}" for k in
             sorted(_required(expected)) if k not in value]  # fmt: skip
    found += [f"{path}.{k}: not a field of {expected.__name__}" for k in value if k not in hints]
    for key, item in value.items():
        if key in hints:
            found += problems(item, hints[key], f"{path}.{key}")
    return found


@functools.cache
def _hints(expected: Any) -> dict[str, Any]:
    return get_type_hints(expected)


@functools.cache
def _required(expected: Any) -> frozenset[str]:
    """Required keys, read from the annotations (``__required_keys__`` misses some inherited
    ``NotRequired`` fields when the annotations are strings)."""
    total = getattr(expected, "__total__", True)
    required = set()
    for key, hint in get_type_hints(expected, include_extras=True).items():
        marker = get_origin(hint)
        if marker is NotRequired or (not total and marker is not Required):
            continue
        required.add(key)
    return frozenset(required)


def _scalar(value: Any, expected: Any, path: str) -> list[str]:
    if expected is type(None) or expected is None:
        ok = value is None
    elif expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(expected, type):
        ok = isinstance(value, expected)
    else:
        ok = True  # a TypeVar or something this small validator does not model
    return [] if ok else [f"{path}: {value!r} is not {getattr(expected, '__name__', expected)}"]


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

    @property
    def custom_ids(self) -> list[str]:
        """Every button's ``custom_id``, row by row."""
        return [c["custom_id"] for row in self.components for c in row.get("components", [])]

    def as_json(self) -> dict[str, Any]:
        """The message object Discord answers with."""
        body: dict[str, Any] = {
            "id": self.id,
            "channel_id": self.channel_id,
            "author": {
                "id": BOT_USER_ID, "username": "watchkeeper", "discriminator": "0",
                "global_name": None, "avatar": None, "bot": True,
            },
            "content": self.content,
            "timestamp": datetime.fromtimestamp(self.created, UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": False, "type": 0,
            "components": self.components,
        }  # fmt: skip
        if self.nonce is not None:
            body["nonce"] = self.nonce
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


#: Faults a test can queue for the next create calls.
Fault = Literal["429", "429_global", "403", "404", "500", "hang"]


@dataclass
class FakeDiscord:
    """State of the fake and the knobs tests turn."""

    url: str = ""
    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    messages: dict[str, Stored] = field(default_factory=dict)
    followups: list[Followup] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    retry_after_s: float = 1.5
    #: Creates allowed per channel within ``window_s`` before 429s (``None``: unlimited).
    per_channel_limit: int | None = 5
    window_s: float = 5.0
    released: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)
    _posted: dict[str, list[float]] = field(default_factory=dict)

    def in_channel(self, channel_id: str) -> list[Stored]:
        """The messages of one channel, oldest first."""
        return [m for m in self.messages.values() if m.channel_id == channel_id]

    def wait_for(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        """Block until ``check()`` holds (checked whenever a request arrives)."""
        with self.changed:
            if not self.changed.wait_for(check, timeout):
                raise AssertionError("the fake Discord did not see what the test waited for")

    def followups_for(self, token: str) -> list[Followup]:
        """Follow-ups sent for one interaction token."""
        return [f for f in self.followups if f.token == token]


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
    known = {"content", "components", "nonce", "enforce_nonce"}
    fake.invalid += [f"$.{k}: not a create-message field we expect" for k in body if k not in known]
    _check_content(body, fake.invalid)
    _check_components(body.get("components", []), fake.invalid, "$.components")
    nonce = body.get("nonce")
    if nonce is not None and (not isinstance(nonce, str | int) or len(str(nonce)) > 25):
        fake.invalid.append(f"$.nonce: at most 25 characters, got {nonce!r}")
    now = time.monotonic()
    if nonce is not None and body.get("enforce_nonce") is True:
        for stored in fake.in_channel(channel_id):
            if stored.nonce == str(nonce) and now - stored.created < NONCE_WINDOW_S:
                return stored.as_json()
    recent = [t for t in fake._posted.get(channel_id, []) if now - t < fake.window_s]
    if fake.per_channel_limit is not None and len(recent) >= fake.per_channel_limit:
        wait = round(fake.window_s - (now - recent[0]), 3)
        raise _Error(429, {"message": "You are being rate limited.", "retry_after": wait,
                           "global": False}, {"Retry-After": str(int(wait) + 1)})  # fmt: skip
    fake._posted[channel_id] = [*recent, now]
    stored = Stored(snowflake(), channel_id, str(body.get("content", "")),
                    list(body.get("components") or []), None if nonce is None else str(nonce),
                    now)  # fmt: skip
    fake.messages[stored.id] = stored
    return _answer(fake, stored)


def _answer(fake: FakeDiscord, stored: Stored) -> dict[str, Any]:
    """The message object, itself checked: the fake must speak Discord's format too."""
    answer = stored.as_json()
    fake.invalid += problems(answer, discord_typings.MessageData, "answer")
    return answer


def _edit(fake: FakeDiscord, channel_id: str, message_id: str, body: dict[str, Any]) -> Any:
    fake.invalid += [f"$.{k}: not an edit field we expect" for k in body
                     if k not in {"content", "components"}]  # fmt: skip
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
    return stored.as_json()


def _fault(fake: FakeDiscord) -> None:
    if not fake.faults:
        return
    fault = fake.faults.pop(0)
    if fault == "hang":
        fake.released.wait(30)
        raise ConnectionAbortedError
    if fault in {"429", "429_global"}:
        is_global = fault == "429_global"
        raise _Error(429, {"message": "You are being rate limited.",
                           "retry_after": fake.retry_after_s, "global": is_global},
                     {"Retry-After": str(int(fake.retry_after_s) + 1),
                      "X-RateLimit-Global": str(is_global).lower()})  # fmt: skip
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
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _route(self, path: str, body: Any) -> Any:
            if not isinstance(body, dict):
                raise _Error(400, {"message": "400: Bad Request", "code": 50109})
            followup = _FOLLOWUP.match(path)
            if followup and self.command == "POST":
                with fake.changed:
                    return _followup(fake, followup[1], followup[2], body)
            if self.headers.get("Authorization") != f"Bot {fake.token}":
                raise _Error(401, {"message": "401: Unauthorized", "code": 0})
            create, edit = _CREATE.match(path), _EDIT.match(path)
            if create and self.command == "POST":
                _fault(fake)
                with fake.changed:
                    return _create(fake, create[1], body)
            if edit and self.command == "PATCH":
                with fake.changed:
                    return _edit(fake, edit[1], edit[2], body)
            raise _Error(404, {"message": "404: Not Found", "code": 0})

        do_POST = do_PATCH = _serve  # noqa: N815

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# -- interactions, signed as Discord signs them -----------------------------------------------


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


def _user(user_id: str, username: str) -> dict[str, Any]:
    return {"id": user_id, "username": username, "discriminator": "0", "global_name": username,
            "avatar": None}  # fmt: skip


def _guild_context(user_id: str, username: str, channel_id: str) -> dict[str, Any]:
    return {
        "id": snowflake(), "application_id": APPLICATION_ID, "guild_id": GUILD_ID,
        "guild": {"id": GUILD_ID, "name": "ops", "icon": None, "owner": False,
                  "permissions": "0", "features": []},
        "channel": {"id": channel_id, "name": "alerts", "type": 0},
        "channel_id": channel_id,
        "member": {"user": _user(user_id, username), "roles": [], "joined_at":
                   "2025-01-01T00:00:00+00:00", "deaf": False, "mute": False, "flags": 0},
        "token": f"itok_{snowflake()}", "version": 1, "app_permissions": "0",
        "locale": "en-US", "guild_locale": "en-US",
        "authorizing_integration_owners": {"0": GUILD_ID}, "context": 0,
    }  # fmt: skip


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
    return {"id": snowflake(), "application_id": APPLICATION_ID, "type": 1,
            "user": _user("1", "discord"), "version": 1}  # fmt: skip


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
        custom_id, user_id, username, stored.channel_id, stored.as_json()
    )
    return post_interaction(server_url, signer, interaction, timestamp), interaction


# -- the work's own service, whose actions can be held open -----------------------------------


@dataclass
class ActionService:
    """The kind's own action endpoint (shared by the chat platform tests).

    With ``hold`` set, every call waits until ``release`` is set, so a test can
    show that a press is answered while the action it started is still running.
    """

    url: str = ""
    paths: list[str] = field(default_factory=list)
    hold: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        """Block until ``check()`` holds (checked whenever a call ends)."""
        with self.changed:
            if not self.changed.wait_for(check, timeout):
                raise AssertionError("the action service did not see what the test waited for")


@contextmanager
def action_service() -> Iterator[ActionService]:
    """Start the service on a free port; release anything held and stop it on exit."""
    service = ActionService()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if service.hold:
                service.entered.set()
                service.release.wait(30)
            with service.changed:
                service.paths.append(self.path)
                service.changed.notify_all()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    service.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield service
    finally:
        service.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
