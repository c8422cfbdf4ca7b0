"""A sessions.parquet row built from one (query, session): the export writes it, the
tests' demo rows are made by it, and grumem.verl's agent loop reads it back.

Pure: the chunks come rendered (the text that fills `{chunk}`, with its sha), the
labels as a function of (query_id, chunk_sha); the row is returned as its typed
record (grumem.records.rollout_row), checked in the making.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict

from grumem.core.advantages import ALPHA
from grumem.core.json_text import sha256_text
from grumem.core.rewards import last_evidence_turn
from grumem.core.template import Budget
from grumem.errors import RolloutRowError
from grumem.records.return_weights import EQUAL_WEIGHTS, ReturnWeights
from grumem.records.rollout_row import AGENT_NAME, RolloutRow

__all__ = ["ABILITY", "AGENT_NAME", "EVIDENCE", "LABELS", "rollout_row"]

ABILITY = "memory_gating"
LABELS = {True: "yes", False: "no"}  # turns.parquet's encoding of a label
EVIDENCE = {"yes": True, "no": False}


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
    data_source: str = "grumem",
    ability: str = ABILITY,
    split: str = "train",
) -> RolloutRow:
    """The row of one (query, session): `chunks` are (rendered text, chunk_sha) in
    session order, `label(query_id, chunk_sha)` their evidence labels (None: no
    label, refused naming the chunk). `index` is the row's place in its file."""
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
        },
    }
    return RolloutRow.convert(row, f"sessions row {index} ({project}/{query['id']}/{session})")
