"""`grumem redact`: chunk files written by hand, with their secrets redacted, as copies.

The chunk stage redacts transcripts; chunk files a user wrote (a `chunks:`
project) are read as they are, because their labels and calibration name their
chunks by sha256 and a redacted chunk has another. This command is how a user
asks for them to be redacted anyway: each chunk file is copied into `--out` with
every record's secrets replaced as the chunk stage replaces them
(grumem.transcripts.redact); the inputs are never written. Labels of a chunk that
changed must then be made again (its `chunk_sha` is new): the command says how
many chunks changed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

from grumem.errors import GrumemError
from grumem.io.jsonl import read_jsonl, write_jsonl
from grumem.transcripts.redact import Redactor, detector_label


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    targets = [out / Path(f).name for f in args.files]
    names = [t.name for t in targets]
    for f, t in zip(args.files, targets, strict=True):
        if names.count(t.name) > 1:
            raise GrumemError(f"{f}: another input is also named {t.name}; --out would hold one")
        if t.exists() and os.path.samefile(f, t):
            raise GrumemError(
                f"{f}: --out {out} is its own directory (no command writes its input)"
            )
    out.mkdir(parents=True, exist_ok=True)
    redactor = Redactor()
    print(f"detector: {detector_label()}", file=sys.stderr)
    changed_total = 0
    for f, t in zip(args.files, targets, strict=True):
        lines = list(read_jsonl(f, "chunk"))
        found: Counter[str] = Counter()
        changed = 0
        for line in lines:
            records, counts = redactor.records(line["records"])
            if counts:
                changed += 1
                line["records"] = records
                found += counts
        write_jsonl(t, lines, "chunk")
        changed_total += changed
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(found.items())) or "none"
        print(f"{f}: {len(lines)} chunk(s), {changed} changed; redacted: {kinds}", file=sys.stderr)
    if changed_total:
        print(
            f"{changed_total} chunk(s) have a new chunk_sha: their labels and calibration"
            " pairs must be made again",
            file=sys.stderr,
        )
    return 0
