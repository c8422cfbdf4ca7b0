"""grumem.core.redact: placeholders, grumem's own patterns, replacement, idempotence.

The detector library's part (and the recall floors) is tests/transcripts/test_transcripts_redact.py;
here the detector is grumem's patterns alone, or a list of findings given by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.redact import (
    PATTERNS,
    PATTERNS_VERSION,
    PLACEHOLDER,
    Finding,
    is_value,
    kind_of_rule,
    pattern_findings,
    placeholder,
    redact_text,
    replace_findings,
)
from grumem.errors import GrumemError
from support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
LABELLED = REPO / "fixtures" / "secrets" / "labelled.jsonl"
CASES = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def no_detector(text: str) -> list[Finding]:
    return []


def test_a_placeholder_names_the_kind_and_four_hex_digits_of_the_secrets_sha256() -> None:
    secret = "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"
    digest = hashlib.sha256(secret.encode()).hexdigest()[:4]
    assert placeholder("github-token", secret) == f"[REDACTED:github-token:{digest}]"
    assert PLACEHOLDER.fullmatch(placeholder("aws-key", "AKIALUULMJAGCR63WBZH"))
    # golden: the same secret reads the same in every run and on every machine
    assert placeholder("aws-key", "AKIALUULMJAGCR63WBZH") == "[REDACTED:aws-key:3787]"


def test_the_same_secret_reads_the_same_everywhere_and_two_secrets_differ() -> None:
    text = "A=AKIALUULMJAGCR63WBZH B=AKIALUULMJAGCR63WBZH C=ASIASHVJY65YZQUVVQLK"
    out, counts = redact_text(text, no_detector)
    a, b, c = PLACEHOLDER.findall(out)
    assert a == b != c
    assert counts == {"aws-key": 3}


def test_overlapping_findings_become_one_placeholder_named_by_the_longest() -> None:
    text = "key: abcdefghij0123456789 end"
    findings = [Finding(5, 15, "short"), Finding(5, 25, "long"), Finding(10, 20, "inner")]
    out, counts = replace_findings(text, findings)
    assert out == f"key: {placeholder('long', text[5:25])} end"
    assert counts == {"long": 1}
    # touching findings stay two
    out, counts = replace_findings(text, [Finding(5, 10, "a"), Finding(10, 15, "b")])
    assert counts == {"a": 1, "b": 1}


def test_a_finding_touching_a_placeholder_is_dropped() -> None:
    text = "token=[REDACTED:openai-key:3f9c]xyz"
    assert replace_findings(text, [Finding(6, 35, "high-entropy")]) == (text, {})
    assert replace_findings(text, [Finding(0, 8, "x")]) == (text, {})
    out, _ = replace_findings(text, [Finding(32, 35, "x")])
    assert out.startswith("token=[REDACTED:openai-key:3f9c][REDACTED:x:")


def test_a_detector_that_never_settles_is_an_error_not_a_loop() -> None:
    def one_character_a_pass(text: str) -> list[Finding]:
        """Finds the first character after the placeholders the text starts with."""
        at = 0
        for m in PLACEHOLDER.finditer(text):
            if m.start() != at:
                break
            at = m.end()
        return [Finding(at, at + 1, "x")] if at < len(text) else []

    assert redact_text("abc", one_character_a_pass)[1] == {"x": 3}
    with pytest.raises(GrumemError, match="did not settle after 16 passes"):
        redact_text("a" * 40, one_character_a_pass)


@pytest.mark.parametrize(
    ("rule", "kind"),
    [
        ("betterleaks.github-pat", "github-token"),
        ("betterleaks.github-fine-grained-pat", "github-token"),
        ("betterleaks.aws-access-token", "aws-key"),
        ("betterleaks.aws-secret-access-key", "aws-secret"),
        ("betterleaks.slack-webhook-url", "slack-webhook"),
        ("betterleaks.slack-bot-token", "slack-token"),
        ("betterleaks.generic-credential-uri", "url-password"),
        ("betterleaks.private-key", "private-key"),
        ("veles.secrets/npmjsaccesstoken", "npm-token"),
        ("veles.secrets/sendgrid", "sendgrid-key"),
        ("betterleaks.auth0-client-id.1", "auth0-client-id"),
        ("betterleaks.Weird_Rule!", "weird-rule"),
    ],
)
def test_a_library_rule_is_named_by_provider(rule: str, kind: str) -> None:
    assert kind_of_rule(rule) == kind


@pytest.mark.parametrize(
    "value",
    [
        "${TOKEN}",
        "$TOKEN",
        "${{ secrets.X }}",
        "$(cat key)",
        "<your key>",
        "sk-...",
        "xxxxxxxx",
        "********",
        "your-api-key-here",
        "changeme",
        "AKIAIOSFODNN7EXAMPLE",
        "[REDACTED:x:1234]",
    ],
)
def test_what_stands_for_a_secret_is_no_value(value: str) -> None:
    assert not is_value(value)


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("export AWS_ACCESS_KEY_ID=AKIALUULMJAGCR63WBZH", "AKIALUULMJAGCR63WBZH", "aws-key"),
        ("postgres://app:Winter2024!@db:5432/x", "Winter2024!", "url-password"),
        ("DB_PASSWORD=maple9374$", "maple9374$", "env-secret"),
        ("$ PGPASSWORD=s3cret-pw psql -h db", "s3cret-pw", "env-secret"),
        ('api_key = "x8Fj3kLm9QpR2sTv6WyZ"', "x8Fj3kLm9QpR2sTv6WyZ", "high-entropy"),
        ('{"password": "Summer2787!"}', "Summer2787!", "password"),
        ("$ curl -u admin:hunter2x9 https://ci", "hunter2x9", "password"),
        ("<password>tiger1952#</password>", "tiger1952#", "password"),
        (
            "> Authorization: Bearer 8f0c2b7e9a41d6c3b5e7f9a1",
            "8f0c2b7e9a41d6c3b5e7f9a1",
            "auth-header",
        ),
    ],
)
def test_each_pattern_finds_its_secret(text: str, secret: str, kind: str) -> None:
    out, counts = replace_findings(text, pattern_findings(text))
    assert out == text.replace(secret, placeholder(kind, secret))
    assert counts == {kind: 1}  # two patterns may find the same span: it is one secret


@pytest.mark.parametrize(
    "text",
    [
        'token = response.json()["access_token"]',
        "client.login(username='alice', password='wrong')",
        '"private_key_id": "91d5e6f978d0ee43d02eaa7f02e3b65268e0861f"',
        "SECRET_KEY_NAME=session_key\nTOKEN_TTL=3600\nPASSWORD_MIN_LENGTH=12",
        "The password must be at least 12 characters long.",
        "export GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
        "https://ana@github.com/team/app.git",
        'password = getpass.getpass("Password: ")',
    ],
)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert list(pattern_findings(text)) == []


# --------------------------------------------------------------- properties

_FRAGMENTS = [c["text"] for c in CASES] + [
    "[REDACTED:openai-key:3f9c]",
    "[REDACTED:",
    "password",
    "=",
    ": ",
    "\n",
    " ",
    '"',
    "'",
    "TOKEN=",
    "://a:b@",
    "é日本😀",
]
texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join),
    st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=20)), max_size=8).map("".join),
)


@PROPERTY
@given(texts)
def test_redaction_is_idempotent(text: str) -> None:
    once, _ = redact_text(text, no_detector)
    twice, counts = redact_text(once, no_detector)
    assert twice == once
    assert counts == {}


@PROPERTY
@given(texts)
def test_text_without_a_finding_is_returned_byte_for_byte(text: str) -> None:
    out, counts = redact_text(text, no_detector)
    if not list(pattern_findings(text)):
        assert out == text and out.encode("utf-8", "surrogatepass") == text.encode(
            "utf-8", "surrogatepass"
        )
        assert counts == {}
    else:
        assert counts  # a change is always counted
    assert (out == text) == (not counts)


@PROPERTY
@given(texts)
def test_placeholders_already_in_the_text_are_kept(text: str) -> None:
    out, _ = redact_text(text, no_detector)
    for p in PLACEHOLDER.findall(text):
        assert out.count(p) >= text.count(p)


# --------------------------------------------------------------- the labelled set


def test_the_labelled_set_is_what_its_script_writes() -> None:
    module = load_script("make_secrets_fixture")
    assert module.render(module.build()) == LABELLED.read_text(encoding="utf-8")


# Changing a pattern changes what is redacted, so the chunks: bump PATTERNS_VERSION
# (the chunk rule's params carry it, and another version re-runs the chunk jobs),
# then pin the new digest here.
PINNED_PATTERNS = {
    "version": 1,
    "digest": "d9251d11e3698aec399ff6369efbe2f91d06da32a2fe8fb977feab16289fada0",
}


def patterns_digest() -> str:
    import grumem.core.redact as redact

    parts = [redact._NOT_A_VALUE.pattern, redact._XML_SECRET.pattern]
    for kind, finder, keep in PATTERNS:
        anchored = getattr(finder, "__self__", None)
        regexes = (
            [anchored.word.pattern, str(anchored.left), anchored.tail.pattern]
            if anchored is not None
            else [finder.__closure__[0].cell_contents.pattern]  # type: ignore[union-attr]
        )
        parts += [kind, *regexes, keep.__name__]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def test_the_patterns_are_those_of_their_version() -> None:
    assert {"version": PATTERNS_VERSION, "digest": patterns_digest()} == PINNED_PATTERNS, (
        "the patterns changed: bump PATTERNS_VERSION and pin the new digest"
    )
