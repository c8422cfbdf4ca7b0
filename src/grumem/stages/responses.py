"""The `responses` stage: the gated recurrent loop over one shard, free-running.

Every trajectory of the shard runs as its own task with at most one request in
flight; its next turn is sent the moment its last answer is parsed. There is
no barrier across trajectories at each t: simulated at 2.7x slower for 256
trajectories (../shared/notes/schedule-sim.py). The client's semaphore caps
the requests in flight across the shard.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from grumem.core.grammar import fitting_text_chars, grammar_fields
from grumem.core.loop import ask_seed, interpret, memory_after, stops, user_message
from grumem.core.template import NO_PREVIOUS_MEMORY, Budget, check_budget, memory_text
from grumem.core.tokens import Tokens, token_bound
from grumem.errors import BudgetError, GrumemError
from grumem.io.jsonl import write_jsonl
from grumem.io.progress import Progress
from grumem.io.tokenizer import cl100k_tokens
from grumem.io.typed import read_records
from grumem.llm.job import failed_requests_message, llm_job
from grumem.llm.request import build_body, sampling_params
from grumem.records.prompt import PromptRecord
from grumem.records.response import Attempt


@dataclass(frozen=True)
class LoopSettings:
    level: str
    samples: int
    parse_retries: int
    model: str
    llm: dict[str, Any]
    budget: Budget
    grammar: dict[str, Any]
    tokens: Tokens  # the job's counter: its cache serves every trajectory of the shard

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> LoopSettings:
        llm, loop = settings["llm"], settings["loop"]
        # bounded text slots: a constrained answer that max_tokens cuts off
        # mid-tag could never parse
        bound = fitting_text_chars(llm["max_tokens"])
        grammar = grammar_fields(llm["server_kind"], "gate", bound) if llm["grammar"] else {}
        return cls(
            loop["level"],
            loop["samples"],
            loop["parse_retries"],
            llm["model"],
            llm,
            Budget.from_config(settings["budget"]),
            grammar,
            cl100k_tokens(),
        )


async def run_trajectory(
    client: Any, turns: list[PromptRecord], s: LoopSettings, progress: Progress
) -> list[dict]:
    """One trajectory's exchange (and abort) records, turn by turn."""
    out: list[dict] = []
    memory: str | None = None
    for turn in turns:
        base = {"trajectory_id": turn.trajectory_id, "t": turn.t}
        user = user_message(turn, memory)
        try:
            _check_turn_budget(s, turn, user, memory)
        except BudgetError as e:
            out.append(
                {
                    "kind": "abort",
                    **base,
                    "chunk_sha": turn.chunk_sha,
                    "reason": "budget",
                    "component": e.component,
                    "detail": str(e),
                }
            )
            progress.dropped += 1
            break
        messages = [] if turn.system is None else [{"role": "system", "content": turn.system}]
        messages.append({"role": "user", "content": user})
        for ask in range(s.parse_retries + 1):
            seed = ask_seed(ask, s.samples, turn.sample)
            body = build_body(s.model, messages, sampling_params(s.llm, seed), s.grammar)
            ex = await client.complete(body, label=f"{turn.trajectory_id} t={turn.t} ask={ask}")
            out.append(
                {
                    "kind": "exchange",
                    **base,
                    "ask": ask,
                    "chunk_sha": turn.chunk_sha,
                    "memory_before": memory,
                    "request": ex.request,
                    "response": ex.response,
                    "attempts": list(ex.attempts),
                    "response_model": ex.response_model,
                }
            )
            progress.answers += 1
            if not ex.ok:
                out.append(
                    {
                        "kind": "abort",
                        **base,
                        "chunk_sha": turn.chunk_sha,
                        "reason": "request_failed",
                        "component": None,
                        "detail": ex.failure(f"{turn.trajectory_id} t={turn.t} ask={ask}"),
                    }
                )
                progress.dropped += 1
                progress.done += 1
                return out
            # an over-long candidate is this turn's format failure, not the next
            # turn's budget abort: the memory stays M_{t-1} and the loop goes on
            gate = interpret(Attempt.convert(ex.response), s.budget.memory, s.tokens)
            if gate["parsed"]:
                progress.parsed += 1
                break
        progress.done += 1
        memory = memory_after(memory, gate)
        if stops(s.level, gate):
            break
    return out


def _check_turn_budget(s: LoopSettings, turn: PromptRecord, user: str, memory: str | None) -> None:
    """BudgetError when the turn does not fit, decided on exact counts: upper bounds
    that fit prove the counts fit (the usual case, with no encoder loaded); only a
    turn near a limit is counted."""
    try:
        check_budget(s.budget, _turn_token_bounds(turn, user, memory), s.llm["max_tokens"])
    except BudgetError:
        check_budget(s.budget, turn_tokens(turn, memory, s.tokens), s.llm["max_tokens"])


