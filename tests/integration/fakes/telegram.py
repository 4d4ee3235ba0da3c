"""A local fake of the Telegram Bot API, speaking its wire format, for tests.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread) that answers
``POST /bot<token>/<method>`` the way Telegram does: ``{"ok": true, "result":
...}`` or ``{"ok": false, "error_code": N, "description": "...",
"parameters": {...}}``. Every request body is validated against aiogram's
pydantic models of the Bot API methods; anything aiogram would not accept (or
an unknown parameter) is recorded in ``invalid`` and refused with a 400, so a
test that ends with ``invalid == []`` proves our channel sent real Bot API
calls. Updates for our webhook are built from aiogram's types for the same
reason.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from aiogram import methods, types
from pydantic import BaseModel, ValidationError

TOKEN = "123456:TEST-token_for-the-fake"
BOT_ID = 123456
BOT_USERNAME = "watchkeeper_test_bot"
WEBHOOK_SECRET = "telegram-webhook-secret_1"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
BLOCKED = "Forbidden: bot was blocked by the user"
CHAT_NOT_FOUND = "Bad Request: chat not found"

_METHODS: dict[str, type[BaseModel]] = {
    "getMe": methods.GetMe,
    "getWebhookInfo": methods.GetWebhookInfo,
    "sendMessage": methods.SendMessage,
    "editMessageText": methods.EditMessageText,
    "editMessageReplyMarkup": methods.EditMessageReplyMarkup,
    "answerCallbackQuery": methods.AnswerCallbackQuery,
}


class _Refused(Exception):
    """A Bot API error answer."""

    def __init__(
        self, code: int, description: str, parameters: dict[str, Any] | None = None
    ) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters


@dataclass
class Stored:
    """One message in a chat, as the fake holds it."""

    message_id: int
    chat_id: int | str
    text: str
    thread_id: int | None = None
    reply_markup: dict[str, Any] | None = None
    edits: int = 0
    #: The message this one answers (``reply_parameters``), as people see it threaded.
    reply_to: int | None = None

    @property
    def buttons(self) -> list[list[dict[str, Any]]]:
        """The inline keyboard's rows (empty when there is none)."""
        return list((self.reply_markup or {}).get("inline_keyboard", []))

    @property
    def callback_data(self) -> list[str]:
        """Every button's callback data, row by row."""
        return [b["callback_data"] for row in self.buttons for b in row]


@dataclass
class Call:
    """One request the fake received (after validation)."""

    method: str
    body: dict[str, Any]
    status: int = 200


@dataclass
class Answer:
    """One answerCallbackQuery."""

    callback_query_id: str
    text: str
    show_alert: bool


