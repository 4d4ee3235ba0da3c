"""Remove secrets from text before it is stored, shown, logged or sent anywhere.

Every exit of the project (logs, error messages, the dashboard, CLI output,
hooks, diagnoses, the timeline) goes through :func:`redact`, and every secret
shape it knows lives in one table, :data:`SHAPES`.

Why not detect-secrets: its plugins carry good regexes (the AWS key id
prefixes, the Discord and Telegram token shapes and the Slack webhook below
follow them), but they are built for scanning source files line by line: each
plugin answers "which strings on this line look secret" through a settings
registry and per-line filters, not "this text with secrets replaced", several
shapes we need are missing (Anthropic and project-scoped OpenAI keys, Stripe
test keys, the body of a PEM block, query strings, ``wk_`` tokens), and
running its plugin set per call costs far more than one regex pre-check.
:func:`redact` sits on the timeline ingest path, so speed matters here.

Speed: most texts hold no secret. One compiled alternation of every shape's
cheap trigger (a prefix or keyword) is searched first; a text it finds anything
in goes through the patterns of the shapes whose triggers it holds, no others.
The alternation is grouped by first character, and the case-insensitive
keyword shapes start their search just before their first trigger: such a
pattern costs most on the text before its keyword.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

MASK = "[redacted]"
#: A line longer than this is redacted as it stands rather than held back whole.
MAX_LINE_BYTES = 256 * 1024

_KEY_TRIGGERS = (
    "passw", "pwd", "passphrase", "secret", "token", "api[_-]?key", "apikey",
    r"access[_-]?key", r"private[_-]?key", "credential", "auth",
)  # fmt: skip
_KEY_WORDS = (
    r"passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credential|auth(?!or)"
)


def _keep_counts(match: re.Match[str]) -> str:
    """``name=value`` masked, except token counts (``max_tokens=4096``) that hold no secret."""
    name, separator, value = match.group(1), match.group(2), match.group(3)
    if name.lower().endswith("tokens") and value.isdigit():
        return match.group(0)
    return f"{name}{separator}{MASK}"


_PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_KEY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}[ \t]*\r?\n")


def _mask_key_tails(text: str) -> str:
    """Each END line masked with the base64 lines right before it, walking back line by line.

    A regex for "base64 lines, then END" retries from every line and goes quadratic
    on long texts; this walk reads each line at most once.
    """
    parts: list[str] = []
    done = 0
    for end in _PEM_END.finditer(text):
        start = end.start()
        while start > done:
            line_start = max(done, text.rfind("\n", done, start - 1) + 1)
            if not _KEY_LINE.fullmatch(text, line_start, start):
                break
            start = line_start
        parts += [text[done:start], MASK]
        done = end.end()
    parts.append(text[done:])
    return "".join(parts)


@dataclass(frozen=True)
class Shape:
    """One kind of secret: what to look for first, what to replace, and how."""

    name: str
    #: Regexes matched against the lower-cased text, each starting with a literal character
    #: so the combined pre-check can skip ahead quickly. The pattern runs only on a text
    #: where one of them occurs, so each must occur in every text the pattern matches.
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str] = MASK
    #: For a shape a regex alone would find only by backtracking: the whole rewrite.
    apply: Callable[[str], str] | None = None
    #: Every match starts where one of the triggers does (in an ASCII text, where
    #: ``(?i)`` is plain lower-casing) and the pattern looks back one character at most,
    #: so the search may start just before the first trigger: a case-insensitive
    #: pattern costs most on the text before its keyword.
    from_trigger: bool = False

    def rewrite(self, text: str) -> str:
        """``text`` with this shape masked."""
        if self.apply is not None:
            return self.apply(text)
        return self.pattern.sub(self.replacement, text)

    def rewrite_from(self, text: str, start: int) -> str:
        """:meth:`rewrite`, where no match can start before ``start`` nor look before it."""
        if start <= 0:
            return self.rewrite(text)
        return text[:start] + self.rewrite(text[start:])


# Order matters where shapes overlap: whole blocks and headers first, then
# provider tokens, then the generic ``name=value`` pairs. Every repeat is bounded
# or anchored on a literal: redact() must stay linear on hostile input.
SHAPES: tuple[Shape, ...] = (
    Shape(
        "pem private key",
        ("private key",),
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
    ),
    # The second half of a block whose BEGIN line arrived in an earlier write.
    Shape("pem private key end", ("private key",), _PEM_END, apply=lambda t: _mask_key_tails(t)),
    Shape(
        "authorization header",
        ("authorization",),
        re.compile(
            r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token|digest)\s+)?"
            r"[^\s'\",]+"
        ),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}",
        from_trigger=True,
    ),
    Shape(
        "bearer token",
        ("bearer",),
        re.compile(r"(?i)\b(bearer\s+)(?!\[redacted\])[A-Za-z0-9._~+/=-]{8,}"),
        rf"\1{MASK}",
        from_trigger=True,
    ),
    Shape(
        "url password",
        (r"://[^\s/@]+@",),
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://[^\s:/@]+:)[^\s@/]+@"),
        rf"\1{MASK}@",
    ),
    Shape(
        "slack webhook",
        (r"hooks\.slack\.com/",),
        re.compile(r"(https?://hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]+"),
        rf"\1{MASK}",
    ),
    Shape("telegram bot url", (r"/bot\d",), re.compile(r"(/bot)\d+:[A-Za-z0-9_-]+"), rf"\1{MASK}"),
    Shape(
        "telegram bot token",
        (r":[a-z0-9_-]{35}",),
        re.compile(r"(?<!\d)\d{5,12}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    ),
    Shape("openai or anthropic key", ("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    Shape("github classic token", ("gh[pousr]_",), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    Shape("github fine-grained token", ("github_pat_",), re.compile(r"\bgithub_pat_\w{20,}")),
    Shape(
        "slack token",
        ("xox[a-z]-", "xapp-"),
        re.compile(r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,}"),
    ),
    Shape(
        "discord bot token",
        (r"\.[a-z0-9_-]{6}\.",),
        re.compile(r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}"),
    ),
    Shape(
        "aws access key id",
        ("akia", "asia", "abia", "acca", "a3t"),
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ),
    Shape(
        "aws secret key",
        ("secret",),
        re.compile(
            r"(?i)(aws[\w .-]{0,20}?secret[\w .-]{0,20}?[\"']?\s*[:=]?\s*[\"']?)"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        rf"\1{MASK}",
    ),
    Shape("google api key", ("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    Shape(
        "stripe key",
        ("k_live_", "k_test_", "whsec_"),
        re.compile(r"\b(?:(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[0-9A-Za-z]{16,})"),
    ),
    Shape(
        "jwt",
        ("eyj",),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    Shape("watchkeeper token", ("wk_",), re.compile(r"\bwk_[A-Za-z0-9_-]{20,}")),
    # Matched from the keyword on, not from the start of the name: a name's prefix
    # (``FOO_`` in ``FOO_TOKEN``) stays as it is either way, and the search stays cheap.
    Shape(
        "name=value secret",
        _KEY_TRIGGERS,
        re.compile(
            rf"(?i)((?:{_KEY_WORDS})[A-Za-z0-9_.-]{{0,40}})"
            r"([\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
        ),
        _keep_counts,
        from_trigger=True,
    ),
)

_TRIGGERS = tuple(dict.fromkeys(trigger for shape in SHAPES for trigger in shape.triggers))


def _literal(trigger: str) -> str:
    """How ``trigger`` spells the character every match starts with (it starts with one)."""
    if trigger.startswith("\\"):
        return trigger[:2]
    if trigger[0] in "[(.*+?{|^$":
        raise ValueError(f"the trigger {trigger!r} must start with a literal character")
    return trigger[0]


def _first_character(trigger: str) -> str:
    """The literal every match of ``trigger`` starts with."""
    return _literal(trigger)[-1]


#: Per first character: the triggers starting with it, each with the shapes it stands for.
_TRIGGERS_AT: dict[str, list[tuple[re.Pattern[str], frozenset[int]]]] = {}
for _trigger in _TRIGGERS:
    _TRIGGERS_AT.setdefault(_first_character(_trigger), []).append(
        (
            re.compile(_trigger),
            frozenset(i for i, shape in enumerate(SHAPES) if _trigger in shape.triggers),
        )
    )


def _grouped(triggers: Iterable[str]) -> str:
    """One alternation of ``triggers``, grouped by first character: ``a(?:kia|uth)|s(?:k-)``.

    It matches where the flat alternation does, about twice as fast: at each position
    the engine tries one branch per first character, not every trigger.
    """
    by_first: dict[str, list[str]] = {}
    for trigger in triggers:
        literal = _literal(trigger)
        by_first.setdefault(literal, []).append(trigger[len(literal) :])
    return "|".join(f"{literal}(?:{'|'.join(rests)})" for literal, rests in by_first.items())


_TRIGGER = re.compile(_grouped(_TRIGGERS))


def redact(text: str) -> str:
    """``text`` with every secret it appears to contain replaced by ``[redacted]``."""
    lower = text.lower()
    found = _TRIGGER.search(lower)
    if found is None:
        return text
    original, ascii_text = text, text.isascii()
    for index, at in sorted(_triggered(lower, found.start()).items()):
        shape = SHAPES[index]
        # Positions are the original text's: only while nothing before changed it.
        if shape.from_trigger and ascii_text and text is original:
            text = shape.rewrite_from(text, at - 1)
        else:
            text = shape.rewrite(text)
    return text


def _triggered(lower: str, at: int = 0) -> dict[int, int]:
    """The indexes of the shapes whose triggers occur in ``lower`` (none before ``at``),
    each with where its first trigger starts.

    A shape's pattern cannot match where none of its triggers occurs, so the others
    are skipped: most texts that hold a trigger name one shape, and running all twenty
    patterns on each was most of the timeline's ingest time. Each position where some
    trigger starts is tried with every trigger starting with its character, and the
    next search starts one character on, not after the match: a match reports only
    its first alternative ("authorization" hides "auth") and covers triggers that
    start inside it. (A lookahead finding every start is slower: it defeats the
    engine's skipping to the characters a trigger can start with.)
    """
    first: dict[int, int] = {}
    search = _TRIGGER.search
    found: re.Match[str] | None = None
    if at == 0:
        found = search(lower)
        if found is None:
            return first
        at = found.start()
    while True:
        for trigger, shapes in _TRIGGERS_AT[lower[at]]:
            if not shapes <= first.keys() and trigger.match(lower, at):
                for index in shapes:
                    first.setdefault(index, at)
        if len(first) == len(SHAPES):
            return first
        found = search(lower, at + 1)
        if found is None:
            return first
        at = found.start()


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
