"""The `log` stage: each shard's prompts, responses and gates read, joined into one
line per turn (grumem.core.log_join) and written to log.jsonl, the boundary the
export reads."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence

from grumem.core.log_join import join_turns
from grumem.io.typed import read_records, read_responses
from grumem.records.gate import GateRecord
from grumem.records.log import LogLine
from grumem.records.prompt import PromptRecord


def join_shard(
    prompts_path: str | os.PathLike[str],
    responses_path: str | os.PathLike[str],
    gates_path: str | os.PathLike[str],
    level: str,
    model: str,
) -> Iterator[LogLine]:
    """Log lines of one shard, in the prompts' order; only turns that happened."""
    # read in this order, each file whole, so a bad line is named before any join
    prompts = [p for _, p in read_records(prompts_path, PromptRecord)]
    responses = [r for _, r in read_responses(responses_path)]
    gates = [g for _, g in read_records(gates_path, GateRecord)]
    return join_turns(prompts, responses, gates, level, model, (responses_path, gates_path))


def join(shards: Sequence[tuple[str, str, str]], level: str, model: str) -> Iterator[LogLine]:
    for prompts, responses, gates in shards:
        yield from join_shard(prompts, responses, gates, level, model)


def main(args: argparse.Namespace) -> int:
    """`grumem log`: the shards' prompts, responses and gates joined, one line per turn."""
    from grumem.config.settings import settings_from_args
    from grumem.errors import GrumemError
    from grumem.io.typed import write_records

    s = settings_from_args(args)
    if not len(args.prompts) == len(args.responses) == len(args.gates):
        raise GrumemError(
            "grumem log: --prompts, --responses and --gates need one file per shard each"
        )
    shards = list(zip(args.prompts, args.responses, args.gates, strict=True))
    lines = join(shards, s["loop"]["level"], s["llm"]["model"])
    n = write_records(args.out, lines, LogLine)
    print(f"log: {n} turns written to {args.out}", file=sys.stderr)
    return 0