@dataclass
class FakeTelegram:
    """State of the fake and the knobs tests turn."""

    url: str = ""
    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    chats: dict[int | str, list[Stored]] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)
    #: Chats where the user blocked the bot (403) and chats that do not exist (400).
    blocked: set[int | str] = field(default_factory=set)
    missing: set[int | str] = field(default_factory=set)
    #: Faults for the next calls of a method: (method, error code, description, retry_after).
    faults: list[tuple[str, int, str, int | None]] = field(default_factory=list)
    #: sendMessage calls allowed per chat before 429s (``None``: unlimited).
    per_chat_limit: int | None = None
    #: What getWebhookInfo reports: the URL updates go to, and Telegram's last error there.
    webhook_url: str = ""
    webhook_error: str = ""
    limit_retry_after: int = 3
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(init=False)
    #: Set while a request hangs; the hang ends with ``release()``.
    hanging: threading.Event = field(default_factory=threading.Event)
    _hang_next: set[str] = field(default_factory=set)
    _release: threading.Event = field(default_factory=threading.Event)
    _ids: dict[int | str, itertools.count[int]] = field(default_factory=dict)
    _sent_per_chat: dict[int | str, int] = field(default_factory=dict)
    _updates: itertools.count[int] = field(default_factory=lambda: itertools.count(100_000))
    _queries: itertools.count[int] = field(default_factory=lambda: itertools.count(7_000_000))

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    @property
    def base_url(self) -> str:
        """What ``[telegram] base_url`` should be."""
        return self.url

    # -- knobs ------------------------------------------------------------------------------

    def fail_next(
        self, method: str, code: int, description: str, retry_after: int | None = None
    ) -> None:
        """The next call of ``method`` gets this Bot API error (after validation)."""
        with self.lock:
            self.faults.append((method, code, description, retry_after))

    def hang_next(self, method: str) -> None:
        """The next call of ``method`` is carried out, then never answered until ``release()``."""
        with self.lock:
            self._hang_next.add(method)
            self._release.clear()

    def release(self) -> None:
        """End every hang."""
        self._release.set()

    def rate_limit(self, per_chat: int | None, retry_after: int = 3) -> None:
        """Switch the per-chat flood limit on (``per_chat`` sends, then 429s) or off."""
        with self.lock:
            self.per_chat_limit = per_chat
            self.limit_retry_after = retry_after
            self._sent_per_chat.clear()

    # -- reading back -------------------------------------------------------------------------

    def messages(self, chat_id: int | str) -> list[Stored]:
        """Messages in a chat, oldest first."""
        with self.lock:
            return list(self.chats.get(chat_id, []))

    def methods_called(self) -> list[str]:
        """Every method called, in order."""
        with self.lock:
            return [call.method for call in self.calls]

    def answers_to(self, callback_query_id: str) -> list[Answer]:
        """Every answer given to one callback query."""
        with self.lock:
            return [a for a in self.answers if a.callback_query_id == callback_query_id]

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        """Block until ``predicate(self)`` holds (checked whenever the fake's state changes)."""
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self), timeout=timeout):
                raise AssertionError("the fake Telegram never reached the expected state")

    # -- updates for our webhook -------------------------------------------------------------

    def next_update_id(self) -> int:
        """A fresh update id, as Telegram numbers them (increasing)."""
        return next(self._updates)

    def callback_update(
        self,
        stored: Stored,
        data: str,
        user_id: int,
        username: str | None = None,
        first_name: str = "Tester",
        update_id: int | None = None,
    ) -> dict[str, Any]:
        """The Update Telegram posts when ``user_id`` presses a button of ``stored``."""
        chat_type = "supergroup" if str(stored.chat_id).startswith("-") else "private"
        message = types.Message(
            message_id=stored.message_id,
            date=datetime.now(UTC),
            chat=types.Chat(
                id=int(stored.chat_id), type=chat_type, is_forum=bool(stored.thread_id)
            ),
            from_user=types.User(
                id=BOT_ID, is_bot=True, first_name="watchkeeper", username=BOT_USERNAME
            ),
            message_thread_id=stored.thread_id,
            is_topic_message=True if stored.thread_id else None,
            text=stored.text,
            reply_markup=types.InlineKeyboardMarkup.model_validate(stored.reply_markup)
            if stored.reply_markup
            else None,
        )
        query = types.CallbackQuery(
            id=str(next(self._queries)),
            from_user=types.User(
                id=user_id, is_bot=False, first_name=first_name, username=username
            ),
            chat_instance="-4411223344556677",
            message=message,
            data=data,
        )
        update = types.Update(
            update_id=self.next_update_id() if update_id is None else update_id,
            callback_query=query,
        )
        return update.model_dump(mode="json", exclude_none=True, by_alias=True)

    def command_update(
        self,
        chat_id: int,
        text: str,
        user_id: int,
        thread_id: int | None = None,
        username: str | None = None,
    ) -> dict[str, Any]:
        """The Update Telegram posts for a text message (a command) in a chat or topic."""
        chat_type = "supergroup" if chat_id < 0 else "private"
        entity_length = len(text.split()[0]) if text.startswith("/") else 0
        message = types.Message(
            message_id=next(self._counter(chat_id)),
            date=datetime.now(UTC),
            chat=types.Chat(id=chat_id, type=chat_type, is_forum=thread_id is not None),
            from_user=types.User(id=user_id, is_bot=False, first_name="Tester", username=username),
            message_thread_id=thread_id,
            is_topic_message=True if thread_id is not None else None,
            text=text,
            entities=[types.MessageEntity(type="bot_command", offset=0, length=entity_length)]
            if entity_length
            else None,
        )
        update = types.Update(update_id=self.next_update_id(), message=message)
        return update.model_dump(mode="json", exclude_none=True, by_alias=True)

    # -- the Bot API ----------------------------------------------------------------------------

    def _counter(self, chat_id: int | str) -> itertools.count[int]:
        if chat_id not in self._ids:
            self._ids[chat_id] = itertools.count(1)
        return self._ids[chat_id]

    def handle(self, path: str, raw: bytes, content_type: str) -> tuple[int, dict[str, Any], bool]:
        """Answer one request: (status, body, hang before answering)."""
        prefix = f"/bot{self.token}/"
        if not path.startswith("/bot"):
            return 404, _error(404, "Not Found"), False
        if not path.startswith(prefix):
            return 401, _error(401, "Unauthorized"), False
        method = path[len(prefix) :]
        model = _METHODS.get(method)
        if model is None:
            return 404, _error(404, "Not Found: method not found"), False
        if not content_type.startswith("application/json"):
            return self._invalid(method, f"content type {content_type!r} is not JSON")
        try:
            body = json.loads(raw or b"{}")
            validated = model.model_validate(body)
        except (ValueError, ValidationError) as exc:
            return self._invalid(method, f"not a valid {method}: {exc}")
        if validated.model_extra:
            return self._invalid(method, f"unknown parameters {sorted(validated.model_extra)}")
        problem = _check_markup(body.get("reply_markup"))
        if problem:
            return self._invalid(method, problem)
        with self.changed:
            hang = method in self._hang_next
            self._hang_next.discard(method)
            try:
                result = self._carry_out(method, body)
                status, answer = 200, {"ok": True, "result": result}
            except _Refused as refused:
                status = refused.code
                answer = _error(refused.code, refused.description, refused.parameters)
            self.calls.append(Call(method, body, status))
            self.changed.notify_all()
        return status, answer, hang

    def _invalid(self, method: str, problem: str) -> tuple[int, dict[str, Any], bool]:
        with self.changed:
            self.invalid.append(f"{method}: {problem}")
            self.calls.append(Call(method, {}, 400))
            self.changed.notify_all()
        return 400, _error(400, f"Bad Request: {problem}"), False

    def _carry_out(self, method: str, body: dict[str, Any]) -> Any:
        for index, (name, code, description, retry_after) in enumerate(self.faults):
            if name == method:
                del self.faults[index]
                raise _Refused(
                    code,
                    description,
                    None if retry_after is None else {"retry_after": retry_after},
                )
        if method == "getMe":
            return types.User(
                id=BOT_ID,
                is_bot=True,
                first_name="watchkeeper",
                username=BOT_USERNAME,
                can_join_groups=True,
                can_read_all_group_messages=False,
                supports_inline_queries=False,
            ).model_dump(mode="json", exclude_none=True, by_alias=True)
        if method == "getWebhookInfo":
            return types.WebhookInfo(
                url=self.webhook_url,
                has_custom_certificate=False,
                pending_update_count=0,
                last_error_date=1 if self.webhook_error else None,
                last_error_message=self.webhook_error or None,
            ).model_dump(mode="json", exclude_none=True)
        if method == "answerCallbackQuery":
            query_id = str(body["callback_query_id"])
            if any(a.callback_query_id == query_id for a in self.answers):
                raise _Refused(
                    400,
                    "Bad Request: query is too old and response timeout expired or query ID is "
                    "invalid",
                )
            self.answers.append(
                Answer(query_id, str(body.get("text", "")), bool(body.get("show_alert")))
            )
            return True
        chat_id = body["chat_id"]
        if chat_id in self.blocked:
            raise _Refused(403, BLOCKED)
        if chat_id in self.missing:
            raise _Refused(400, CHAT_NOT_FOUND)
        if method == "sendMessage":
            return self._send(chat_id, body)
        return self._edit(method, chat_id, body)

    def _send(self, chat_id: int | str, body: dict[str, Any]) -> dict[str, Any]:
        text = str(body["text"])
        if not text.strip():
            raise _Refused(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            raise _Refused(400, "Bad Request: message is too long")
        if self.per_chat_limit is not None:
            used = self._sent_per_chat.get(chat_id, 0)
            if used >= self.per_chat_limit:
                wait = self.limit_retry_after
                raise _Refused(429, f"Too Many Requests: retry after {wait}", {"retry_after": wait})
            self._sent_per_chat[chat_id] = used + 1
        markup = body.get("reply_markup")
        stored = Stored(
            next(self._counter(chat_id)),
            chat_id,
            text,
            body.get("message_thread_id"),
            markup if markup and markup.get("inline_keyboard") else None,
            reply_to=self._replied(chat_id, body),
        )
        self.chats.setdefault(chat_id, []).append(stored)
        return _message_json(stored)

    def _replied(self, chat_id: int | str, body: dict[str, Any]) -> int | None:
        """The message a reply answers; Telegram refuses a missing one unless told not to."""
        reply = body.get("reply_parameters") or {}
        wanted = reply.get("message_id", body.get("reply_to_message_id"))
        if wanted is None:
            return None
        if any(m.message_id == wanted for m in self.chats.get(chat_id, [])):
            return int(wanted)
        if reply.get("allow_sending_without_reply") or body.get("allow_sending_without_reply"):
            return None
        raise _Refused(400, "Bad Request: message to be replied not found")

    def _edit(self, method: str, chat_id: int | str, body: dict[str, Any]) -> dict[str, Any]:
        found = next(
            (m for m in self.chats.get(chat_id, []) if m.message_id == body["message_id"]), None
        )
        if found is None:
            raise _Refused(400, "Bad Request: message to edit not found")
        markup = body.get("reply_markup")
        new_markup = markup if markup and markup.get("inline_keyboard") else None
        new_text = str(body["text"]) if method == "editMessageText" else found.text
        if (new_text, new_markup) == (found.text, found.reply_markup):
            raise _Refused(400, NOT_MODIFIED)
        found.text, found.reply_markup = new_text, new_markup
        found.edits += 1
        return _message_json(found)


def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return body


def _check_markup(markup: Any) -> str | None:
    """What Telegram would refuse in an inline keyboard (aiogram checks the types only)."""
    if markup is None:
        return None
    try:
        keyboard = types.InlineKeyboardMarkup.model_validate(markup)
    except ValidationError as exc:
        return f"reply_markup is not an inline keyboard: {exc}"
    if keyboard.model_extra:
        return f"reply_markup: unknown fields {sorted(keyboard.model_extra)}"
    for row in keyboard.inline_keyboard:
        for button in row:
            if button.model_extra:
                return f"button: unknown fields {sorted(button.model_extra)}"
            data = button.callback_data
            if data is None or not 1 <= len(data.encode()) <= 64:
                return "BUTTON_DATA_INVALID"
    return None


def _message_json(stored: Stored) -> dict[str, Any]:
    chat_type = "supergroup" if str(stored.chat_id).startswith("-") else "private"
    chat_id = stored.chat_id if isinstance(stored.chat_id, int) else 0
    message = types.Message(
        message_id=stored.message_id,
        date=datetime.now(UTC),
        chat=types.Chat(id=chat_id, type=chat_type),
        from_user=types.User(
            id=BOT_ID, is_bot=True, first_name="watchkeeper", username=BOT_USERNAME
        ),
        message_thread_id=stored.thread_id,
        is_topic_message=True if stored.thread_id else None,
        text=stored.text,
        reply_markup=types.InlineKeyboardMarkup.model_validate(stored.reply_markup)
        if stored.reply_markup
        else None,
        edit_date=int(datetime.now(UTC).timestamp()) if stored.edits else None,
    )
    return message.model_dump(mode="json", exclude_none=True, by_alias=True)


@contextmanager
def fake_telegram() -> Iterator[FakeTelegram]:
    """Serve a fake Bot API on a free loopback port until the block ends."""
    fake = FakeTelegram()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            status, answer, hang = fake.handle(self.path, raw, self.headers.get("Content-Type", ""))
            if hang:
                fake.hanging.set()
                fake._release.wait(timeout=60)
                fake.hanging.clear()
            payload = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up waiting (a hang): nothing to answer
                self.close_connection = True

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = False
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield fake
    finally:
        fake.release()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def press(
    server_url: str, update: dict[str, Any], secret: str | None = WEBHOOK_SECRET
) -> httpx.Response:
    """POST ``update`` to our ``/webhooks/telegram`` as Telegram does (with the secret header)."""
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    with httpx.Client(timeout=60) as client:
        return client.post(f"{server_url}/webhooks/telegram", json=update, headers=headers)
