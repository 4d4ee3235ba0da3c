"""Remove secrets and personal data from text before it is stored, shown, logged or sent.

Every exit of the project (logs, error messages, the dashboard, CLI output, cards,
hooks, diagnoses, the timeline, task and process output) goes through :func:`redact`,
and every shape it knows lives in one table, :data:`SHAPES`:

- the provider tokens are the regexes of detect-secrets' regex-based plugins
  (:mod:`watchkeeper.redact.detectors`), read on the first redaction;
- the shapes those do not cover (PEM blocks, headers, URL passwords, ``name=value``
  pairs and ``--password X`` flags, bare AWS secret keys, e-mail addresses and card
  numbers, the provider tokens no plugin reads, watchkeeper's ``wk_`` tokens) are kept
  in :mod:`watchkeeper.redact.shapes`.

Speed: most texts hold no secret. A shape's triggers (a prefix, or a literal every match
holds) are its gate: its pattern runs only on a text that holds one. One compiled
alternation of every trigger's literal part, longest first, finds them all in one pass of
the regex engine (``findall``); the triggers a found literal holds, or may run into past
its end, are read from tables built once. A pattern that starts at its trigger is tried
only there, and one matched a line at a time only on the lines holding a trigger.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from watchkeeper.redact import detectors
from watchkeeper.redact.shape import CARD_MASK, EMAIL_MASK, MASK, Shape, literal_part
from watchkeeper.redact.shapes import HEAD, PROVIDERS, TAIL

__all__ = [
    "CARD_MASK",
    "EMAIL_MASK",
    "MASK",
    "MAX_LINE_BYTES",
    "SHAPES",
    "Shape",
    "redact",
    "redact_bytes",
    "redact_lines",
    "tail",
    "whole_lines",
]

#: A line longer than this is redacted as it stands rather than held back whole.
MAX_LINE_BYTES = 256 * 1024

#: A regex trigger whose literal part is this short is searched for alone: as a literal
#: it would be found all over ordinary text ("ac", "ap"), and so would the literals that
#: may start inside it.
_SHORT = 2


class _Gates:
    """Which shapes' triggers a lower-cased text holds, and where the first of each starts."""

    def __init__(self, shapes: tuple[Shape, ...]) -> None:
        self.always = frozenset(i for i, shape in enumerate(shapes) if not shape.triggers)
        #: Shapes by the literal trigger that gates them; regex triggers by their literal
        #: part, and those whose literal part is short (in most texts) apart.
        self.by_literal: dict[str, set[int]] = {}
        self.regexes: dict[str, list[tuple[re.Pattern[str], frozenset[int]]]] = {}
        self.unscanned: list[tuple[re.Pattern[str], frozenset[int]]] = []
        regex_shapes: dict[str, set[int]] = {}
        for index, shape in enumerate(shapes):
            for trigger in shape.triggers:
                literal, whole = literal_part(trigger)
                if shape.from_trigger and not whole:
                    raise ValueError(f"{shape.name}: a trigger it starts at must be a literal")
                if whole:
                    self.by_literal.setdefault(literal, set()).add(index)
                else:
                    regex_shapes.setdefault(trigger, set()).add(index)
        for trigger, indexes in regex_shapes.items():
            literal = literal_part(trigger)[0]
            gate = (re.compile(trigger), frozenset(indexes))
            if len(literal) <= _SHORT:
                self.unscanned.append(gate)
            else:
                self.by_literal.setdefault(literal, set())
                self.regexes.setdefault(literal, []).append(gate)
        #: The short regex triggers that start with a literal, as one alternation: the
        #: engine skips to their first characters, and most texts hold none of them.
        led = [trigger.pattern for trigger, _ in self.unscanned if literal_part(trigger.pattern)[0]]
        self.any_led = re.compile("|".join(f"(?:{trigger})" for trigger in led) or "(?!)")
        self.unled = [gate for gate in self.unscanned if not literal_part(gate[0].pattern)[0]]
        self.led = [gate for gate in self.unscanned if literal_part(gate[0].pattern)[0]]
        literals = sorted(self.by_literal)
        self.scan = re.compile(_trie(literals))
        #: Every literal by each of its proper prefixes, to find what may run on past a hit.
        self.by_prefix: dict[str, list[str]] = {}
        for literal in literals:
            for end in range(1, len(literal)):
                self.by_prefix.setdefault(literal[:end], []).append(literal)
        self.near: dict[str, tuple[frozenset[int], tuple[str, ...], tuple[str, ...]]] = {}

    def found(self, lower: str) -> Iterable[int]:
        """The indexes of the shapes to run on ``lower``, in order.

        ``findall`` takes the longest literal at each place it stops and goes on after it,
        so a literal is missed only where it starts inside a found one: it lies inside it,
        or runs on past its end (looked up by itself).
        """
        hits = set(self.scan.findall(lower))
        shapes = set(self.always) if self.always else set()
        self._search(lower, self.unled, shapes)
        if self.any_led.search(lower):
            self._search(lower, self.led, shapes)
        if not hits:
            return sorted(shapes) if shapes else ()
        seen = set(hits)
        for hit in hits:
            indexes, running_on, regex_literals = self.near.get(hit) or self._near(hit)
            shapes |= indexes
            for literal in regex_literals:
                self._search(lower, self.regexes[literal], shapes)
            for other in running_on:
                if other not in seen and other in lower:
                    seen.add(other)
                    hits_of_other = self.near.get(other) or self._near(other)
                    shapes |= hits_of_other[0]
                    for literal in hits_of_other[2]:
                        self._search(lower, self.regexes[literal], shapes)
        return sorted(shapes)

    @staticmethod
    def _search(
        lower: str, gates: list[tuple[re.Pattern[str], frozenset[int]]], shapes: set[int]
    ) -> None:
        for trigger, indexes in gates:
            if not indexes <= shapes and trigger.search(lower):
                shapes |= indexes

    def _near(self, hit: str) -> tuple[frozenset[int], tuple[str, ...], tuple[str, ...]]:
        """The shapes of the literals inside ``hit``, the literals that may start inside it
        and end past it, and the literals inside it that regex triggers start with."""
        inside = {hit[i:j] for i in range(len(hit)) for j in range(i + 1, len(hit) + 1)}
        inside &= self.by_literal.keys()
        running_on = tuple(
            other for i in range(1, len(hit)) for other in self.by_prefix.get(hit[i:], ())
        )
        indexes = frozenset(i for literal in inside for i in self.by_literal[literal])
        regex_literals = tuple(literal for literal in inside if literal in self.regexes)
        found = self.near[hit] = (indexes, running_on, regex_literals)
        return found


