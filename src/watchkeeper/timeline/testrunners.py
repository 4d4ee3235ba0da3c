"""How each test runner's output is read: its counts, failing tests and first assertion.

One reader a runner: pytest, unittest, jest, ``go test`` (verbose or not, one package or
many), ``cargo test`` (every test binary's result line summed), TAP producers, mocha and
Maven's surefire. :data:`LOOKS` says whether a text looks like any of them, or like test
output at all (two or more PASS/FAIL or check-mark lines); :func:`read` returns what the
first reader that finds counts or names found, ``None`` when none does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_M = re.MULTILINE
#: A line any runner may print for one test: a check mark or a cross, PASS or FAIL.
_MARK = r"(?:[\u2713\u2714\u2717\u2716\u00d7]|(?:PASS|FAIL)(?:ED)?\b)"

LOOKS = re.compile(
    r"\b\d+ (?:passed|failed)\b|^(?:FAILED|ERROR) \S+::|\bAssertionError\b|^\s*={5,}"
    r"|^Ran \d+ tests? in |^Tests:\s+\d+"
    r"|^=== RUN\s|^\s*--- (?:PASS|FAIL|SKIP): |^(?:ok|FAIL)\s+\S+\s+(?:\d[\d.]*s|\(cached\))"
    r"|^running \d+ tests?$|^test result: "
    r"|^(?:not )?ok \d+\b|^\s*\d+ (?:passing|failing|pending)\b|\bTests run: \d+, Failures: \d+"
    rf"|^[ \t]*{_MARK}.*\n(?:.*\n)*?[ \t]*{_MARK}",
    _M,
)


@dataclass(frozen=True)
class Found:
    """What one reader found: counts by outcome, failing tests' names, the first assertion."""

    counts: dict[str, int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    assertion: str | None = None


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> str | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


def _add(counts: dict[str, int], key: str, number: int) -> None:
    counts[key] = counts.get(key, 0) + number


# -- pytest, unittest, jest --------------------------------------------------------------

_PYTEST_COUNT = re.compile(
    r"(\d+) (failed|passed|skipped|errors?|xfailed|xpassed|deselected|warnings?)\b"
)
_PYTEST_TOTALS = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in [\d.]+s\b.*$", _M)
_PYTEST_NAME = re.compile(r"^(?:FAILED|ERROR) (\S+::.+?)(?: - .*)?$", _M)
_ASSERTIONS = (
    re.compile(r"^E\s+((?:AssertionError\b|assert\b).*)$", _M),
    re.compile(r"^\s*(AssertionError\b.*)$", _M),
    re.compile(r"^\s+(expect\(.*)$", _M),
)


def pytest(text: str) -> Found | None:
    counts: dict[str, int] = {}
    totals = _PYTEST_TOTALS.findall(text)
    if totals:
        for number, word in _PYTEST_COUNT.findall(totals[-1]):
            _add(counts, "errors" if word.startswith("error") else word, int(number))
    names = [name.strip() for name in _PYTEST_NAME.findall(text)]
    return Found(counts, names, _first(_ASSERTIONS, text)) if counts or names else None


_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", _M)
_UNITTEST_STATUS = re.compile(r"^(?:OK|FAILED)(?: \((.*)\))?\s*$", _M)
_UNITTEST_NAME = re.compile(r"^(?:FAIL|ERROR): \S+ \(([^)]+)\)", _M)


def unittest(text: str) -> Found | None:
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
    return Found(counts, _UNITTEST_NAME.findall(text), _first(_ASSERTIONS, text))


_JEST_TESTS = re.compile(r"^Tests:\s+(.*)$", _M)
_JEST_COUNT = re.compile(r"(\d+) (failed|passed|skipped|todo)\b")
_JEST_NAME = re.compile(r"^\s+\u25cf (.+?)\s*$", _M)


def jest(text: str) -> Found | None:
    totals = _JEST_TESTS.findall(text)
    if not totals:
        return None
    counts = {word: int(number) for number, word in _JEST_COUNT.findall(totals[-1])}
    names = [name for name in _JEST_NAME.findall(text) if name != "Test suite failed to run"]
    return Found(counts, names, _first(_ASSERTIONS, text))


# -- go test -----------------------------------------------------------------------------

_GO_TEST = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(", _M)
_GO_PACKAGE = re.compile(r"^(ok|FAIL)\s+\S+\s+(?:\d[\d.]*s|\(cached\))", _M)
_GO_ASSERTIONS = (
    re.compile(r"^\s+(\w+_test\.go:\d+: .*)$", _M),
    re.compile(r"^(panic: .*)$", _M),
)
_GO_WORDS = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}


def go(text: str) -> Found | None:
    counts: dict[str, int] = {}
    names = []
    for outcome, name in _GO_TEST.findall(text):
        _add(counts, _GO_WORDS[outcome], 1)
        if outcome == "FAIL":
            names.append(name)
    packages = _GO_PACKAGE.findall(text)
    if "passed" not in counts and packages:  # not verbose: passing tests are not listed
        for outcome in packages:
            _add(counts, "packages ok" if outcome == "ok" else "packages failed", 1)
    if not counts:
        return None
    return Found(counts, names, _first(_GO_ASSERTIONS, text))


# -- cargo test --------------------------------------------------------------------------

_CARGO_RESULT = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;(?: (\d+) measured;)?", _M
)
_CARGO_NAME = re.compile(r"^test (\S+) \.\.\. FAILED$", _M)
_CARGO_ASSERTIONS = (
    re.compile(r"^(assertion .* failed.*)$", _M),
    re.compile(r"panicked at [^\n]*:\n(.+)$", _M),
    re.compile(r"panicked at '(.*)'", _M),
)


