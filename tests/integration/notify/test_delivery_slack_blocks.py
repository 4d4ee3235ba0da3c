"""A card's Block Kit is built straight as JSON on every call; it says exactly what Slack's
own block models say of the same message, and refuses what they refuse."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from watchkeeper.notify.channels import slack
from watchkeeper.notify.message import Button, Message

CARE = (
    ("Silence 1 h", "silence_1h", "wk1:7:s:0123456789ab"),
    ("I am on it", "ack", "wk1:7:a:0123456789ab"),
)


def by_the_models(message: Message) -> list[dict[str, object]]:
    """The blocks as ``slack_sdk``'s models build and check them."""
    section = SectionBlock(
        text=MarkdownTextObject(
            text=slack.fit(slack.escape(message.text or " "), slack.SECTION_LIMIT)
        )
    )
    built = [section.to_dict()]
    if message.buttons:
        elements = [
            ButtonElement(
                text=PlainTextObject(text=slack.fit(b.label, slack.LABEL_LIMIT)),
                action_id=f"{slack.ACTION_PREFIX}{b.action}",
                value=b.data,
            )
            for b in message.buttons
        ]
        built.append(ActionsBlock(elements=elements).to_dict())
    return built


MESSAGES = [
    Message(""),
    Message("plain <b> & more", headline="h"),
    Message("x" * 5000),
    Message("*run* failed", tuple(Button(label, action, data) for label, action, data in CARE)),
    Message("long label", (Button("L" * 120, "retry", "wk1:7:r:0123456789ab"),)),
]


@pytest.mark.parametrize("message", MESSAGES)
def test_blocks_say_what_the_models_say(message: Message) -> None:
    assert slack.blocks_json(message) == by_the_models(message)


def test_what_the_models_refuse_is_refused() -> None:
    too_many = Message("many", tuple(Button(f"b{n}", "retry", f"d{n}") for n in range(26)))
    with pytest.raises(SlackObjectFormationError):
        by_the_models(too_many)
    with pytest.raises(SlackObjectFormationError):
        slack.blocks_json(too_many)
    long_value = Message("v", (Button("b", "retry", "v" * 2001),))
    with pytest.raises(SlackObjectFormationError):
        by_the_models(long_value)
    with pytest.raises(SlackObjectFormationError):
        slack.blocks_json(long_value)