def _turn_token_bounds(turn: PromptRecord, user: str, memory: str | None) -> dict[str, int]:
    """turn_tokens' counts, or upper bounds of them (grumem.core.tokens.token_bound)."""
    system = token_bound(turn.system) if turn.system else 0
    return {
        "question": turn.tokens.question,
        "section": turn.tokens.section,
        "memory": token_bound(memory_text(memory)),
        "total": token_bound(user) + system,
    }


def turn_tokens(turn: PromptRecord, memory: str | None, tokens: Tokens) -> dict[str, int]:
    """The budget counts of user_message(turn, memory) (and the system prompt), exactly.

    The prompts stage counted the turn with the t=1 memory (`tokens.fixed` is that
    count, less the memory's own); only the slot around the memory is counted here
    again, and cached: no turn encodes its section a second time."""
    cached = tokens.count_cached
    system = cached(turn.system) if turn.system else 0
    text = memory_text(memory)
    first = cached(NO_PREVIOUS_MEMORY)
    user_first = turn.tokens.fixed - system + first
    user = tokens.count_refilled(turn.prefix, turn.suffix, NO_PREVIOUS_MEMORY, user_first, text)
    return {
        "question": turn.tokens.question,
        "section": turn.tokens.section,
        "memory": cached(text),
        "total": user + system,
    }


async def run_shard(
    client: Any,
    prompts: list[PromptRecord],
    s: LoopSettings,
    progress: Progress,
    report_every: float = 5.0,
) -> list[dict]:
    trajectories = [list(g) for _, g in groupby(prompts, key=lambda p: p.trajectory_id)]
    progress.counters = client.counters
    reporter = asyncio.create_task(progress.report_every(report_every))
    try:
        results = await asyncio.gather(
            *(run_trajectory(client, t, s, progress) for t in trajectories)
        )
    finally:
        reporter.cancel()
    progress.emit()
    return [rec for traj in results for rec in traj]


def run(
    prompts_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    settings: dict[str, Any],
    log_path: str | os.PathLike[str] | None = None,
    label: str | None = None,
    max_in_flight: int | None = None,
) -> dict[str, int]:
    """Run the loop over a prompts file and write its responses file atomically;
    `max_in_flight` caps the requests in flight (None: the endpoints' caps)."""
    s = LoopSettings.from_settings(settings)
    prompts = [p for _, p in read_records(prompts_path, PromptRecord)]
    progress = Progress(len(prompts), label or str(prompts_path))
    with llm_job(s.llm, s.llm["base_url"], [out_path], progress, log_path, max_in_flight) as job:
        records = job.run(lambda client: run_shard(client, prompts, s, progress))
    failure = failed_requests(records, out_path)
    if failure is not None:
        raise GrumemError(failure)
    write_jsonl(out_path, records, "response")
    return {
        "turns": progress.done,
        "asks": progress.answers,
        "parsed": progress.parsed,
        "aborted": progress.dropped,
    }


def failed_requests(records: list[dict], out_path: object) -> str | None:
    """None when every request was answered; else what failed, and what to do."""
    failed = [r for r in records if r["kind"] == "abort" and r["reason"] == "request_failed"]
    if not failed:
        return None
    sent = sum(1 for r in records if r["kind"] == "exchange")
    kinds: dict[str, int] = {}
    for r in records:
        last = r.get("response") or {}
        if r["kind"] == "exchange" and last.get("error"):
            status = last["status"]
            kind = last["error"].split(":")[0] if status is None else f"HTTP {status}"
            kinds[kind] = kinds.get(kind, 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    down = " Is the server at llm.base_url up?" if "connection error" in kinds else ""
    return failed_requests_message(
        len(failed), sent, failed[0]["detail"], out_path, kinds=counts, down=down
    )


def main(args: argparse.Namespace) -> int:
    """`grumem responses`: the loop over a shard; progress to stderr and `--log`."""
    from grumem.config.settings import settings_from_args

    settings = settings_from_args(args)
    # Snakemake may scale the job's llm_slots down to the global cap; the job
    # then keeps at most that many requests in flight across its endpoints
    slots = None if args.concurrency is None else max(1, args.concurrency)
    # no log_path: the command's stderr, progress included, goes to --log (cli.main)
    stats = run(args.prompts, args.out, settings, label=args.prompts, max_in_flight=slots)
    print(f"responses: {stats}", file=sys.stderr)
    return 0
