"""The shapes our Telegram code puts on the wire and reads off it, checked against aiogram."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from aiogram import methods, types

from tests.support.json_server import JsonHandler, JsonServer, answering
from watchkeeper.config import TelegramConfig
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.telegram import (
    TelegramChannel,
    chat_ref,
    fit,
    keyboard,
    telegram_length,
)
from watchkeeper.notify.message import Button, Message, Target, button_data
from watchkeeper.server.webhooks.telegram import _RUNS, _Update

TOKEN = "42:unit-token"


def buttons(n: int) -> tuple[Button, ...]:
    return tuple(Button(f"B{i}", "retry", button_data(i, "retry", f"token-{i}")) for i in range(n))


@pytest.mark.parametrize(
    ("count", "rows"),
    [(1, [1]), (2, [2]), (3, [3]), (4, [2, 2]), (5, [3, 2]), (6, [3, 3]), (7, [3, 3, 1])],
)
def test_keyboards_are_rows_of_at_most_three_buttons(count: int, rows: list[int]) -> None:
    markup = keyboard(buttons(count))
    parsed = types.InlineKeyboardMarkup.model_validate(markup)
    assert [len(row) for row in parsed.inline_keyboard] == rows
    flat = [b for row in parsed.inline_keyboard for b in row]
    assert [b.callback_data for b in flat] == [b.data for b in buttons(count)]
    assert all(not b.model_extra for b in flat)


def test_no_buttons_is_an_empty_keyboard_which_removes_them() -> None:
    assert keyboard(()) == {"inline_keyboard": []}
    types.InlineKeyboardMarkup.model_validate(keyboard(()))


def test_text_is_cut_the_way_telegram_counts_characters() -> None:
    assert fit("short", 4096) == "short"
    cut = fit("x" * 5000, 4096)
    assert telegram_length(cut) == 4096 and cut.endswith("…")
    emoji = "🚀" * 3000  # two UTF-16 units each: 6000 by Telegram's count
    assert telegram_length(emoji) == 6000
    fitted = fit(emoji, 4096)
    assert telegram_length(fitted) <= 4096 and fitted.endswith("…")


def test_chat_ids_go_as_numbers_and_channel_names_as_strings() -> None:
    assert chat_ref("-1001234567890") == -1001234567890
    assert chat_ref("42") == 42
    assert chat_ref("@watch_channel") == "@watch_channel"


@dataclass(frozen=True)
class Captured:
    """One call as it reached the platform's side of the wire."""

    path: str
    headers: dict[str, str]
    content: bytes


