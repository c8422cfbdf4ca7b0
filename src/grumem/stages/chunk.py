"""Stage `chunk`: transcripts -> token-budgeted chunk files, one per session; the
statistics of each file go to stderr, the job's log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grumem.errors import GrumemError
from grumem.jsonl import write_jsonl
from grumem.packing import chunk_session
from grumem.transcripts import read_transcript


def main(args: argparse.Namespace) -> int:
    """`grumem chunk`: every transcript file -> one chunk file per session."""
    if args.budget < 50:
        raise GrumemError(f"--budget {args.budget}: must be at least 50 tokens")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}  # session id -> the transcript it came from
    for file in args.files:
        options = {
            "messages_field": args.messages_field,
            "id_field": args.id_field,
            "text_field": args.text_field,
        }
        fmt, sessions = read_transcript(file, args.format, args.drop_thinking, options)
        print(f"{file}: {fmt}, {len(sessions)} session(s)", file=sys.stderr)
        for s in sessions:
            if s.id in written:
                raise GrumemError(
                    f"{file}: session {s.id!r} also comes from {written[s.id]};"
                    " chunk files are named by session: one would overwrite the other"
                )
            written[s.id] = file
            skipped = ", ".join(f"{k} {n}" for k, n in sorted(s.skipped.items())) or "none"
            if not s.records:
                print(
                    f"  {s.id}: records 0, no chunk file written; skipped: {skipped}",
                    file=sys.stderr,
                )
                continue
            result = chunk_session(s.id, s.records, args.budget)
            write_jsonl(out / f"{s.id}.jsonl", result.chunks, "chunk")
            print(
                f"  {s.id}: records {result.records}, chunks {len(result.chunks)}, "
                f"tokens {result.tokens} (max {max(result.chunk_tokens)}), "
                f"parts split {result.split_records}"
                + (f" (into {result.parts} parts)" if result.split_records else "")
                + f", skipped: {skipped}",
                file=sys.stderr,
            )
    return 0
