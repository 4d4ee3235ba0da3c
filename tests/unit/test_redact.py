"""Secrets and personal data never leave through logs, answers, pages, cards or output.

The table holds one real-looking (but made-up) sample of every common secret shape:
the text before and after it must survive, and no run of the secret's characters may,
whether the text is redacted whole or arrives through the live log in two writes cut
inside the secret. The negatives are ordinary output that must stay readable.
"""

# One sample per line reads as a table; some samples are long.
# ruff: noqa: E501

from __future__ import annotations

import random
import re

import pytest

from watchkeeper.redact import MASK, SHAPES, redact, redact_lines, tail
from watchkeeper.server.http.auth import NO_BEARER_ADVICE

_B64 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ9876543210"
_MIX = "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9Yt7Uw2Vx4Rs6Pn8Mk0Lj1Hg3Fd5Sa"
_HEX = "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d1f3e"
_PEM_BODY = "MIIEowIBAAKCAQEA0Zx9fZ3nq1s2K7bQh2Vb9yR8\nq1s2K7bQh2Vb9yR8MIIEowIBAAKCAQEA0Zx9fZ3n\n"
_TELEGRAM = "7123456789:AAH" + _B64[:32]
_LETTERS = "ZqXwVtSrPoNmLkJiHgFeDcBaYuTrEwQzMxKp"

