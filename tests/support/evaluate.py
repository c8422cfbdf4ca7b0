"""Fake-server scripts of policies whose behaviour is known exactly, for `snakemake
evaluate` on the demo project (its chunks and labels), and the demo's hand count.

- end_at_1: never remembers, says `end` at t=1;
- always_continue: remembers every chunk, never says `end`;
- follow_labels: remembers a chunk exactly when it is evidence for the question,
  and says `end` at the session's last evidence chunk (never, without evidence).

Each is the fake server's gate policy (tests/support/replies.py): the section of the
prompt is matched, so follow_labels names the evidence chunks of each question by
their rendered text, one rule per question (matched by its `<problem>`).

Each is served as its own model: the response cache is keyed by the request, so two
policies asking one model with the same settings would be answered alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from grumem.core.chunk_text import render_records
from grumem.io.chunk_files import iter_sessions
from grumem.io.labels import load_labels
from support.workflow import DEMO

NEVER = "(?!)"  # a regex that matches nothing


def end_at_1(model: str) -> dict[str, Any]:
    return {"model": model, "replies": [{"match": "<section>", "gate": _gate(NEVER, "")}]}


def always_continue(model: str) -> dict[str, Any]:
    return {"model": model, "replies": [{"match": "<section>", "gate": _gate("", None)}]}


def follow_labels(model: str) -> dict[str, Any]:
    labels = load_labels(DEMO / "labels.jsonl")
    replies = []
    for query in demo_queries():
        evidence, last = [], []
        for _, chunks in iter_sessions([DEMO / "chunks"]):
            said = [c for c in chunks if labels.get(query["id"], c.sha)]
            evidence += [_exactly(render_records(c.records)) for c in said]
            last += [_exactly(render_records(said[-1].records))] if said else []
        gate = _gate(_any(evidence), _any(last))
        replies.append(
            {"match": f"<problem> {re.escape(query['question'])} </problem>", "gate": gate}
        )
    return {"model": model, "replies": replies}


def _gate(check_if: str, next_if: str | None) -> dict[str, str]:
    return {"check_if": check_if} | ({} if next_if is None else {"next_if": next_if})


def _exactly(section: str) -> str:
    # the fake reads the section trimmed, as the gate parser does
    return "^" + re.escape(section.strip()) + r"\Z"


def _any(patterns: list[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns) if patterns else NEVER


def demo_queries() -> list[dict[str, str]]:
    return yaml.safe_load((DEMO / "queries.yaml").read_text(encoding="utf-8"))["queries"]


@dataclass(frozen=True)
class Trajectory:
    """One (query, session) of the demo by hand: its chunks, the turns that are
    evidence, and the last of them (None: no evidence)."""

    query_id: str
    session: str
    chunks: int
    evidence: tuple[int, ...]

    @property
    def last(self) -> int | None:
        return max(self.evidence) if self.evidence else None

    def label(self, t: int) -> bool:
        return t in self.evidence


def _t(query: str, session: str, chunks: int, *evidence: int) -> Trajectory:
    return Trajectory(query, f"demo-{session}", chunks, evidence)


E, ENV = "errors-and-fixes", "environment"
# fixtures/demo/labels.jsonl by hand, per (query, session): evidence at t
DEMO_HAND_COUNT = (
    _t(E, "01-k8s-namespace", 7, 2, 3, 4, 5, 6),
    _t(ENV, "01-k8s-namespace", 7, 1, 3, 4, 5, 6),
    _t(E, "02-slugify-unicode", 5, 1, 2, 3, 4),
    _t(ENV, "02-slugify-unicode", 5),
    _t(E, "03-npm-peer-deps", 3, 1, 2, 3),
    _t(ENV, "03-npm-peer-deps", 3, 1, 2, 3),
    _t(E, "04-git-rebase-conflict", 9, 2, 3, 4, 5, 6, 7),
    _t(ENV, "04-git-rebase-conflict", 9),
    _t(E, "05-ci-postgres", 12, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    _t(ENV, "05-ci-postgres", 12, 1, 2, 3, 4, 5, 6, 9, 10),
)
