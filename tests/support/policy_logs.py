"""Turn logs of scripted policies over the export fixture's sessions and labels.

A policy is a function of the turn it is shown (the query, the session, t, the
chunk's label, the session's last evidence) to its answer: gates, an answer that
does not parse, re-asks, or an abort. `policy_log` runs it as the loop does (L2:
a trajectory stops after a parsed `end`) and writes what `grumem log` writes: the
prompt filled from templates/gru-mem.txt with the memory of the turn before, the
request body as grumem.llm.request builds it, a chat completion body, the gates
parsed from it by the strict gate parser (grumem.core.gate_parser), the memory
rule (U = yes: the candidate; else the memory stays). Each line is checked as a
LogLine, the log's record class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grumem.core.json_text import dumps, sha256_text
from grumem.core.loop import interpret_content, memory_after
from grumem.core.template import PromptBuilder
from grumem.io.chunk_files import iter_sessions
from grumem.io.labels import load_labels
from grumem.io.template_files import load_template
from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.request import build_body, request_sha, sampling_params
from grumem.records.log import LogLine
from support.checkout import FIXTURES_DIR
from support.replies import completion_body

FIXTURE = FIXTURES_DIR / "export"
LABELS = FIXTURE / "labels.jsonl"
CHUNKS = FIXTURE / "chunks.jsonl"
LLM = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}
PROJECT = "eval"


@dataclass(frozen=True)
class Turn:
    """What a scripted policy is shown."""

    query_id: str
    session: str
    sample: int
    t: int
    chunks: int  # the session's chunks
    label: bool  # whether this chunk is evidence
    last_evidence: int | None  # the session's last evidence chunk, if any


@dataclass(frozen=True)
class Gates:
    check: bool
    end: bool


@dataclass(frozen=True)
class Unparsed:
    text: str = "I think this section matters. <check>maybe</check>"


@dataclass(frozen=True)
class Reasked:
    """Answers that did not parse, then the answer the turn kept."""

    earlier: tuple[str, ...]
    final: Gates | Unparsed


@dataclass(frozen=True)
class Abort:
    reason: str = "request_failed"
    component: str | None = None


Answer = Gates | Unparsed | Reasked | Abort
Policy = Callable[[Turn], Answer]


@dataclass(frozen=True)
class Fixture:
    """The export fixture's queries, sessions (chunk texts and shas) and labels."""

    questions: dict[str, str]
    sessions: dict[str, list[tuple[str, str]]]  # session -> [(rendered text, sha)]
    labels: dict[tuple[str, str], bool]

    def evidence(self, query_id: str, session: str) -> list[bool]:
        return [self.labels[(query_id, sha)] for _, sha in self.sessions[session]]


def fixture() -> Fixture:
    queries = yaml.safe_load((FIXTURE / "queries.yaml").read_text(encoding="utf-8"))
    return Fixture(
        questions={q["id"]: q["question"] for q in queries["queries"]},
        sessions={s: [(c.text, c.sha) for c in chunks] for s, chunks in iter_sessions([CHUNKS])},
        labels=load_labels(LABELS).evidence,
    )


def gate_text(check: bool, end: bool, t: int, memory: str | None, chunk: str) -> str:
    if check:
        update = (memory + " " if memory else "") + f"From chunk {t}: " + chunk.split("\n")[0]
    else:
        update = memory or "Nothing relevant yet."
    return (
        f"<think>Turn {t}.</think>\n<check>{'yes' if check else 'no'}</check>\n"
        f"<update>{update}</update>\n<next>{'end' if end else 'continue'}</next>"
    )


def completion(content: str, sha: str, n: int, model: str, usage: bool) -> str:
    """The fake server's chat completion (support.replies), its usage left out unless
    `usage`: a server that sends none."""
    body = completion_body(sha, model, content, 300 + n % 7, 30 + n % 5).decode("utf-8")
    if usage:
        return body
    data = json.loads(body)
    del data["usage"]
    return dumps(data)


