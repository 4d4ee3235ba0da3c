"""The shapes kept by hand: structure, names, personal data, and the provider tokens
detect-secrets' plugins lack.

The provider tokens come from detect-secrets (:mod:`watchkeeper.redact.detectors`). These
are the shapes its regex plugins do not cover, or cover only in part:

- structure: a PEM private key (also its second half, when a write cut the block in
  two), ``Authorization`` headers, ``Bearer`` values, a password in a URL;
- a secret after a secret-ish name: ``name=value`` and ``name: value`` pairs, and
  command-line flags (``--password X``, ``curl -u user:password``);
- a bare 40-character AWS secret access key: detect-secrets' Base64HighEntropyString idea
  (entropy at least 4.5 bits a character), held to the key's exact length and alphabet,
  so git SHAs (hex, no capitals), UUIDs and words stay readable;
- personal data: e-mail addresses and card numbers (13-19 digits passing the Luhn check);
- provider tokens no plugin reads (:data:`PROVIDERS`), each written from the provider's
  documented token format, and watchkeeper's own ``wk_`` tokens.
"""

from __future__ import annotations

import re

from watchkeeper.redact.shape import CARD_MASK, EMAIL_MASK, MASK, Shape, entropy

__all__ = ["CARD_MASK", "EMAIL_MASK", "HEAD", "MASK", "PROVIDERS", "TAIL", "Shape"]


# -- name = value ----------------------------------------------------------------------------

_KEY_TRIGGERS = (
    "passw",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "api_key",
    "api-key",
    "apikey",
    "access_key",
    "access-key",
    "accesskey",
    "private_key",
    "private-key",
    "privatekey",
    "credential",
    "auth",
)
_KEY_WORDS = (
    r"passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credential|auth(?!or)"
)
#: detect-secrets' KeywordDetector DENYLIST, spelled as flags (``-`` or ``_`` or nothing).
_FLAG_WORDS = (
    r"(?:api|app|auth|service|application|account|db|database|client)[-_]?key"
    r"|aws[-_]secret[-_]access[-_]key|db[-_]pass|password|passwd|pass|pwd"
    r"|priv(?:ate)?[-_]?key|secret[oe]?|keypass|token|contrase(?:n|\u00f1)a"
    r"|(?:access|auth|api|bot)[-_]token|client[-_]secret|secret[-_]key"
)


def _keep_counts(match: re.Match[str]) -> str:
    """``name=value`` masked, except token counts (``max_tokens=4096``) that hold no secret."""
    name, separator, value = match.group(1), match.group(2), match.group(3)
    if name.lower().endswith("tokens") and value.isdigit():
        return match.group(0)
    return f"{name}{separator}{MASK}"


#: curl's ``-u``/``--user`` option and its ``user:password`` value.
_CURL_USER = re.compile(r"(?<![\w-])((?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:\"']+:)[^\s\"']+")


def _mask_curl_users(text: str) -> str:
    """The password of ``curl -u user:password`` masked, on the lines that run curl only:
    elsewhere ``-u 1000:1000`` is a user and a group id."""
    lines = text.split("\n")
    return "\n".join(
        _CURL_USER.sub(rf"\1{MASK}", line) if "curl" in line else line for line in lines
    )


# -- PEM blocks --------------------------------------------------------------------------

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


# -- high entropy, personal data ---------------------------------------------------------

#: detect-secrets' Base64HighEntropyString limit.
AWS_SECRET_ENTROPY = 4.5


def _bare_aws_secret(match: re.Match[str]) -> str:
    """A 40-character base64 word masked when it mixes cases and digits at a key's entropy."""
    word = match.group(0)
    mixed = not word.islower() and not word.isupper() and any(c.isdigit() for c in word)
    return MASK if mixed and entropy(word) >= AWS_SECRET_ENTROPY else word


def _card(match: re.Match[str]) -> str:
    """``[card]`` for 13-19 digits that pass the Luhn check, as card numbers do."""
    digits = [int(c) for c in match.group(0) if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return match.group(0)
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return CARD_MASK if total % 10 == 0 else match.group(0)


# Order matters where shapes overlap: whole blocks and headers first (HEAD), then the
# provider tokens of detect-secrets' plugins, then the provider tokens kept here
# (PROVIDERS), then the generic shapes (TAIL): ``name=value`` pairs and flags, high
# entropy, personal data. Every repeat is bounded or anchored on a literal: redact() must
# stay linear on hostile input.
HEAD: tuple[Shape, ...] = (
    Shape(
        "pem private key",
        ("private key",),
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        flags=re.S,
    ),
    # The second half of a block whose BEGIN line arrived in an earlier write.
    Shape("pem private key end", ("private key",), _PEM_END.pattern, apply=_mask_key_tails),
    Shape(
        "authorization header",
        ("authorization",),
        r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token|digest)\s+)?"
        r"[^\s'\",]+",
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}",
        from_trigger=True,
    ),
    Shape(
        "bearer token",
        ("bearer",),
        r"(?i)\b(bearer\s+)(?!\[redacted\])[A-Za-z0-9._~+/=-]{8,}",
        rf"\1{MASK}",
        from_trigger=True,
    ),
    Shape(
        "url password",
        (r"://[^\s/@]+@",),
        r"(?i)\b([a-z][a-z0-9+.-]{0,30}://[^\s:/@]+:)[^\s@/]+@",
        rf"\1{MASK}@",
    ),
)