def run_channel(answer: dict[str, Any], call: Callable[[TelegramChannel], Any]) -> Any:
    """``call`` on a channel sending (as production does) to a loopback server that answers
    ``answer`` to everything; its result and the calls the server received."""
    seen: list[Captured] = []

    class Platform(JsonHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            seen.append(Captured(self.path, headers, body))
            self.send_json(200, answer)

    async def go(url: str) -> Any:
        channel = TelegramChannel(TelegramConfig(bot_token=TOKEN, base_url=url))
        try:
            return await call(channel)
        finally:
            await channel.aclose()

    with answering(JsonServer(("127.0.0.1", 0), Platform)) as platform:
        return asyncio.run(go(platform.url)), seen


SENT_MESSAGE = {
    "ok": True,
    "result": {"message_id": 77, "date": 1767614400, "chat": {"id": -100, "type": "supergroup"}},
}


def test_a_card_is_a_valid_send_message_to_its_forum_topic() -> None:
    message = Message("Nightly crawl has stalled", buttons(4), "Nightly crawl has stalled")
    target = Target("telegram", "-1001234", "7")
    result, seen = run_channel(SENT_MESSAGE, lambda c: c.send(target, message, "key-1"))
    assert result.outcome is SendOutcome.SENT and result.message_id == "77"
    (request,) = seen
    assert request.path == f"/bot{TOKEN}/sendMessage"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    call = methods.SendMessage.model_validate(body)
    assert not call.model_extra
    assert call.chat_id == -1001234 and call.message_thread_id == 7
    assert isinstance(call.reply_markup, types.InlineKeyboardMarkup)
    assert [len(r) for r in call.reply_markup.inline_keyboard] == [2, 2]


def test_a_message_without_buttons_or_topic_sends_neither() -> None:
    result, seen = run_channel(
        SENT_MESSAGE, lambda c: c.send(Target("telegram", "5"), Message("hi"), "k")
    )
    assert result.outcome is SendOutcome.SENT
    assert json.loads(seen[0].content) == {"chat_id": 5, "text": "hi"}


def test_an_edit_is_a_valid_edit_message_text_with_an_empty_keyboard() -> None:
    edited = {**SENT_MESSAGE, "result": {**SENT_MESSAGE["result"], "edit_date": 1767614500}}  # type: ignore[dict-item]
    target = Target("telegram", "-100", "7", "77")
    result, seen = run_channel(edited, lambda c: c.edit(target, Message("Decided: Retry")))
    assert result.outcome is SendOutcome.SENT and result.message_id == "77"
    call = methods.EditMessageText.model_validate(json.loads(seen[0].content))
    assert not call.model_extra
    assert (call.chat_id, call.message_id, call.text) == (-100, 77, "Decided: Retry")
    assert isinstance(call.reply_markup, types.InlineKeyboardMarkup)
    assert call.reply_markup.inline_keyboard == []


def test_a_callback_answer_is_valid_and_at_most_200_characters() -> None:
    result, seen = run_channel(
        {"ok": True, "result": True},
        lambda c: c.answer_callback("8150", "already decided " * 30, show_alert=True),
    )
    assert result.outcome is SendOutcome.SENT
    call = methods.AnswerCallbackQuery.model_validate(json.loads(seen[0].content))
    assert not call.model_extra
    assert call.show_alert is True and call.text is not None and len(call.text) == 200


def test_without_a_token_nothing_is_sent() -> None:
    async def go() -> Any:
        channel = TelegramChannel(TelegramConfig())
        try:
            return await channel.send(Target("telegram", "5"), Message("hi"), "k")
        finally:
            await channel.aclose()

    unset = asyncio.run(go())
    assert unset.outcome is SendOutcome.FAILED
    assert unset.error == "telegram.bot_token is not configured"


def test_our_webhook_reads_the_updates_aiogram_builds() -> None:
    now = datetime(2026, 1, 5, 12, tzinfo=UTC)
    press = types.Update(
        update_id=10,
        callback_query=types.CallbackQuery(
            id="4382bfdwdsb323b2d9",
            from_user=types.User(id=42, is_bot=False, first_name="Ana", username="ana"),
            chat_instance="-88",
            data="wk1:1:r:abcdefabcdef",
            message=types.Message(
                message_id=3,
                date=now,
                chat=types.Chat(id=-100, type="supergroup", is_forum=True),
                message_thread_id=7,
                is_topic_message=True,
                text="card",
            ),
        ),
    ).model_dump(mode="json", exclude_none=True, by_alias=True)
    parsed = _Update.model_validate(press)
    assert parsed.callback_query is not None
    assert parsed.callback_query.from_user.id == 42
    assert parsed.callback_query.from_user.username == "ana"
    assert parsed.callback_query.data == "wk1:1:r:abcdefabcdef"
    command = types.Update(
        update_id=11,
        message=types.Message(
            message_id=4,
            date=now,
            chat=types.Chat(id=-100, type="supergroup", is_forum=True),
            from_user=types.User(id=43, is_bot=False, first_name="Bob"),
            message_thread_id=7,
            is_topic_message=True,
            text="/runs all",
        ),
    ).model_dump(mode="json", exclude_none=True, by_alias=True)
    message = _Update.model_validate(command).message
    assert message is not None
    assert (message.chat.id, message.message_thread_id, message.text) == (-100, 7, "/runs all")


@pytest.mark.parametrize(
    ("text", "bot", "argument"),
    [
        ("/runs", None, None),
        ("/runs all", None, "all"),
        ("/runs@watch_bot", "watch_bot", None),
        ("/runs@watch_bot all", "watch_bot", "all"),
    ],
)
def test_runs_commands(text: str, bot: str | None, argument: str | None) -> None:
    found = _RUNS.match(text)
    assert found is not None
    assert (found.group("bot"), found.group("argument")) == (bot, argument)


@pytest.mark.parametrize("text", ["/runsall", "/run", "runs", "/status", "/runs@"])
def test_other_text_is_not_runs(text: str) -> None:
    assert _RUNS.match(text) is None
