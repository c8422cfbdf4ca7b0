"""The `responses` stage: the GRU-Mem loop (grumem.core.turn_loop) over one shard's
prompt records, driven with the recording client, free-running.

Every trajectory of the shard runs as its own task with at most one request in
flight; its next turn is sent the moment its last answer is read. There is no
barrier across trajectories at each t: simulated at 2.7x slower for 256
trajectories. The client's semaphore caps the requests in flight across the
shard. The stage reads, drives and writes: each Ask becomes the exact request
body sent, each recorded exchange goes back to the loop, and the loop's steps
are the lines written.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from grumem.core.grammar import fitting_text_chars, grammar_fields
from grumem.core.template import Budget
from grumem.core.turn_loop import (
    Abort,
    Ask,
    LoopRules,
    Reply,
    TurnLoop,
    abort_record,
    exchange_record,
)
from grumem.errors import GrumemError
from grumem.io.progress import Progress
from grumem.io.tokenizer import cl100k_tokens
from grumem.io.typed import read_records, write_records
from grumem.llm.job import failed_requests_message, llm_job
from grumem.llm.request import build_body, sampling_params
from grumem.records.prompt import PromptRecord
from grumem.records.response import (
    AbortRecord,
    Attempt,
    ExchangeRecord,
    Request,
    ResponseRecord,
)


@dataclass(frozen=True)
class LoopSettings:
    """The loop's rules, and what a request body needs beside an Ask."""

    rules: LoopRules
    model: str
    llm: dict[str, Any]
    grammar: dict[str, Any]

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> LoopSettings:
        llm, loop = settings["llm"], settings["loop"]
        # bounded text slots: a constrained answer that max_tokens cuts off
        # mid-tag could never parse
        bound = fitting_text_chars(llm["max_tokens"])
        grammar = grammar_fields(llm["server_kind"], "gate", bound) if llm["grammar"] else {}
        rules = LoopRules(
            loop["level"],
            loop["parse_retries"],
            loop["samples"],
            Budget.from_config(settings["budget"]),
            cl100k_tokens(),  # the job's counter: its cache serves every trajectory
            llm["max_tokens"],
        )
        return cls(rules, llm["model"], llm, grammar)

    def body(self, ask: Ask[PromptRecord]) -> str:
        """The exact request body of an Ask."""
        params = sampling_params(self.llm, ask.seed)
        return build_body(self.model, ask.messages, params, self.grammar)


async def run_trajectory(
    client: Any, prompts: Sequence[PromptRecord], s: LoopSettings, progress: Progress
) -> list[ResponseRecord]:
    """One trajectory's exchange (and abort) records, turn by turn."""
    out: list[ResponseRecord] = []
    loop = TurnLoop(prompts, s.rules, prompts[0].sample)
    for step in loop:
        if isinstance(step, Abort):
            out.append(abort_record(step))
            progress.dropped += 1
            break
        label = f"{step.prompt.trajectory_id} t={step.t} ask={step.ask}"
        ex = await client.complete(s.body(step), label=label)
        reply = Reply(
            Request.convert(ex.request),
            Attempt.convert(ex.response),
            [Attempt.convert(a) for a in ex.attempts],
            ex.response_model,
            None if ex.ok else ex.failure(label),
        )
        answered = loop.answer(reply)
        out.append(exchange_record(answered))
        progress.answers += 1
        progress.parsed += answered.gate.parsed
        progress.done += answered.settled
    return out


async def run_shard(
    client: Any,
    prompts: list[PromptRecord],
    s: LoopSettings,
    progress: Progress,
    report_every: float = 5.0,
) -> list[ResponseRecord]:
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
    llm_setting: str = "llm",
) -> dict[str, int]:
    """Run the loop over a prompts file and write its responses file atomically;
    `max_in_flight` caps the requests in flight (None: the endpoints' caps).
    `llm_setting` names the settings' llm block in messages (an evaluated policy's).
    A file of no prompts (a shard with no session of an evaluated split) gets a file
    of no responses, and no server is started for it."""
    s = LoopSettings.from_settings(settings)
    prompts = [p for _, p in read_records(prompts_path, PromptRecord)]
    progress = Progress(len(prompts), label or str(prompts_path))
    if not prompts:
        progress.streams = [sys.stderr]
        progress.emit()
        write_records(out_path, [], ResponseRecord)
        return {"turns": 0, "asks": 0, "parsed": 0, "aborted": 0}
    with llm_job(s.llm, s.llm["base_url"], [out_path], progress, log_path, max_in_flight) as job:
        records = job.run(lambda client: run_shard(client, prompts, s, progress))
    failure = failed_requests(records, out_path, llm_setting)
    if failure is not None:
        raise GrumemError(failure)
    write_records(out_path, records, ResponseRecord)
    return {
        "turns": progress.done,
        "asks": progress.answers,
        "parsed": progress.parsed,
        "aborted": progress.dropped,
    }


def failed_requests(
    records: Sequence[ResponseRecord], out_path: object, llm_setting: str = "llm"
) -> str | None:
    """None when every request was answered; else what failed, and what to do."""
    failed = [r for r in records if isinstance(r, AbortRecord) and r.reason == "request_failed"]
    if not failed:
        return None
    exchanges = [r for r in records if isinstance(r, ExchangeRecord)]
    kinds: dict[str, int] = {}
    for ex in exchanges:
        last = ex.response
        if last.error:
            kind = last.error.split(":")[0] if last.status is None else f"HTTP {last.status}"
            kinds[kind] = kinds.get(kind, 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    down = f" Is the server at {llm_setting}.base_url up?" if "connection error" in kinds else ""
    return failed_requests_message(
        len(failed), len(exchanges), failed[0].detail, out_path, kinds=counts, down=down
    )


def main(args: argparse.Namespace) -> int:
    """`grumem responses`: the loop over a shard; progress to stderr and `--log`."""
    from grumem.config.settings import settings_from_args

    settings = settings_from_args(args)
    # Snakemake may scale the job's llm_slots down to the global cap; the job
    # then keeps at most that many requests in flight across its endpoints
    slots = None if args.concurrency is None else max(1, args.concurrency)
    policy = args.policy
    where = "llm" if policy is None else f"evaluate.policies.{policy}"
    try:
        # no log_path: the command's stderr, progress included, goes to --log (cli.main)
        stats = run(
            args.prompts,
            args.out,
            settings,
            label=args.prompts,
            max_in_flight=slots,
            llm_setting=where,
        )
    except GrumemError as e:
        if policy is None:
            raise
        # the evaluation's jobs are one per policy: the error names whose it is
        raise GrumemError(f"policy {policy} ({where}): {e}") from None
    print(f"responses: {stats}", file=sys.stderr)
    return 0