#: Provider tokens detect-secrets' regex plugins do not read (or read only in a narrower
#: form than the provider documents), each written from that provider's documented format.
#: Each starts at its prefix, so it is tried only where the prefix is.
PROVIDERS: tuple[Shape, ...] = (
    # OpenAI: API keys start with "sk-" (project keys "sk-proj-", service accounts
    # "sk-svcacct-"); Anthropic: "sk-ant-" (e.g. "sk-ant-api03-"). detect-secrets reads only
    # OpenAI keys holding their "T3BlbkFJ" marker.
    Shape("openai or anthropic key", ("sk-",), r"\bsk-[A-Za-z0-9_-]{16,}", from_trigger=True),
    # GitHub: fine-grained personal access tokens start with "github_pat_".
    Shape(
        "github fine-grained token", ("github_pat_",), r"\bgithub_pat_\w{20,}", from_trigger=True
    ),
    # Slack: app-level tokens start with "xapp-", refresh tokens with "xoxe-", rotating
    # access tokens with "xoxe.xoxp-" or "xoxe.xoxb-" (detect-secrets reads xoxa, xoxb,
    # xoxp, xoxo, xoxs and xoxr tokens).
    Shape(
        "slack app or refresh token",
        ("xapp-", "xoxe"),
        r"\b(?:xapp|xoxe(?:\.xox[a-z])?)-[A-Za-z0-9-]{10,}",
        from_trigger=True,
    ),
    # Slack: Workflow Builder webhooks are https://hooks.slack.com/workflows/... or
    # /triggers/... (detect-secrets reads /services/ incoming webhooks).
    Shape(
        "slack workflow webhook",
        (r"hooks\.slack\.com/",),
        r"(https?://hooks\.slack\.com/(?:workflows|triggers)/)[A-Za-z0-9_/-]+",
        rf"\1{MASK}",
    ),
    # Telegram: a bot token is the bot's numeric id, ":" and a 35-character secret of
    # letters, digits, "_" and "-"; detect-secrets reads ids of 8 to 10 digits, older bots
    # have shorter ones.
    Shape(
        "telegram bot token",
        (r":[a-z0-9_-]{35}",),
        r"(?<!\d)\d{5,12}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
    ),
    # Discord: a bot token is three base64url parts joined by ".": the bot's id (24 to 28
    # characters, starting M, N or O), a timestamp (6 or 7) and an HMAC (27 or more).
    Shape(
        "discord bot token",
        (r"\.[a-z0-9_-]{6}\.",),
        r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}",
    ),
    # Stripe: secret keys "sk_live_"/"sk_test_", restricted "rk_live_"/"rk_test_",
    # publishable "pk_live_"/"pk_test_", webhook signing secrets "whsec_". detect-secrets
    # reads live secret and restricted keys only.
    Shape(
        "stripe key",
        ("sk_test_", "rk_test_", "pk_live_", "pk_test_", "whsec_"),
        r"\b(?:(?:sk|rk|pk)_test_|pk_live_)[0-9A-Za-z]{10,}|\bwhsec_[0-9A-Za-z]{16,}",
        from_trigger=True,
    ),
    # JSON Web Tokens (RFC 7519): three base64url parts joined by "."; the header is JSON,
    # so it starts "eyJ". detect-secrets' pattern stops before the signature.
    Shape(
        "jwt",
        ("eyj",),
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        from_trigger=True,
    ),
    # Hugging Face: user access tokens start with "hf_".
    Shape("hugging face token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}", from_trigger=True),
    # npm: access tokens are "npm_" and 36 letters and digits (detect-secrets reads them
    # only in an .npmrc line).
    Shape("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36,}", from_trigger=True),
    # Google Cloud: API keys are 39 characters starting "AIza".
    Shape("google api key", ("aiza",), r"\bAIza[0-9A-Za-z_-]{35}", from_trigger=True),
    # DigitalOcean: personal access tokens "dop_v1_", OAuth tokens "doo_v1_", refresh
    # tokens "dor_v1_", each followed by 64 hex digits.
    Shape(
        "digitalocean token",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        r"\bdo[por]_v1_[a-f0-9]{64}",
        from_trigger=True,
    ),
    # Shopify: admin API access tokens "shpat_", custom app "shpca_", private app "shppa_",
    # shared secrets "shpss_", each followed by 32 hex digits.
    Shape(
        "shopify token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        from_trigger=True,
    ),
    # PyPI: API tokens are "pypi-" and a base64url macaroon (detect-secrets reads those of
    # 70 characters or more after the macaroon's fixed start).
    Shape("pypi token", ("pypi-",), r"\bpypi-[A-Za-z0-9_-]{50,}", from_trigger=True),
    # Databricks: personal access tokens are "dapi" and 32 hex digits (sometimes "-2" after).
    Shape("databricks token", ("dapi",), r"\bdapi[a-f0-9]{32}(?:-[0-9]+)?\b", from_trigger=True),
    # Doppler: personal "dp.pt.", service "dp.st.", service account "dp.sa.", CLI "dp.ct.",
    # SCIM "dp.scim." and audit "dp.audit." tokens.
    Shape(
        "doppler token",
        (r"dp\.pt\.", r"dp\.st\.", r"dp\.sa\.", r"dp\.ct\.", r"dp\.scim\.", r"dp\.audit\."),
        r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}",
        from_trigger=True,
    ),
    # Linear: personal API keys "lin_api_", OAuth access tokens "lin_oauth_".
    Shape(
        "linear key",
        ("lin_api_", "lin_oauth_"),
        r"\blin_(?:api|oauth)_[A-Za-z0-9]{40,}",
        from_trigger=True,
    ),
    # Grafana: service account tokens "glsa_" (32 letters and digits, "_", an 8-hex-digit
    # checksum); Grafana Cloud access policy tokens "glc_" (base64).
    Shape(
        "grafana token",
        ("glsa_", "glc_"),
        r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|\bglc_[A-Za-z0-9+/]{32,}={0,2}",
        from_trigger=True,
    ),
    # age: a secret key is Bech32 (BIP 173's alphabet) with the prefix "AGE-SECRET-KEY-1",
    # written in capitals: 58 characters after the prefix.
    Shape(
        "age secret key",
        ("age-secret-key-1",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        from_trigger=True,
    ),
    # HashiCorp Vault: service tokens "hvs.", batch tokens "hvb.", recovery tokens "hvr.".
    Shape(
        "vault token",
        (r"hvs\.", r"hvb\.", r"hvr\."),
        r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}",
        from_trigger=True,
    ),
    # Sentry: user auth tokens "sntryu_" and 64 hex digits; organization tokens "sntrys_"
    # and base64.
    Shape(
        "sentry token",
        ("sntryu_", "sntrys_"),
        r"\bsntryu_[a-f0-9]{64}|\bsntrys_[A-Za-z0-9+/=_-]{30,}",
        from_trigger=True,
    ),
    # Postman: API keys are "PMAK-", 24 hex digits, "-" and 34 hex digits.
    Shape(
        "postman key",
        ("pmak-",),
        r"\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
        from_trigger=True,
    ),
    # watchkeeper's own API tokens.
    Shape("watchkeeper token", ("wk_",), r"\bwk_[A-Za-z0-9_-]{20,}", from_trigger=True),
)

