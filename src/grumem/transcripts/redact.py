"""The secret detector of the chunk stage: Kingfisher's rules, then grumem's patterns.

Kingfisher (MongoDB's secret scanner, the `kingfisher-secret-scanner` package,
imported as `kingfisher_sdk`) scans in process and offline: its rules are
Betterleaks' (gitleaks' successor) and Google's Veles, compiled by Vectorscan. It
was chosen by measuring (scripts/bench_redaction.py's set, fixtures/secrets/, 248
fake secrets of 31 kinds and 56 look-alikes): recall 0.73 and precision 0.98 alone,
where detect-secrets had 0.55 and 0.93 (on files: its in-memory scan reports every
word), Microsoft's secret masker 0.16, and the Betterleaks bindings 0.85 and 1.00
(betterleaks-py: one release of a third party's ctypes wrapper; pybetterleaks 30x
slower); none found anything in the transcript fixtures. What Kingfisher misses
that a transcript holds (an AWS key id alone, `.env` assignments, passwords in
URLs and on command lines, generated values assigned to a secret's name) grumem's
own patterns add (grumem.core.redact.PATTERNS): together 0.996 and 1.00. Its
validation and revocation (which call the providers) are never used.

Compiling the rules costs ~5 CPU-seconds; Kingfisher keeps the compiled rules in
a cache directory of its own, here `kingfisher/` under grumem's start-up cache
(grumem.io.startup_cache), so a chunk job pays it once per machine and version.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections import Counter
from contextlib import suppress
from functools import cache
from typing import Any

from grumem.core.redact import (
    PATTERNS_VERSION,
    Finding,
    is_value,
    kind_of_rule,
    redact_text,
)
from grumem.io.startup_cache import cache_dir

__all__ = ["DETECTOR", "Redactor", "detector_identity", "detector_label"]

DETECTOR = "kingfisher-secret-scanner"

# Kingfisher's helper rules that find what names an account, not what opens it
# (an Azure storage account's name, an OAuth client id): reported invisible, they
# are the components its validation pairs with a secret. Measured: the account
# name beside an Azure key was the library's one false finding on the labelled set.
_IDENTIFIER_RULE = re.compile(r"[-.](?:id|name|url|host|domain|username|address)(?:\.\d+)?$")


def detector_identity() -> dict[str, Any]:
    """The detector as the chunk manifest records it. Cheap (no rule is compiled):
    the chunk rule's params carry it, so another version re-runs the chunk jobs."""
    return {
        "detector": DETECTOR,
        "version": importlib.metadata.version(DETECTOR),
        "patterns": PATTERNS_VERSION,
    }


def detector_label() -> str:
    """The detector in one word: `kingfisher-secret-scanner==1.5.0+patterns.1`."""
    d = detector_identity()
    return f"{d['detector']}=={d['version']}+patterns.{d['patterns']}"


class Redactor:
    """Redacts the text of transcript records; one per process (its rules compiled once)."""

    def __init__(self, window: int = 0, overlap: int = 0) -> None:
        # the rules (~50 MB) are loaded at the first scan, not here: a chunk job then
        # holds them after its first transcript is parsed, not beside the parse
        # (a 40 MB transcript's peak: 190 MB, not 269)
        self.window = window or WINDOW
        self.overlap = overlap or OVERLAP

    def findings(self, text: str) -> list[Finding]:
        """The library's findings in `text`, as character spans, in order. A long text
        is scanned a window at a time (`window` characters cut at a line's end, each
        beginning `overlap` before the last one ended), so that a 40 MB tool output
        costs a window's copy, not the text's."""
        found: set[Finding] = set()
        for start, end in windows(text, self.window, self.overlap):
            found.update(self._window(text[start:end], start))
        return sorted(found)

    def _window(self, text: str, offset: int) -> list[Finding]:
        data = text.encode("utf-8", "surrogatepass")
        found = []
        for f in _scanner().scan(data):
            if not f.visible and _IDENTIFIER_RULE.search(f.rule_id):
                continue
            if not f.is_base64_encoded and not is_value(f.secret):
                continue
            start, end = _char_span(
                text, data, f.location["start_offset"], f.location["end_offset"]
            )
            found.append(Finding(offset + start, offset + end, kind_of_rule(f.rule_id)))
        return found

    def text(self, text: str) -> tuple[str, Counter[str]]:
        return redact_text(text, self.findings)

    def record(self, record: dict[str, Any]) -> tuple[dict[str, Any], Counter[str]]:
        """The record with every string redacted (its text, its source pointer's
        fields, anything a format keeps beside them) but its role; the kinds found."""
        counts: Counter[str] = Counter()

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                redacted, found = self.text(value)
                counts.update(found)
                return redacted
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        out = {k: (v if k == "role" else walk(v)) for k, v in record.items()}
        return out, counts

    def records(self, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Counter[str]]:
        """A session's records redacted, and the kinds found in all of them."""
        total: Counter[str] = Counter()
        out = []
        for r in records:
            redacted, found = self.record(r)
            out.append(redacted)
            total += found
        return out, total


# A window is scanned whole; a secret longer than OVERLAP (a private key is a few
# KB) could be cut at a window's end and missed.
WINDOW = 1 << 20
OVERLAP = 1 << 16


def windows(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """(start, end) of the windows covering `text`: at most `size` characters each,
    ending after a newline where one is in the window's last half, each starting
    `overlap` characters (at a line's start, where there is one) before the last
    one ended. A text of at most `size` characters is one window."""
    if len(text) <= size:
        return [(0, len(text))] if text else []
    spans = []
    start = 0
    while True:
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + size // 2, end)
            end = cut + 1 if cut != -1 else end
        spans.append((start, end))
        if end == len(text):
            return spans
        back = max(end - overlap, start + 1)
        line = text.find("\n", back, end)
        start = line + 1 if line != -1 and line + 1 < end else back


def _char_span(text: str, data: bytes, start: int, end: int) -> tuple[int, int]:
    """Byte offsets into text's UTF-8 as character offsets, widened to whole characters."""
    if len(data) == len(text):  # ASCII: a byte is a character
        return start, end
    while start > 0 and data[start] & 0xC0 == 0x80:
        start -= 1
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end += 1
    first = len(data[:start].decode("utf-8", "surrogatepass"))
    return first, first + len(data[start:end].decode("utf-8", "surrogatepass"))


@cache
def _scanner() -> Any:
    from kingfisher_sdk import Rules, Scanner

    directory = cache_dir() / "kingfisher"
    rules = None
    with suppress(OSError):
        # Kingfisher uses a cache directory only when it is private to the user
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        rules = Rules(cache_dir=str(directory))
    if rules is None:
        rules = Rules(cache=False)
    # base64: a secret inside a base64 value (a Kubernetes Secret's data) is found,
    # and its whole encoded form is redacted
    return Scanner(rules, base64=True)
