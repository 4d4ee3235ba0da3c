"""Secrets never leave through logs, diagnoses or hooks.

The table holds one real-looking (but made-up) sample of every secret shape
:mod:`watchkeeper.redact` knows: the text before and after it must survive,
and no run of the secret's characters may.
"""

# One sample per line reads as a table; some samples are long.
# ruff: noqa: E501

from __future__ import annotations

import pytest

from watchkeeper.redact import MASK, SHAPES, redact, redact_lines, tail

_B64 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ9876543210"
_PEM_BODY = "MIIEowIBAAKCAQEA0Zx9fZ3nq1s2K7bQh2Vb9yR8\nq1s2K7bQh2Vb9yR8MIIEowIBAAKCAQEA0Zx9fZ3n\n"
_TELEGRAM = "7123456789:AAH" + _B64[:32]

#: (shape, text before, the secret, text after).
SAMPLES: list[tuple[str, str, str, str]] = [
    ("openai key", "export MODEL=gpt; key ", "sk-" + _B64[:48], " used"),
    ("openai project key", "using ", "sk-proj-" + _B64[:64], " now"),
    ("anthropic key", "ANTHROPIC=ok client(", "sk-ant-api03-" + _B64[:60] + "-AbCdAA", ")"),
    ("github classic ghp", "remote: ", "ghp_" + _B64[:36], " rejected"),
    ("github classic gho", "oauth ", "gho_" + _B64[1:37], " expired"),
    ("github classic ghu", "user ", "ghu_" + _B64[2:38], " ok"),
    ("github classic ghs", "app ", "ghs_" + _B64[3:39], " ok"),
    ("github classic ghr", "refresh ", "ghr_" + _B64[4:40], " ok"),
    ("github fine-grained", "git push with ", "github_pat_11ABCDEFG0" + _B64[:12] + "_" + _B64[:59], "!"),
    ("slack bot token", "slack ", "xoxb-123456789012-1234567890123-" + _B64[:24], " posted"),
    ("slack user token", "slack ", "xoxp-123456789012-1234567890123-1234567890123-" + _B64[:32], "."),
    ("slack app token", "socket mode ", "xapp-1-A0123456789-1234567890123-" + _B64[:64].lower(), "."),
    ("slack webhook", "POST https://hooks.slack.com/services/", "T0ABCDEF1/B0ABCDEF2/" + _B64[:24], " 200"),
    ("telegram token", "bot ", _TELEGRAM, " started"),
    ("telegram token in a url", "POST https://api.telegram.org/bot", _TELEGRAM, "/sendMessage 200"),
    ("discord bot token", "client.run(", "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl." + _B64[:38], ")"),
    ("aws access key id", "aws id ", "AKIA" + "Z7QW3RT5YU8IOP2A", " in us-east-1"),
    ("aws session key id", "sts ", "ASIA" + "Q2W3E4R5T6Y7U8I9", " issued"),
    ("aws secret key", "aws_secret_access_key = ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE", "\n"),
    ("aws secret key, spaced", "AWS Secret Key: ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE", " (rotated)"),
    ("google api key", "maps key ", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", " loaded"),
    ("stripe live secret", "charge with ", "sk_live_" + _B64[:24], " ok"),
    ("stripe test secret", "charge with ", "sk_test_" + _B64[2:26], " ok"),
    ("stripe restricted", "report with ", "rk_live_" + _B64[4:28], " ok"),
    ("stripe publishable", "checkout ", "pk_live_" + _B64[6:30], " ok"),
    (
        "jwt",
        "cookie=abc; jwt ",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        " sent",
    ),
    ("pem rsa", "key:\n", "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "-----END RSA PRIVATE KEY-----", "\ndone"),
    ("pem openssh", "id:\n", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY + "-----END OPENSSH PRIVATE KEY-----", "\ndone"),
    ("pem ec", "ec:\n", "-----BEGIN EC PRIVATE KEY-----\n" + _PEM_BODY + "-----END EC PRIVATE KEY-----", "\ndone"),
    ("pem encrypted", "p8:\n", "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + _PEM_BODY + "-----END ENCRYPTED PRIVATE KEY-----", "\ndone"),
    ("authorization bearer", "curl -H 'Authorization: Bearer ", "Zm9vYmFyLXNlY3JldC12YWx1ZQ", "' https://x"),
    ("authorization basic", "Authorization: Basic ", "dXNlcjpwYXNzd29yZDEyMw==", "\nHost: x"),
    ("password in a query string", "GET /login?user=bob&password=", "hunter2hunter2", "&next=/ 200"),
    ("token in a query string", "GET /feed?token=", "a8f5f167f44f4964e6c998dee827110c", " 200"),
    ("exported env token", "export FOO_TOKEN=", "f00b4rb4zqux1234567890", "\nexport PATH=/bin"),
    ("database url password", "DATABASE_URL=postgres://app:", "pa55w0rdXyZ", "@db.internal:5432/app"),
    ("watchkeeper token", "token ", "wk_" + _B64[:43], " created"),
]  # fmt: skip


def _runs(secret: str, size: int = 8) -> list[str]:
    """Every run of ``size`` characters of ``secret`` (the secret itself when shorter)."""
    if len(secret) <= size:
        return [secret]
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


@pytest.mark.parametrize(
    ("shape", "before", "secret", "after"), SAMPLES, ids=[sample[0] for sample in SAMPLES]
)
def test_every_secret_shape_is_masked_and_its_surroundings_kept(
    shape: str, before: str, secret: str, after: str
) -> None:
    cleaned = redact(before + secret + after)
    assert MASK in cleaned
    kept_context = before + after + MASK
    leaked = [run for run in _runs(secret) if run in cleaned and run not in kept_context]
    assert leaked == [], f"{shape}: {leaked[:3]} survived in {cleaned!r}"
    assert cleaned.startswith(before.rstrip("'\"")), cleaned
    assert cleaned.endswith(after), cleaned


def test_the_table_names_every_shape_once() -> None:
    names = [shape.name for shape in SHAPES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "line",
    [
        "collected 312 items; 3 failed in tests/test_api.py::test_token_expiry (took 4.2s)",
        "2026-01-05 12:30:45 INFO GET https://example.com/api/v1/runs?limit=20 200",
        "usage: input_tokens=1200 output_tokens: 340 max_tokens=4096",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b by author=Jane (authored)",
        "run 9b2e1f4c-0d2a-4a8e-9a57-6a1e8a3b7c11 moved to stalled after 600 s",
        "disk-usage 82% of /dev/sda1; skipping sk-1 and task-17",
    ],
)
def test_ordinary_text_is_left_alone(line: str) -> None:
    assert redact(line) == line


def test_redacting_twice_changes_nothing_more() -> None:
    text = "".join(before + secret + after for _s, before, secret, after in SAMPLES)
    once = redact(text)
    assert redact(once) == once


def test_tail_keeps_the_last_lines_redacted() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\npassword=abc"
    kept = tail(text, lines=3)
    assert kept.splitlines() == ["line 98", "line 99", f"password={MASK}"]


def test_a_secret_split_across_two_writes_is_still_masked() -> None:
    secret = "sk-ant-api03-" + _B64[:60]
    chunks = [b"starting\nkey sk-ant-ap", secret[9:].encode() + b" loaded\nnext line", b" ends"]
    out = b"".join(redact_lines(chunks)).decode()
    assert out == f"starting\nkey {MASK} loaded\nnext line ends"


def test_a_private_key_split_across_writes_is_masked_in_both_halves() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "-----END RSA PRIVATE KEY-----\n"
    half = block.index("\n", 40) + 1
    out = b"".join(redact_lines([block[:half].encode(), block[half:].encode() + b"ok\n"]))
    assert not any(run in out.decode() for run in _runs(_PEM_BODY.replace("\n", "")))
    assert out.decode().endswith("ok\n")


@pytest.mark.parametrize(
    "hostile",
    [
        "token " + "a-" * 100_000,
        "token=" * 40_000,
        "private key\n" + ("QUJD" * 40 + "\n") * 3_000,
        "x://" + "a-" * 100_000,
        "aws secret " + "a" * 200_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 10_000,
    ],
    ids=["names", "keywords", "key lines", "schemes", "aws", "begins"],
)
def test_hostile_input_is_redacted_in_one_pass(hostile: str) -> None:
    # Patterns that backtrack over unbounded runs take minutes on these; bounded ones, moments.
    cleaned = redact(hostile)
    assert len(cleaned) <= len(hostile) + len(MASK)


def _every_shape(text: str) -> str:
    """What redaction gave when every pattern ran on any text with a trigger in it."""
    for shape in SHAPES:
        text = shape.rewrite(text)
    return text


def test_running_only_the_triggered_shapes_masks_exactly_what_all_of_them_did() -> None:
    import random

    rng = random.Random(17)
    pieces = [before + secret + after for _, before, secret, after in SAMPLES]
    # Triggers that start at one position or sit inside each other's matches.
    pieces += [
        "authorization_token=abc123def456ghi",
        "Authorization: Bearer eyJabcdefgh.ijklmnopq.rstuvwxyz0",
        "https://user:" + "sk-" + _B64[:20] + "@host/x?api_key=zzz&passwd=p",
        "aws secret_token = " + _B64[:40],
        "max_tokens=4096 auth=secret-value",
        "-----END RSA PRIVATE KEY-----",
    ]
    for _ in range(400):
        text = " ".join(rng.sample(pieces, rng.randint(1, 4)))
        cut = rng.randint(0, len(text))
        for sample in (text, text[:cut], text[cut:], text.upper(), text.replace(" ", "\n")):
            assert redact(sample) == _every_shape(sample), sample
