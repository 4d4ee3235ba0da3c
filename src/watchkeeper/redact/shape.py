"""What a secret shape is: what to look for first, what to replace, and how.

Every shape of :data:`watchkeeper.redact.SHAPES` is one :class:`Shape`, whether it comes
from detect-secrets' plugins (:mod:`watchkeeper.redact.detectors`) or is kept by hand
(:mod:`watchkeeper.redact.shapes`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

MASK = "[redacted]"
EMAIL_MASK = "[email]"
CARD_MASK = "[card]"

Replacement = str | Callable[[re.Match[str]], str]

_QUANTIFIERS = "?*{"
_SPECIAL = ".^$*+?{}[]|()"


def literal_part(trigger: str) -> tuple[str, bool]:
    """The literal text every match of ``trigger`` starts with (may be none), and whether
    that is all of it."""
    out: list[str] = []
    i = 0
    while i < len(trigger):
        char = trigger[i]
        if char == "\\" and i + 1 < len(trigger) and not trigger[i + 1].isalnum():
            out.append(trigger[i + 1])
            i += 2
        elif char == "\\" or char in _SPECIAL:
            if char in _QUANTIFIERS and out:
                out.pop()  # the character before an optional repeat may be missing
            return "".join(out), False
        else:
            out.append(char)
            i += 1
    return "".join(out), True


@dataclass(frozen=True)
class Shape:
    """One kind of secret: what to look for first, what to replace, and how."""

    name: str
    #: Regexes matched against the lower-cased text, one of which every match holds; most
    #: start with a literal, found by the combined pre-check in one pass. The pattern runs
    #: only on a text where one of them occurs; none: on every text.
    triggers: tuple[str, ...]
    #: The pattern's source; compiled when first needed (most texts need few shapes).
    regex: str
    replacement: Replacement = MASK
    flags: int = 0
    #: For a shape a regex alone would find only by backtracking: the whole rewrite.
    apply: Callable[[str], str] | None = field(default=None, compare=False)
    #: Every match starts where one of the (literal) triggers does, in an ASCII text (where
    #: ``(?i)`` is plain lower-casing): the pattern is tried there alone. A
    #: case-insensitive pattern gives the engine no first character to skip ahead to, and
    #: costs most on all the text between its keywords.
    from_trigger: bool = False
    #: The pattern is matched against each line on its own (``^`` and ``$`` are the line's
    #: ends), as detect-secrets scans; in an ASCII text, only on the lines holding a trigger.
    by_line: bool = False

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern."""
        return re.compile(self.regex, self.flags)

    @cached_property
    def _trigger_patterns(self) -> tuple[re.Pattern[str] | str, ...]:
        found: list[re.Pattern[str] | str] = []
        for trigger in self.triggers:
            literal, whole = literal_part(trigger)
            found.append(literal if whole else re.compile(trigger))
        return tuple(found)

    def rewrite(self, text: str) -> str:
        """``text`` with this shape masked."""
        if self.apply is not None:
            return self.apply(text)
        if self.by_line:
            return "\n".join(self.pattern.sub(self.replacement, line) for line in text.split("\n"))
        return self.pattern.sub(self.replacement, text)

    def rewrite_at(self, text: str, lower: str) -> str:
        """:meth:`rewrite` of an ASCII ``text`` (``lower`` lower-cased), trying the pattern
        only where a trigger starts (:attr:`from_trigger`) or on the lines holding one
        (:attr:`by_line`)."""
        places = sorted({at for found in self._trigger_patterns for at in _places(lower, found)})
        if self.by_line:
            return self._rewrite_lines(text, places)
        out: list[str] = []
        done = 0
        for at in places:
            found = self.pattern.match(text, at) if at >= done else None
            if found is not None:
                replacement = self.replacement
                masked = replacement(found) if callable(replacement) else found.expand(replacement)
                out += [text[done:at], masked]
                done = found.end()
        return "".join([*out, text[done:]]) if out else text

    def _rewrite_lines(self, text: str, places: list[int]) -> str:
        out: list[str] = []
        done = 0
        for at in places:
            if at < done:
                continue  # on a line already rewritten
            start = text.rfind("\n", done, at) + 1 or done
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            out += [text[done:start], self.pattern.sub(self.replacement, text[start:end])]
            done = end
        return "".join([*out, text[done:]]) if out else text


def _places(lower: str, trigger: re.Pattern[str] | str) -> Iterator[int]:
    """Where ``trigger`` (a literal, or a compiled regex) starts in ``lower``, overlapping
    places too."""
    if not isinstance(trigger, str):
        yield from (found.start() for found in trigger.finditer(lower))
        return
    at = lower.find(trigger)
    while at >= 0:
        yield at
        at = lower.find(trigger, at + 1)


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits a character, as detect-secrets counts."""
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values()) if size else 0.0
