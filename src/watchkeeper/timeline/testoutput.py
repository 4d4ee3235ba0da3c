"""Test output as the timeline keeps it: a summary, never the raw text.

A verify phase (or any event) may send what its test runner printed. The raw
text carries whatever the tests printed (fixtures, captured output, personal
data), so the timeline keeps only what it needs to explain the round: the
counts (failed, errors, passed, skipped), the failing tests' names (at most
:data:`NAMES_MAX`) and the first assertion line, redacted, with e-mail
addresses and card numbers masked. pytest, unittest and jest output are read;
other runners' output is described by its length only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from watchkeeper.redact import redact

#: Failing tests named in a summary; the rest are counted.
NAMES_MAX = 20
NAME_MAX = 200
ASSERTION_MAX = 200

_LOOKS = re.compile(
    r"\b\d+ (?:passed|failed)\b|^(?:FAILED|ERROR) \S+::|\bAssertionError\b|^\s*={5,}"
    r"|^Ran \d+ tests? in |^Tests:\s+\d+",
    re.MULTILINE,
)
_PYTEST_COUNT = re.compile(
    r"(\d+) (failed|passed|skipped|errors?|xfailed|xpassed|deselected|warnings?)\b"
)
_PYTEST_TOTALS = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in [\d.]+s\b.*$", re.MULTILINE)
_PYTEST_NAME = re.compile(r"^(?:FAILED|ERROR) (\S+::.+?)(?: - .*)?$", re.MULTILINE)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)
_UNITTEST_STATUS = re.compile(r"^(?:OK|FAILED)(?: \((.*)\))?\s*$", re.MULTILINE)
_UNITTEST_NAME = re.compile(r"^(?:FAIL|ERROR): \S+ \(([^)]+)\)", re.MULTILINE)
_JEST_TESTS = re.compile(r"^Tests:\s+(.*)$", re.MULTILINE)
_JEST_COUNT = re.compile(r"(\d+) (failed|passed|skipped|todo)\b")
_JEST_NAME = re.compile(r"^\s+\u25cf (.+?)\s*$", re.MULTILINE)
_ASSERTIONS = (
    re.compile(r"^E\s+((?:AssertionError\b|assert\b).*)$", re.MULTILINE),
    re.compile(r"^\s*(AssertionError\b.*)$", re.MULTILINE),
    re.compile(r"^\s+(expect\(.*)$", re.MULTILINE),
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")


def looks_like(text: str) -> bool:
    """Whether ``text`` looks like what pytest, unittest or jest print."""
    return _LOOKS.search(text) is not None


def summarize(text: str) -> str | None:
    """The summary of test output; ``None`` when ``text`` does not look like any."""
    if not looks_like(text):
        return None
    counts, names = _jest(text) or _unittest(text) or _pytest(text)
    parts = [_counts(counts) or "no counts"]
    if names:
        parts.append("failed: " + _names(names))
    assertion = _first_assertion(text)
    if assertion:
        parts.append("first assertion: " + assertion)
    return "; ".join(parts)


def describe(text: str) -> str:
    """:func:`summarize`, or only how long ``text`` is when no runner's output is recognized."""
    summary = summarize(text)
    if summary is not None:
        return summary
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return f"test output not recognized ({lines} lines)"


_Found = tuple[dict[str, int], list[str]]


def _pytest(text: str) -> _Found:
    counts: dict[str, int] = {}
    totals = _PYTEST_TOTALS.findall(text)
    if totals:
        for number, word in _PYTEST_COUNT.findall(totals[-1]):
            key = "errors" if word.startswith("error") else word
            counts[key] = counts.get(key, 0) + int(number)
    names = [name.strip() for name in _PYTEST_NAME.findall(text)]
    return counts, names


def _unittest(text: str) -> _Found | None:
    ran = _UNITTEST_RAN.findall(text)
    if not ran:
        return None
    counts = {"failed": 0, "errors": 0, "skipped": 0}
    other = 0
    status = _UNITTEST_STATUS.findall(text)
    for item in (status[-1] if status else "").split(","):
        key, _, number = item.strip().partition("=")
        if not number.isdigit():
            continue
        if key in ("failures", "errors", "skipped"):
            counts["failed" if key == "failures" else key] += int(number)
        else:  # expected failures, unexpected successes
            other += int(number)
    counts["passed"] = max(0, int(ran[-1]) - sum(counts.values()) - other)
    return counts, _UNITTEST_NAME.findall(text)


def _jest(text: str) -> _Found | None:
    totals = _JEST_TESTS.findall(text)
    if not totals:
        return None
    counts = {word: int(number) for number, word in _JEST_COUNT.findall(totals[-1])}
    names = [name for name in _JEST_NAME.findall(text) if name != "Test suite failed to run"]
    return counts, names


def _counts(counts: dict[str, int]) -> str:
    shown = []
    for key in ("failed", "errors", "passed", "skipped"):
        number = counts.get(key, 0)
        if number:
            word = ("error" if number == 1 else "errors") if key == "errors" else key
            shown.append(f"{number} {word}")
    return ", ".join(shown)


def _names(names: Iterable[str]) -> str:
    unique = list(dict.fromkeys(_masked(name, NAME_MAX) for name in names))
    shown = ", ".join(unique[:NAMES_MAX])
    if len(unique) > NAMES_MAX:
        shown += f" (+{len(unique) - NAMES_MAX} more)"
    return shown


def _first_assertion(text: str) -> str | None:
    for pattern in _ASSERTIONS:
        found = pattern.search(text)
        if found:
            return _masked(found.group(1).strip(), ASSERTION_MAX)
    return None


def _masked(text: str, limit: int) -> str:
    """Redacted, with e-mail addresses and card numbers masked, capped at ``limit``."""
    text = _CARD.sub(_card, _EMAIL.sub("[email]", redact(text)))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _card(found: re.Match[str]) -> str:
    """``[card]`` for a number that passes the Luhn check, as card numbers do."""
    digits = [int(c) for c in found.group(0) if c.isdigit()]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return "[card]" if total % 10 == 0 else found.group(0)
