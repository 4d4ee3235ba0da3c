"""What "the same observation again" means for the kinds watchkeeper reads from its own
stores: pure functions over what they observed, for the judge's ``looping`` verdict.

- A process run's output: the same line, or the same block of up to
  :data:`LONGEST_BLOCK` lines, again and again at the end of its log (blank lines
  aside, trailing spaces aside, byte for byte otherwise: a line with a counter or a
  time in it is a new line each time). Counted within the last :data:`TAIL_BYTES`
  of the log.
- A queue task's timeline: rounds that carry the same fingerprint as the round before
  them (rounds without one, once the task fingerprints, are skipped, as
  :func:`watchkeeper.timeline.service.progress_time` skips them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from watchkeeper.records.timeline import Fact

#: How much of a log's end is read to count repeated lines.
TAIL_BYTES = 16 * 1024
#: The longest block of lines that is recognised as repeating.
LONGEST_BLOCK = 4
#: The longest text of what repeats that a verdict quotes.
QUOTED_MAX = 200
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Repetition:
    """The same observation ``count`` times in a row (2 or more), in words: ``what``."""

    count: int
    what: str


def repeated_lines(tail: bytes, *, whole: bool = False) -> Repetition | None:
    """The block of lines that ends ``tail`` (a log's last bytes, or all of it when
    ``whole``) and repeats just before it, the shortest such block, or ``None`` when the
    last line is not a repeat.

    An unfinished last line (no line break after it yet) is left out, and so is the
    first line of a tail that starts inside the log (it may be cut).
    """
    pieces = _LINE_BREAK.split(tail)
    pieces.pop()  # after the last break: unfinished, or empty
    lines = [line.rstrip() for line in pieces[0 if whole else 1 :] if line.strip()]
    for size in range(1, LONGEST_BLOCK + 1):
        count = _count_block(lines, size)
        if count >= 2:
            block = " / ".join(line.decode("utf-8", "replace") for line in lines[-size:])
            return Repetition(count, _quoted(block))
    return None


def _count_block(lines: list[bytes], size: int) -> int:
    """How many times the last ``size`` lines repeat back to back at the end of ``lines``."""
    if len(lines) < 2 * size:
        return 0
    block = lines[-size:]
    count = 1
    end = len(lines) - size
    while end - size >= 0 and lines[end - size : end] == block:
        count += 1
        end -= size
    return count


def repeated_rounds(facts: Iterable[Fact]) -> Repetition | None:
    """The fingerprint the last rounds of a task's timeline share, and how many rounds in a
    row carry it (2 or more), or ``None``."""
    rounds: dict[int, str | None] = {}
    for _, number, fingerprint in facts:
        if number is not None and rounds.get(number) is None:
            rounds[number] = fingerprint
    fingerprinted = [rounds[number] for number in sorted(rounds) if rounds[number] is not None]
    if len(fingerprinted) < 2 or fingerprinted[-1] != fingerprinted[-2]:
        return None
    last = fingerprinted[-1]
    count = 0
    for fingerprint in reversed(fingerprinted):
        if fingerprint != last:
            break
        count += 1
    return Repetition(count, _quoted(f"round fingerprint {last}"))


def last_event_at(facts: Iterable[Fact]) -> float | None:
    """When the latest event of a task's timeline happened."""
    return max((at for at, _, _ in facts), default=None)


def _quoted(text: str) -> str:
    return text if len(text) <= QUOTED_MAX else text[: QUOTED_MAX - 1] + "…"
