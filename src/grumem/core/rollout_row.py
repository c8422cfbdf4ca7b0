"""A sessions.parquet row built from one (query, session), and what the GRU-Mem loop
reads of it: the export writes it, the tests' demo rows are made by it, and
grumem.verl's agent loop runs the loop over it.

Pure: the chunks come rendered (the text that fills `{chunk}`, with its sha), the
labels as a function of (query_id, chunk_sha); the row is checked as its typed
record (grumem.records.rollout_row) before it is returned. Read back, a row is
checked again beyond its shape (checked_row), and each of its chunks becomes a
turn's prompt as the prompts stage makes one (row_turns), so the loop runs over a
row exactly as over the workflow's prompt records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

from grumem.core.advantages import ALPHA, ROW
from grumem.core.json_text import sha256_text
from grumem.core.rewards import last_evidence_turn
from grumem.core.template import Budget, PromptBuilder
from grumem.core.tokens import Tokens
from grumem.errors import GrumemError, RolloutRowError
from grumem.records.base import SplitName
from grumem.records.prompt import TokenCounts
from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights
from grumem.records.rollout_row import AGENT_NAME, EVIDENCE, LABELS, RolloutRow, RowChunk

__all__ = ["ABILITY", "AGENT_NAME", "EVIDENCE", "LABELS", "RowTurn", "checked_row"]
__all__ += ["row_budget", "row_prompt_builder", "row_turns", "rollout_row"]

ABILITY = "memory_gating"


def rollout_row(
    index: int,
    project: str,
    query: Mapping[str, str],
    session: str,
    chunks: Sequence[tuple[str, str]],
    label: Callable[[str, str], bool | None],
    *,
    level: str,
    budget: Budget,
    template_sha256: str,
    system: str | None = None,
    alpha: float = ALPHA,
    return_weights: ReturnWeights = EQUAL_WEIGHTS,
    turn_weighting: str = ROW,
    data_source: str = "grumem",
    ability: str = ABILITY,
    split: SplitName,
) -> RolloutRow:
    """The row of one (query, session): `chunks` are (rendered text, chunk_sha) in
    session order, `label(query_id, chunk_sha)` their evidence labels (None: no
    label, refused naming the chunk). `index` is the row's place in sessions.parquet,
    `split` the session's (grumem.core.split)."""
    labels = []
    for t, (text, sha) in enumerate(chunks, start=1):
        if sha256_text(text) != sha:
            raise RolloutRowError(
                f"{project}/{query['id']}/{session}: chunk t={t} is given with chunk_sha"
                f" {sha[:12]}…, not the sha256 of its text"
            )
        value = label(query["id"], sha)
        if value is None:
            raise RolloutRowError(
                f"{project}/{query['id']}/{session}: chunk t={t} ({sha[:12]}…) has no label;"
                " label it before exporting sessions"
            )
        labels.append(value)
    row = {
        "data_source": data_source,
        "agent_name": AGENT_NAME,
        "prompt": [{"role": "user", "content": query["question"]}],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": [LABELS[v] for v in labels]},
        "extra_info": {
            "index": index,
            "split": split,
            "project": project,
            "query_id": query["id"],
            "session": session,
            "question": query["question"],
            "system": system,
            "level": level,
            "chunks": [{"text": text, "chunk_sha": sha} for text, sha in chunks],
            "t_last_evidence": last_evidence_turn(enumerate(labels, start=1)),
            "budget": asdict(budget),
            "template_sha256": template_sha256,
            "alpha": alpha,
            "return_weights": return_weights.to_dict(),
            "turn_weighting": turn_weighting,
        },
    }
    return RolloutRow.convert(row, f"sessions row {index} ({project}/{query['id']}/{session})")


def checked_row(row: RolloutRow) -> RolloutRow:
    """`row` once what its shape cannot say holds: one label a chunk, each chunk's sha
    the sha256 of its text, t_last_evidence the labels'; a RolloutRowError naming the
    field otherwise (a row altered after export)."""
    info, where = row.extra_info, row.where
    labels = row.reward_model.ground_truth
    if len(labels) != len(info.chunks):
        raise RolloutRowError(
            f"{where}: reward_model.ground_truth has {len(labels)} labels for"
            f" {len(info.chunks)} chunks: one label per chunk"
        )
    for i, c in enumerate(info.chunks):
        if sha256_text(c.text) != c.chunk_sha:
            raise RolloutRowError(
                f"{where}: extra_info.chunks.{i}.chunk_sha is not the sha256 of its text:"
                " the row was altered after export"
            )
    last = last_evidence_turn((c.t, c.evidence) for c in row.chunks)
    if info.t_last_evidence != last:
        raise RolloutRowError(
            f"{where}: extra_info.t_last_evidence is {info.t_last_evidence}, the labels say {last}"
        )
    return row


def row_budget(row: RolloutRow) -> Budget:
    """The budget the row was exported with."""
    b = row.extra_info.budget
    return Budget(b.context, b.question, b.memory, b.section, b.response)


def row_prompt_builder(row: RolloutRow, template: str, tokens: Tokens, name: str) -> PromptBuilder:
    """The PromptBuilder of the row's turns from the `template` text (read from `name`),
    counting with `tokens`; the template must be the one the row was exported with."""
    sha = sha256_text(template)
    expected = row.extra_info.template_sha256
    if sha != expected:
        raise GrumemError(
            f"{row.where}: exported with template sha256 {expected[:12]}…, but the"
            f" agent loop's template {name} is {sha[:12]}…: give the loop the template the"
            " prompts stage used (`template:` in rollout.agent.agent_loop_config_path)"
        )
    return PromptBuilder(template, row.extra_info.system, row_budget(row), tokens=tokens)


@dataclass(frozen=True)
class RowTurn:
    """Turn t of a row as the loop reads a prompt record: the user message split
    around the memory slot and counted as the prompts stage splits and counts it."""

    chunk: RowChunk
    system: str | None
    prefix: str
    suffix: str
    tokens: TokenCounts

    @property
    def t(self) -> int:
        return self.chunk.t

    @property
    def chunk_sha(self) -> str:
        return self.chunk.chunk_sha


def row_turns(row: RolloutRow, builder: PromptBuilder) -> Iterator[RowTurn]:
    """The row's turns in order, each made as the loop reaches it (an L2 rollout that
    stops early counts no later section)."""
    question = row.extra_info.question
    for chunk in row.chunks:
        prefix, suffix = builder.split(question, chunk.text)
        counts = builder.count(question, chunk.text, None)
        # as the prompts stage records it: the first turn's count less its memory's own
        fixed = counts["total"] - counts["memory"]
        tokens = TokenCounts(counts["question"], counts["section"], fixed)
        yield RowTurn(chunk, builder.system, prefix, suffix, tokens)
