"""Secrets never leave through logs, diagnoses or hooks."""

from __future__ import annotations

import pytest

from watchkeeper.redact import MASK, redact, tail


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdef123456789", "abcdef123456789"),
        (
            "curl -H 'authorization: token ghp_abcdefghijklmnopqrstuvwxyz0123'",
            "ghp_abcdefghijklmnop",
        ),
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv", "sk-proj-abcdefghij"),
        ("password=hunter2 user=bob", "hunter2"),
        ('{"client_secret": "s3cr3t-value"}', "s3cr3t-value"),
        ("db: postgresql://app:pa55word@db.internal/app", "pa55word"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("token wk_abcdefghijklmnopqrstuvwxyz", "wk_abcdefghijklmnopqrstuvwxyz"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "dozjgNryP4J3",
        ),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----", "MIIabc"),
    ],
)
def test_secrets_are_masked(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert MASK in cleaned


def test_ordinary_text_is_left_alone() -> None:
    line = "collected 312 items; 3 failed in tests/test_api.py::test_token_expiry (took 4.2s)"
    assert redact(line) == line


def test_tail_keeps_the_last_lines_redacted() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\npassword=abc"
    kept = tail(text, lines=3)
    assert kept.splitlines() == ["line 98", "line 99", f"password={MASK}"]