def policy_log(
    policy: Policy,
    *,
    level: str = "L2",
    samples: int = 1,
    model: str = "policy-model",
    latency: Callable[[Turn], float] = lambda turn: 0.25,
    usage: bool = True,
    keys: Sequence[tuple[str, str, int]] | None = None,
    fx: Fixture | None = None,
) -> list[dict[str, Any]]:
    """The log lines of `policy` over every (query, session, sample) of the fixture, or
    over `keys` in their order."""
    fx = fx or fixture()
    builder = PromptBuilder(load_template(), tokens=cl100k_tokens())
    if keys is None:
        keys = [(q, s, k) for q in fx.questions for s in fx.sessions for k in range(samples)]
    lines: list[dict[str, Any]] = []
    n = 0
    for query_id, session, sample in keys:
        evidence = fx.evidence(query_id, session)
        last = max((t for t, e in enumerate(evidence, start=1) if e), default=None)
        memory: str | None = None
        for t, (text, sha) in enumerate(fx.sessions[session], start=1):
            turn = Turn(query_id, session, sample, t, len(evidence), evidence[t - 1], last)
            answer = policy(turn)
            base = {
                "trajectory_id": f"{PROJECT}/{query_id}/{session}/{sample}",
                "project": PROJECT,
                "query_id": query_id,
                "session": session,
                "sample": sample,
                "level": level,
                "model": model,
                "t": t,
                "chunk_sha": sha,
            }
            if isinstance(answer, Abort):
                lines.append(_abort_line(base, answer, memory))
                break
            prompt = builder.build(fx.questions[query_id], text, memory)
            final = answer.final if isinstance(answer, Reasked) else answer
            texts = list(answer.earlier) if isinstance(answer, Reasked) else []
            texts.append(
                final.text
                if isinstance(final, Unparsed)
                else gate_text(final.check, final.end, t, memory, text)
            )
            asks = []
            for ask, content in enumerate(texts):
                n += 1
                body = build_body(model, prompt.messages(), sampling_params(LLM, ask + sample))
                sha = request_sha(body)
                reply = completion(content, sha, n, model, usage)
                asks.append(
                    {
                        "ask": ask,
                        "request": {"body": body, "sha256": sha},
                        "response": {
                            "attempt": 1,
                            "status": 200,
                            "body": reply,
                            "sha256": sha256_text(reply),
                            "latency_s": latency(turn),
                            "error": None,
                        },
                        # the gates stage's strict parse of the recorded answer
                        **interpret_content(content, "stop").to_dict(),
                    }
                )
            last_ask = asks[-1]
            after = memory_after(memory, interpret_content(last_ask["content"], "stop"))
            line = {
                **base,
                "status": "ok",
                "abort": None,
                "asks": len(asks),
                "earlier_asks": [{k: a[k] for k in EARLIER_KEYS} for a in asks[:-1]],
                "memory_before": memory,
                "memory_after": after,
                **{k: last_ask[k] for k in LAST_KEYS},
            }
            LogLine.convert(line)  # the log's record: the shape `grumem log` writes
            lines.append(line)
            memory = after
            if level == "L2" and last_ask["exit_gate"] is True:
                break
    return lines


EARLIER_KEYS = ("ask", "request", "response", "content", "finish_reason", "parsed", "parse_error")
LAST_KEYS = (
    "request",
    "response",
    "content",
    "finish_reason",
    "parsed",
    "update_gate",
    "exit_gate",
    "candidate",
    "think",
    "parse_error",
)


def _abort_line(base: dict[str, Any], abort: Abort, memory: str | None) -> dict[str, Any]:
    line = {
        **base,
        "status": "aborted",
        "abort": {"reason": abort.reason, "component": abort.component, "detail": "scripted"},
        "asks": 0,
        "earlier_asks": [],
        "memory_before": memory,
        "memory_after": memory,
        "request": None,
        "response": None,
        "content": None,
        "finish_reason": None,
        "parsed": False,
        "update_gate": None,
        "exit_gate": None,
        "candidate": None,
        "think": None,
        "parse_error": None,
    }
    LogLine.convert(line)
    return line


def write_log(path: Path, lines: Iterator[dict[str, Any]] | Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# --- the policies whose figures are known exactly -------------------------------------------


def end_at_once(turn: Turn) -> Answer:
    """Says `no` and `end` at t = 1: reads one chunk of every session."""
    return Gates(check=False, end=True)


def always_continue(turn: Turn) -> Answer:
    """Says `no` and `continue` to the end: reads every chunk, late wherever there is
    evidence."""
    return Gates(check=False, end=False)


def follow_labels(turn: Turn) -> Answer:
    """Updates exactly on the evidence and ends exactly at the session's last evidence."""
    return Gates(check=turn.label, end=turn.t == turn.last_evidence)
