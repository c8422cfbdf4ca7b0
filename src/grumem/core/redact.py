"""Secrets out of transcript text: findings become stable placeholders.

A finding is a span of the text and the kind of secret in it. Every span is
replaced by `[REDACTED:<kind>:<hash>]`, the hash being the first 4 hex digits of
the sha256 of the secret itself: the same secret reads the same in every record,
session and run (chunks stay deterministic), two secrets of a session are told
apart, and 16 bits are too few to confirm a guess of a random key (a weak
password can still be narrowed down by guessing: see the README).

Pure: the detector is a function passed in (grumem.transcripts.redact runs the
secret-scanning library); here are the patterns that library misses (measured on
fixtures/secrets/labelled.jsonl, scripts/bench_redaction.py), what a rule of the
library is called here, and how findings become placeholders.

Redaction is idempotent by construction: a placeholder is never part of a
finding (a finding touching one is dropped), and the text is redacted again
until a pass finds nothing, so redacting redacted text changes nothing. Text
without a finding is returned as it is, byte for byte.
"""

from __future__ import annotations

import hashlib
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from grumem.errors import GrumemError

__all__ = [
    "PATTERNS_VERSION",
    "PLACEHOLDER",
    "Finding",
    "is_value",
    "kind_of_rule",
    "pattern_findings",
    "placeholder",
    "redact_text",
    "replace_findings",
]

# Bumped whenever the patterns below change what they find: it is part of the
# detector's identity in the chunk manifest and the chunk rule's params, so that
# chunks redacted by other patterns are made again. tests/core/test_redact.py pins
# the patterns' digest to this number.
PATTERNS_VERSION = 1

PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9][a-z0-9-]*:[0-9a-f]{4}\]")
_KIND = re.compile(r"[^a-z0-9]+")
MAX_PASSES = 16


@dataclass(frozen=True, order=True)
class Finding:
    """text[start:end] is a secret of this kind."""

    start: int
    end: int
    kind: str


def placeholder(kind: str, secret: str) -> str:
    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:4]
    return f"[REDACTED:{kind}:{digest}]"


def kind_name(raw: str) -> str:
    """A kind as a placeholder writes it: lowercase letters, digits and dashes."""
    return _KIND.sub("-", raw.lower()).strip("-") or "secret"


# The library's rule ids (`betterleaks.github-pat`, `veles.secrets/npmjsaccesstoken`)
# named by provider, first match wins; any other rule is named by its own id.
RULE_KINDS: tuple[tuple[str, str], ...] = (
    (r"aws-access-token|aws-access-key", "aws-key"),
    (r"aws-secret", "aws-secret"),
    (r"github", "github-token"),
    (r"gitlab", "gitlab-token"),
    (r"openai", "openai-key"),
    (r"anthropic", "anthropic-key"),
    (r"slack-webhook", "slack-webhook"),
    (r"slack", "slack-token"),
    (r"stripe", "stripe-key"),
    (r"gcp-api-key|google-?api|gcpapikey", "google-api-key"),
    (r"gcp-service-account|private-key|privatekey|pkcs|rsa|openssh|pgp", "private-key"),
    (r"huggingface|hugging-face", "huggingface-token"),
    (r"npm", "npm-token"),
    (r"pypi", "pypi-token"),
    (r"sendgrid", "sendgrid-key"),
    (r"twilio", "twilio-key"),
    (r"jwt", "jwt"),
    (r"credential-uri|connection-string|credentials-in-url", "url-password"),
    (r"curl-auth|auth-header|authorization", "auth-header"),
    (r"digitalocean", "digitalocean-token"),
    (r"azure-storage", "azure-storage-key"),
    (r"telegram", "telegram-token"),
)
_RULE_KINDS = [(re.compile(p), k) for p, k in RULE_KINDS]
_RULE_PREFIX = re.compile(r"^(?:betterleaks|kingfisher|custom|veles\.secrets)[./]")


def kind_of_rule(rule_id: str) -> str:
    """What a placeholder calls a secret found by the library's rule `rule_id`."""
    rule = _RULE_PREFIX.sub("", rule_id.lower())
    rule = re.sub(r"\.\d+$", "", rule)  # a rule's numbered variant (`auth0-client-id.1`)
    for pattern, kind in _RULE_KINDS:
        if pattern.search(rule):
            return kind
    return kind_name(rule)


# ------------------------------------------------------------------ the patterns
# Each is a gap of the library measured on the labelled set; `secret` is the group
# replaced. Quantifiers are bounded so that no pattern backtracks without end on a
# long record.

