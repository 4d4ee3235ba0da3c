"""Redaction's shortcuts on the ingest path mask exactly what its plain rule does.

The rule: a shape runs on a text when one of its triggers occurs in the lower-cased
text (a shape without triggers, on every text), and then rewrites the whole text. The
shortcuts (one scan for all triggers, a case-insensitive pattern started just before its
first trigger) must not change a single character of the result, whatever the case, the
script or what comes before a keyword.
"""

from __future__ import annotations

import random
import re

from watchkeeper.redact import SHAPES, redact

PIECES = [
    "token=abc123def456",
    "mytoken=abc123def456",
    "X-Api-Key: 9f8e7d6c5b4a",
    "xauthorization: Bearer abcdefghijkl",
    "Authorization: Basic dXNlcjpwYXNz",
    "authorization_token=abc123def456ghi",
    "bearer abcdefghij",
    "xbearer abcdefghij",
    "max_tokens=4096",
    "PASSWORD='hunter 2'",
    "sk-" + "a1b2c3d4e5f6g7h8i9j0",
    "postgresql://app:s3cret@db/x",
    "aws secret_key = " + "A" * 40,
    "\u017fecret=abc123",  # a long s: (?i) matches it with "s", lower() leaves it
    "\u0130token=abc123",  # a dotted capital I: lower() makes it two characters
    "\u212aey: secret=abc",  # the Kelvin sign lowers to "k"
    "caf\u00e9 auth=xyz789",
    "plain words, nothing to hide",
    "-----END RSA PRIVATE KEY-----",
    "",
]


def _plain_rule(text: str) -> str:
    lower = text.lower()
    for shape in SHAPES:
        if not shape.triggers or any(re.search(trigger, lower) for trigger in shape.triggers):
            text = shape.rewrite(text)
    return text


def test_redaction_equals_its_plain_rule_on_mixed_texts() -> None:
    rng = random.Random(23)
    separators = [" ", "", "\n", ";", "a", "_", "9"]
    for _ in range(3000):
        parts = rng.sample(PIECES, rng.randint(1, 4))
        text = "".join(part + rng.choice(separators) for part in parts)
        if rng.random() < 0.3:
            text = text.upper()
        assert redact(text) == _plain_rule(text), text


def test_a_keyword_at_the_very_start_or_after_a_letter_is_handled_as_before() -> None:
    for text in ("token=abc", "xtoken=abc", "auth=abc", "Bearer abcdefghij", "abearer abcdefghij"):
        assert redact(text) == _plain_rule(text)