#: (shape, text before, the secret, text after).
SAMPLES: list[tuple[str, str, str, str]] = [
    ("openai key", "export MODEL=gpt; key ", "sk-" + _B64[:48], " used"),
    ("openai project key", "using ", "sk-proj-" + _B64[:64], " now"),
    ("openai key with its marker", "client(", "sk-" + _MIX[:20] + "T3BlbkFJ" + _MIX[20:40], ")"),
    ("anthropic key", "ANTHROPIC=ok client(", "sk-ant-api03-" + _B64[:60] + "-AbCdAA", ")"),
    ("github classic ghp", "remote: ", "ghp_" + _B64[:36], " rejected"),
    ("github classic gho", "oauth ", "gho_" + _B64[1:37], " expired"),
    ("github classic ghu", "user ", "ghu_" + _B64[2:38], " ok"),
    ("github classic ghs", "app ", "ghs_" + _B64[3:39], " ok"),
    ("github classic ghr", "refresh ", "ghr_" + _B64[4:40], " ok"),
    (
        "github fine-grained",
        "git push with ",
        "github_pat_11ABCDEFG0" + _B64[:12] + "_" + _B64[:59],
        "!",
    ),
    ("gitlab personal token", "git clone with ", "glpat-" + _MIX[:20], " failed"),
    ("gitlab runner token", "register ", "glrt-" + _MIX[5:25], " done"),
    ("hugging face token", "HF login ", "hf_" + _LETTERS[:34], " ok"),
    ("npm token", "//registry.npmjs.org/:_authToken ", "npm_" + _MIX[:36], "\n"),
    ("sendgrid key", "mail via ", "SG." + _MIX[:22] + "." + _MIX[22:65], " queued"),
    ("slack bot token", "slack ", "xoxb-123456789012-1234567890123-" + _B64[:24], " posted"),
    (
        "slack user token",
        "slack ",
        "xoxp-123456789012-1234567890123-1234567890123-" + _B64[:32],
        ".",
    ),
    (
        "slack app token",
        "socket mode ",
        "xapp-1-A0123456789-1234567890123-" + _B64[:64].lower(),
        ".",
    ),
    (
        "slack webhook",
        "POST ",
        "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/" + _B64[:24],
        " 200",
    ),
    ("telegram token", "bot ", _TELEGRAM, " started"),
    ("telegram token in a url", "POST https://api.telegram.org/bot", _TELEGRAM, "/sendMessage 200"),
    ("discord bot token", "client.run(", "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl." + _B64[:38], ")"),
    ("aws access key id", "aws id ", "AKIA" + "Z7QW3RT5YU8IOP2A", " in us-east-1"),
    ("aws session key id", "sts ", "ASIA" + "Q2W3E4R5T6Y7U8I9", " issued"),
    (
        "aws secret key",
        "aws_secret_access_key = ",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE",
        "\n",
    ),
    (
        "aws secret key, spaced",
        "AWS Secret Key: ",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE",
        " (rotated)",
    ),
    ("aws secret key, bare", "rotated to ", _MIX[:38] + "/+", " today"),
    ("google api key", "maps key ", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", " loaded"),
    ("stripe live secret", "charge with ", "sk_live_" + _B64[:24], " ok"),
    ("stripe test secret", "charge with ", "sk_test_" + _B64[2:26], " ok"),
    ("stripe restricted", "report with ", "rk_live_" + _B64[4:28], " ok"),
    ("stripe publishable", "checkout ", "pk_live_" + _B64[6:30], " ok"),
    ("twilio api key", "twilio ", "SK" + _HEX[:32], " sent"),
    ("digitalocean token", "doctl auth init -t ", "dop_v1_" + _HEX[:64], " ok"),
    ("shopify token", "store ", "shpat_" + _HEX[:32], " ok"),
    ("pypi upload token", "twine upload -p ", "pypi-AgEIcHlwaS5vcmc" + _MIX[:60], " dist/*"),
    ("databricks token", "workspace ", "dapi" + _HEX[:32], " ok"),
    ("doppler token", "doppler ", "dp.pt." + _MIX[:43], " ok"),
    ("linear api key", "linear ", "lin_api_" + _MIX[:40], " ok"),
    ("grafana service account", "grafana ", "glsa_" + _MIX[:32] + "_" + _HEX[:8], " ok"),
    (
        "age secret key",
        "key file ",
        "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" + "QPZRY9X8GF2TVDW0S3JN54KHCE",
        " loaded",
    ),
    ("vault service token", "VAULT ", "hvs." + _MIX[:60] + _HEX[:40], " ok"),
    ("sentry user token", "sentry-cli ", "sntryu_" + _HEX[:64], " ok"),
    ("postman key", "newman ", "PMAK-" + _HEX[:24] + "-" + _HEX[24:58], " ok"),
    (
        "jwt",
        "cookie=abc; jwt ",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        " sent",
    ),
    (
        "pem rsa",
        "key:\n",
        "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "-----END RSA PRIVATE KEY-----",
        "\ndone",
    ),
    (
        "pem openssh",
        "id:\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY + "-----END OPENSSH PRIVATE KEY-----",
        "\ndone",
    ),
    (
        "pem ec",
        "ec:\n",
        "-----BEGIN EC PRIVATE KEY-----\n" + _PEM_BODY + "-----END EC PRIVATE KEY-----",
        "\ndone",
    ),
    (
        "pem encrypted",
        "p8:\n",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
        + _PEM_BODY
        + "-----END ENCRYPTED PRIVATE KEY-----",
        "\ndone",
    ),
    (
        "authorization bearer",
        "curl -H 'Authorization: Bearer ",
        "Zm9vYmFyLXNlY3JldC12YWx1ZQ",
        "' https://x",
    ),
    ("authorization basic", "Authorization: Basic ", "dXNlcjpwYXNzd29yZDEyMw==", "\nHost: x"),
    ("curl user and password", "curl -sS -u ", "deploy:Pa55w0rdXyZ", " https://ci.internal/job"),
    ("password flag", "mysql -u app --password ", "Tr0ub4dor&3x", " -h db"),
    ("token flag", "gh auth login --token ", "t0k3nV4lu3Xy", " --hostname x"),
    (
        "password in a query string",
        "GET /login?user=bob&password=",
        "hunter2hunter2",
        "&next=/ 200",
    ),
    ("token in a query string", "GET /feed?token=", "a8f5f167f44f4964e6c998dee827110c", " 200"),
    ("exported env token", "export FOO_TOKEN=", "f00b4rb4zqux1234567890", "\nexport PATH=/bin"),
    (
        "database url password",
        "DATABASE_URL=postgres://app:",
        "pa55w0rdXyZ",
        "@db.internal:5432/app",
    ),
    ("watchkeeper token", "token ", "wk_" + _B64[:43], " created"),
    ("e-mail address", "mail ", "alice.smith+ops@example.co.uk", " about it"),
    ("card number", "paid with ", "4111 1111 1111 1111", " yesterday"),
    ("card number, unspaced", "card=", "5500005555555559", "; ok"),
]

#: Ordinary output that must come back unchanged.
NEGATIVES = [
    "collected 312 items; 3 failed in tests/test_api.py::test_token_expiry (took 4.2s)",
    "2026-01-05 12:30:45 INFO GET https://example.com/api/v1/runs?limit=20 200",
    "usage: input_tokens=1200 output_tokens: 340 max_tokens=4096",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b by author=Jane (authored)",
    "run 9b2e1f4c-0d2a-4a8e-9a57-6a1e8a3b7c11 moved to stalled after 600 s",
    "disk-usage 82% of /dev/sda1; skipping sk-1 and task-17",
    "The quick brown fox jumps over the lazy dog, then asks for the key to the shed.",
    "remote: git@github.com:acme/watchkeeper.git pushed 4 objects",
    "Merge: 1c8e1a2 9f00b3c  tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 pulled",
    "at 1733500000000 ms the batch of 4096 rows finished; order 1234567890123 shipped",
    'Traceback (most recent call last):\n  File "/usr/lib/python3.11/site-packages/foo/bar.py", line 12, in main',
    "   Compiling serde_json v1.0.128\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.31s",
    "ok  \tgithub.com/acme/widget/internal/store\t0.012s\tcoverage: 81.4% of statements",
    "see the docs at https://docs.example.com/guide?page=2#passwords for how to rotate them",
    "TestSomethingVeryLongCamelCaseName123abc passed on /home/runner/work/watchkeeper/src",
]


def _runs(secret: str, size: int = 8) -> list[str]:
    """Every run of ``size`` characters of ``secret`` (the secret itself when shorter)."""
    if len(secret) <= size:
        return [secret]
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def _leaks(secret: str, cleaned: str, kept: str) -> list[str]:
    """Runs of ``secret`` in ``cleaned`` that ``kept`` (the text meant to stay) does not explain."""
    return [run for run in _runs(secret) if run in cleaned and run not in kept]


#: What a secret, an e-mail address and a card number become.
_MASKS = (MASK, "[email]", "[card]")
_IDS = [sample[0] for sample in SAMPLES]


def test_the_table_holds_at_least_forty_shapes() -> None:
    assert len(SAMPLES) >= 40 and len(set(_IDS)) == len(_IDS)


@pytest.mark.parametrize(("shape", "before", "secret", "after"), SAMPLES, ids=_IDS)
def test_every_secret_shape_is_masked_and_its_surroundings_kept(
    shape: str, before: str, secret: str, after: str
) -> None:
    cleaned = redact(before + secret + after)
    assert any(mask in cleaned for mask in _MASKS), cleaned
    leaked = _leaks(secret, cleaned, before + after + "".join(_MASKS))
    assert leaked == [], f"{shape}: {leaked[:3]} survived in {cleaned!r}"
    assert cleaned.startswith(before.rstrip("'\"")), cleaned
    assert cleaned.endswith(after), cleaned


@pytest.mark.parametrize(("shape", "before", "secret", "after"), SAMPLES, ids=_IDS)
def test_every_secret_shape_is_masked_in_the_live_log_when_written_in_two_pieces(
    shape: str, before: str, secret: str, after: str
) -> None:
    line = f"starting\n{before}{secret}{after}\nnext line\n".encode()
    cut = len(f"starting\n{before}".encode()) + len(secret.encode()) // 2
    shown = b"".join(redact_lines([line[:cut], line[cut:]])).decode()
    leaked = _leaks(secret, shown, before + after + "starting next line" + "".join(_MASKS))
    assert leaked == [], f"{shape}: {leaked[:3]} survived in {shown!r}"
    assert shown.startswith("starting\n") and shown.endswith("\nnext line\n"), shown


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_the_table_names_every_shape_once() -> None:
    names = [shape.name for shape in SHAPES]
    assert len(names) == len(set(names))


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


def test_a_card_number_failing_the_luhn_check_is_kept() -> None:
    assert redact("order 4111 1111 1111 1112 shipped") == "order 4111 1111 1111 1112 shipped"


@pytest.mark.parametrize(
    "hostile",
    [
        "token " + "a-" * 100_000,
        "token=" * 40_000,
        "private key\n" + ("QUJD" * 40 + "\n") * 3_000,
        "x://" + "a-" * 100_000,
        "aws secret " + "a" * 200_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 10_000,
        "curl " * 40_000 + " -u " * 40_000,
        "--password " * 40_000,
        "a@" * 100_000,
        "2345 " * 40_000,
        "A" * 200_000,
        "ey" * 100_000 + ".ey" * 50_000,
        "s." * 100_000,
        "twitter = " * 20_000,
        "key" + " " * 200_000 + "x",
        "cl_password" + " " * 100_000 + ":" + " " * 100_000,
        "//" * 100_000 + "/:_authToken=",
        "sk-" * 60_000 + "T3BlbkFJ",
        "eyJ" * 60_000,
    ],
    ids=[
        "names",
        "keywords",
        "key lines",
        "schemes",
        "aws",
        "begins",
        "curl",
        "flags",
        "addresses",
        "digits",
        "one letter",
        "jwt",
        "vault",
        "context",
        "spaces after a keyword",
        "spaces around an assignment",
        "npmrc",
        "openai marker",
        "jwt starts",
    ],
)
def test_hostile_input_is_redacted_in_one_pass(hostile: str) -> None:
    # Patterns that backtrack over unbounded runs take minutes on these; bounded ones, moments.
    cleaned = redact(hostile)
    assert len(cleaned) <= len(hostile) + len(MASK)


def _plain_rule(text: str) -> str:
    """Redaction as its rule says: every shape a trigger of which the text holds, in order."""
    lower = text.lower()
    for shape in SHAPES:
        if not shape.triggers or any(re.search(t, lower) for t in shape.triggers):
            text = shape.rewrite(text)
    return text


def test_running_only_the_triggered_shapes_masks_exactly_what_the_plain_rule_does() -> None:
    rng = random.Random(17)
    pieces = [before + secret + after for _, before, secret, after in SAMPLES]
    # Triggers that start at one position or sit inside or across each other's matches.
    pieces += [
        "authorization_token=abc123def456ghi",
        "Authorization: Bearer eyJabcdefgh.ijklmnopq.rstuvwxyz0",
        "https://user:" + "sk-" + _B64[:20] + "@host/x?api_key=zzz&passwd=p",
        "aws secret_token = " + _B64[:40],
        "max_tokens=4096 auth=secret-value",
        "-----END RSA PRIVATE KEY-----",
        "xoxe.xoxb-1-" + _MIX[:10],
        "sk_live_sk_test_" + _B64[:12],
        # detect-secrets' plugins: keyword contexts, prefixes inside other prefixes.
        "ibm_api_key: " + _B64[:44],
        "cl_password = " + _HEX[:64] + "\nAccountKey=" + _B64[:64] + _B64[:24],
        " AKC" + _MIX[:20] + " AP1" + _MIX[:20],
        "ghp_" + _B64[:36] + "glpat-" + _MIX[:20],
        "softlayer_key=" + _HEX[:64] + " " + _HEX[:32] + "-us12",
        "amqp://guest:pa55@rabbit",
    ]
    for _ in range(300):
        text = " ".join(rng.sample(pieces, rng.randint(1, 4)))
        cut = rng.randint(0, len(text))
        for sample in (text, text[:cut], text[cut:], text.upper(), text.replace(" ", "\n")):
            assert redact(sample) == _plain_rule(sample), sample


def test_the_advice_to_a_request_without_a_token_survives_redaction_whole() -> None:
    # Every answer is redacted on its way out; a flag's advice must not read as a secret.
    assert redact(NO_BEARER_ADVICE) == NO_BEARER_ADVICE
    assert "WATCHKEEPER_TOKEN or the command line's --token," in NO_BEARER_ADVICE
