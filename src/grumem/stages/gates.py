"""Stage `gates`: the strict offline re-parse of a shard's recording.

Checks every recorded exchange (shas, the prompt it came from, the memory
chain) and re-applies the loop's semantics (grumem.core.loop) to it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from itertools import groupby

from grumem.core.json_text import loads
from grumem.core.loop import interpret, memory_after, user_message
from grumem.core.recording import check_request, check_response
from grumem.core.tokens import Tokens
from grumem.errors import RecordError
from grumem.io.typed import read_records, read_responses
from grumem.records.gate import GateRecord
from grumem.records.prompt import PromptRecord
from grumem.records.response import AbortRecord, ExchangeRecord


def sent_user_message(body: str) -> str:
    return loads(body)["messages"][-1]["content"]


def regate(
    prompts_path: str | os.PathLike[str],
    responses_path: str | os.PathLike[str],
    memory_budget: int | None = None,
    tokens: Tokens | None = None,
) -> Iterator[GateRecord]:
    """Re-parse every recorded ask strictly, checking the recording as it goes.

    Fails naming file and line when a body no longer matches its sha256, or
    when a recorded request holds a memory that the recomputed chain disagrees
    with (the recording was edited, or the loop has a bug)."""
    prompts = {(p.trajectory_id, p.t): p for _, p in read_records(prompts_path, PromptRecord)}
    lines = read_responses(responses_path)
    for tid, group in groupby(lines, key=lambda item: item[1].trajectory_id):
        memory: str | None = None
        t_seen = 0
        for line, rec in group:
            if rec.t < t_seen:
                raise RecordError(responses_path, line, "t", f"turn {rec.t} after turn {t_seen}")
            if isinstance(rec, AbortRecord):
                continue
            if rec.t > t_seen:
                turn_memory, t_seen = memory, rec.t
            _check_exchange(responses_path, line, rec, prompts, turn_memory)
            gate = interpret(rec.response, memory_budget, tokens)
            # every ask of a turn starts from the same memory; the last ask decides
            memory = memory_after(turn_memory, gate)
            yield GateRecord.convert(
                {
                    "trajectory_id": tid,
                    "t": rec.t,
                    "ask": rec.ask,
                    **gate.to_dict(),
                    "memory_after": memory,
                }
            )


def _check_exchange(
    path: str | os.PathLike[str],
    line: int,
    rec: ExchangeRecord,
    prompts: dict[tuple[str, int], PromptRecord],
    memory: str | None,
) -> None:
    body = check_request(path, line, rec.request)
    check_response(path, line, rec.response)
    prompt = prompts.get((rec.trajectory_id, rec.t))
    if prompt is None:
        raise RecordError(path, line, "t", f"no prompt record for {rec.trajectory_id} t={rec.t}")
    if rec.memory_before != memory:
        raise RecordError(
            path,
            line,
            "memory_before",
            "disagrees with the memory recomputed from the recorded gates",
        )
    expected = user_message(prompt, memory)
    try:
        sent = sent_user_message(body)
    except (ValueError, KeyError, IndexError) as e:
        raise RecordError(path, line, "request.body", f"not a chat request: {e}") from None
    if sent != expected:
        raise RecordError(
            path, line, "request.body", "user message differs from prompt + recomputed memory"
        )
    if rec.chunk_sha != prompt.chunk_sha:
        raise RecordError(path, line, "chunk_sha", "differs from the prompt record")


def main(args: argparse.Namespace) -> int:
    """`grumem gates`: every recorded ask of a shard re-parsed strictly."""
    from grumem.config.settings import settings_from_args
    from grumem.io.tokenizer import cl100k_tokens
    from grumem.io.typed import write_records

    memory_budget = settings_from_args(args)["budget"]["memory"]
    gates = regate(args.prompts, args.responses, memory_budget, cl100k_tokens())
    n = write_records(args.out, gates, GateRecord)
    print(f"gates: {n} asks re-parsed into {args.out}", file=sys.stderr)
    return 0
