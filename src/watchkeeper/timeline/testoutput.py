"""Test output as the timeline keeps it: a summary, never the raw text.

An event of any phase may carry what a test runner printed. The raw text carries
whatever the tests printed (fixtures, captured output, personal data), so the timeline
keeps only what it needs to explain the round: the counts (failed, errors, passed,
skipped), the failing tests' names (at most :data:`NAMES_MAX`) and the first assertion
line, each redacted (:func:`watchkeeper.redact.redact` masks secrets, e-mail addresses
and card numbers alike). The output of pytest, unittest, jest, ``go test``, ``cargo
test``, TAP producers, mocha and Maven's surefire is read (:mod:`.testrunners`); any
other text that looks like test output is described by its length only.
"""

from __future__ import annotations

from collections.abc import Iterable

from watchkeeper.redact import redact
from watchkeeper.timeline import testrunners

#: Failing tests named in a summary; the rest are counted.
NAMES_MAX = 20
NAME_MAX = 200
ASSERTION_MAX = 200
_ORDER = ("failed", "errors", "passed", "skipped")


def looks_like(text: str) -> bool:
    """Whether ``text`` looks like what a test runner prints."""
    return testrunners.LOOKS.search(text) is not None


def is_test_output(text: str, verify: bool) -> bool:
    """Whether ``text``, sent in an event (``verify``: a verify phase's), is to be kept as
    its summary: test-like text in any phase; any text of several lines in a verify phase."""
    return looks_like(text) or (verify and "\n" in text.strip())


def summarize(text: str) -> str | None:
    """The summary of test output: counts and names, or its length when no runner's output
    is recognized; ``None`` when ``text`` does not look like test output at all."""
    if not looks_like(text):
        return None
    found = testrunners.read(text)
    if found is None:
        return lines_of(text)
    parts = [_counts(found.counts)]
    if found.names:
        parts.append("failed: " + _names(found.names))
    if found.assertion:
        parts.append("first assertion: " + _masked(found.assertion, ASSERTION_MAX))
    return "; ".join(part for part in parts if part)


def describe(text: str) -> str:
    """:func:`summarize`, or only how long ``text`` is when it is not even test-like."""
    return summarize(text) or lines_of(text)


def lines_of(text: str) -> str:
    """How long ``text`` is, in lines: all a summary says of output no runner's reading fits."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return f"test output not recognized ({lines} lines)"


def _counts(counts: dict[str, int]) -> str:
    shown = []
    for key in (*_ORDER, *sorted(set(counts) - set(_ORDER))):
        number = counts.get(key, 0)
        if number:
            word = ("error" if number == 1 else "errors") if key == "errors" else key
            if number == 1 and word.startswith("packages "):
                word = "package " + word.removeprefix("packages ")
            shown.append(f"{number} {word}")
    return ", ".join(shown)


def _names(names: Iterable[str]) -> str:
    unique = list(dict.fromkeys(_masked(name, NAME_MAX) for name in names))
    shown = ", ".join(unique[:NAMES_MAX])
    if len(unique) > NAMES_MAX:
        shown += f" (+{len(unique) - NAMES_MAX} more)"
    return shown


def _masked(text: str, limit: int) -> str:
    """Redacted (secrets, e-mail addresses, card numbers), capped at ``limit``."""
    text = redact(text.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."
