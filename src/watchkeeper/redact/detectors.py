"""The provider token shapes: the regexes of detect-secrets' regex-based plugins.

detect-secrets (Yelp, a dependency) keeps one plugin per provider; those built on its
``RegexBasedDetector`` list their regexes in ``denylist``. :func:`load` enumerates the
installed plugins as detect-secrets does (``get_mapping_from_secret_type_to_class``) and
makes one shape of each regex, matched a line at a time as detect-secrets scans. It is
called on the first redaction, never at import: importing detect-secrets (and requests
with it) costs a command line that never redacts a few hundred milliseconds.

Each regex was read in the installed release and is used as :data:`REVIEWED` says, by its
fingerprint: which lower-cased literals or regexes every match holds (its triggers: the
shape runs only on the lines holding one), which part of a match is the secret (a capture
group, or the whole match without the spaces, quotes, ``=`` or ``:`` some plugins match
around a token), and whether the token may run on past the fixed length the regex reads
(the mask then runs to the end of the token's characters, so no tail is left readable).
The regexes detect-secrets builds for ``name = value`` assignments
(``build_assignment_regex``) try every split of a run of spaces around the ``=`` (500
spaces after a keyword take seconds); they are used with that spacing matched
possessively, which accepts the same texts.

A regex whose fingerprint is not reviewed (a newer detect-secrets changed it, or a plugin
is new) is used as compiled, on every line, its whole match masked: a release never
narrows redaction unseen, and ``tests/unit/test_redact_detectors.py`` names it for review.
The plugins in :data:`LEFT_OUT` are not used, each for the reason given.
"""

from __future__ import annotations

import hashlib
import logging
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from watchkeeper.redact.shape import MASK, Shape


@dataclass(frozen=True)
class Use:
    """How one reviewed regex of a plugin is used."""

    #: :func:`fingerprint` of the regex as reviewed.
    fingerprint: str
    #: Lower-cased literals or regexes (each starting with a literal) every match holds.
    triggers: tuple[str, ...]
    #: The capture group holding the secret; 0: the whole match.
    group: int = 0
    #: The secret starts after the first of these in the match (the name before it stays).
    after: str = ""
    #: The regex reads a fixed length and the token may be longer: mask to the token's end.
    runs_on: bool = False
    #: Built by ``RegexBasedDetector.build_assignment_regex``.
    assignment: bool = False


#: The spaces, quotes and ``=`` or ``:`` some plugins match around a token: never masked.
_LEADING = " \t\r\n\"'=:"
_TRAILING = " \t\r\n\"'"
_RUN_ON = r"[A-Za-z0-9_-]*"
#: Between an assignment's keyword and its secret: an optional quote and ``]``, then
#: ``=``, ``:``, ``:=``, ``=>`` or ``::`` with optional spaces around, or spaces alone,
#: then an optional quote. Spaces are taken possessively: no operator or secret starts
#: with one.
_SPACING = r"""["']?\]?(?: *+(?:::|:=|=>|[=:]) *+| ++)["']?"""
_KEYWORD_FOLLOWS = r"""["'\]]{0,2}[ :=]"""

