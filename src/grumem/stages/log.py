"""The `log` stage: prompts, responses and gates joined into one line per turn.

log.jsonl is the boundary the export reads; it holds each turn's last ask
(the one the loop acted on), how many asks the turn took, and the asks
before it (re-asks after a parse failure: recorded exchanges, and a format
failure of the model that r_format counts).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence

from grumem.core.json_text import loads
from grumem.errors import RecordError
from grumem.io.typed import read_records
from grumem.records.gate import GateRecord
from grumem.records.log import Abort, EarlierAsk, LogLine
from grumem.records.prompt import PromptRecord
from grumem.records.response import AbortRecord, ExchangeRecord, ResponseRecord


def join_shard(
    prompts_path: str | os.PathLike[str],
    responses_path: str | os.PathLike[str],
    gates_path: str | os.PathLike[str],
    level: str,
    model: str,
) -> Iterator[LogLine]:
    """Log lines of one shard, in the prompts' order; only turns that happened."""
    prompts = [p for _, p in read_records(prompts_path, PromptRecord)]
    by_turn: dict[tuple[str, int], list[ExchangeRecord]] = {}
    aborts: dict[tuple[str, int], AbortRecord] = {}
    for _, rec in read_records(responses_path, ResponseRecord):  # type: ignore[arg-type]
        key = (rec.trajectory_id, rec.t)
        if isinstance(rec, AbortRecord):
            aborts[key] = rec
        else:
            by_turn.setdefault(key, []).append(rec)
    gates = {(g.trajectory_id, g.t, g.ask): g for _, g in read_records(gates_path, GateRecord)}
    memory: dict[str, str | None] = {}  # each trajectory's M_t so far
    for p in prompts:
        key = (p.trajectory_id, p.t)
        asks = by_turn.get(key, [])
        abort = aborts.get(key)
        if not asks and abort is None:
            continue  # not reached: the trajectory ended earlier (L2 exit or an abort)
        common = dict(
            trajectory_id=p.trajectory_id,
            project=p.project,
            query_id=p.query_id,
            session=p.session,
            sample=p.sample,
            level=level,
            model=loads(asks[-1].request.body, responses_path, None, "request.body")["model"]
            if asks
            else model,
            # the model the answer names (provenance); None when no answer was recorded
            response_model=asks[-1].get("response_model") if asks else None,
            t=p.t,
            chunk_sha=p.chunk_sha,
            status="aborted" if abort else "ok",
            abort=None
            if abort is None
            else Abort(reason=abort.reason, component=abort.component, detail=abort.detail),
            asks=len(asks),
        )
        if asks:
            last = asks[-1]
            gate = _gate(gates, gates_path, key, last.ask)
            line = LogLine(
                **common,
                earlier_asks=[
                    EarlierAsk(
                        ask=a.ask,
                        request=a.request,
                        response=a.response,
                        content=g.content,
                        finish_reason=g.finish_reason,
                        parsed=g.parsed,
                        parse_error=g.parse_error,
                    )
                    for a in asks[:-1]
                    for g in [_gate(gates, gates_path, key, a.ask)]
                ],
                memory_before=last.memory_before,
                memory_after=gate.memory_after,
                request=last.request,
                response=last.response,
                content=gate.content,
                finish_reason=gate.finish_reason,
                parsed=gate.parsed,
                update_gate=gate.update_gate,
                exit_gate=gate.exit_gate,
                candidate=gate.candidate,
                think=gate.think,
                parse_error=gate.parse_error,
            )
        else:
            before = memory.get(p.trajectory_id)
            line = LogLine(
                **common,
                earlier_asks=[],
                memory_before=before,
                memory_after=before,
                request=None,
                response=None,
                content=None,
                finish_reason=None,
                parsed=False,
                update_gate=None,
                exit_gate=None,
                candidate=None,
                think=None,
                parse_error=None,
            )
        memory[p.trajectory_id] = line.memory_after
        yield line


def _gate(
    gates: dict[tuple[str, int, int], GateRecord],
    gates_path: str | os.PathLike[str],
    key: tuple[str, int],
    ask: int,
) -> GateRecord:
    gate = gates.get((*key, ask))
    if gate is None:
        raise RecordError(
            gates_path,
            None,
            None,
            f"no gate record for {key[0]} t={key[1]} ask={ask}: rerun the gates stage",
        )
    return gate


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
