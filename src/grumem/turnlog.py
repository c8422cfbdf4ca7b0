"""The `log` stage: prompts, responses and gates joined into one line per turn.

log.jsonl is the boundary the export reads; it holds each turn's last ask
(the one the loop acted on) and how many asks the turn took.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from grumem.records import RecordError, read_jsonl

_GATE_FIELDS = (
    "content",
    "finish_reason",
    "parsed",
    "update_gate",
    "exit_gate",
    "candidate",
    "think",
    "parse_error",
)


def join_shard(
    prompts_path: str | os.PathLike[str],
    responses_path: str | os.PathLike[str],
    gates_path: str | os.PathLike[str],
    level: str,
    model: str,
) -> Iterator[dict[str, Any]]:
    """Log lines of one shard, in the prompts' order; only turns that happened."""
    prompts = list(read_jsonl(prompts_path, "prompt"))
    by_turn: dict[tuple[str, int], list[dict]] = {}
    aborts: dict[tuple[str, int], dict] = {}
    for rec in read_jsonl(responses_path, "response"):
        key = (rec["trajectory_id"], rec["t"])
        if rec["kind"] == "abort":
            aborts[key] = rec
        else:
            by_turn.setdefault(key, []).append(rec)
    gates = {(g["trajectory_id"], g["t"], g["ask"]): g for g in read_jsonl(gates_path, "gate")}
    memory: dict[str, str | None] = {}  # each trajectory's M_t so far
    for p in prompts:
        key = (p["trajectory_id"], p["t"])
        asks = by_turn.get(key, [])
        abort = aborts.get(key)
        if not asks and abort is None:
            continue  # not reached: the trajectory ended earlier (L2 exit or an abort)
        line = {k: p[k] for k in ("trajectory_id", "project", "query_id", "session", "sample")}
        line.update(
            level=level,
            model=json.loads(asks[-1]["request"]["body"])["model"] if asks else model,
            # the model the answer names (provenance); None when no answer was recorded
            response_model=asks[-1].get("response_model") if asks else None,
            t=p["t"],
            chunk_sha=p["chunk_sha"],
            status="aborted" if abort else "ok",
            abort=None
            if abort is None
            else {k: abort[k] for k in ("reason", "component", "detail")},
            asks=len(asks),
        )
        if asks:
            last = asks[-1]
            gate = gates.get((*key, last["ask"]))
            if gate is None:
                raise RecordError(
                    gates_path,
                    None,
                    None,
                    f"no gate record for {key[0]} t={key[1]} "
                    f"ask={last['ask']}: rerun the gates stage",
                )
            line.update(
                memory_before=last["memory_before"],
                memory_after=gate["memory_after"],
                request=last["request"],
                response=last["response"],
                **{k: gate[k] for k in _GATE_FIELDS},
            )
        else:
            before = memory.get(p["trajectory_id"])
            line.update(
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
        memory[p["trajectory_id"]] = line["memory_after"]
        yield line


def join(
    shards: Sequence[tuple[str, str, str]], level: str, model: str
) -> Iterator[dict[str, Any]]:
    for prompts, responses, gates in shards:
        yield from join_shard(prompts, responses, gates, level, model)