REVIEWED: dict[str, tuple[Use, ...]] = {
    "AWS Access Key": (
        Use("dd5d5c22ac2c0846", ("akia", "asia", "abia", "acca", "a3t"), runs_on=True),
        # The secret access key in quotes, within 20 characters of a name holding aws.
        Use("8c7c23290797f087", ("aws",), group=1),
    ),
    "Artifactory Credentials": (
        Use("65898e81b8b9667d", (r"akc[a-z0-9]{10}",)),
        Use("85b9301aa8c82c21", (r"ap[0-9a-f][a-z0-9]{8}",)),
    ),
    "Azure Storage Account access key": (Use("b4ac01445d8a6681", ("accountkey=",), after="="),),
    # The password of a URL's user: the HEAD shape masks most first, this the rest.
    "Basic Auth Credentials": (Use("f8c9e6adef0cd7ca", ("://",), group=1),),
    "Cloudant Credentials": (
        Use("0a84de26d05ec01d", (r"cl[a-z_-]{0,12}(?:key|pw|pass|token)",), 1, assignment=True),
        Use("60fa2e8244f23e84", (r"cl[a-z_-]{0,12}(?:key|pw|pass|token)",), 1, assignment=True),
        Use("a78a531bd630ed73", (r"cloudant\.com",), group=1),
        Use("743612897d05c925", (r"cloudant\.com",), group=1),
    ),
    "Discord Bot Token": (Use("e8cc08c35f53130c", (r"\.[a-z0-9_-]{6}\.",), runs_on=True),),
    # Its group is the prefix (ghp), not the secret.
    "GitHub Token": (
        Use("c06412cd4c3599b5", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), runs_on=True),
    ),
    "GitLab Token": (
        Use("68d2a962f499473d", ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-")),
        Use("cddbd3a1412cc3d4", ("gr1348941",)),
        Use("332ad5bc107051c4", ("glcbt-",)),
        Use("f11cb770ea91010e", ("glimt-",)),
        Use("6bdf7db805d9017a", ("glptt-",)),
        Use("af3ef7de89e92dc9", ("glagent-",)),
        Use("dc3d337e134fb073", ("gloas-",)),
    ),
    "IBM COS HMAC Credentials": (Use("59503c343fe889d3", ("secret",), group=1, assignment=True),),
    # Its name may be a bare key, pwd, pass(word) or token: any such name and 44 characters.
    "IBM Cloud IAM Key": (
        Use(
            "fc0bf3786c5eb2a1",
            tuple(word + _KEYWORD_FOLLOWS for word in ("key", "pwd", "pass(?:word)?", "token")),
            group=1,
            assignment=True,
        ),
    ),
    "Mailchimp Access Key": (Use("dee1cfb51abb80c2", (r"-us[0-9]",)),),
    "PyPI Token": (Use("c208408fa11f9c7c", ("pypi-",)), Use("cdd0664f773a378e", ("pypi-",))),
    "SendGrid API Key": (Use("4dfd257ab90f16da", (r"sg\.[a-z0-9_-]{22}\.",), runs_on=True),),
    "Slack Token": (
        Use("ef4446d05d51faac", ("xox",)),
        Use("d64576e8b91ca465", (r"hooks\.slack\.com/services/",)),
    ),
    "SoftLayer Credentials": (
        Use(
            "01436b93a2a7d62e",
            ("softlayer", r"sl[_-]?(?:api)?[_-]?(?:key|pwd|pass|token)"),
            group=1,
            assignment=True,
        ),
        Use("37cc81caff37efea", ("softlayer",), group=1),
    ),
    "Square OAuth Secret": (Use("71af0e102c08dd03", ("sq0csp-",), runs_on=True),),
    "Stripe Access Key": (Use("fd51cbb18180f5e4", ("sk_live_", "rk_live_"), runs_on=True),),
    "Telegram Bot Token": (Use("b3a83412d0c30407", (r":[a-z0-9_-]{35}",), runs_on=True),),
    "Twilio API Key": (
        Use("37d9aa6d17a4fe90", (r"ac[a-z0-9]{32}",), runs_on=True),
        Use("476c9c3ef8744f84", (r"sk[a-z0-9]{32}",), runs_on=True),
    ),
}

#: The plugins not used, by secret type, and why.
LEFT_OUT: dict[str, str] = {
    "Base64 High Entropy String": "not regex-based: it scores every quoted string, so quoted "
    "ids, hashes and base64 data in JSON output would be masked; the bare AWS secret key "
    "shape applies its 4.5-bit limit to one key's length and alphabet",
    "Hex High Entropy String": "not regex-based: it scores every quoted hex string, so "
    "quoted commit SHAs and ids would be masked",
    "Secret Keyword": "not regex-based: it reads name = value assignments by file type; "
    "the name=value and command-line flag shapes mask a value after a secret-ish name",
    "JSON Web Token": "its pattern ends lazily after the payload (the plugin then checks "
    "the parts decode), so a match would leave the signature readable; the JWT shape kept "
    "by hand masks all three parts",
    "NPM tokens": "its context runs `.+` from every `//` before `/:_authToken=`, quadratic "
    "on a line of many; the name=value shape masks any value after `_authToken=`, the npm "
    "shape a bare npm_ token",
    "OpenAI Token": "every key it reads starts with sk-, which the OpenAI and Anthropic "
    "shape masks whole; its unbounded run before the marker makes a search quadratic on a "
    "line of many sk-",
    "Private Key": "it reads the BEGIN line alone; the PEM shapes mask the whole block, "
    "also one cut in two by a write",
    "Public IP (ipv4)": "an address is no secret, and version numbers such as 1.2.3.4 read as one",
}

