"""What we send Discord and Slack, how their answers are read, how their requests are checked."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import discord_typings
import httpx
import pytest
from nacl.signing import SigningKey
from slack_sdk.models.blocks import Block

from tests.integration.fakes.discord import problems
from watchkeeper.notify.channels import discord, slack
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.message import Button, Message, Target
from watchkeeper.server.webhooks import discord as routes_discord
from watchkeeper.server.webhooks import slack as routes_slack

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
BUTTONS = (
    Button("Cancel", "cancel", "wk1:7:c:0123456789ab"),
    Button("Retry", "retry", "wk1:7:r:0123456789ab"),
    Button("Dismiss", "dismiss", "wk1:7:d:0123456789ab"),
    Button("Ask to diagnose", "diagnose", "wk1:7:g:0123456789ab"),
)


# -- Discord ----------------------------------------------------------------------------------


def test_discord_buttons_are_action_rows_of_at_most_five() -> None:
    seven = tuple(Button(f"B{i}", "dismiss", f"wk1:{i}:d:0123456789ab") for i in range(7))
    rows = discord.components(seven)
    assert [len(r["components"]) for r in rows] == [5, 2]
    assert problems(rows, list[discord_typings.ActionRowData]) == []
    for row in rows:
        for cell in row["components"]:
            assert problems(cell, discord_typings.ButtonComponentData) == []
    assert discord.components(()) == []


def test_discord_button_styles_labels_and_custom_ids() -> None:
    (row,) = discord.components(BUTTONS)
    cells = row["components"]
    assert [c["style"] for c in cells] == [4, 1, 2, 2]
    assert [c["custom_id"] for c in cells] == [b.data for b in BUTTONS]
    long = discord.button(Button("x" * 100, "dismiss", "wk1:1:d:0123456789ab"))
    assert len(long["label"]) == 80 and long["label"].endswith("…")


def test_discord_create_body_carries_an_enforced_nonce_of_at_most_25_characters() -> None:
    body = discord.create_body(Message("y" * 2500, BUTTONS), "k" * 40)
    assert body["nonce"] == "k" * 25 and body["enforce_nonce"] is True
    assert len(body["content"]) == 2000 and body["content"].endswith("…")
    assert set(body) == {"content", "components", "nonce", "enforce_nonce"}
    edited = discord.edit_body(Message("decided"))
    assert edited == {"content": "decided", "components": []}
    assert problems(edited, discord_typings.InteractionMessageCallbackData) == []


@pytest.mark.parametrize(
    ("status", "body", "outcome", "retry_after", "words"),
    [
        (
            429,
            {"message": "You are being rate limited.", "retry_after": 0.75, "global": True},
            SendOutcome.RETRY,
            0.75,
            "(global)",
        ),
        (
            403,
            {"message": "Missing Access", "code": 50001},
            SendOutcome.FAILED,
            None,
            "Missing Access (code 50001)",
        ),
        (
            404,
            {"message": "Unknown Channel", "code": 10003},
            SendOutcome.FAILED,
            None,
            "Unknown Channel",
        ),
        (
            400,
            {"message": "Invalid Form Body", "code": 50035},
            SendOutcome.FAILED,
            None,
            "Invalid Form Body",
        ),
        (503, {"message": "upstream", "code": 0}, SendOutcome.MAYBE_SENT, None, "HTTP 503"),
    ],
)
def test_discord_error_answers(
    status: int,
    body: dict[str, object],
    outcome: SendOutcome,
    retry_after: float | None,
    words: str,
) -> None:
    result = discord.failure(httpx.Response(status, json=body))
    assert (result.outcome, result.retry_after_s) == (outcome, retry_after)
    assert words in (result.error or "")


def test_discord_error_without_a_json_body_falls_back_to_the_status() -> None:
    gateway = discord.failure(httpx.Response(502, text="<html>bad gateway</html>"))
    assert gateway.outcome is SendOutcome.MAYBE_SENT
    limited = discord.failure(httpx.Response(429, text="slow down", headers={"Retry-After": "2"}))
    assert (limited.outcome, limited.retry_after_s) == (SendOutcome.RETRY, 2.0)


def test_discord_signatures_are_checked_with_the_public_key_and_a_five_minute_window() -> None:
    key = SigningKey.generate()
    public = bytes(key.verify_key).hex()
    body = b'{"type": 1}'
    stamp = str(int(NOW.timestamp()))
    signature = key.sign(stamp.encode() + body).signature.hex()
    now = NOW.timestamp()
    assert routes_discord.verified(public, signature, stamp, body, now)
    assert routes_discord.verified(public, signature, stamp, body, now + 300)
    assert not routes_discord.verified(public, signature, stamp, body, now + 301)
    assert not routes_discord.verified(public, signature, stamp, body, now - 301)
    assert not routes_discord.verified(public, signature, stamp, body + b" ", now)
    other = bytes(SigningKey.generate().verify_key).hex()
    assert not routes_discord.verified(other, signature, stamp, body, now)
    assert not routes_discord.verified(public, "zz", stamp, body, now)
    assert not routes_discord.verified(public, signature[:-2], stamp, body, now)
    assert not routes_discord.verified(public, signature, "12a", body, now)
    assert not routes_discord.verified("abc", signature, stamp, body, now)
    assert not routes_discord.verified(None, signature, stamp, body, now)
    assert not routes_discord.verified(public, None, stamp, body, now)


# -- Slack ------------------------------------------------------------------------------------


def test_slack_blocks_are_a_mrkdwn_section_and_an_actions_block() -> None:
    built = slack.blocks_json(Message("a <b> & c", BUTTONS[:2]))
    assert built == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "a &lt;b&gt; &amp; c"}},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Cancel"},
                    "action_id": "wk_cancel",
                    "value": "wk1:7:c:0123456789ab",
                },
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Retry"},
                    "action_id": "wk_retry",
                    "value": "wk1:7:r:0123456789ab",
                },
            ],
        },
    ]
    for raw in built:
        parsed = Block.parse(raw)
        assert parsed is not None and parsed.to_dict() == raw
    assert [b["type"] for b in slack.blocks_json(Message("no buttons"))] == ["section"]


def test_slack_limits_are_respected() -> None:
    built = slack.blocks_json(Message("z" * 5000, (Button("L" * 90, "dismiss", "wk1:1:d:x"),)))
    assert len(built[0]["text"]["text"]) == 3000
    assert len(built[1]["elements"][0]["text"]["text"]) == 75


def test_slack_post_and_update_bodies() -> None:
    message = Message("body", BUTTONS[:1], "headline")
    top = slack.post_body(Target("slack", "C1"), message)
    assert set(top) == {"channel", "text", "blocks"} and top["text"] == "headline"
    threaded = slack.post_body(Target("slack", "C1", "1767614400.000100"), message)
    assert threaded["thread_ts"] == "1767614400.000100"
    update = slack.update_body("C1", "1767614400.000200", message)
    assert (update["channel"], update["ts"]) == ("C1", "1767614400.000200")
    assert slack.ephemeral_reply("no") == {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": "no",
    }


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        ("channel_not_found", SendOutcome.FAILED),
        ("not_in_channel", SendOutcome.FAILED),
        ("invalid_blocks", SendOutcome.FAILED),
        ("ratelimited", SendOutcome.RETRY),
        ("internal_error", SendOutcome.MAYBE_SENT),
    ],
)
def test_slack_refusals(error: str, outcome: SendOutcome) -> None:
    result = slack.refusal(error)
    assert result.outcome is outcome and error in (result.error or "")


def _slack_signature(secret: str, stamp: str, body: bytes) -> str:
    base = f"v0:{stamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def test_slack_signatures_are_checked_with_the_signing_secret_and_a_five_minute_window() -> None:
    body = b"payload=%7B%7D"
    stamp = str(int(NOW.timestamp()))
    good = _slack_signature("s3cret", stamp, body)

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(NOW.timestamp() + seconds, UTC)

    assert routes_slack.verified("s3cret", body, stamp, good, lambda: NOW)
    assert routes_slack.verified("s3cret", body, stamp, good, lambda: at(300))
    assert not routes_slack.verified("s3cret", body, stamp, good, lambda: at(301))
    assert not routes_slack.verified("s3cret", body, stamp, good, lambda: at(-301))
    assert not routes_slack.verified("other", body, stamp, good, lambda: NOW)
    assert not routes_slack.verified("s3cret", body + b"x", stamp, good, lambda: NOW)
    assert not routes_slack.verified("s3cret", body, "12a", good, lambda: NOW)
    assert not routes_slack.verified("s3cret", body, stamp, None, lambda: NOW)
