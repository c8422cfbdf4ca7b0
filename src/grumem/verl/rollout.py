"""What the `grumem` agent loop reads from verl and hands back to it, without verl: the
rollout row as its record, the rules a rollout runs by, and each answered turn as
the group step scores it.

The turn order itself is grumem.core.turn_loop's, the workflow's own: over a row,
its prompts are the prompts stage's split of the template around the memory slot
(grumem.core.rollout_row.row_turns), so each user message is byte for byte what
the `responses` stage would send for that memory.

verl and pandas hand a row's columns over with numpy arrays and scalars inside;
`plain` reads them as the Python values they hold, once, where the row comes in;
anything the schema does not allow is refused with the field named, never coerced.
Going out, a turn becomes plain values once (grumem.verl.group_step.turn_fields),
when the group step has scored it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from grumem.core.rollout_row import RowTurn, checked_row, row_budget, row_prompt_builder
from grumem.core.template import PromptBuilder
from grumem.core.tokens import Tokens
from grumem.core.turn_loop import Answered, LoopRules
from grumem.errors import RolloutRowError
from grumem.io.template_files import load_template
from grumem.records.rollout_row import AGENT_NAME, RolloutRow

__all__ = ["RolloutTurn", "plain", "read_rollout_row", "rollout_builder", "rollout_rules"]
__all__ += ["without_chunk_texts"]


def read_rollout_row(columns: Mapping[str, Any]) -> RolloutRow:
    """The row the agent loop was given (verl passes the dataset's columns as keyword
    arguments, with its own beside them), checked: schema, chunk shas, labels."""
    row = {k: plain(columns.get(k)) for k in ("data_source", "prompt", "ability")}
    # verl consumes agent_name to pick the loop: a row that reached this loop named it
    row["agent_name"] = plain(columns.get("agent_name", AGENT_NAME))
    row["reward_model"] = plain(columns.get("reward_model"))
    row["extra_info"] = plain(columns.get("extra_info"))
    try:
        record = RolloutRow.convert(row, _where(row["extra_info"]))  # checked in C
    except RolloutRowError as e:
        raise RolloutRowError(
            f"{e}: not a grumem sessions row; export sessions.parquet with this grumem"
        ) from None
    return checked_row(record)


def rollout_builder(
    row: RolloutRow, template: str | os.PathLike[str], tokens: Tokens
) -> PromptBuilder:
    """The PromptBuilder of the row's turns from the template file (the one the row was
    exported with), counting with `tokens`."""
    return row_prompt_builder(row, load_template(template), tokens, str(template))


def rollout_rules(row: RolloutRow, tokens: Tokens, level: str | None = None) -> LoopRules:
    """The rules a rollout of `row` runs by: `level` (None: the row's own, the export's
    loop.level) and the row's budget, one ask a turn.

    No re-ask: each ask is a training row, and the paper's r_format scores a
    trajectory 0 when any turn fails to parse, because a later turn may be caused by
    an earlier malformed one. A re-ask would hide the failure the policy must learn
    from, and the group step scores one answer a turn. verl samples with its own
    seed: the loop's seed is not sent (samples 1)."""
    if level not in (None, "L1", "L2"):
        raise RolloutRowError(f"{row.where}: the rollouts' level {level!r} is not L1 or L2")
    return LoopRules(level or row.extra_info.level, 0, 1, row_budget(row), tokens)


@dataclass(frozen=True)
class RolloutTurn:
    """One answered turn of a rollout: what the group step scores and verl's metrics
    count. `parse_error` is the failing tag; `memory_tokens` the memory after the turn
    in the budget's tokens (0 while none has been written)."""

    t: int
    chunk_sha: str
    label: bool
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    parse_error: str | None
    memory_tokens: int

    @classmethod
    def of(cls, answered: Answered[RowTurn], tokens: Tokens) -> RolloutTurn:
        chunk, gate, memory = answered.ask.prompt.chunk, answered.gate, answered.memory_after
        return cls(
            t=chunk.t,
            chunk_sha=chunk.chunk_sha,
            label=chunk.evidence,
            parsed=gate.parsed,
            update_gate=gate.update_gate,
            exit_gate=gate.exit_gate,
            parse_error=None if gate.parse_error is None else gate.parse_error.tag,
            memory_tokens=0 if memory is None else tokens.count_cached(memory),
        )

    def fields(self) -> dict[str, Any]:
        """The turn as verl's extra_fields carry it (plain values only)."""
        return asdict(self)


def without_chunk_texts(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The row's columns as each turn's training row keeps them: chunk shas, no texts."""
    info = plain(columns["extra_info"])
    info["chunks"] = [{"chunk_sha": c["chunk_sha"]} for c in info["chunks"]]
    return {**columns, "extra_info": info}


def plain(value: Any) -> Any:
    """`value` as JSON-shaped Python: mappings, lists, str, int, float, bool, None.

    numpy arrays and scalars (what verl's batches and pandas hold) become the
    lists and numbers they are (`tolist`); anything else is returned as it is,
    for the schema to refuse."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, str | bytes):
        return plain(tolist())
    return value


def _where(info: Any) -> str:
    if isinstance(info, Mapping) and isinstance(info.get("index"), int):
        return f"sessions row {info['index']}"
    return "sessions row"