NAME_PREFIX = "detect-secrets: "


def fingerprint(regex: re.Pattern[str]) -> str:
    """A short digest of a compiled regex's source and flags, to tell a reviewed one."""
    return hashlib.sha256(f"{regex.flags}:{regex.pattern}".encode()).hexdigest()[:16]


def plugins() -> dict[str, tuple[re.Pattern[str], ...]]:
    """The installed regex-based plugins' regexes, by secret type, in detect-secrets' order.

    Importing detect-secrets turns on ``logging.captureWarnings`` for the whole process;
    that is undone unless it was on before.
    """
    showwarning = warnings.showwarning
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    if warnings.showwarning is not showwarning:
        logging.captureWarnings(False)
    installed: dict[str, type] = get_mapping_from_secret_type_to_class()
    # ``denylist`` is declared as an abstract property; each plugin class sets it to its list.
    return {
        secret_type: tuple(cast("Iterable[re.Pattern[str]]", plugin.denylist))
        for secret_type, plugin in installed.items()
        if issubclass(plugin, RegexBasedDetector)
    }


def load() -> tuple[Shape, ...]:
    """A shape for every regex of every regex-based plugin not left out."""
    shapes: list[Shape] = []
    for secret_type, regexes in plugins().items():
        if secret_type in LEFT_OUT:
            continue
        uses = {use.fingerprint: use for use in REVIEWED.get(secret_type, ())}
        for number, regex in enumerate(regexes, 1):
            name = NAME_PREFIX + secret_type + (f" ({number})" if len(regexes) > 1 else "")
            shapes.append(shape_for(name, regex, uses.get(fingerprint(regex))))
    return tuple(shapes)


def shape_for(name: str, regex: re.Pattern[str], use: Use | None) -> Shape:
    """The shape of one plugin regex: as ``use`` says, or (not reviewed) on every line,
    its whole match masked."""
    if use is None:
        return Shape(name, (), regex.pattern, _masker(Use("", ())), regex.flags, by_line=True)
    source = _possessive_spacing(regex) if use.assignment else regex.pattern
    if use.runs_on:
        end = "\n" if regex.flags & re.VERBOSE else ""  # past a trailing comment
        source = f"(?:{source}{end}){_RUN_ON}"
    return Shape(name, use.triggers, source, _masker(use), regex.flags, by_line=True)


def _possessive_spacing(regex: re.Pattern[str]) -> str:
    """``regex``, an assignment regex, with :data:`_SPACING` between keyword and secret.

    What lies between them is read from ``build_assignment_regex`` itself, built around
    markers.
    """
    from detect_secrets.plugins.base import RegexBasedDetector

    built = RegexBasedDetector.build_assignment_regex("(?#p)", "(?#k)", "(?#s)").pattern
    between = built.split("(?#k)", 1)[1].split("(?#s)", 1)[0]
    if regex.pattern.count(between) != 1:
        raise ValueError(f"not an assignment regex of this detect-secrets: {regex.pattern}")
    return regex.pattern.replace(between, _SPACING)


def _masker(use: Use) -> Callable[[re.Match[str]], str]:
    """The match with its secret part masked."""

    def mask(match: re.Match[str]) -> str:
        whole = match.group(0)
        start, end = match.span(use.group)
        if start < 0:
            return whole
        start, end = start - match.start(), end - match.start()
        if use.after and (cut := whole.find(use.after, start, end)) >= 0:
            start = cut + len(use.after)
        while start < end and whole[start] in _LEADING:
            start += 1
        while end > start and whole[end - 1] in _TRAILING:
            end -= 1
        return whole[:start] + MASK + whole[end:] if start < end else whole

    return mask