# A value that stands for a secret without being one: a variable, a template, a
# placeholder, a mask, an example.
_NOT_A_VALUE = re.compile(
    r"""^(?:
        \$[{(A-Za-z_].*             # $VAR, ${VAR}, ${{ expression }}, $(command)
      | %[A-Za-z_]+%                # %VAR%
      | \{\{.*                      # {{ template }}
      | <.*>                        # <your key>
      | \[REDACTED:.*               # already redacted
      | (?:x+|X+|\*+|\.+|-+|_+|0+)  # a mask
      | .*\.\.\.                    # sk-...
      | (?i:your[-_ ]?.*|changeme|change[-_]me|placeholder|example|redacted|secret|password
          |passwd|token|none|null|nil|true|false|undefined|empty|required|optional|string|str)
      | .*EXAMPLE(?:KEY)?           # AWS's documented example keys
    )$""",
    re.VERBOSE,
)


def is_value(value: str) -> bool:
    """False for what stands for a secret without being one (`${TOKEN}`, `sk-...`,
    `<your key>`, a mask, AWS's documented `...EXAMPLE` keys)."""
    return _NOT_A_VALUE.match(value) is None


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s own character distribution."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    """A generated key, not a word or an identifier: long, mixed, spread out."""
    return (
        len(value) >= 16
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and shannon_entropy(value) >= 3.0
    )


def _looks_like_password(value: str) -> bool:
    """A value worth hiding under a password's name: not a variable of code
    (`password=pw`, `password=password_hash`) nor a word of a test (`'wrong'`)."""
    return (
        is_value(value)
        and len(value) >= 8
        and any(c.isdigit() or not (c.isalnum() or c == "_") for c in value)
    )


# AWS access key ids alone: the library reports one only beside its secret key.
_AWS_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16})(?![A-Za-z0-9])"
)
# user:password@ in any URL (database URLs, git remotes, package indexes).
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://"
    r"[^\s:/@?#\"'<>\[\]]{0,128}:(?P<secret>[^\s/@?#\"'<>]{1,256})@(?=[A-Za-z0-9\[])"
)
# The name of an environment variable holding a secret: it ends in the secret's word.
_SECRET_NAME = (
    r"[A-Z][A-Z0-9_]{0,80}(?:PASSWORD|PASSWD|PWD|PASS|SECRET|TOKEN|CREDENTIALS?|PASSPHRASE)"
)
# .env-style assignments (`NAME=value`, `export NAME=value`, `- NAME=value` in a
# compose file, `NAME: value`, `ENV NAME=value`) of such a name: any value that is
# not a variable or a placeholder.
_ENV_SECRET = re.compile(
    r"(?m)^[ \t]*(?:export[ \t]+|-[ \t]+|ENV[ \t]+)?"
    + _SECRET_NAME
    + r"[ \t]*[=:][ \t]*(?P<q>[\"']?)(?P<secret>[^\s\"'#]{3,512})(?P=q)[ \t]*(?:#.*)?$"
)
# The same assignment inline, before a command (`PGPASSWORD=... psql`).
_ENV_INLINE = re.compile(
    r"(?<![A-Za-z0-9_$])"
    + _SECRET_NAME
    + r"=(?P<q>[\"']?)(?P<secret>[^\s\"'`;&|]{3,512})(?P=q)(?=[\s;&|]|$)"
)
# `NAME_KEY=value` (API_KEY, SIGNING_KEY, ...): a key, when the value looks generated.
_ENV_KEY = re.compile(
    r"(?m)^[ \t]*(?:export[ \t]+|-[ \t]+|ENV[ \t]+)?[A-Z][A-Z0-9_]{0,80}KEY"
    r"[ \t]*[=:][ \t]*(?P<q>[\"']?)(?P<secret>[^\s\"'#]{16,512})(?P=q)[ \t]*(?:#.*)?$"
)
# `NAME_KEY=value` inline (`heroku config:set SESSION_KEY=...`), when the value looks generated.
_ENV_KEY_INLINE = re.compile(
    r"(?<![A-Za-z0-9_$])[A-Z][A-Z0-9_]{0,80}KEY=(?P<q>[\"']?)(?P<secret>[^\s\"'`;&|]{16,512})(?P=q)"
    r"(?=[\s;&|]|$)"
)
# In XML: `<password>...</password>`, `<add key="DbPassword" value="..."/>`.
_XML_SECRET = re.compile(
    r"(?i)<(?P<tag>[a-z0-9_.:-]{0,40}(?:password|passwd|secret|token|apikey|api-key|api_key))>"
    r"(?P<secret>[^<\s]{1,512})</(?P=tag)>"
    r"|\bkey=[\"'][^\"'<>]{0,40}(?:password|passwd|secret|token|apikey|api-key|api_key)"
    r"[^\"'<>]{0,20}[\"'][ \t]+value=[\"'](?P<attr>[^\"'\s]{1,512})[\"']"
)
# A name and its value as two arguments: `set("stripeSecret", "...")`.
_ARGUMENT_PAIR = re.compile(
    r"(?i)\([ \t]*[\"'][A-Za-z0-9_.-]{0,40}(?:secret|token|passw(?:or)?d|api[_-]?key|apikey)"
    r"[A-Za-z0-9_.-]{0,20}[\"'][ \t]*,[ \t]*[\"'](?P<secret>[^\"'\s]{8,512})[\"']"
)
# A generated-looking value assigned to a name holding a secret's word, in code,
# JSON, YAML or a query string: `api_key = "..."`, `"clientSecret": "..."`,
# `?access_token=...`. A name that ends in what only names a secret
# (`private_key_id`, `token_url`) is left out.
_ASSIGNED_WORD = re.compile(
    r"(?i)secret|token|passw(?:or)?d|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|auth[_-]?key|signing[_-]?key|encryption[_-]?key|credential|passphrase"
)
_ASSIGNED_TAIL = re.compile(
    r"(?P<rest>[A-Za-z0-9_.-]{0,20})[\"']?[ \t]*(?:=|:|=>|:=)[ \t]*(?P<q>[\"'`]?)"
    r"(?P<secret>[A-Za-z0-9+/=_.~!@#$%^*-]{16,512})(?P=q)(?=[\s,;)}\]&]|$)"
)
_NAMES_NO_SECRET = re.compile(
    r"(?i)(?:[_.-]?(?:id|ids|name|names|url|uri|path|file|type|length|ttl))$"
)
# A password under its own name, low entropy or not: `"password": "..."`,
# `password = ...` (ini, .pypirc), `password ...` (.netrc),
# `--from-literal=password=...`, `--password ...`.
_PASSWORD_WORD = re.compile(r"(?i)password|passwd|pwd|passphrase")
_PASSWORD_TAIL = re.compile(
    r"(?P<rest>)[\"']?(?:[ \t]*[=:][ \t]*|[ \t]+)"
    r"(?P<q>[\"']?)(?P<secret>[^\s\"'`,;(){}\[\]]{1,256})(?P=q)(?=[\s,;)}\]]|$)"
)
# Passwords on a command line: `curl -u user:pw`, `mysql -p'pw'`.
_CLI_PASSWORD = re.compile(
    r"(?:\bcurl\b[^\n]{0,200}?\s(?:-u|--user)[ \t]*[\"']?[^\s:\"']{1,64}:"
    r"|\b(?:mysql|mysqldump|mariadb|mysqladmin|sshpass)\b[^\n]{0,200}?\s-p[ \t]*)"
    r"(?P<q>[\"']?)(?P<secret>[^\s\"']{1,256})(?P=q)"
)
# Telegram bot tokens (`<bot id>:AA<33>`): the library finds them only beside a name.
_TELEGRAM = re.compile(r"(?<![0-9])(?P<secret>[0-9]{8,10}:AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])")
# An opaque token in an Authorization header outside a curl command (`curl -v`'s
# `> Authorization: Bearer ...`, a request printed by a library).
_AUTH_HEADER = re.compile(
    r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:bearer|token|basic)[ \t]+"
    r"(?P<secret>[A-Za-z0-9._~+/=-]{16,2048})"
)
# A value under an API key's header (`X-API-Key: ...`, `"x-api-key": "..."`).
_KEY_HEADER = re.compile(
    r"(?i)[\"']?\bx-(?:[a-z]+-)?(?:api-?key|auth-token|access-token|token)[\"']?[ \t]*[:=][ \t]*"
    r"[\"']?(?P<secret>[A-Za-z0-9._~+/=-]{16,512})"
)


_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


@dataclass(frozen=True)
class Anchored:
    """A name holding `word`, at most `left` name characters before it, then `tail`
    (the rest of the name, the assignment, the value). Found from each match of
    the word, not tried at every position of the text: a regex starting with a name
    of up to 40 characters costs 40 tries a character."""

    word: re.Pattern[str]
    left: int
    tail: re.Pattern[str]

    def finditer(self, text: str) -> Iterator[tuple[str, re.Match[str]]]:
        """(the whole name, the tail's match) of each assignment."""
        done = -1
        for w in self.word.finditer(text):
            if w.start() < done:
                continue
            start = w.start()
            while start > 0 and w.start() - start < self.left and text[start - 1] in _NAME_CHARS:
                start -= 1
            if start > 0 and text[start - 1] in _NAME_CHARS:
                continue  # a name longer than this pattern reads
            m = self.tail.match(text, w.end())
            if m is not None:
                done = m.end()
                yield text[start : m.end("rest")], m


_ASSIGNED = Anchored(_ASSIGNED_WORD, 40, _ASSIGNED_TAIL)
_PASSWORD = Anchored(_PASSWORD_WORD, 31, _PASSWORD_TAIL)


def _plain(pattern: re.Pattern[str]) -> Callable[[str], Iterator[tuple[str, re.Match[str]]]]:
    return lambda text: (("", m) for m in pattern.finditer(text))


def _value(name: str, m: re.Match[str]) -> bool:
    return is_value(m.group("secret"))


def _random(name: str, m: re.Match[str]) -> bool:
    return is_value(m.group("secret")) and _looks_random(m.group("secret"))


def _assigned(name: str, m: re.Match[str]) -> bool:
    return _random(name, m) and not _NAMES_NO_SECRET.search(name)


def _password(name: str, m: re.Match[str]) -> bool:
    return _looks_like_password(m.group("secret"))


def _xml_findings(text: str) -> Iterator[Finding]:
    for m in _XML_SECRET.finditer(text):
        group = "secret" if m.group("secret") is not None else "attr"
        if _looks_like_password(m.group(group)):
            yield Finding(m.start(group), m.end(group), "password")


Finder = Callable[[str], Iterator[tuple[str, re.Match[str]]]]
PATTERNS: tuple[tuple[str, Finder, Callable[[str, re.Match[str]], bool]], ...] = (
    ("aws-key", _plain(_AWS_KEY), _value),
    ("url-password", _plain(_URL_PASSWORD), _value),
    ("env-secret", _plain(_ENV_SECRET), _value),
    ("env-secret", _plain(_ENV_INLINE), _value),
    ("env-secret", _plain(_ENV_KEY), _random),
    ("env-secret", _plain(_ENV_KEY_INLINE), _random),
    ("high-entropy", _ASSIGNED.finditer, _assigned),
    ("password", _PASSWORD.finditer, _password),
    ("password", _plain(_CLI_PASSWORD), _value),
    ("password", _plain(_ARGUMENT_PAIR), _password),
    ("telegram-token", _plain(_TELEGRAM), _value),
    ("auth-header", _plain(_AUTH_HEADER), _random),
    ("api-key", _plain(_KEY_HEADER), _random),
)


def pattern_findings(text: str) -> Iterator[Finding]:
    """The findings of grumem's own patterns, in pattern order."""
    for kind, finder, keep in PATTERNS:
        for name, m in finder(text):
            if keep(name, m):
                yield Finding(m.start("secret"), m.end("secret"), kind)
    yield from _xml_findings(text)


# ------------------------------------------------------------------ replacement


def _placeholders(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in PLACEHOLDER.finditer(text)]


# The kinds of grumem's patterns that say where a secret was, not whose it is: a
# provider's kind found on the same span names it instead.
GENERIC_KINDS = frozenset({"env-secret", "high-entropy", "password", "api-key", "auth-header"})


def _naming_order(f: Finding) -> tuple[int, bool, str]:
    """The finding that names a merged span sorts first: the longest, then a
    provider's kind before a generic one, then the kind's name."""
    return (f.start - f.end, f.kind in GENERIC_KINDS, f.kind)


def replace_findings(text: str, findings: Iterable[Finding]) -> tuple[str, Counter[str]]:
    """Every finding's span replaced by its placeholder; the kinds replaced, counted.

    A finding touching a placeholder already in the text is dropped (placeholders
    are never redacted again). Overlapping findings become one span, named by the
    longest of them (ties: a provider's kind, then the kind first in sorted order)."""
    kept = sorted(f for f in findings if f.start < f.end)
    if not kept:
        return text, Counter()
    taken = _placeholders(text)
    kept = [f for f in kept if not any(f.start < b and a < f.end for a, b in taken)]
    spans: list[tuple[int, int, Finding]] = []  # merged span and its naming finding
    for f in kept:
        if spans and f.start < spans[-1][1]:
            start, end, name = spans[-1]
            longest = min(name, f, key=_naming_order)
            spans[-1] = (start, max(end, f.end), longest)
        else:
            spans.append((f.start, f.end, f))
    counts: Counter[str] = Counter()
    parts = []
    at = 0
    for start, end, name in spans:
        parts.append(text[at:start])
        parts.append(placeholder(name.kind, text[start:end]))
        counts[name.kind] += 1
        at = end
    parts.append(text[at:])
    return "".join(parts), counts


def redact_text(text: str, detect: Callable[[str], Iterable[Finding]]) -> tuple[str, Counter[str]]:
    """`text` with every secret `detect` (and grumem's patterns) finds replaced, again
    until a pass finds nothing; the kinds replaced, counted. A replacement can show a
    detector something new (a key's name beside a value now gone): the fixed point
    is what makes redaction idempotent."""
    total: Counter[str] = Counter()
    for _ in range(MAX_PASSES):
        findings = [*detect(text), *pattern_findings(text)]
        redacted, counts = replace_findings(text, findings)
        if redacted == text:
            return text, total
        total += counts
        text = redacted
    raise GrumemError(
        f"redaction did not settle after {MAX_PASSES} passes over a text of {len(text)}"
        " characters: a detector keeps finding new secrets in its own output"
    )
