"""Stage `chunk`: transcripts -> token-budgeted chunk files, one per session; the
statistics of each file go to stderr, the job's log.

Two layouts: `--out DIR` puts every session of every file in DIR; `--units-under
ROOT` gives each transcript its own directory ROOT/<unit name> (grumem.core.units), the
layout of the workflow, whose `chunk` job turns a whole shard of transcripts into
their directories (jobs grow with shards, not with sessions) and lists what it
wrote in `--manifest`.

Secrets are redacted from every record before it is chunked (`--redact`, the
default; grumem.transcripts.redact): nothing a chunk file holds, and so no
request, cache entry, log or corpus, carries one. Each session's line on stderr
counts them by kind, and the manifest names the detector and the counts."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from pathlib import Path

from grumem.core.packing import plan_session
from grumem.core.tokens import Tokens
from grumem.core.units import unit_names
from grumem.errors import GrumemError
from grumem.io.jsonl import write_json, write_jsonl
from grumem.io.tokenizer import cl100k_tokens
from grumem.io.typed import checked_document
from grumem.records.chunk import ChunkManifest
from grumem.transcripts import read_transcript
from grumem.transcripts.redact import Redactor, detector_identity, detector_label


def out_dirs(args: argparse.Namespace) -> list[Path]:
    """The directory of each file's chunk files, in the order of args.files."""
    if args.units_under is None:
        return [Path(args.out)] * len(args.files)
    units = unit_names(None, args.files, under=args.units_under)
    return [Path(args.units_under) / name for name in units]


def main(args: argparse.Namespace) -> int:
    """`grumem chunk`: every transcript file -> one chunk file per session."""
    if args.budget < 50:
        raise GrumemError(f"--budget {args.budget}: must be at least 50 tokens")
    dirs = out_dirs(args)
    if args.units_under is not None:
        # a unit directory holds one version of its transcript: sessions an earlier
        # version had must not linger (Snakemake cleared a directory() output itself)
        for d in dirs:
            if d.exists():
                shutil.rmtree(d)
    options = {
        "messages_field": args.messages_field,
        "id_field": args.id_field,
        "text_field": args.text_field,
    }
    written: dict[tuple[Path, str], str] = {}  # (directory, session id) -> its transcript
    manifest: list[dict[str, object]] = []
    tokens = cl100k_tokens()
    if args.redact and args.detector not in (None, detector_label()):
        raise GrumemError(
            f"--detector {args.detector}: the installed secret detector is {detector_label()};"
            " the workflow was planned with another install of grumem: run it with this one"
            " (or reinstall the same version), so that chunks are redacted as planned"
        )
    redactor = Redactor() if args.redact else None
    for file, out in zip(args.files, dirs, strict=True):
        chunk_files, redacted = chunk_file(file, out, args, options, written, tokens, redactor)
        manifest.append(
            {
                "transcript": file,
                "directory": str(out),
                "chunks": chunk_files,
                "redacted": dict(sorted(redacted.items())),
            }
        )
    if args.manifest is not None:
        document = {
            "transcripts": manifest,
            "redaction": detector_identity() if args.redact else None,
        }
        checked_document(document, ChunkManifest, args.manifest)
        write_json(args.manifest, document)
    return 0


def chunk_file(
    file: str,
    out: Path,
    args: argparse.Namespace,
    options: dict[str, str | None],
    written: dict[tuple[Path, str], str],
    tokens: Tokens,
    redactor: Redactor | None,
) -> tuple[list[str], Counter[str]]:
    """One transcript's sessions -> their chunk files in `out`; the files written and
    the secrets redacted, by kind.

    A function of its own so that a file's sessions are gone before the next file is
    read: a shard's job holds one transcript at a time, not two."""
    out.mkdir(parents=True, exist_ok=True)
    fmt, sessions = read_transcript(file, args.format, args.drop_thinking, options)
    print(f"{file}: {fmt}, {len(sessions)} session(s)", file=sys.stderr)
    chunk_files: list[str] = []
    file_redacted: Counter[str] = Counter()
    for s in sessions:
        if (out, s.id) in written:
            raise GrumemError(
                f"{file}: session {s.id!r} also comes from {written[out, s.id]};"
                " chunk files are named by session: one would overwrite the other"
            )
        written[out, s.id] = file
        skipped = ", ".join(f"{k} {n}" for k, n in sorted(s.skipped.items())) or "none"
        if not s.records:
            print(
                f"  {s.id}: records 0, no chunk file written; skipped: {skipped}",
                file=sys.stderr,
            )
            continue
        records, redacted = (
            (s.records, Counter()) if redactor is None else redactor.records(s.records)
        )
        file_redacted += redacted
        # chunks are made as they are written: a long record's parts are never all
        # held beside it
        result = plan_session(s.id, records, args.budget, tokens)
        write_jsonl(out / f"{s.id}.jsonl", result.chunks(), "chunk")
        chunk_files.append(str(out / f"{s.id}.jsonl"))
        print(
            f"  {s.id}: records {result.records}, chunks {len(result.bounds)}, "
            f"tokens {result.tokens} (max {max(result.chunk_tokens)}), "
            f"parts split {result.split_records}"
            + (f" (into {result.parts} parts)" if result.split_records else "")
            + f", skipped: {skipped}"
            + ("" if redactor is None else f", redacted: {counted(redacted)}"),
            file=sys.stderr,
        )
    return chunk_files, file_redacted


def counted(kinds: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"
