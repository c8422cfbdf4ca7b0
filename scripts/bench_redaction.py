"""Recall and precision of the chunk stage's redaction, per kind of secret: prints figures.

The labelled set is fixtures/secrets/labelled.jsonl (scripts/make_secrets_fixture.py:
fake secrets in each provider's shape, in the contexts a transcript holds them,
and look-alikes that are none). A secret counts as caught when every character of
it is inside a redacted span; a redacted span counts as right when it overlaps a
labelled secret. The transcript fixtures (fixtures/transcripts/) hold no secret:
every finding there is a false one.

    .venv/bin/python scripts/bench_redaction.py               # grumem's redaction
    .venv/bin/python scripts/bench_redaction.py --library-only  # Kingfisher's rules alone
    .venv/bin/python scripts/bench_redaction.py --patterns-only # grumem's patterns alone
    .venv/bin/python scripts/bench_redaction.py --misses        # and list what was missed

The last line is machine-readable: `redaction recall=... precision=... transcript_findings=...`.
tests/transcripts/test_transcripts_redact.py holds the figures above floors with `score`.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grumem.core.redact import PLACEHOLDER, Finding, pattern_findings
from grumem.transcripts import read_transcript
from grumem.transcripts.redact import Redactor, detector_label

REPO = Path(__file__).resolve().parents[1]
LABELLED = REPO / "fixtures" / "secrets" / "labelled.jsonl"
TRANSCRIPTS = REPO / "fixtures" / "transcripts"

Detect = Callable[[str], Iterable[Finding]]


@dataclass
class Scores:
    caught: Counter[str] = field(default_factory=Counter)  # kind -> secrets caught
    secrets: Counter[str] = field(default_factory=Counter)  # kind -> secrets labelled
    right: int = 0  # redacted spans overlapping a secret
    wrong: int = 0  # redacted spans overlapping none
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    def recall(self, kind: str | None = None) -> float:
        if kind is None:
            return sum(self.caught.values()) / sum(self.secrets.values())
        return self.caught[kind] / self.secrets[kind]

    def precision(self) -> float:
        return self.right / max(1, self.right + self.wrong)


def load_cases(path: Path = LABELLED) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def occurrences(text: str, value: str) -> list[tuple[int, int]]:
    found, at = [], text.find(value)
    while at != -1:
        found.append((at, at + len(value)))
        at = text.find(value, at + 1)
    return found


def spans(text: str, detect: Detect) -> list[tuple[int, int]]:
    """The spans one pass of redaction replaces (findings merged as replace_findings does)."""
    merged: list[list[int]] = []
    for f in sorted(detect(text)):
        if merged and f.start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], f.end)
        else:
            merged.append([f.start, f.end])
    # as replace_findings: a span touching a placeholder already in the text is dropped
    taken = [m.span() for m in PLACEHOLDER.finditer(text)]
    return [(a, b) for a, b in merged if not any(a < y and x < b for x, y in taken)]


def score(cases: list[dict], detect: Detect) -> Scores:
    s = Scores()
    for case in cases:
        text = case["text"]
        found = spans(text, detect)
        labelled = [span for x in case["secrets"] for span in occurrences(text, x["value"])]
        for a, b in found:
            if any(a < lb and la < b for la, lb in labelled):
                s.right += 1
            else:
                s.wrong += 1
                s.false.append(f"{case['id']}: {text[a:b][:60]!r}")
        for x in case["secrets"]:
            covered = all(
                any(a <= i < b for a, b in found)
                for la, lb in occurrences(text, x["value"])
                for i in range(la, lb)
            )
            s.secrets[x["kind"]] += 1
            s.caught[x["kind"]] += covered
            if not covered:
                s.misses.append(f"{case['id']}: {x['value'][:40]!r}")
    return s


def transcript_texts() -> list[str]:
    """Every record text of the transcript fixtures, as the chunk stage reads them."""
    texts = []
    for path in sorted(glob.glob(str(TRANSCRIPTS / "*" / "*"))):
        try:
            _, sessions = read_transcript(path)
        except Exception:  # a fixture's side file (sources, licenses): no transcript
            continue
        for session in sessions:
            texts.extend(r["text"] for r in session.records)
    return texts


def detector(which: str) -> Detect:
    if which == "patterns":
        return lambda text: list(pattern_findings(text))
    redactor = Redactor()
    if which == "library":
        return redactor.findings
    return lambda text: [*redactor.findings(text), *pattern_findings(text)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--library-only", action="store_const", dest="which", const="library")
    which.add_argument("--patterns-only", action="store_const", dest="which", const="patterns")
    p.add_argument("--misses", action="store_true", help="list missed secrets and false findings")
    args = p.parse_args(argv)
    what = args.which or "all"
    t0 = time.process_time()
    detect = detector(what)
    setup = time.process_time() - t0
    cases = load_cases()
    t0 = time.process_time()
    s = score(cases, detect)
    cpu = time.process_time() - t0
    texts = transcript_texts()
    t0 = time.process_time()
    false_in_transcripts = sum(len(spans(t, detect)) for t in texts)
    transcript_cpu = time.process_time() - t0
    chars = sum(map(len, texts))
    print(f"detector: {detector_label()} ({what}); set-up {setup:.2f} CPU-s")
    print(f"labelled set: {len(cases)} cases, {sum(s.secrets.values())} secrets, {cpu:.2f} CPU-s")
    width = max(map(len, s.secrets))
    for kind in sorted(s.secrets):
        print(
            f"  {kind:<{width}}  recall {s.recall(kind):.2f}  ({s.caught[kind]}/{s.secrets[kind]})"
        )
    print(
        f"  {'all':<{width}}  recall {s.recall():.3f}"
        f"  ({sum(s.caught.values())}/{sum(s.secrets.values())})"
    )
    print(f"precision {s.precision():.3f} ({s.right} of {s.right + s.wrong} redacted spans)")
    print(
        f"transcript fixtures: {false_in_transcripts} findings in {len(texts)} records"
        f" ({chars} characters, {transcript_cpu:.2f} CPU-s)"
    )
    if args.misses:
        for line in s.misses:
            print(f"  missed {line}")
        for line in s.false:
            print(f"  false  {line}")
    print(
        f"redaction recall={s.recall():.3f} precision={s.precision():.3f}"
        f" transcript_findings={false_in_transcripts}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