def cargo(text: str) -> Found | None:
    results = _CARGO_RESULT.findall(text)
    if not results:
        return None
    counts: dict[str, int] = {}
    for passed, failed, ignored, _measured in results:
        _add(counts, "passed", int(passed))
        _add(counts, "failed", int(failed))
        _add(counts, "skipped", int(ignored))
    return Found(counts, _CARGO_NAME.findall(text), _first(_CARGO_ASSERTIONS, text))


# -- TAP, mocha, surefire ----------------------------------------------------------------

_TAP = re.compile(r"^(not )?ok \d+\b(?: -)?\s*(.*?)(\s+# (?:SKIP|skip|TODO|todo)\b.*)?$", _M)


def tap(text: str) -> Found | None:
    counts: dict[str, int] = {}
    names = []
    for failed, name, skipped in _TAP.findall(text):
        _add(counts, "skipped" if skipped else "failed" if failed else "passed", 1)
        if failed and not skipped:
            names.append(name or "unnamed")
    return Found(counts, names) if counts else None


_MOCHA = re.compile(r"^\s*(\d+) (passing|failing|pending)\b", _M)
_MOCHA_WORDS = {"passing": "passed", "failing": "failed", "pending": "skipped"}
_MOCHA_NAME = re.compile(r"^\s+\d+\) (.+?):?\s*$", _M)


def mocha(text: str) -> Found | None:
    counts: dict[str, int] = {}
    for number, word in _MOCHA.findall(text):
        _add(counts, _MOCHA_WORDS[word], int(number))
    return Found(counts, _MOCHA_NAME.findall(text)) if counts else None


_SUREFIRE = re.compile(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)")
_SUREFIRE_NAME = re.compile(r"^\[ERROR\]\s+(\S+?)(?:\(|\s+(?:Time elapsed|\u00bb))", _M)


def surefire(text: str) -> Found | None:
    totals = _SUREFIRE.findall(text)
    if not totals:
        return None
    ran, failed, errors, skipped = (int(n) for n in totals[-1])
    counts = {
        "failed": failed,
        "errors": errors,
        "skipped": skipped,
        "passed": max(0, ran - failed - errors - skipped),
    }
    return Found(counts, _SUREFIRE_NAME.findall(text))


#: The readers, most particular first: cargo's and mocha's lines would read as pytest's.
READERS: tuple[Callable[[str], Found | None], ...] = (
    jest,
    unittest,
    cargo,
    go,
    surefire,
    mocha,
    tap,
    pytest,
)


def read(text: str) -> Found | None:
    """What the first reader that finds counts or names finds in ``text``."""
    for reader in READERS:
        found = reader(text)
        if found is not None and (any(found.counts.values()) or found.names):
            return found
    return None
