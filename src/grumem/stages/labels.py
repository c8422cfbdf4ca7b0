"""Stage `labels`: one labels file from the judge's shard outputs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from grumem.core.judge_counts import format_judge_counts, judge_counts
from grumem.errors import RecordError
from grumem.io.typed import read_records, write_records
from grumem.records.label import Label, UnjudgedPair


def merge(
    label_paths: Sequence[str | os.PathLike[str]],
    unjudged_paths: Sequence[str | os.PathLike[str]],
    out_path: str | os.PathLike[str],
    unjudged_out: str | os.PathLike[str],
) -> dict[str, int]:
    """One labels file from the judge's shard outputs, sorted by (query_id, chunk_sha).

    A chunk in two shards was judged in each, the second time from the cache:
    identical lines are kept once. Two different labels for one pair (two
    shards sent the request at the same moment, sampling above temperature 0)
    are an error, never a pick. A pair unjudged in one shard and labelled in
    another is labelled."""
    labels: dict[tuple[str, str], tuple[Label, str, int]] = {}
    for path in label_paths:
        for line, rec in read_records(path, Label):
            pair = (rec.query_id, rec.chunk_sha)
            if pair in labels and labels[pair][0] != rec:
                first, first_path, first_line = labels[pair]
                raise RecordError(
                    path,
                    line,
                    "evidence",
                    f"query {pair[0]!r}, chunk {pair[1][:12]}…: {first_path} line {first_line} "
                    f"says evidence={first.evidence} ({first.annotator}), this line "
                    f"evidence={rec.evidence} ({rec.annotator}); rerun the judge of one "
                    "shard so that both read the cached answer",
                )
            labels.setdefault(pair, (rec, str(path), line))
    unjudged: dict[tuple[str, str], UnjudgedPair] = {}
    for path in unjudged_paths:
        for _, pending in read_records(path, UnjudgedPair):
            pair = (pending.query_id, pending.chunk_sha)
            if pair not in labels:
                unjudged.setdefault(pair, pending)
    merged = [labels[p][0] for p in sorted(labels)]
    left = [unjudged[p] for p in sorted(unjudged)]
    write_records(unjudged_out, left, UnjudgedPair)
    write_records(out_path, merged, Label)
    return judge_counts([x.evidence for x in merged], [x.reason for x in left])


def main(args: argparse.Namespace) -> int:
    """`grumem labels`: the judge's shard outputs merged into labels.jsonl."""
    stats = merge(args.labels, args.unparsed, args.out, args.unparsed_out)
    print(format_judge_counts(stats, args.out, args.unparsed_out), file=sys.stderr)
    return 0
