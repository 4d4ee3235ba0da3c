"""The provider token shapes are detect-secrets' regex plugins, each reviewed, and read alike.

The installed detect-secrets must hold no regex plugin that is neither reviewed (its regexes'
fingerprints in ``REVIEWED``) nor left out with a reason, so a release that changes a regex
is looked at. Each used regex masks a made-up token of its kind alone, keeping the text
around it; an assignment regex, whose spacing redaction matches possessively, finds what
detect-secrets' own finds; and the detectors are imported on the first redaction, not before.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap

import pytest

from watchkeeper.redact import MASK, SHAPES, detectors, redact

_HEX = "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d1f3e"
_MIX = "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9Yt7Uw2Vx4Rs6Pn8Mk0Lj1Hg3Fd5Sa"
_LOWER = "qwhzkxmvplrtbnsjdgfcyuaeiozq"

#: (shape, text before, the secret, text after): one made-up token per used regex.
SAMPLES: list[tuple[str, str, str, str]] = [
    ("Artifactory Credentials (1)", "artifactory key=", "AKC" + _MIX[:70], " used"),
    ("Artifactory Credentials (2)", 'password: "', "AP6" + _MIX[:40], '" set'),
    ("AWS Access Key (1)", "id ", "AKIA" + "Q7W3RT5YU8IOP2AZ", " in eu-west-1"),
    ("AWS Access Key (2)", 'aws_secret_key = "', "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKE", '"\n'),
    (
        "Azure Storage Account access key",
        "DefaultEndpointsProtocol=https;AccountKey=",
        _MIX[:64] + _MIX[:22] + "==",
        ";EndpointSuffix=x",
    ),
    ("Basic Auth Credentials", "amqp://guest:", "s3cr3tPa55", "@rabbit:5672/"),
    ("Cloudant Credentials (1)", "cloudant_password = ", _HEX[:64], "\n"),
    ("Cloudant Credentials (2)", "cl_apikey: '", _LOWER[:24], "'"),
    ("Cloudant Credentials (3)", "https://acct:", _HEX[:64], "@acct.cloudant.com/db"),
    ("Cloudant Credentials (4)", "https://acct:", _LOWER[:24], "@acct.cloudant.com/db"),
    ("Discord Bot Token", "bot.run(", "NzkyNzE1NDU0MTk2MDg4ODQy.X-hvzA." + _MIX[:27], ")"),
    ("GitHub Token", "push with ", "ghp_" + _MIX[:36], " done"),
    ("GitLab Token (1)", "deploy ", "gldt-" + _MIX[:20], " ok"),
    ("GitLab Token (2)", "runner ", "GR1348941" + _MIX[:20], " ok"),
    ("GitLab Token (3)", "ci ", "glcbt-" + _MIX[:24], " ok"),
    ("GitLab Token (4)", "incoming ", "glimt-" + _MIX[:25], " ok"),
    ("GitLab Token (5)", "trigger ", "glptt-" + _HEX[:40], " ok"),
    ("GitLab Token (6)", "agent ", "glagent-" + _MIX[:50], " ok"),
    ("GitLab Token (7)", "oauth ", "gloas-" + _HEX[:64], " ok"),
    ("IBM COS HMAC Credentials", "cos_hmac_secret_access_key = ", _HEX[:48], "\n"),
    ("IBM Cloud IAM Key", "ibm_cloud_iam_api_key: ", _MIX[:44], "\n"),
    ("Mailchimp Access Key", "mailchimp ", _HEX[:32] + "-us14", " ok"),
    ("PyPI Token (1)", "upload with ", "pypi-AgEIcHlwaS5vcmc" + _MIX[:64] + _MIX[:16], " ok"),
    (
        "PyPI Token (2)",
        "test upload with ",
        "pypi-AgENdGVzdC5weXBpLm9yZw" + _MIX[:64] + _MIX[:16],
        " ok",
    ),
    ("SendGrid API Key", "key ", "SG." + _MIX[:22] + "." + _MIX[22:65], " ok"),
    ("Slack Token (1)", "bot ", "xoxs-1234567890-" + _HEX[:30], " ok"),
    (
        "Slack Token (2)",
        "POST ",
        "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/" + _MIX[:24],
        " 200",
    ),
    ("SoftLayer Credentials (1)", "softlayer_api_key = ", _HEX[:64], "\n"),
    (
        "SoftLayer Credentials (2)",
        "GET https://api.softlayer.com/soap/v3.1/",
        _HEX[:64],
        " 200",
    ),
    ("Square OAuth Secret", "square ", "sq0csp-" + _MIX[:43], " ok"),
    ("Stripe Access Key", "charge with ", "sk_live_" + _MIX[:24], " ok"),
    ("Telegram Bot Token", "bot ", "71234567:AAH" + _MIX[:32], " started"),
    ("Twilio API Key (1)", "account ", "AC" + _HEX[:32], " ok"),
    ("Twilio API Key (2)", "key ", "SK" + _HEX[:32], " ok"),
]
_IDS = [sample[0] for sample in SAMPLES]
_BY_NAME = {shape.name: shape for shape in SHAPES}


def _leaks(secret: str, cleaned: str, kept: str) -> list[str]:
    runs = [secret[i : i + 8] for i in range(max(1, len(secret) - 7))]
    return [run for run in runs if run in cleaned and run not in kept]


def test_every_regex_plugin_installed_is_reviewed_or_left_out() -> None:
    installed = detectors.plugins()
    unreviewed = {
        secret_type: [
            regex.pattern
            for regex in regexes
            if detectors.fingerprint(regex)
            not in {use.fingerprint for use in detectors.REVIEWED.get(secret_type, ())}
        ]
        for secret_type, regexes in installed.items()
        if secret_type not in detectors.LEFT_OUT
    }
    assert {name: found for name, found in unreviewed.items() if found} == {}, (
        "detect-secrets changed or added these regexes: review each one's triggers and "
        "secret part in watchkeeper.redact.detectors.REVIEWED"
    )
    assert set(detectors.REVIEWED) <= set(installed)
    assert set(detectors.LEFT_OUT) - set(installed) <= {
        "Base64 High Entropy String",
        "Hex High Entropy String",
        "Secret Keyword",
    }
    assert all(reason.strip() for reason in detectors.LEFT_OUT.values())


def test_the_provider_shapes_are_every_regex_of_the_plugins_used() -> None:
    taken = [name for name in _BY_NAME if name.startswith(detectors.NAME_PREFIX)]
    used = {
        name: regexes
        for name, regexes in detectors.plugins().items()
        if name not in detectors.LEFT_OUT
    }
    assert len(taken) == sum(len(regexes) for regexes in used.values())
    assert {shape for shape, *_ in SAMPLES} == {
        name.removeprefix(detectors.NAME_PREFIX) for name in taken
    }


@pytest.mark.parametrize(("shape", "before", "secret", "after"), SAMPLES, ids=_IDS)
def test_each_plugin_regex_masks_its_token_alone_and_keeps_the_text_around_it(
    shape: str, before: str, secret: str, after: str
) -> None:
    text = before + secret + after
    for cleaned in (_BY_NAME[detectors.NAME_PREFIX + shape].rewrite(text), redact(text)):
        assert MASK in cleaned, cleaned
        assert _leaks(secret, cleaned, before + after + MASK) == [], cleaned
        # The name=value shape masks a quoted value with its quotes.
        assert cleaned.startswith(before.rstrip("'\"")), cleaned
        assert cleaned.endswith(after.lstrip("'\"")), cleaned


def test_a_token_longer_than_its_regex_reads_is_masked_to_its_end() -> None:
    for token in ("ghp_" + _MIX[:40], "AKIA" + "Q7W3RT5YU8IOP2AZ" + "XY", "sk_live_" + _MIX[:60]):
        assert redact(f"use {token}, then") == f"use {MASK}, then"


def test_a_public_address_and_a_version_stay_readable() -> None:
    text = "connected to 8.8.8.8:53 with resolver 1.2.3.4 (v2.31.0.1)"
    assert redact(text) == text


def _assignment_shapes() -> list[tuple[str, re.Pattern[str], re.Pattern[str]]]:
    pairs = []
    for secret_type, regexes in detectors.plugins().items():
        uses = {use.fingerprint: use for use in detectors.REVIEWED.get(secret_type, ())}
        for number, regex in enumerate(regexes, 1):
            use = uses.get(detectors.fingerprint(regex))
            if use is not None and use.assignment:
                shape = detectors.shape_for(secret_type, regex, use)
                pairs.append((f"{secret_type} ({number})", regex, shape.pattern))
    return pairs


_ASSIGNMENTS = _assignment_shapes()


@pytest.mark.parametrize(("name", "theirs", "ours"), _ASSIGNMENTS, ids=[a[0] for a in _ASSIGNMENTS])
def test_an_assignment_regex_finds_what_detect_secrets_own_finds(
    name: str, theirs: re.Pattern[str], ours: re.Pattern[str]
) -> None:
    assert ours.pattern != theirs.pattern  # the spacing was taken possessively
    rng = random.Random(29)
    names = [
        "cloudant_password",
        "cl_api_key",
        "cos_hmac_secret_access_key",
        "secret_key",
        "ibm_cloud_iam_api_key",
        "key",
        "pass",
        "token",
        "softlayer_api_key",
        "sl_key",
    ]
    secrets = [_HEX[:64], _LOWER[:24], _HEX[:48], _MIX[:44], _HEX[:44]]
    between = [
        "",
        " ",
        "  ",
        "=",
        " = ",
        ":",
        " : ",
        ":=",
        "=>",
        "::",
        " :: ",
        "   =>  ",
        "'",
        '"',
        "]",
        "'] = '",
        '" : "',
        "\t=",
        "= =",
        ": :",
    ]
    matched = 0
    for _ in range(3000):
        text = (
            rng.choice(["", " ", "[", "x", "$", "'"])
            + rng.choice(names)
            + rng.choice(between)
            + rng.choice(["", "'", '"'])
            + rng.choice(secrets)
            + rng.choice(["", "'", '"', "x", " ", "-"])
        )
        found = [(m.span(), m.group(1)) for m in ours.finditer(text)]
        assert found == [(m.span(), m.group(1)) for m in theirs.finditer(text)], text
        matched += bool(found)
    assert matched >= 20  # the texts do hold assignments of this plugin


def test_the_detectors_are_imported_on_the_first_redaction_and_leave_warnings_alone() -> None:
    probe = textwrap.dedent(
        """
        import sys, warnings
        shown = warnings.showwarning
        from watchkeeper.redact import redact
        before = "detect_secrets" in sys.modules
        out = redact("push with ghp_" + "a1B2" * 9)
        print(before, "detect_secrets" in sys.modules, warnings.showwarning is shown, out)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True", "True", "push", "with", MASK]


def test_a_regex_not_reviewed_is_used_on_every_line_with_its_whole_match_masked() -> None:
    shape = detectors.shape_for("new plugin", re.compile(r"zz-[0-9]{4}"), None)
    assert shape.triggers == () and shape.by_line
    assert shape.rewrite("a zz-1234 b\nzz-5678\n") == f"a {MASK} b\n{MASK}\n"