TAIL: tuple[Shape, ...] = (
    # AWS: a secret access key is 40 characters of base64; detect-secrets reads one only in
    # quotes after a name holding "aws" (``AWS Secret Key: ...`` is no name=value pair).
    Shape(
        "aws secret key",
        ("secret",),
        r"(?i)(aws[\w .-]{0,20}?secret[\w .-]{0,20}?[\"']?\s*[:=]?\s*[\"']?)"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        rf"\1{MASK}",
    ),
    # Matched from the keyword on, not from the start of the name: a name's prefix
    # (``FOO_`` in ``FOO_TOKEN``) stays as it is either way, and the search stays cheap.
    Shape(
        "name=value secret",
        _KEY_TRIGGERS,
        rf"(?i)((?:{_KEY_WORDS})[A-Za-z0-9_.-]{{0,40}})"
        r"([\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)",
        _keep_counts,
        from_trigger=True,
    ),
    # ``--password X``: the value is the next word (``--password=X`` is a name=value pair).
    Shape(
        "secret command-line flag",
        ("--",),
        rf"(?i)(?<![\w-])(--(?:{_FLAG_WORDS})[ \t]+)(\"[^\"]*\"|'[^']*'|[^\s\"'-]\S*)",
        rf"\1{MASK}",
        from_trigger=True,
    ),
    # curl's ``-u user:password`` (``--user``): the password is masked, the user kept.
    Shape("curl user and password", ("curl",), _CURL_USER.pattern, apply=_mask_curl_users),
    Shape(
        "bare aws secret access key",
        (r"(?<![a-z0-9/+=_-])[a-z0-9/+]{40}",),
        r"(?<![A-Za-z0-9/+=_-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_-])",
        _bare_aws_secret,
    ),
    # After the URL password: ``user:[redacted]@host`` is no address; nor is a URL's user
    # (``postgresql://app@db.internal``) or an SSH remote (``git@github.com``).
    Shape(
        "e-mail address",
        ("@",),
        r"(?<![\w.+-])(?<!//)(?!git@)[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
        r"\.[A-Za-z]{2,24}(?![\w-])",
        EMAIL_MASK,
        flags=re.ASCII,
    ),
    Shape(
        "card number",
        (r"[2-6]\d{3}",),
        # The first digit before the look behind: the engine skips to one before trying.
        r"[2-6](?<![\w.-].)\d{3}(?:[ -]?\d{2,6}){2,4}(?!\w|[.-]\d)",
        _card,
    ),
)