def _trie(literals: Iterable[str]) -> str:
    """One regex matching the longest of ``literals`` that starts at a place, as a trie.

    At each place the engine tests one character against each branch of a node, not each
    literal: five to seven times faster than the flat alternation on ordinary text.
    """
    root: dict[str, Any] = {}
    for literal in literals:
        node = root
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node(root)


def _node(node: dict[str, Any]) -> str:
    branches = [re.escape(char) + _node(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    if "" not in node:
        return body
    # A literal ends here and longer ones go on: the longer are tried first (greedy).
    return f"(?:{body})?" if len(branches) == 1 else f"{body}?"


class _Table:
    """The shapes in the order they run, and their gates."""

    def __init__(self, shapes: tuple[Shape, ...]) -> None:
        self.shapes = shapes
        self.gates = _Gates(shapes)


class _Loader:
    """Builds the table on first use: detect-secrets' plugins are imported then, not before.

    A log record made while they load, in the loading thread (logging passes records
    through :func:`redact`), is redacted by the shapes kept by hand alone.
    """

    def __init__(self) -> None:
        self.table: _Table | None = None
        self.hand_kept: _Table | None = None
        self.loading = False
        self.lock = threading.RLock()

    def __call__(self) -> _Table:
        if self.table is not None:
            return self.table
        with self.lock:
            if self.table is not None:
                return self.table
            if self.loading:
                if self.hand_kept is None:
                    self.hand_kept = _Table((*HEAD, *PROVIDERS, *TAIL))
                return self.hand_kept
            self.loading = True
            try:
                self.table = _Table((*HEAD, *detectors.load(), *PROVIDERS, *TAIL))
            finally:
                self.loading = False
            return self.table


_loaded = _Loader()


def __getattr__(name: str) -> tuple[Shape, ...]:
    # SHAPES is built on first use (PEP 562), like the table redact() reads.
    if name == "SHAPES":
        return _loaded().shapes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def redact(text: str) -> str:
    """``text`` with every secret it appears to contain replaced by ``[redacted]``, e-mail
    addresses by ``[email]`` and card numbers by ``[card]``."""
    table = _loaded()
    lower = text.lower()
    found = table.gates.found(lower)
    if not found:
        return text
    shortcuts, lowered = _places_agree(text), text
    for index in found:
        shape = table.shapes[index]
        if shortcuts and shape.triggers and (shape.from_trigger or shape.by_line):
            if lowered is not text:
                lower, lowered = text.lower(), text
            text = shape.rewrite_at(text, lower)
        else:
            text = shape.rewrite(text)
    return text


#: The characters a case-insensitive pattern matches to an ASCII letter that lower-casing
#: does not make that letter (``(?i)s`` matches the long s), or makes two characters.
_UNLIKE_LOWER = ("\u0130", "\u0131", "\u017f")


def _places_agree(text: str) -> bool:
    """Whether every match of a pattern starts where ``text.lower()`` shows its trigger.

    Each character lower-cases to one then (a mask is ASCII too, so this holds as shapes
    rewrite the text), and ``(?i)`` matches a trigger's ASCII letters only where
    lower-casing shows them.
    """
    return text.isascii() or not any(char in text for char in _UNLIKE_LOWER)


def tail(text: str, lines: int = 20, max_chars: int = 4000) -> str:
    """The last ``lines`` lines of ``text``, redacted and capped at ``max_chars``."""
    kept = "\n".join(text.splitlines()[-lines:])
    return redact(kept)[-max_chars:]


def whole_lines(data: bytes, *, final: bool) -> int:
    """How many bytes of ``data`` to redact now: up to its last newline.

    A secret written in two pieces is only recognisable once its line is
    complete, so an unfinished last line waits, unless the stream has ended
    (``final``) or the line is too long to keep waiting for.
    """
    if final or len(data) >= MAX_LINE_BYTES:
        return len(data)
    # A carriage return ends a line too: progress bars redraw with it and never print "\n".
    return max(data.rfind(b"\n"), data.rfind(b"\r")) + 1


def redact_bytes(data: bytes) -> bytes:
    """Raw output (UTF-8, broken bytes replaced) redacted."""
    return redact(data.decode("utf-8", "replace")).encode("utf-8")


def redact_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A byte stream redacted a whole line at a time, whatever the sizes of its writes."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        cut = whole_lines(pending, final=False)
        if cut:
            yield redact_bytes(pending[:cut])
            pending = pending[cut:]
    if pending:
        yield redact_bytes(pending)
